"""Issue 34's tf.data ops in Python: concatenate, flat_map, sample_from_datasets,
choose_from_datasets, unique, scan, window, group_by_window,
bucket_by_sequence_length, take_while and cache, with the YAML names and arguments, tf.data's
documented examples, and restoring mid-stream."""

import numpy as np
import pytest

import sluice

Dataset = sluice.Dataset


def forever(value):
    return Dataset.from_tensors(value).repeat()


def test_concatenate_is_tf_data_example():
    assert list(Dataset.range(1, 4).concatenate(Dataset.range(4, 8))) == [1, 2, 3, 4, 5, 6, 7]
    assert Dataset.range(1, 4).concatenate(pipeline=Dataset.range(4, 8)).cardinality() == 7
    with pytest.raises(ValueError) as bad:
        list(Dataset.range(3).concatenate(Dataset.from_tensors(b"a")))
    assert bad.value.code == "INVALID_ARGUMENT"
    assert str(bad.value) == (
        "step 2 (concatenate): incompatible element specs TensorSpec(shape=[], dtype=int64) and "
        "TensorSpec(shape=[], dtype=string) (components must match in number, names and dtype)"
    )


def test_flat_map_reads_each_elements_files_in_turn(tmp_path):
    names = []
    for name, text in [("a.txt", "a0\na1\n"), ("b.txt", "b0\n"), ("c.txt", "c0\nc1\n")]:
        (tmp_path / name).write_text(text)
        names.append(str(tmp_path / name))
    lines = Dataset.from_tensor_slices(names).flat_map(Dataset.text_line([]))
    assert list(lines) == [b"a0", b"a1", b"b0", b"c0", b"c1"]


def test_interleave_takes_blocks_from_open_files_in_turn(tmp_path):
    names = []
    for name, text in [("a.txt", "a0\na1\na2\n"), ("b.txt", "b0\nb1\n"), ("c.txt", "c0\nc1\nc2\nc3\n")]:
        (tmp_path / name).write_text(text)
        names.append(str(tmp_path / name))
    files = Dataset.from_tensor_slices(names)
    # tf.data's order: cycle_length 2, block_length 2; c.txt opens when a.txt ends.
    expected = [b"a0", b"a1", b"b0", b"b1", b"a2", b"c0", b"c1", b"c2", b"c3"]
    assert list(files.interleave(Dataset.text_line([]), cycle_length=2, block_length=2)) == expected
    assert list(files.interleave(Dataset.text_line([]), 2, 2, num_parallel_calls=2)) == expected


def test_sample_from_datasets_weights_seed_and_restore():
    draws = list(Dataset.sample_from_datasets([forever(0), forever(1)], weights=[0.75, 0.25], seed=3).take(10000))
    zeros = draws.count(0)
    assert zeros + draws.count(1) == 10000
    assert abs(zeros - 7500) <= 3 * (10000 * 0.75 * 0.25) ** 0.5
    again = Dataset.sample_from_datasets([forever(0), forever(1)], [0.75, 0.25], 3, False).take(10000)
    assert list(again) == draws
    # stop_on_empty_dataset=False: every element of both comes out.
    mixed = Dataset.sample_from_datasets([Dataset.range(3), Dataset.range(100, 110)], seed=1)
    assert sorted(mixed) == [0, 1, 2] + list(range(100, 110))
    # Restored mid-stream, the rest is what the saved iterator went on with.
    it = iter(mixed)
    head = [next(it) for _ in range(4)]
    state = it.save()
    rest = list(it)
    assert head + rest == list(mixed)
    assert list(mixed.iterator(restore_from=state)) == rest


def test_choose_from_datasets_is_tf_data_example():
    datasets = [forever(b"foo"), forever(b"bar"), forever(b"baz")]
    chosen = Dataset.choose_from_datasets(datasets, Dataset.range(3).repeat(3))
    assert list(chosen) == [b"foo", b"bar", b"baz"] * 3
    ended = [Dataset.range(2), Dataset.range(10, 20)]
    choices = Dataset.from_tensor_slices([0, 0, 0, 1])
    assert list(Dataset.choose_from_datasets(ended, choices)) == [0, 1]
    assert list(Dataset.choose_from_datasets(ended, choice_pipeline=choices, stop_on_empty_dataset=False)) == [
        0,
        1,
        10,
    ]
    with pytest.raises(ValueError, match=r"the choice pipeline yielded 5, out of range for 3 datasets \(valid: 0 to 2\)"):
        list(Dataset.choose_from_datasets(datasets, Dataset.from_tensor_slices([5])))


def test_unique_is_tf_data_example():
    assert list(Dataset.from_tensor_slices([1, 37, 2, 37, 2, 1]).unique()) == [1, 37, 2]
    assert list(Dataset.from_tensor_slices([b"b", b"a", b"b"]).unique()) == [b"b", b"a"]
    with pytest.raises(ValueError, match=r"step 3 \(unique\): elements must be one scalar int32, int64 or string"):
        list(Dataset.range(4).batch(2).unique())


def test_the_python_definitions_are_the_yaml_ones(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "pipeline:\n"
        "  - sample_from_datasets: {datasets: [[range: 3], [range: 4]], weights: [0.5, 0.5], seed: 9}\n"
        "  - concatenate: [{range: 2}]\n"
        "  - unique\n"
    )
    built = (
        Dataset.sample_from_datasets([Dataset.range(3), Dataset.range(4)], [0.5, 0.5], seed=9)
        .concatenate(Dataset.range(2))
        .unique()
    )
    assert Dataset.from_yaml(str(path)).fingerprint() == built.fingerprint()
    assert sorted(built) == [0, 1, 2, 3]


def test_scan_is_tf_data_example():
    assert list(Dataset.range(10).scan("accumulate", 0)) == [0, 1, 3, 6, 10, 15, 21, 28, 36, 45]
    assert list(Dataset.range(3).scan(fn="accumulate", initial_state=100)) == [100, 101, 103]
    with pytest.raises(ValueError, match=r"step 2 \(scan\): missing 'initial_state'"):
        list(Dataset.range(3).scan("accumulate", ()))
    it = iter(Dataset.range(6).scan("accumulate", 0))
    head = [next(it) for _ in range(3)]
    state = it.save()
    assert head == [0, 1, 3]
    assert list(Dataset.range(6).scan("accumulate", 0).iterator(restore_from=state)) == [6, 10, 15]


def test_window_and_flat_map_over_windows_are_tf_data_examples():
    windows = [w.tolist() for w in Dataset.range(7).window(3)]
    assert windows == [[0, 1, 2], [3, 4, 5], [6]]
    assert [w.tolist() for w in Dataset.range(7).window(3, shift=1, stride=2, drop_remainder=True)] == [
        [0, 2, 4],
        [1, 3, 5],
        [2, 4, 6],
    ]
    rows = Dataset.from_tensor_slices(())
    batched = Dataset.range(7).window(3, 2, drop_remainder=True).flat_map(rows.batch(2))
    assert [b.tolist() for b in batched] == [[0, 1], [2], [2, 3], [4], [4, 5], [6]]


def ragged(*rows):
    """One int64 vector per element, of the lengths given: a ragged input."""
    out = Dataset.from_tensors(np.array(rows[0], dtype=np.int64))
    for row in rows[1:]:
        out = out.concatenate(Dataset.from_tensors(np.array(row, dtype=np.int64)))
    return out


def test_bucket_by_sequence_length_is_tf_data_example():
    elements = ragged([0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11], [13, 14, 15, 16, 19, 20], [21, 22])
    batches = [b.tolist() for b in elements.bucket_by_sequence_length([3, 5], [2, 2, 2])]
    assert batches == [[[1, 2, 3, 4], [5, 6, 7, 0]], [[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]], [[0, 0], [21, 22]]]
    # pad_to_bucket_boundary pads to the bucket's boundary - 1; padding_values.
    short = ragged([1], [2, 3], [4, 5, 6])
    padded = short.bucket_by_sequence_length([10], [3, 3], pad_to_bucket_boundary=True, padding_values=[-1])
    assert [b.tolist() for b in padded] == [[[1] + [-1] * 8, [2, 3] + [-1] * 7, [4, 5, 6] + [-1] * 6]]
    assert list(short.bucket_by_sequence_length([2], [2, 3], drop_remainder=True)) == []


def test_group_by_window_is_tf_data_example():
    # tf.data: range(10).group_by_window(key_func=x % 2, reduce_func=batch(5), window_size=5).
    windows = Dataset.range(10).group_by_window("mod", 5, value=2)
    assert [w.tolist() for w in windows] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    batched = windows.flat_map(Dataset.from_tensor_slices(()).batch(5))
    assert [b.tolist() for b in batched] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    # Partial groups come out at the end, in key order.
    assert [w.tolist() for w in Dataset.range(7).group_by_window("mod", 3, value=3)] == [[0, 3, 6], [1, 4], [2, 5]]


def test_take_while_is_tf_data_example():
    assert list(Dataset.range(10).take_while("less", value=5)) == [0, 1, 2, 3, 4]
    it = iter(Dataset.range(10).take_while("less", value=5))
    head = [next(it) for _ in range(2)]
    state = it.save()
    assert head == [0, 1]
    assert list(Dataset.range(10).take_while("less", value=5).iterator(restore_from=state)) == [2, 3, 4]


def test_cache_runs_the_steps_before_it_once(tmp_path):
    calls = []

    def counted(x):
        calls.append(int(x))
        return x * 10

    in_memory = Dataset.range(4).map(counted).cache().repeat(3)
    assert list(in_memory) == [0, 10, 20, 30] * 3
    assert calls == [0, 1, 2, 3]
    calls.clear()
    on_disk = Dataset.range(4).map(counted).cache(str(tmp_path / "squares")).repeat(2)
    assert list(on_disk) == [0, 10, 20, 30] * 2
    assert calls == [0, 1, 2, 3]
    # A new pipeline over the same files reads them and runs nothing.
    assert list(on_disk) == [0, 10, 20, 30] * 2
    assert calls == [0, 1, 2, 3]


def test_sample_from_datasets_weights_file_is_read_again_at_restore(tmp_path):
    weights = tmp_path / "weights.txt"
    weights.write_text("3 1\n")
    mixed = Dataset.sample_from_datasets([forever(0), forever(1)], seed=42, weights_file=str(weights))
    inline = Dataset.sample_from_datasets([forever(0), forever(1)], [3, 1], seed=42)
    assert list(mixed.take(500)) == list(inline.take(500))
    it = iter(mixed)
    head = [next(it) for _ in range(50)]
    state = it.save()
    weights.write_text("0, 1")
    restored = mixed.iterator(restore_from=state)
    continuation = list(inline.skip(50).take(100))
    assert head == list(inline.take(50))
    # The elements the iterator had read ahead before the save were drawn
    # with the old weights and come first; every draw after them, with the
    # file's new weights, is from the second dataset.
    got = [next(restored) for _ in range(100)]
    read_ahead = next(k for k in range(101) if got[:k] == continuation[:k] and all(v == 1 for v in got[k:]))
    assert read_ahead < 50 and got[read_ahead:] == [1] * (100 - read_ahead)
    assert 0 in continuation[read_ahead:]  # the old weights would have drawn zeros there
    with pytest.raises(ValueError, match="give weights or weights_file, not both"):
        Dataset.sample_from_datasets([forever(0)], weights=[1], weights_file=str(weights))
