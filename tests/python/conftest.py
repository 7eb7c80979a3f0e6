"""pytest setup: the package under test is the build's (PYTHONPATH, set by
ctest), and SLUICE_SOURCE_DIR names the source tree."""

import os

import pytest


@pytest.fixture
def source_dir():
    return os.environ.get("SLUICE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
