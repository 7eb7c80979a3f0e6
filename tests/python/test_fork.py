"""Children forked after the parent used the service (issue 49, part 1): a
DataLoader's workers, multiprocessing.Pool, os.fork. gRPC's default poller
kept one epoll set per process, which forked siblings shared and fought
over (segfaults in gRPC, 60 s hangs); the package picks the poll poller and
holds no channel between reads, so a child forked between reads starts gRPC
afresh. A child forked while the parent is mid-read is told so at once."""

import multiprocessing
import os
import signal
import time

import pytest

import sluice

COUNT = 200


@pytest.fixture(scope="module")
def cluster():
    with sluice.LocalCluster(workers=2) as running:
        yield running


def dataset(cluster):
    return sluice.Dataset.range(COUNT).distribute("distributed_epoch", cluster.service)


def read_in_children(ds, children=4, epochs=2):
    """Forks `children` at once; each reads `epochs` epochs and exits 0 only
    when each had every element once. Returns their exit statuses."""
    pids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(30)  # a hang ends the child, not the test
                code = 0 if all(sorted(int(x) for x in ds) == list(range(COUNT)) for _ in range(epochs)) else 2
            except BaseException:
                code = 3
            finally:
                os._exit(code)
        pids.append(pid)
    statuses = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        statuses.append(os.waitstatus_to_exitcode(status))
    return statuses


@pytest.mark.parametrize("touch", ["element_spec", "cardinality", "next", "epoch"])
def test_forked_children_read_after_the_parent_touched_the_service(cluster, touch):
    ds = dataset(cluster)
    if touch == "element_spec":
        assert ds.element_spec is not None
    elif touch == "cardinality":
        assert ds.cardinality() == COUNT
    elif touch == "next":
        next(iter(ds))
    else:
        assert sorted(int(x) for x in ds) == list(range(COUNT))
    assert read_in_children(ds) == [0, 0, 0, 0]
    # The parent reads on.
    assert sorted(int(x) for x in ds) == list(range(COUNT))


def _read_all(service):
    ds = sluice.Dataset.range(COUNT).distribute("distributed_epoch", service)
    return sorted(int(x) for x in ds)


def test_a_multiprocessing_pool_forked_after_a_read(cluster):
    assert _read_all(cluster.service) == list(range(COUNT))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map_async(_read_all, [cluster.service] * 4).get(timeout=60)
    assert results == [list(range(COUNT))] * 4


def test_a_child_forked_mid_read_is_told_so_at_once_and_the_parent_reads_on(cluster):
    ds = dataset(cluster)
    it = iter(ds)
    first = [int(next(it)) for _ in range(10)]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        message = b"read without error"
        try:
            signal.alarm(30)
            list(sluice.Dataset.range(5).distribute("distributed_epoch", cluster.service))
        except sluice.Error as error:
            message = str(error).encode()
        except BaseException as error:  # noqa: B902 (reported to the parent)
            message = repr(error).encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    started = time.monotonic()
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as f:
        message = f.read().decode()
    assert os.waitstatus_to_exitcode(status) == 0
    assert time.monotonic() - started < 20
    assert message.startswith("step 2 (distribute): this process was forked while its parent had a Sluice read or "
                              "service call in progress"), message
    assert sorted(first + [int(x) for x in it]) == list(range(COUNT))
