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
import os
import subprocess
import time

import pytest

from multihost_cluster import DISPATCHERD, SLUICE, WORKERD, wait_for
from slow_link import SlowLink

N = 1000


class SlowWorkerCluster:
    """A dispatcher and `workers` workers on 127.0.0.1, each worker
    advertised behind a SlowLink of `one_way_ms`."""

    def __init__(self, tmp_path, workers, one_way_ms):
        self.tmp, self.processes, self.links = tmp_path, [], []
        self._start(["dispatcherd", DISPATCHERD, "--port", "0", "--insecure", "--port-file",
                     str(tmp_path / "dispatcher.port")], tmp_path / "dispatcher.port")
        self.service = f"grpc://127.0.0.1:{(tmp_path / 'dispatcher.port').read_text().strip()}"
        for i in range(workers):
            port_file = tmp_path / f"worker{i}.port"
            link = SlowLink(str(port_file), one_way_ms)
            self.links.append(link)
            self._start([f"worker{i}", WORKERD, "--dispatcher", self.service[len("grpc://"):], "--port", "0",
                         "--insecure", "--drain-timeout-ms", "0", "--advertised-address", f"127.0.0.1:{link.port}",
                         "--port-file",
                         str(port_file)], port_file)

    def _start(self, argv, port_file):
        name, argv = argv[0], argv[1:]
        log = open(self.tmp / f"{name}.log", "w")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        wait_for(port_file, process, name)

    def read(self, steps, timeout=60):
        path = self.tmp / "p.yaml"
        path.write_text("pipeline:\n" + "".join(f"  - {step}\n" for step in steps))
        start = time.monotonic()
        done = subprocess.run([SLUICE, "read", str(path), "--service", self.service], capture_output=True,
                              timeout=timeout)
        return done.returncode, done.stdout.decode().split(), done.stderr.decode(), time.monotonic() - start

    def close(self):
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for link in self.links:
            link.close()


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
