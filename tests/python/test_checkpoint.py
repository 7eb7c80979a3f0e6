"""Iterator.save() and Dataset.iterator(restore_from=...): local pipelines,
reads from the service that resume exactly once, and the states of a shared
job's consumers merged and resumed on another number of consumers (issue 20).
Elements read ahead by the iterator's thread but not yet taken by Python
are part of the state, so nothing is lost between the save and the restore."""

import pytest

import sluice


@pytest.fixture(scope="module")
def cluster():
    with sluice.LocalCluster(workers=2) as running:
        yield running


def test_a_local_pipeline_resumes_right_after_the_last_element_taken():
    ds = sluice.Dataset.range(1000).shuffle(50, seed=7).batch(3)
    whole = [[int(v) for v in batch] for batch in ds]
    it = iter(ds)
    first = [[int(v) for v in next(it)] for _ in range(40)]
    state = it.save()
    assert isinstance(state, bytes)
    # The iterator reads on past the save; the restore goes on from it.
    next(it)
    rest = [[int(v) for v in batch] for batch in ds.iterator(restore_from=state)]
    assert first + rest == whole
    # Saved again after its restore, read-ahead and replay both in front.
    again = ds.iterator(restore_from=state)
    [next(again) for _ in range(10)]
    tail = [[int(v) for v in batch] for batch in ds.iterator(restore_from=again.save())]
    assert first + rest[:10] + tail == whole


def test_another_pipelines_state_is_refused_naming_both_fingerprints():
    state = iter(sluice.Dataset.range(10)).save()
    with pytest.raises(sluice.Error, match="the saved iterator state is from another pipeline"):
        sluice.Dataset.range(11).iterator(restore_from=state)


def test_a_service_read_saved_mid_epoch_resumes_exactly_once(cluster):
    ds = sluice.Dataset.range(5000).distribute("distributed_epoch", cluster.service, exactly_once=True)
    it = iter(ds)
    first = [int(next(it)) for _ in range(1234)]
    state = it.save()
    rest = [int(x) for x in ds.iterator(restore_from=state)]
    assert sorted(first + rest) == list(range(5000))


def test_two_consumers_merge_and_resume_as_three(cluster):
    def dataset():  # each trainer's own: both read repetition 0
        return sluice.Dataset.range(300000).distribute(
            "distributed_epoch", cluster.service, job_name="py-elastic", exactly_once=True
        )

    ds = dataset()
    consumers = [iter(ds), iter(dataset())]
    values = []
    for _ in range(300):
        for consumer in consumers:
            values.append(int(next(consumer)))
    merged = sluice.merge_saved_states([consumer.save() for consumer in consumers])
    del consumers
    restored = [ds.iterator(restore_from=merged, consumer_index=i, num_consumers=3) for i in range(3)]
    while restored:
        for reader in list(restored):
            value = reader.get_next_as_optional()
            if value is None:
                restored.remove(reader)
            else:
                values.append(int(value))
    assert sorted(values) == list(range(300000))


def test_reads_that_cannot_be_saved_say_why(cluster):
    it = iter(sluice.Dataset.range(10).shuffle(5).distribute("parallel_epochs", cluster.service))
    next(it)
    with pytest.raises(sluice.Error, match="step 2 is a shuffle without a seed"):
        it.save()
    with pytest.raises(ValueError, match="one consumer's saved state restores one consumer, not 2"):
        sluice.Dataset.range(10).iterator(restore_from=iter(sluice.Dataset.range(10)).save(), num_consumers=2)


def test_a_distributed_iterator_saves_as_of_the_last_step_taken(cluster):
    ds = (
        sluice.Dataset.range(8000)
        .distribute("distributed_epoch", cluster.service, exactly_once=True)
        .batch(8)
    )
    distributed = sluice.distribute_dataset(ds, ["CPU:0", "CPU:1"], prefetch_buffer_size=3)
    it = iter(distributed)
    values = []
    for _ in range(100):
        step = it.get_next()
        values += [int(v) for replica in ("CPU:0", "CPU:1") for v in step[replica]]
    state = it.save()
    next(it)  # past the save: not part of the saved run
    for step in distributed.iterator(restore_from=state):
        values += [int(v) for replica in ("CPU:0", "CPU:1") for v in step[replica]]
    assert sorted(values) == list(range(8000))


def test_a_deterministic_read_comes_in_order_and_resumes_in_order(cluster):
    ds = sluice.Dataset.range(5000).distribute("distributed_epoch", cluster.service, deterministic=True)
    assert [int(x) for x in ds] == list(range(5000))
    it = iter(ds)
    first = [int(next(it)) for _ in range(1234)]
    rest = [int(x) for x in ds.iterator(restore_from=it.save())]
    assert first + rest == list(range(5000))


def test_a_parallel_epochs_read_resumes_with_the_rest_of_each_workers_epoch(cluster):
    ds = sluice.Dataset.range(2000).shuffle(50, seed=3).distribute("parallel_epochs", cluster.service)
    it = iter(ds)
    first = [int(next(it)) for _ in range(1500)]
    rest = [int(x) for x in ds.iterator(restore_from=it.save())]
    # Two workers, each with the whole epoch.
    assert sorted(first + rest) == sorted(list(range(2000)) * 2)
