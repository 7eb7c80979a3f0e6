"""Consumers of one named distributed_epoch job with exactly_once, and a
worker killed (SIGKILL) a third of the way through: the dispatcher holds
the lost task's splits until every consumer has said which of their
elements it took, and their rerun passes over those (issue 50, finding
10), so over all consumers every value arrives exactly once and every read
ends normally. Values are counted exactly."""

import collections
import threading
import time

import sluice

N = 20000


def _cluster():
    return sluice.LocalCluster(
        workers=2, dispatcher_args=["--worker-timeout-ms", "1500"], worker_args=["--buffer-elements", "16"]
    )


def _read_shared(consumers, kill_after):
    with _cluster() as cluster:
        def dataset():
            return sluice.Dataset.range(N).distribute(
                "distributed_epoch", cluster.service, job_name="shared", exactly_once=True,
                max_outstanding_requests=8)

        got = [[] for _ in range(consumers)]
        errors = [None] * consumers
        started = threading.Barrier(consumers)

        def read(i):
            try:
                it = iter(dataset())
                started.wait(timeout=30)
                for x in it:
                    got[i].append(int(x))
                    time.sleep(0.0002)
            except Exception as e:  # noqa: BLE001 (the test judges the message)
                errors[i] = e

        threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(consumers)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while sum(len(g) for g in got) < kill_after and time.monotonic() < deadline:
            time.sleep(0.01)
        cluster.kill_worker(0)
        for t in threads:
            t.join(timeout=90)
        assert not any(t.is_alive() for t in threads), "a reader did not end within 90 s"
        if consumers > 1:
            # The kill came mid-epoch, while the task held leases: its
            # splits were held for the consumers' reports.
            log = cluster.log("dispatcher")
            assert "are held until its %d clients say which of their elements they took" % consumers in log, log
        return got, errors


def _check_exactly_once(got, errors):
    assert all(e is None for e in errors), errors
    counts = collections.Counter(v for g in got for v in g)
    repeated = sorted(v for v, c in counts.items() if c > 1)
    assert not repeated, f"{len(repeated)} values delivered twice across the consumers: {repeated[:10]}"
    missing = sorted(set(range(N)) - set(counts))
    assert not missing, f"{len(missing)} values missing: {missing[:10]}"
    assert all(got), "a consumer got nothing: the read was not shared"


def test_two_consumers_recover_exactly_after_a_kill():
    for _ in range(3):
        got, errors = _read_shared(consumers=2, kill_after=N // 3)
        _check_exactly_once(got, errors)


def test_three_consumers_recover_exactly_after_a_kill():
    got, errors = _read_shared(consumers=3, kill_after=N // 2)
    _check_exactly_once(got, errors)


def test_sole_consumer_of_named_job_survives_a_kill():
    got, errors = _read_shared(consumers=1, kill_after=N // 3)
    assert errors[0] is None, errors[0]
    counts = collections.Counter(got[0])
    assert len(counts) == N and max(counts.values()) == 1, (
        f"{N - len(counts)} missing, {sum(1 for c in counts.values() if c > 1)} repeated")
