"""sluice.LocalCluster and reads from the service: the reference docs'
distribute examples, shared jobs, errors, and children that die with their
parent."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import sluice


@pytest.fixture(scope="module")
def cluster():
    with sluice.LocalCluster(workers=2) as running:
        yield running


def ints(ds):
    return sorted(int(x) for x in ds)


def test_local_cluster_reads_each_element_once_in_distributed_epoch(cluster):
    ds = sluice.Dataset.range(100).distribute("distributed_epoch", cluster.service)
    assert ints(ds) == list(range(100))


def test_several_connections_per_worker_deliver_every_element_once(cluster):
    ds = sluice.Dataset.range(500).batch(10).distribute(
        "distributed_epoch", cluster.service, connections_per_worker=3
    )
    values = sorted(int(v) for batch in ds for v in batch)
    assert values == list(range(500))
    with pytest.raises(ValueError, match="connections_per_worker must be 0 to 16, got 17"):
        list(sluice.Dataset.range(5).distribute("distributed_epoch", cluster.service, connections_per_worker=17))


def test_transport_tcp_and_auto_deliver_every_element_once(cluster):
    for transport in ("tcp", "auto"):
        ds = sluice.Dataset.range(300).distribute("distributed_epoch", cluster.service, transport=transport)
        assert ints(ds) == list(range(300))
    with pytest.raises(ValueError, match="transport must be 'auto' or 'tcp', got 'udp'"):
        list(sluice.Dataset.range(5).distribute("distributed_epoch", cluster.service, transport="udp"))


def test_reference_examples_in_both_modes(cluster):
    assert ints(sluice.Dataset.range(10).distribute("parallel_epochs", cluster.service)) == sorted(
        list(range(10)) * 2
    )
    assert ints(sluice.Dataset.range(10).distribute("distributed_epoch", cluster.service)) == list(range(10))
    # map before and after distribute
    ds = sluice.Dataset.range(5).map("square").distribute("parallel_epochs", cluster.service).map("add", value=1)
    assert ints(ds) == [1, 1, 2, 2, 5, 5, 10, 10, 17, 17]


def test_a_shared_job_is_split_between_two_consumers(cluster):
    # Two trainers' datasets: each counts its own repetitions, so both read
    # repetition 0 (two iterators of one dataset would read 0 and 1).
    def dataset():
        return sluice.Dataset.range(1000).distribute(
            "distributed_epoch", cluster.service, job_name="shared_py", max_outstanding_requests=8
        )

    datasets = [dataset(), dataset()]
    results = [None, None]

    def consume(i):
        results[i] = [int(x) for x in datasets[i]]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r is not None for r in results)
    assert sorted(results[0] + results[1]) == list(range(1000))


def test_an_unreachable_dispatcher_is_a_connection_error():
    ds = sluice.Dataset.range(3).distribute("parallel_epochs", "grpc://127.0.0.1:1", timeout_ms=1000)
    start = time.monotonic()
    with pytest.raises(ConnectionError) as refused:
        list(ds)
    assert refused.value.code == "UNAVAILABLE"
    assert time.monotonic() - start < 20


def test_a_pipeline_that_cannot_be_split_is_a_sluice_error(cluster):
    ds = sluice.Dataset.zip([sluice.Dataset.range(3), sluice.Dataset.range(3)]).distribute(
        "distributed_epoch", cluster.service
    )
    with pytest.raises(sluice.Error) as refused:
        list(ds)
    assert refused.value.code == "FAILED_PRECONDITION"
    assert "cannot be split for distributed_epoch" in str(refused.value)


def test_add_and_kill_workers():
    with sluice.LocalCluster(workers=1) as small:
        assert small.add_worker() == 1
        assert ints(sluice.Dataset.range(4).distribute("parallel_epochs", small.service)) == [0, 0, 1, 1, 2, 2, 3, 3]
        small.kill_worker(1)
        assert small.workers[1].returncode == -signal.SIGKILL
        assert "listening on 127.0.0.1:" in small.log("dispatcher")


def test_a_daemon_that_cannot_start_is_named_with_its_log():
    with pytest.raises(RuntimeError, match=r"dispatcher exited with 2 at start:(.|\n)*no_such_flag"):
        sluice.LocalCluster(workers=0, dispatcher_args=["--no_such_flag"]).start()


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def test_the_children_die_with_a_killed_parent():
    script = (
        "import sluice, sys, time\n"
        "c = sluice.LocalCluster(workers=2).start()\n"
        "print(c._dispatcher.pid, *[w.pid for w in c.workers], flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=os.environ)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 3 and all(alive(pid) for pid in pids)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


def test_daemon_settings_pass_through_as_dicts_or_files(tmp_path):
    worker_yaml = tmp_path / "worker.yaml"
    worker_yaml.write_text("buffer_elements: 8\nlog_level: warn\n")
    with sluice.LocalCluster(workers=1, dispatcher_config={"log_level": "warn"}, worker_config=str(worker_yaml)) as c:
        assert ints(sluice.Dataset.range(4).distribute("parallel_epochs", c.service)) == [0, 1, 2, 3]
        # At warn, neither logs its "listening on" line: only that they have
        # no data_roots.
        for name in ("dispatcher", "worker0"):
            lines = c.log(name).splitlines()
            assert len(lines) == 1 and lines[0].endswith(
                "[warning] no data_roots: file sources in pipelines that clients send may read any file this user can"
            ), lines
    with sluice.LocalCluster(workers=1) as c:
        assert "[info] listening on 127.0.0.1:" in c.log("worker0")
    with pytest.raises(RuntimeError, match=r"worker0 exited with 2 at start:(.|\n)*worker.yaml:1:2: unknown worker "
                                           r"setting 'bufer_elements'; did you mean 'buffer_elements'\?"):
        sluice.LocalCluster(workers=1, worker_config={"bufer_elements": 8}).start()
    with pytest.raises(TypeError, match="worker_config is a dict of settings or a YAML file's path, not int"):
        sluice.LocalCluster(workers=1, worker_config=3).start()
