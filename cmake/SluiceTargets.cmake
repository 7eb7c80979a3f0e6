# Per-target helpers, so warnings and sanitizers are set on Sluice's own
# targets only and never leak into users' builds through exported targets.

# sluice_configure_target(TARGET): warnings plus the SLUICE_SANITIZE choice.
function(sluice_configure_target target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
                                           -Wno-missing-field-initializers)
  if(SLUICE_SANITIZE STREQUAL "address")
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  elseif(SLUICE_SANITIZE STREQUAL "thread")
    # -U__SANITIZE_THREAD__: protobuf's and abseil's headers change class
    # layouts under that macro (protobuf's MapFieldBase gains two fields),
    # which breaks the ABI with Debian's uninstrumented libraries. Our code
    # is still instrumented; the headers just match the prebuilt libraries.
    target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer -U__SANITIZE_THREAD__)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  elseif(NOT SLUICE_SANITIZE STREQUAL "")
    message(FATAL_ERROR "SLUICE_SANITIZE must be '', 'address' or 'thread', not '${SLUICE_SANITIZE}'")
  endif()
endfunction()

# sluice_add_daemon(NAME SOURCES...): a daemon's logic as the static
# library sluice_NAME (alias Sluice::NAME, on the service plumbing and the
# daemon runner) and its program NAMEd from main.cc.
function(sluice_add_daemon name)
  add_library(sluice_${name} STATIC ${ARGN})
  add_library(Sluice::${name} ALIAS sluice_${name})
  target_link_libraries(sluice_${name} PUBLIC Sluice::core Sluice::service Sluice::daemon spdlog::spdlog)
  sluice_configure_target(sluice_${name})
  sluice_precompile_headers(sluice_${name} service)
  add_executable(${name}d main.cc)
  target_link_libraries(${name}d PRIVATE Sluice::${name})
  sluice_configure_target(${name}d)
endfunction()

# sluice_precompile_headers(TARGET core|service): the headers nearly every
# source of TARGET includes, parsed once per target instead of once per
# file. Parsing them is 55-70% of a file's compile time (3 of 4.3 s for
# dispatcher_impl.cc on the CI machine), and the build is most of CI's 20
# minutes. `core`: the engine's (protobuf, abseil, the data protos);
# `service`: those and gRPC, spdlog and the service protos. Not for the
# Python module (Python.h must come first) or the SentencePiece bridge (its
# own protobuf).
set(SLUICE_CORE_PCH
  <algorithm> <chrono> <cstdint> <filesystem> <map> <memory> <optional> <string> <utility> <vector>
  <google/protobuf/message.h> [["absl/status/statusor.h"]] [["absl/strings/str_cat.h"]]
  [["absl/synchronization/mutex.h"]] [["sluice/proto/dataset.pb.h"]] [["sluice/proto/tensor.pb.h"]])
set(SLUICE_SERVICE_PCH ${SLUICE_CORE_PCH}
  <thread> <grpcpp/grpcpp.h> <spdlog/spdlog.h> [["sluice/proto/service.pb.h"]])
function(sluice_precompile_headers target kind)
  if(kind STREQUAL "core")
    target_precompile_headers(${target} PRIVATE ${SLUICE_CORE_PCH})
  elseif(kind STREQUAL "service")
    target_precompile_headers(${target} PRIVATE ${SLUICE_SERVICE_PCH})
  else()
    message(FATAL_ERROR "sluice_precompile_headers: kind must be core or service, not '${kind}'")
  endif()
endfunction()
