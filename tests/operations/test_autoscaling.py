"""Autoscaling on real daemons (issue 37): a worker paced below what its
trainer takes (bench/pace_plugin.cc) makes the dispatcher recommend more
workers; starting them removes most of the trainer's wait; draining all but
one of them loses nothing (docs/design.md, "Autoscaling")."""

import json
import os
import signal
import time
import urllib.request

import pytest

import sluice

# Each worker process passes PACE elements a second; the trainer spends
# STEP on each, so it would take about 2.5 workers' worth.
PACE = 300
STEP = 1 / 800
ELEMENTS = 16000


def pace_plugin():
    path = os.environ.get("SLUICE_BENCH_PACE_PLUGIN")
    if not path:
        from sluice import _paths  # the build's daemons; the plugin is built beside them

        path = os.path.join(os.path.dirname(os.path.dirname(_paths.WORKERD)), "bench", "libsluice_bench_pace.so")
    if not os.path.exists(path):
        pytest.skip(f"no {path}: the benchmarks (SLUICE_BUILD_BENCH) were not built")
    return path


def scaling(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=10) as response:
        return json.loads(response.read())["scaling"]


def trainer_wait_seconds():
    """This process's trainer wait so far (the Python iterator measures it)."""
    for line in sluice.metrics().splitlines():
        if line.startswith("sluice_client_trainer_wait_seconds_total "):
            return float(line.split()[1])
    return 0.0


def test_the_recommendation_rises_settles_and_its_workers_remove_the_wait(tmp_path):
    plugin = pace_plugin()
    http_port_file = str(tmp_path / "dispatcher.http")
    with sluice.LocalCluster(
        workers=1,
        # Shorter windows than the defaults (10 s, 6 s), so that the test
        # takes seconds; the 60 s scale-down window stays.
        dispatcher_args=["--http-port", "0", "--http-port-file", http_port_file, "--plugins", plugin,
                         "--autoscale-smoothing-ms", "3000", "--autoscale-up-window-ms", "3000"],
        # A small buffer: workers with more than the trainer takes go idle
        # soon, rather than after 8192 small elements each.
        worker_args=["--plugins", plugin, "--buffer-elements", "64"],
    ) as cluster:
        # Written before the gRPC port's file, which the cluster waited for.
        with open(http_port_file) as f:
            port = int(f.read())
        ds = (sluice.Dataset.range(ELEMENTS).map("bench.pace", per_second=PACE)
              .distribute("distributed_epoch", cluster.service, job_name="paced", exactly_once=True))
        it = iter(ds)
        values = []

        def read_for(seconds, step=STEP):
            """Trains for `seconds`; the fraction of them the trainer waited."""
            waited, start = trainer_wait_seconds(), time.monotonic()
            while time.monotonic() - start < seconds:
                values.append(int(next(it)))
                time.sleep(step)
            return (trainer_wait_seconds() - waited) / (time.monotonic() - start)

        # One worker cannot keep up: within 30 s the recommendation rises
        # above 1; then it settles (the same for 4 s), within 20 s more.
        start, seen = time.monotonic(), []
        while not seen or seen[-1] <= 1:
            assert time.monotonic() - start < 30, f"no recommendation above 1 within 30 s: {seen}"
            read_for(0.5)
            seen.append(scaling(port)["recommended_workers"])
        rose = time.monotonic()
        while len(seen) < 8 or len(set(seen[-8:])) > 1:
            assert time.monotonic() - rose < 20, f"the recommendation did not settle: {seen}"
            read_for(0.5)
            seen.append(scaling(port)["recommended_workers"])
        recommended = seen[-1]
        wait_before = read_for(2)
        before = scaling(port)
        assert before["recommended_workers"] == recommended, (seen, before)
        assert wait_before > 0.3, before
        assert before["advice"].startswith(f"trainers wait {round(before['wait_fraction'] * 100)}% of the time; "
                                           f"about {recommended - 1} more worker"), before

        # Starting the workers it recommends removes most of the wait, and
        # the recommendation stays.
        for _ in range(recommended - 1):
            cluster.add_worker()
        read_for(3)  # their pipelines start
        wait_after = read_for(4)
        after = scaling(port)
        assert wait_after < wait_before / 3, (wait_before, wait_after, after)
        assert after["wait_fraction"] < before["wait_fraction"] / 2, (before, after)
        assert after["recommended_workers"] == recommended, after
        assert after["workers"] == recommended, after

        # Draining all but one loses nothing: the exactly_once epoch stays
        # exact. Read fast until about 3 s of one worker's elements are left.
        while len(values) < ELEMENTS - 3 * PACE:
            values.append(int(next(it)))
        for worker in cluster.workers[1:]:
            worker.send_signal(signal.SIGTERM)
        values.extend(int(v) for v in it)
        assert len(values) == ELEMENTS
        assert sorted(values) == list(range(ELEMENTS))
        for worker in cluster.workers[1:]:
            assert worker.wait(timeout=30) == 0
