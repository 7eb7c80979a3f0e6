"""Shared memory across hosts (issue 36, part 1): a reader on its worker's
host (the same network namespace) reads through shared memory while a
reader on another host reads the same worker over TCP, quietly: a reader
in another network namespace cannot reach the worker's abstract socket, so
the worker answers it as another host (service/shared_memory.h, HostId)."""

import os
import re

import pytest

from multihost_cluster import Cluster, Lines
from netns_hosts import Hosts, skip_reason

_why = skip_reason()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"multi-host tests need network namespaces: {_why}")

ROWS, ELEMENTS = 131072, 48  # 1 MiB int64 batches: large enough to be lent


def metric(text, name):
    """The value of counter `name` in Prometheus text, 0 when absent (a
    counter is registered when first counted)."""
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_colocated_reader_uses_shared_memory_while_a_remote_one_uses_tcp(tmp_path):
    with Hosts(3) as hosts:
        # Host 1: the worker and a reader; host 2: a reader of its own.
        cluster = Cluster(hosts, tmp_path, worker_hosts=[1])
        pipeline = cluster.pipeline("tensors", [f"range: {ROWS * ELEMENTS}", f"batch: {ROWS}",
                                                "distribute: {processing_mode: parallel_epochs}"])
        reads = {host: Lines(cluster.reader(host, pipeline, "--summary", "--metrics-file",
                                            str(tmp_path / f"metrics{host}.txt")))
                 for host in (1, 2)}
        # Each read is a job of its own, the worker's whole epoch: every
        # batch once, known by its first rows and its mean.
        expected = sorted(f'["int64[{ROWS}] {b * ROWS}, {b * ROWS + 1}, {b * ROWS + 2}, ... '
                          f'mean {b * ROWS + (ROWS - 1) / 2:.4g}"]' for b in range(ELEMENTS))
        for host, read in reads.items():
            code, lines, err = read.finish(timeout=90)
            assert code == 0, f"reader on host {host}: {err}"
            assert sorted(line.strip() for line in lines) == expected, f"reader on host {host}"
            # Neither says anything about shared memory: the remote reader
            # is another host to the worker, not a failed setup.
            assert "shared memory" not in err, f"reader on host {host}: {err}"
        colocated = (tmp_path / "metrics1.txt").read_text()
        remote = (tmp_path / "metrics2.txt").read_text()
        assert metric(colocated, "sluice_client_shared_memory_responses_total") > 0, colocated
        assert metric(colocated, "sluice_client_lent_tensors_total") == ELEMENTS, colocated
        assert metric(remote, "sluice_client_shared_memory_responses_total") == 0, remote
        assert metric(remote, "sluice_client_lent_tensors_total") == 0, remote
        assert os.path.getsize(tmp_path / "metrics2.txt") > 0
