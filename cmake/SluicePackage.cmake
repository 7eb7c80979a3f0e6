# Debian packages from this build, by CPack (`cpack -G DEB` in the build
# tree; tests/deb_package_test.sh checks them):
#   sluice          the daemons, the CLI, the shared libraries, the systemd
#                   units and the example configs; its postinst makes the
#                   `sluice` system user (deploy/deb/postinst)
#   sluice-dev      the SDK's headers and the CMake package
#   python3-sluice  the Python package
# Installed under /usr; the libraries in /usr/lib, where the programs'
# RPATH ($ORIGIN/../lib) finds them.
configure_file(${CMAKE_CURRENT_LIST_DIR}/install_units.cmake.in ${PROJECT_BINARY_DIR}/install_units.cmake @ONLY)
install(SCRIPT ${PROJECT_BINARY_DIR}/install_units.cmake COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/dispatcher.yaml ${PROJECT_SOURCE_DIR}/deploy/systemd/worker.yaml
  DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice/examples COMPONENT runtime)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Sluice developers <sluice@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "input-data service for ML training")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime sdk)
if(SLUICE_BUILD_PYTHON)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME sluice)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
# Depends from the programs' and libraries' own links (dpkg-shlibdeps),
# and adduser for the postinst.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/deb/postinst)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Sluice: dispatcherd, workerd and the sluice command
 The input-data service's daemons, its CLI and shared libraries, and
 systemd units for both daemons.")

set(CPACK_DEBIAN_SDK_PACKAGE_NAME sluice-dev)
set(CPACK_DEBIAN_SDK_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_SDK_PACKAGE_DEPENDS "sluice (= ${PROJECT_VERSION}), libabsl-dev")
set(CPACK_DEBIAN_SDK_DESCRIPTION "Sluice: the C++ SDK's headers and CMake package
 find_package(Sluice CONFIG REQUIRED) and target_link_libraries(app
 PRIVATE Sluice::client).")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-sluice)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
# The extension links the libraries of `sluice` (dpkg-shlibdeps cannot see
# them across packages) and Python's own.
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "sluice (= ${PROJECT_VERSION}), python3 (>= 3.11), python3 (<< 3.12), python3-numpy")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Sluice: the Python package
 import sluice: pipelines, LocalCluster and the PyTorch IterableDataset,
 over the installed daemons.")
include(CPack)
