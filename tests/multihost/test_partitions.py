"""Partial partitions across hosts (issue 36, part 1; issue 50, finding 9):
the dispatcher cut off from every worker (or from everyone) while the reader
still reaches the workers, and a reader cut off from one worker while both
still reach the dispatcher. A cut drops
packets silently (netns_hosts.Hosts.cut), as a broken path does. Every
read is checked exactly: the multiset of its elements, or an error that
names what was lost; none may outlive its bound."""

import collections
import json
import time

import pytest

from multihost_cluster import Cluster, Lines
from netns_hosts import Hosts, skip_reason

_why = skip_reason()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"multi-host tests need network namespaces: {_why}")

N, BATCH = 2_000_000, 1000


def batch_counts(lines):
    """How often each batch (by its first element) was read; each must be
    the run of BATCH integers from its first."""
    firsts = collections.Counter()
    for line in lines:
        batch = json.loads(line)
        assert batch == list(range(batch[0], batch[0] + BATCH))
        firsts[batch[0]] += 1
    return firsts


def cut_during_read(cluster, reader_host, pipeline, pairs, seconds, lines_before=200, timeout=90, advance_within=15):
    """Reads `pipeline` on `reader_host`; after `lines_before` lines cuts
    each (host, host) of `pairs` off from each other for `seconds`, and
    longer while no line came since the cut (up to `advance_within` seconds
    in all), then mends them and reads to the end. Returns the read's exit
    code, lines and stderr, and how many lines it had when the cut began and
    ended.

    Why the cut waits for a line: over an 8 Mbit/s link a response of 512
    batches (4 MB) takes 4 s, and lines come in bursts; gaps of 3.4-8.6 s
    between bursts were measured (issue 36), so a fixed 3 s window could
    see none while the uncut worker was serving."""
    read = Lines(cluster.reader(reader_host, pipeline))
    read.wait_for_lines(lines_before)
    at_cut = len(read.lines)
    cut_at = time.monotonic()
    for i, j in pairs:
        cluster.hosts.cut(i, j)
    time.sleep(seconds)
    while len(read.lines) == at_cut and read.reader.poll() is None and time.monotonic() - cut_at < advance_within:
        time.sleep(0.05)
    at_mend = len(read.lines)
    for i, j in pairs:
        cluster.hosts.mend(i, j)
    code, lines, err = read.finish(timeout)
    return code, lines, err, at_cut, at_mend


def parallel_epochs_pipeline(cluster):
    """A parallel_epochs read of N // 2 integers in batches of BATCH, and
    how many batches each worker's epoch has."""
    pipeline = cluster.pipeline("parallel", [f"range: {N // 2}", f"batch: {BATCH}",
                                             "distribute: {processing_mode: parallel_epochs}"])
    return pipeline, N // 2 // BATCH


def assert_epochs_whole_or_loss_counted(code, lines, err, workers, batches, cut_off):
    """parallel_epochs: each of `workers` workers ran the whole epoch of
    `batches` batches. Either every batch came once per worker, or the read
    failed with DataLoss naming a worker of `cut_off` and counting exactly
    the batches that did not come (never a loss claimed for what came)."""
    counts = batch_counts(lines)
    assert set(counts) <= set(range(0, batches * BATCH, BATCH))
    assert max(counts.values()) <= workers
    missing = workers * batches - len(lines)
    if code == 0:
        assert missing == 0, f"{missing} batches short, the read ended 0; its stderr: {err}"
        assert set(counts.values()) == {workers}
        return
    assert "parallel_epochs: the epoch of" in err, err
    assert f"; {missing} elements lost." in err, err
    assert any(worker in err for worker in cut_off), err


def wait_in_log(cluster, name, text, count, timeout=20):
    """Waits until `text` is `count` times in daemon `name`'s log."""
    deadline = time.monotonic() + timeout
    while cluster.log(name).count(text) < count:
        assert time.monotonic() < deadline, f"{name} did not log {text!r} {count} times: {cluster.log(name)}"
        time.sleep(0.1)


# The tests of a dispatcher that suspects itself give workers 3 s, not
# 1.5: workers cut off together count as silent together once both are
# past half the timeout, and a heartbeat queued behind data on an 8 Mbit/s
# link can arrive 400 ms late, so their last heartbeats may lie that far
# apart.
SUSPECTING_TIMEOUT_MS = 3000


def suspected_itself(cluster, workers):
    """The dispatcher logged that `workers` workers went silent at once and
    kept them (it suspects itself), and removed none."""
    log = cluster.log("dispatcher")
    assert (f"{workers} of {workers} workers went silent at once (worker_timeout_ms {SUSPECTING_TIMEOUT_MS}): this "
            f"dispatcher may be cut off from them, so they stay until silent for 60000 ms "
            f"(silent_majority_timeout_ms)") in log, log
    assert "removed" not in log, log


def test_the_dispatcher_cut_off_from_the_workers_past_their_timeout_loses_nothing_with_exactly_once(tmp_path):
    with Hosts(4) as hosts:
        # 8 Mbit/s links: the 8 MB epoch takes seconds, so the 5 s cut (past
        # the 3 s worker timeout) lands in its middle.
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit", worker_timeout_ms=SUSPECTING_TIMEOUT_MS)
        n = N // 2
        pipeline = cluster.pipeline("exact", [f"range: {n}", f"batch: {BATCH}",
                                              "distribute: {processing_mode: distributed_epoch, exactly_once: true}"])
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(0, 1), (0, 2)], 5)
        assert code == 0, err
        counts = batch_counts(lines)
        assert sorted(counts) == list(range(0, n, BATCH)) and set(counts.values()) == {1}
        # The workers, which the reader still reached, went on serving.
        assert at_mend > at_cut
        # Both silent at once: the dispatcher suspected itself and kept them
        # (issue 50, finding 9).
        suspected_itself(cluster, 2)
        # And the healed cluster serves a new job.
        squares = cluster.pipeline("squares", ["range: 1000", "map: square",
                                               "distribute: {processing_mode: distributed_epoch}"])
        code, lines, err = Lines(cluster.reader(3, squares)).finish(timeout=60)
        assert code == 0, err
        assert sorted(int(v) for v in lines) == sorted(i * i for i in range(1000))


def test_the_dispatcher_cut_off_from_the_workers_in_parallel_epochs_loses_nothing(tmp_path):
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit", worker_timeout_ms=SUSPECTING_TIMEOUT_MS)
        pipeline, batches = parallel_epochs_pipeline(cluster)
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(0, 1), (0, 2)], 5)
        assert at_mend > at_cut
        assert code == 0, err
        assert len(lines) == 2 * batches
        assert_epochs_whole_or_loss_counted(code, lines, err, 2, batches, [])
        suspected_itself(cluster, 2)


def test_the_dispatcher_cut_off_from_everyone_past_the_worker_timeout_loses_nothing(tmp_path):
    """Issue 50, finding 9: the dispatcher's host drops off (from the workers
    and the reader) for longer than the worker timeout while the reader and
    the workers still reach each other. Every element comes, once per worker
    in parallel_epochs and once in all with exactly_once."""
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit", worker_timeout_ms=SUSPECTING_TIMEOUT_MS)
        pipeline, batches = parallel_epochs_pipeline(cluster)
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(0, 1), (0, 2), (0, 3)], 5)
        assert at_mend > at_cut
        assert code == 0, err
        assert len(lines) == 2 * batches
        assert_epochs_whole_or_loss_counted(code, lines, err, 2, batches, [])
        suspected_itself(cluster, 2)
        exact = cluster.pipeline("exact", [f"range: {N // 2}", f"batch: {BATCH}",
                                           "distribute: {processing_mode: distributed_epoch, exactly_once: true}"])
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, exact, [(0, 1), (0, 2), (0, 3)], 5)
        assert code == 0, err
        counts = batch_counts(lines)
        assert sorted(counts) == list(range(0, N // 2, BATCH)) and set(counts.values()) == {1}
        assert "removed" not in cluster.log("dispatcher"), cluster.log("dispatcher")


def test_a_dispatcher_that_gives_its_workers_up_loses_nothing_in_parallel_epochs(tmp_path):
    """With silent_majority_timeout_ms at the worker timeout, the dispatcher
    gives both workers up while only it is cut off from them. The reader,
    which still reaches them, reads their unlisted tasks on to their ends,
    and the workers, back, keep those tasks: both epochs whole, exit 0."""
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit",
                          dispatcher_flags=["--silent-majority-timeout-ms", "1500"])
        pipeline, batches = parallel_epochs_pipeline(cluster)
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(0, 1), (0, 2)], 3)
        assert at_mend > at_cut
        log = cluster.log("dispatcher")
        assert f"worker {cluster.worker(1)} missed heartbeats for 1500 ms; removed" in log, log
        assert code == 0, err
        assert len(lines) == 2 * batches
        assert_epochs_whole_or_loss_counted(code, lines, err, 2, batches, [])
        # Back after the cut: registered again.
        for i in (1, 2):
            wait_in_log(cluster, "dispatcher", f"worker {cluster.worker(i)} registered", 2)


def test_a_worker_cut_off_from_the_dispatcher_alone_loses_nothing_in_parallel_epochs(tmp_path):
    """One worker of two loses the dispatcher past its timeout: no silent
    majority, so the dispatcher removes it. Its reader still reaches it and
    reads its task on to the end; back, the worker keeps the task. Both
    epochs whole, exit 0 (issue 50, finding 9: the reader's part)."""
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit")
        pipeline, batches = parallel_epochs_pipeline(cluster)
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(0, 1)], 3)
        assert at_mend > at_cut
        log = cluster.log("dispatcher")
        assert f"worker {cluster.worker(1)} missed heartbeats for 1500 ms; removed" in log, log
        assert f"worker {cluster.worker(2)} missed" not in log, log
        assert code == 0, err
        assert len(lines) == 2 * batches
        assert_epochs_whole_or_loss_counted(code, lines, err, 2, batches, [])
        wait_in_log(cluster, "dispatcher", f"worker {cluster.worker(1)} registered", 2)


def test_a_reader_cut_off_from_one_worker_reads_every_element_once(tmp_path):
    with Hosts(4) as hosts:
        # Workers that buffer 16 batches lease splits only as the reader
        # takes them, so worker 2 has the rest of the epoch to serve during
        # the cut. With the default buffer (about 2,000 batches here) each
        # worker leases what it can as fast as it can, and worker 1 could
        # hold every split left when the cut began: then nothing came until
        # the mend (CI, 2026-11-29: 324 of 1,000 batches, none in 15 s).
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit", worker_flags=["--buffer-elements", "16"])
        n = N // 2
        pipeline = cluster.pipeline("exact", [f"range: {n}", f"batch: {BATCH}",
                                              "distribute: {processing_mode: distributed_epoch, exactly_once: true}"])
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(3, 1)], 3)
        assert code == 0, err
        counts = batch_counts(lines)
        assert sorted(counts) == list(range(0, n, BATCH)) and set(counts.values()) == {1}
        assert at_mend > at_cut  # worker 2 went on serving


def test_a_reader_cut_off_from_one_worker_in_parallel_epochs_gets_the_epochs_whole_or_names_it(tmp_path):
    with Hosts(4) as hosts:
        cluster = Cluster(hosts, tmp_path, workers=2, worker_link="8mbit")
        pipeline, batches = parallel_epochs_pipeline(cluster)
        code, lines, err, at_cut, at_mend = cut_during_read(cluster, 3, pipeline, [(3, 1)], 3)
        assert at_mend > at_cut
        assert_epochs_whole_or_loss_counted(code, lines, err, 2, batches, [cluster.worker(1)])
