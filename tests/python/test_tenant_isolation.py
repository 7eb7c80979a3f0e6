"""Issue 50 from a daemon's command line and logs: python.allow_client_functions
ends the isolation between tenants, so a daemon of several tenants refuses it
unless the operator accepts that in so many words; and a file name a tenant
gives cannot forge a line of a daemon's log."""

import os
import subprocess
import time

import pytest

import sluice
from sluice import local_cluster


def tenant_config(tmp_path, python):
    lines = []
    for name in ("cluster", "alice", "bob"):
        token = tmp_path / f"{name}.token"
        token.write_text(f"token-of-{name}-0123456789\n")
        os.chmod(token, 0o400)
    lines.append("auth:")
    lines.append(f"  cluster_token_file: {tmp_path / 'cluster.token'}")
    lines.append("  clients:")
    for name in ("alice", "bob"):
        lines.append(f"    - {{name: {name}, token_file: {tmp_path / (name + '.token')}}}")
    lines.append(f"python: {python}")
    config = tmp_path / "daemon.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


@pytest.mark.parametrize("daemon", ["dispatcherd", "workerd"])
def test_client_functions_are_refused_on_a_daemon_of_several_tenants(tmp_path, daemon):
    binary = local_cluster._daemon(daemon, "SLUICE_" + daemon.upper())
    config = tenant_config(tmp_path, "{allow_client_functions: true}")
    args = [binary, "--config", str(config), "--port", "0", "--bind-address", "127.0.0.1"]
    if daemon == "workerd":
        args += ["--dispatcher", "127.0.0.1:1"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert done.stderr.strip().endswith(
        "python.allow_client_functions ends the isolation between tenants, and this daemon has 2: a client's "
        "function runs in the same processes as every tenant's client functions, so it can read whatever files "
        "the daemon can and change what their functions return (the operator's modules run in processes of "
        "their own). Give each tenant a cluster of its own, or set python.allow_client_functions_with_tenants: "
        "true to accept that"), done.stderr


def test_an_operator_may_accept_client_functions_with_tenants(tmp_path):
    binary = local_cluster._daemon("dispatcherd", "SLUICE_DISPATCHERD")
    config = tenant_config(tmp_path, "{allow_client_functions: true, allow_client_functions_with_tenants: true}")
    port_file = tmp_path / "port"
    with subprocess.Popen([binary, "--config", str(config), "--port", "0", "--bind-address", "127.0.0.1",
                           "--port-file", str(port_file)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as daemon:
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() and daemon.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert port_file.exists() and int(port_file.read_text()) > 0
        finally:
            daemon.terminate()
            log, _ = daemon.communicate(timeout=30)
    assert ("python.allow_client_functions: every holder of a client token can run Python code here (in 2 "
            "processes of their own, apart from the operator's modules)") in log


def test_a_newline_in_a_file_name_cannot_forge_a_log_line():
    """Issue 50, finding 8: a worker logs a failed task's error, which quotes
    the file name a pipeline gave; its control characters are escaped."""
    forged = "[2026-12-07 00:00:00.000] [error] worker 10.0.0.9:7000 lost: forged by a tenant"
    path = f"/nonexistent-{os.getpid()}\n{forged}"
    with sluice.LocalCluster(workers=1) as cluster:
        ds = sluice.Dataset.text_line([path]).distribute("parallel_epochs", cluster.service)
        with pytest.raises(FileNotFoundError, match="cannot open"):
            list(ds)
        deadline = time.monotonic() + 10
        while "forged by a tenant" not in cluster.log("worker0") and time.monotonic() < deadline:
            time.sleep(0.05)
        log = cluster.log("worker0")
    assert f"/nonexistent-{os.getpid()}\\n{forged}" in log, log
    assert not any(line.startswith("[2026-12-07 00:00:00.000]") for line in log.splitlines()), log
