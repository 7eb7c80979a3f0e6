"""pytest setup: the package under test is the build's (PYTHONPATH, set by
ctest), and SLUICE_SOURCE_DIR names the source tree."""

import os

import pytest


@pytest.fixture
def source_dir():
    return os.environ.get("SLUICE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def write_tokens(folder):
    """A cluster and a client token in `folder`: the daemons' flags that
    turn auth on with them, and an environment whose SLUICE_TOKEN_FILE is
    the client's (as a trainer's process would have)."""
    for name, token in (("cluster", "cluster-0123456789abcdef"), ("client", "client-fedcba9876543210")):
        (folder / f"{name}.token").write_text(token + "\n")
        os.chmod(folder / f"{name}.token", 0o400)
    flags = ["--auth-cluster-token-file", str(folder / "cluster.token")]
    flags += ["--auth-client-token-file", str(folder / "client.token")]
    return flags, dict(os.environ, SLUICE_TOKEN_FILE=str(folder / "client.token"))
