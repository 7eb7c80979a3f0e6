# Install rules and the CMake package, so that a project can use the SDK
# with
#
#   find_package(Sluice CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE Sluice::client)
#
# Installs the shared libraries sluice_core, sluice_service and
# sluice_client (exported as Sluice::core, Sluice::service and
# Sluice::client; the service's headers are not installed, and the client
# links it privately), the SDK's public headers (include/sluice), the
# daemons and the sluice command. Included from
# the top-level CMakeLists.txt once every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SLUICE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Sluice)

# Installed binaries find the installed libraries beside them, and
# libraries outside the system directories (the CUDA runtime) where they
# were linked from.
set_target_properties(sluice_core sluice_service sluice_client PROPERTIES
  INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(sluice_core PROPERTIES EXPORT_NAME core)
set_target_properties(sluice_service PROPERTIES EXPORT_NAME service)
set_target_properties(sluice_client PROPERTIES EXPORT_NAME client)
# client/include/sluice installs to include/sluice (sluice_core's include
# dir too).
target_include_directories(sluice_client PUBLIC $<INSTALL_INTERFACE:include>)
install(TARGETS sluice_core sluice_service sluice_client EXPORT SluiceTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)

set_target_properties(dispatcherd workerd sluice PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}" INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS dispatcherd workerd sluice RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# tokenize's SentencePiece bridge, which sluice_core loads from its own folder.
install(TARGETS sluice_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)

# The SDK's public headers are all of client/include/sluice and nothing
# else: they declare every type a user touches and include only each other,
# the C++ library and Abseil. tests/find_package_consumer compiles every
# installed header against the install tree alone, so a header that
# includes anything else fails there.
install(DIRECTORY client/include/sluice DESTINATION include COMPONENT sdk FILES_MATCHING PATTERN "*.h")

install(EXPORT SluiceTargets NAMESPACE Sluice:: DESTINATION ${SLUICE_CMAKE_INSTALL_DIR} COMPONENT sdk)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/SluiceConfig.cmake.in ${PROJECT_BINARY_DIR}/SluiceConfig.cmake
  INSTALL_DESTINATION ${SLUICE_CMAKE_INSTALL_DIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SluiceConfig.cmake ${PROJECT_BINARY_DIR}/SluiceConfigVersion.cmake
  DESTINATION ${SLUICE_CMAKE_INSTALL_DIR} COMPONENT sdk)
