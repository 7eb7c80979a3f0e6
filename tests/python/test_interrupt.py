"""Ctrl-C during a blocking read raises KeyboardInterrupt within a second:
while C++ waits, the GIL is released and the wait checks for signals."""

import os
import signal
import subprocess
import sys
import time

import pytest

PRELUDE = """
import sys, time, threading
import sluice
def report_interrupt(read):
    ticks = []
    ticker = threading.Thread(target=lambda: [ticks.append(time.sleep(0.01)) for _ in range(50)], daemon=True)
    print("reading", flush=True)
    ticker.start()
    try:
        read()
    except KeyboardInterrupt:
        # The other thread ran while this one waited in C++.
        print("KeyboardInterrupt", len(ticks) > 10, flush=True)
        sys.exit(0)
    print("read ended without an interrupt", flush=True)
    sys.exit(1)
"""


def interrupt_latency(script):
    """Starts `script`, sends SIGINT once it blocks, and returns the seconds
    until it reports KeyboardInterrupt."""
    child = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=os.environ,
    )
    try:
        assert child.stdout.readline().strip() == "reading"
        time.sleep(1.0)  # well inside the blocking call
        assert child.poll() is None
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().strip()
        latency = time.monotonic() - sent
        assert line == "KeyboardInterrupt True"
        assert child.wait(timeout=10) == 0
        return latency
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_ctrl_c_while_connecting_to_a_silent_dispatcher():
    latency = interrupt_latency(
        "ds = sluice.Dataset.range(10).distribute('distributed_epoch', 'grpc://127.0.0.1:9', timeout_ms=60000)\n"
        "report_interrupt(lambda: list(ds))\n"
    )
    assert latency < 1.0


def test_ctrl_c_while_waiting_for_the_next_element():
    # One worker serves a few elements, then dies: the read waits for
    # another worker that never comes.
    latency = interrupt_latency(
        "cluster = sluice.LocalCluster(workers=1).start()\n"
        "ds = sluice.Dataset.range(10**9).distribute('parallel_epochs', cluster.service, timeout_ms=60000)\n"
        "it = iter(ds)\n"
        "assert int(it.get_next()) == 0\n"
        "cluster.kill_worker(0)\n"
        "report_interrupt(lambda: [None for _ in it])\n"
    )
    assert latency < 1.0


def test_ctrl_c_in_a_local_pipeline_with_a_slow_callable():
    latency = interrupt_latency(
        "ds = sluice.Dataset.range(100).map(lambda x: time.sleep(30) or x)\n"
        "report_interrupt(lambda: list(ds))\n"
    )
    assert latency < 1.0
