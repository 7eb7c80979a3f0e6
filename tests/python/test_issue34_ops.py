"""Issue 34's tf.data ops in Python: concatenate, flat_map, sample_from_datasets,
choose_from_datasets and unique, with the YAML names and arguments, tf.data's
documented examples, and restoring mid-stream."""

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


