"""Cross-trainer sharing (issue 37, part 1) on real daemons: trainers in
processes of their own read one shared job with cross_trainer_cache, each
gets the whole stream, and the worker computes it once."""
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import types
import urllib.request

import pytest

import sluice

BUFFER = 16  # the worker's buffer_elements: how far the pipeline runs ahead
READ_AHEAD = 64  # each reader's max_outstanding_requests: how far it fetches ahead
PY_READ_AHEAD = 32  # what the package's iterator reads ahead of Python (dataset_bindings.cc)

TRAINER = textwrap.dedent(
    """
    import sys
    import sluice
    service, trainer, count, READ_AHEAD = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ds = sluice.Dataset.range(100000).repeat().distribute(
        "parallel_epochs", service, job_name="sweep", max_outstanding_requests=READ_AHEAD,
        cross_trainer_cache={"trainer_id": trainer, "max_bytes": 1 << 20})
    values = []
    for value in ds:
        values.append(int(value))
        if len(values) == count:
            break
    print(" ".join(map(str, values)))
    """
)


def wait_for_port(path, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return int(open(path).read())
        time.sleep(0.05)
    raise TimeoutError(f"{path} was not written within {timeout} s")


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


@pytest.fixture
def cluster():
    directory = tempfile.mkdtemp(prefix="sluice-cross-trainer-")
    http_file = os.path.join(directory, "worker.http")
    with sluice.LocalCluster(
        workers=1,
        worker_args=["--buffer-elements", str(BUFFER), "--http-port", "0", "--http-port-file", http_file],
    ) as local:
        yield local, wait_for_port(http_file)


def test_three_trainer_processes_each_read_the_whole_stream_computed_once(cluster):
    local, worker_http = cluster
    count = 3000
    produced_before = metric(worker_http, "sluice_worker_elements_produced_total")
    trainers = [
        subprocess.Popen([sys.executable, "-c", TRAINER, local.service, f"trainer-{k}", str(count), str(READ_AHEAD)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k in range(3)
    ]
    outputs = []
    for proc in trainers:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        outputs.append([int(v) for v in out.split()])
    # One worker, one task: every trainer gets the stream from its start (a
    # trainer new to the task starts at the oldest element kept, and 1 MiB
    # keeps all 3000), in order, with nothing skipped.
    for values in outputs:
        assert values == list(range(count))
    # The pipeline ran once for the three (three jobs would run it 3 x 3000
    # times): what the leading trainer took, what its reader fetched ahead
    # (its budget, and what the package reads ahead of Python), and the
    # worker's buffer ahead of that.
    produced = metric(worker_http, "sluice_worker_elements_produced_total") - produced_before
    assert count <= produced <= count + READ_AHEAD + PY_READ_AHEAD + BUFFER + 1
    assert metric(worker_http, "sluice_worker_cross_trainer_hits_total") >= 2 * count - 2 * BUFFER
    assert metric(worker_http, "sluice_worker_cross_trainer_skipped_total") == 0


def test_cross_trainer_cache_is_refused_with_the_reason(cluster):
    local, _ = cluster
    cache = {"trainer_id": "t", "max_bytes": 1 << 20}
    with pytest.raises(Exception) as finite:
        list(sluice.Dataset.range(10).distribute("parallel_epochs", local.service, job_name="j",
                                                  cross_trainer_cache=cache))
    assert "cross_trainer_cache needs an endless dataset (repeat() without a count before distribute)" in str(
        finite.value)
    assert "this dataset has 10 elements" in str(finite.value)
    endless = sluice.Dataset.range(10).repeat()
    with pytest.raises(Exception) as nameless:
        iter(endless.distribute("parallel_epochs", local.service, cross_trainer_cache=cache))
    assert "cross_trainer_cache needs a job_name" in str(nameless.value)
    with pytest.raises(Exception) as sharded:
        iter(endless.distribute("distributed_epoch", local.service, job_name="j", cross_trainer_cache=cache))
    assert "cross_trainer_cache needs parallel_epochs with sharding_policy OFF" in str(sharded.value)
    with pytest.raises(Exception) as no_bytes:
        iter(endless.distribute("parallel_epochs", local.service, job_name="j",
                                cross_trainer_cache={"trainer_id": "t", "max_bytes": 0}))
    assert "cross_trainer_cache.max_bytes must be > 0" in str(no_bytes.value)
    with pytest.raises(ValueError) as unknown:
        endless.distribute("parallel_epochs", local.service, job_name="j",
                           cross_trainer_cache={"trainer": "t", "max_bytes": 1})
    assert str(unknown.value) == "cross_trainer_cache: unknown key 'trainer' (valid: trainer_id, max_bytes)"
    # An object with the two attributes is read as the dict is; anything
    # else is refused.
    with pytest.raises(Exception) as from_attributes:
        iter(endless.distribute("parallel_epochs", local.service, job_name="j",
                                cross_trainer_cache=types.SimpleNamespace(trainer_id="t", max_bytes=0)))
    assert "cross_trainer_cache.max_bytes must be > 0" in str(from_attributes.value)
    with pytest.raises(TypeError) as neither:
        endless.distribute("parallel_epochs", local.service, job_name="j", cross_trainer_cache=7)
    assert str(neither.value) == ("cross_trainer_cache must be a dict {'trainer_id': ..., 'max_bytes': ...} or "
                                  "have trainer_id and max_bytes attributes")
    # Over the dispatcher's bound (1 GiB by default).
    with pytest.raises(Exception) as too_big:
        iter(endless.distribute("parallel_epochs", local.service, job_name="big",
                                cross_trainer_cache={"trainer_id": "t", "max_bytes": 2 << 30}))
    assert "is more than the dispatcher allows each worker to keep (1073741824" in str(too_big.value)
    # A job made with one max_bytes is not joined with another.
    first = iter(endless.distribute("parallel_epochs", local.service, job_name="j", cross_trainer_cache=cache))
    assert int(next(first)) == 0
    with pytest.raises(Exception) as other_bytes:
        iter(endless.distribute("parallel_epochs", local.service, job_name="j",
                                cross_trainer_cache={"trainer_id": "u", "max_bytes": 1 << 21}))
    assert "already exists with cross_trainer_cache max_bytes 1048576; asked for 2097152" in str(
        other_bytes.value)
