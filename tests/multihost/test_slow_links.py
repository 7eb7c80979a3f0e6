"""Reads over a link with latency (issue 36): a worker whose readers and
dispatcher reach it through a relay that holds every chunk 150 ms each way
(slow_link.SlowLink; no namespaces needed). Over such a link a task's
push takes longer than gRPC's first connection attempt, so the worker
gets its task by heartbeat, after the reader's first requests: those are
answered empty, and land after the worker has made every element and the
iteration has finished. The reader took that for the task's end and
exited 0 with no element (2026-11-29). Every read here must bring every
element exactly as its mode promises."""

import collections

import pytest

from slow_link import SlowWorkerCluster

N = 1000


@pytest.fixture
def slow_cluster(tmp_path, request):
    cluster = SlowWorkerCluster(tmp_path, *request.param)
    yield cluster
    cluster.close()


@pytest.mark.parametrize("slow_cluster", [(1, 150), (2, 150)], indirect=True, ids=["1-worker", "2-workers"])
@pytest.mark.parametrize("mode", ["distributed_epoch", "distributed_epoch, exactly_once: true"])
def test_a_distributed_epoch_over_a_slow_link_brings_every_element_once(slow_cluster, mode):
    code, values, err, seconds = slow_cluster.read([f"range: {N}", f"distribute: {{processing_mode: {mode}}}"])
    assert code == 0, err
    counts = collections.Counter(int(v) for v in values)
    assert sorted(counts) == list(range(N)), f"{len(values)} values in {seconds:.1f} s; stderr: {err}"
    assert set(counts.values()) == {1}


@pytest.mark.parametrize("slow_cluster", [(2, 150)], indirect=True, ids=["2-workers"])
def test_parallel_epochs_over_a_slow_link_bring_each_workers_epoch_whole(slow_cluster):
    code, values, err, seconds = slow_cluster.read([f"range: {N}", "distribute: {processing_mode: parallel_epochs}"])
    assert code == 0, err
    counts = collections.Counter(int(v) for v in values)
    assert sorted(counts) == list(range(N)), f"{len(values)} values in {seconds:.1f} s; stderr: {err}"
    assert set(counts.values()) == {2}
