"""Two consumers of one named distributed_epoch job with exactly_once, and a
worker killed (SIGKILL) a third of the way through: over both consumers
every value arrives at most once, and where the read cannot stay exact
(the lost task's splits would run again, and neither consumer knows what
the other delivered of them) both reads fail saying so, naming the job and
the lost worker, instead of repeating or skipping values in silence
(dispatcher/shared_exactly_once.h). Values are counted exactly.

A sole consumer of a named job survives the same kill: it reads the lost
task's splits again alone and gets every value once."""

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
        return got, errors


def test_two_consumers_never_repeat_and_fail_loudly():
    for _ in range(3):
        got, errors = _read_shared(consumers=2, kill_after=N // 3)
        counts = collections.Counter(v for g in got for v in g)
        repeated = sorted(v for v, c in counts.items() if c > 1)
        assert not repeated, f"{len(repeated)} values delivered twice across the consumers: {repeated[:10]}"
        missing = N - len(counts)
        if all(e is None for e in errors):
            # The lost task had been read to its end: nothing ran again.
            assert missing == 0, f"{missing} values missing though both reads ended normally"
            continue
        for e in errors:
            assert e is not None, "one consumer failed and the other ended normally"
            message = str(e)
            assert "job 'shared'" in message and "exactly_once by several consumers" in message, message
            assert "on worker 127.0.0.1:" in message and "was lost" in message, message
            assert "num_consumers" in message, message


def test_sole_consumer_of_named_job_survives_a_kill():
    got, errors = _read_shared(consumers=1, kill_after=N // 3)
    assert errors[0] is None, errors[0]
    counts = collections.Counter(got[0])
    assert len(counts) == N and max(counts.values()) == 1, (
        f"{N - len(counts)} missing, {sum(1 for c in counts.values() if c > 1)} repeated")
