"""Sluice across hosts (issue 36, part 1): the dispatcher, the workers and
the readers each on a host of their own (network namespaces on one private
bridge, tests/multihost/netns_hosts.py), and a worker partitioned from the
others past its heartbeat timeout in the middle of an epoch, then healed.
Skipped, saying why, where namespaces cannot be made (not root)."""

import collections
import json
import threading
import time

import pytest

from multihost_cluster import WORKER_PORT, Cluster
from netns_hosts import Hosts, skip_reason

_why = skip_reason()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"multi-host tests need network namespaces: {_why}")


def test_dispatcher_workers_and_reader_each_on_a_host_of_their_own(tmp_path):
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2)
        pipeline = cluster.pipeline("squares", ["range: 1000", "map: square",
                                                "distribute: {processing_mode: distributed_epoch}"])
        reader = cluster.reader(3, pipeline)
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err.decode()
        assert sorted(int(v) for v in out.split()) == sorted(i * i for i in range(1000))
        # Both workers served it, each from its own address.
        for i in (1, 2):
            assert f"listening on {hosts.address(i)}:{WORKER_PORT}" in (tmp_path / f"worker{i}.log").read_text()


def read_partitioned(cluster, hosts, pipeline, lines_before, *flags):
    """Reads `pipeline` on host 3, partitions worker host 1 for 4 s (past
    the dispatcher's 1.5 s worker timeout) after `lines_before` lines, then
    heals it and reads the rest."""
    reader = cluster.reader(3, pipeline, *flags)
    lines, errors = [], []
    readers = [threading.Thread(target=lambda: lines.extend(reader.stdout)),
               threading.Thread(target=lambda: errors.append(reader.stderr.read()))]
    for thread in readers:
        thread.start()
    deadline = time.monotonic() + 120
    while len(lines) < lines_before and reader.poll() is None:
        assert time.monotonic() < deadline, "the read did not start"
        time.sleep(0.01)
    hosts.partition(1)
    time.sleep(4)
    hosts.heal(1)
    reader.wait(timeout=240)
    for thread in readers:
        thread.join()
    return reader.returncode, [line.decode() for line in lines], errors[0].decode()


N, BATCH = 2_000_000, 1000


def test_a_worker_partitioned_mid_epoch_loses_nothing_with_exactly_once(tmp_path):
    with Hosts(4) as hosts:
        # 20 Mbit/s links: the 16 MB epoch takes seconds, so the cut lands
        # in its middle.
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="20mbit")
        pipeline = cluster.pipeline("exact", [f"range: {N}", f"batch: {BATCH}",
                                              "distribute: {processing_mode: distributed_epoch, exactly_once: true}"])
        code, lines, err = read_partitioned(cluster, hosts, pipeline, 200)
        assert code == 0, err
        firsts = collections.Counter()
        for line in lines:
            batch = json.loads(line)
            assert batch == list(range(batch[0], batch[0] + BATCH))
            firsts[batch[0]] += 1
        assert sorted(firsts) == list(range(0, N, BATCH))  # every batch
        assert set(firsts.values()) == {1}  # once
        # The cut outlasted the heartbeat timeout while the reader had 10% of
        # the epoch: the dispatcher removed the worker (and gave its
        # unfinished splits, if any, to the other).
        log = (tmp_path / "dispatcher.log").read_text()
        assert f"worker {hosts.address(1)}:{WORKER_PORT} missed heartbeats for 1500 ms; removed" in log


def test_a_worker_partitioned_mid_epoch_in_parallel_epochs_is_named_or_the_epoch_is_whole(tmp_path):
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="20mbit")
        pipeline = cluster.pipeline("parallel", [f"range: {N // 2}", f"batch: {BATCH}",
                                                 "distribute: {processing_mode: parallel_epochs}"])
        code, lines, err = read_partitioned(cluster, hosts, pipeline, 200)
        if code == 0:
            # Each worker ran the whole epoch: every batch twice.
            firsts = collections.Counter(json.loads(line)[0] for line in lines)
            missing = {b: 2 - firsts[b] for b in range(0, N // 2, BATCH) if firsts[b] != 2}
            assert not missing, f"{len(missing)} batches short, the read ended 0; its stderr: {err}"
        else:
            assert f"{hosts.address(1)}:{WORKER_PORT}" in err, err
