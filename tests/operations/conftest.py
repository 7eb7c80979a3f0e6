"""pytest setup for the operations tests: the build's package and daemons
(PYTHONPATH, set by ctest), SLUICE_SOURCE_DIR and SLUICE_CLI."""
