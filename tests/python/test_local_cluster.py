"""LocalCluster as trainers start it: from a thread that then exits, and
stopped by SIGTERM. Each case runs in a fresh process, as a trainer would."""

import os
import signal
import subprocess
import sys
import time


def run_python(script):
    """Runs `script` in a fresh interpreter; its stdout."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_cluster_started_from_a_thread_outlives_the_thread():
    # PR_SET_PDEATHSIG follows the thread that forked: before, the daemons
    # died the moment the starting thread ended.
    script = (
        "import threading, time, sluice\n"
        "holder = {}\n"
        "def start():\n"
        "    holder['cluster'] = sluice.LocalCluster(workers=1).start()\n"
        "thread = threading.Thread(target=start)\n"
        "thread.start(); thread.join()\n"
        "time.sleep(0.5)\n"
        "cluster = holder['cluster']\n"
        "assert all(p.poll() is None for p in cluster.workers), 'a daemon died with its thread'\n"
        "ds = sluice.Dataset.range(30).distribute('distributed_epoch', cluster.service)\n"
        "print(sorted(int(x) for x in ds) == list(range(30)))\n"
        "cluster.stop()\n"
    )
    assert run_python(script) == "True\n"


def test_sigterm_stops_the_daemons_and_removes_the_directory():
    script = (
        "import sys, time, sluice\n"
        "cluster = sluice.LocalCluster(workers=1).start()\n"
        "print(cluster._dir, cluster._dispatcher.pid, cluster.workers[0].pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    trainer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        directory, *pids = trainer.stdout.readline().split()
        assert os.path.isdir(directory)
        trainer.send_signal(signal.SIGTERM)
        assert trainer.wait(timeout=30) == -signal.SIGTERM
    finally:
        trainer.kill()
        trainer.wait()
    assert not os.path.exists(directory)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in pids):
        time.sleep(0.05)
    # stop() waited for them, so nothing is left, not even a zombie.
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_cli_warnings_go_to_stderr_never_into_the_data(tmp_path):
    # A token file others may read makes shared code warn through spdlog,
    # which printed on stdout before the data.
    cli = os.environ.get("SLUICE_CLI")
    if not cli:
        import pytest

        pytest.skip("SLUICE_CLI (the sluice command) is not set: run through ctest")
    import json

    import sluice

    token = tmp_path / "token"
    token.write_text("secret-token-value\n")
    os.chmod(token, 0o644)
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("pipeline:\n  - range: 5\n")
    with sluice.LocalCluster(workers=1) as cluster:
        commands = [
            ["read", str(pipeline), "--service", cluster.service, "--processing-mode", "distributed_epoch"],
            ["run", str(pipeline)],
            ["status", "--service", cluster.service, "--json"],
        ]
        # Text output: the warning must be on stderr, not among the lines.
        text_commands = [["inspect", str(pipeline)], ["functions"], ["bench", str(pipeline), "--seconds", "1"]]
        for command in commands + text_commands:
            done = subprocess.run([cli, "--token-file", str(token)] + command, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, (command, done.stderr)
            if command in text_commands:
                assert "sluice: warning" not in done.stdout and "may be read" not in done.stdout, (command, done.stdout)
            else:
                lines = done.stdout.splitlines() if command[0] != "status" else [done.stdout]
                for line in lines:
                    json.loads(line)  # every line of stdout is data
            assert "sluice: warning: " in done.stderr and "may be read by other users" in done.stderr, (
                command,
                done.stderr,
            )


def test_a_forked_child_leaves_its_parents_cluster_alone():
    # A child forked from a trainer (a multiprocessing Pool, a DataLoader
    # worker) inherits the SIGTERM handler and the atexit hook: terminated
    # or exiting, it must not stop the parent's daemons or remove its files.
    script = (
        "import multiprocessing, os, sys, time, sluice\n"
        "cluster = sluice.LocalCluster(workers=1).start()\n"
        "child = multiprocessing.get_context('fork').Process(target=time.sleep, args=(30,))\n"
        "child.start(); time.sleep(0.5); child.terminate(); child.join()\n"
        "assert child.exitcode == -15, child.exitcode\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)  # runs atexit in the child\n"
        "os.waitpid(pid, 0)\n"
        "assert os.path.isdir(cluster._dir), 'a child removed the directory'\n"
        "ds = sluice.Dataset.range(20).distribute('distributed_epoch', cluster.service)\n"
        "print(sorted(int(x) for x in ds) == list(range(20)))\n"
        "cluster.stop()\n"
    )
    assert run_python(script) == "True\n"
