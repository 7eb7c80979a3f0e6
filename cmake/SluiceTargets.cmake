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
  add_executable(${name}d main.cc)
  target_link_libraries(${name}d PRIVATE Sluice::${name})
  sluice_configure_target(${name}d)
endfunction()
