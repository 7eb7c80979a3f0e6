"""sluice.Dataset in this process: ops, values, specs and errors."""

import os

import numpy as np
import pytest

import sluice


def test_the_issue_example_gives_numpy_batches():
    batches = list(sluice.Dataset.range(10).map("square").batch(4))
    assert [b.tolist() for b in batches] == [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]
    assert all(isinstance(b, np.ndarray) and b.dtype == np.int64 for b in batches)


def test_arrays_share_the_tensor_buffer():
    batch = next(iter(sluice.Dataset.range(6).batch(6)))
    # No copy: the array does not own its memory; a capsule holding the C++
    # tensor keeps the buffer alive.
    assert not batch.flags.owndata
    assert type(batch.base).__name__ == "PyCapsule"
    del batch  # the buffer goes with the last array


def test_scalars_tuples_dicts_and_strings():
    assert list(sluice.Dataset.range(3)) == [0, 1, 2]
    assert isinstance(next(iter(sluice.Dataset.range(3))), np.int64)
    named = list(sluice.Dataset.from_tensor_slices({"x": np.arange(3.0), "y": np.arange(3)}))
    assert named == [{"x": 0.0, "y": 0}, {"x": 1.0, "y": 1}, {"x": 2.0, "y": 2}]
    assert isinstance(named[0]["x"], np.float64)
    pairs = list(sluice.Dataset.from_tensor_slices((np.array([1, 2]), np.array([b"a", b"bc"]))))
    assert pairs == [(1, b"a"), (2, b"bc")]
    strings = next(iter(sluice.Dataset.from_tensors(np.array([b"a", b"bc"]))))
    assert strings.dtype == object and strings.tolist() == [b"a", b"bc"]
    texts = list(sluice.Dataset.from_tensor_slices(["é", "z"]))
    assert texts == ["é".encode(), b"z"]


def test_element_spec_cardinality_fingerprint():
    ds = sluice.Dataset.from_tensor_slices({"x": np.arange(8.0), "y": np.arange(8)})
    assert ds.element_spec == {"x": sluice.TensorSpec((), "float64"), "y": sluice.TensorSpec((), "int64")}
    assert sluice.Dataset.range(10).batch(4).element_spec == sluice.TensorSpec((None,), "int64")
    assert sluice.Dataset.range(10).batch(4).cardinality() == 3
    assert sluice.Dataset.range(10).batch(4, drop_remainder=True).cardinality() == 2
    assert sluice.Dataset.range(3).repeat().cardinality() == sluice.INFINITE == -1
    assert sluice.Dataset.range(3).filter("greater_equal", value=1).cardinality() == sluice.UNKNOWN == -2
    a = sluice.Dataset.range(10).map("square").batch(4)
    assert a.fingerprint() == sluice.Dataset.range(10).map("square").batch(4).fingerprint()
    assert a.fingerprint() != sluice.Dataset.range(10).batch(4).fingerprint()


def test_ops_keep_the_yaml_names_and_arguments():
    assert list(sluice.Dataset.range(6).map("add", value=10).filter("greater_equal", value=13)) == [13, 14, 15]
    assert list(sluice.Dataset.range(2, 8, 2)) == [2, 4, 6]
    assert list(sluice.Dataset.range(5).skip(1).take(2)) == [1, 2]
    assert list(sluice.Dataset.range(6).shard(3, 1)) == [1, 4]
    assert list(sluice.Dataset.range(2).repeat(2)) == [0, 1, 0, 1]
    assert list(sluice.Dataset.range(3).enumerate(start=5)) == [(5, 0), (6, 1), (7, 2)]
    assert sorted(sluice.Dataset.range(10).shuffle(4, seed=7)) == list(range(10))
    assert [b.tolist() for b in sluice.Dataset.range(5).batch(2).unbatch().batch(3)] == [[0, 1, 2], [3, 4]]
    zipped = sluice.Dataset.zip([sluice.Dataset.range(2), sluice.Dataset.range(10, 12)])
    assert list(zipped) == [(0, 10), (1, 11)]
    copy = sluice.Dataset.deserialize(sluice.Dataset.range(4).map("square").serialize())
    assert list(copy) == [0, 1, 4, 9]


def test_from_yaml(source_dir):
    ds = sluice.Dataset.from_yaml(os.path.join(source_dir, "config", "pipelines", "squares.yaml"))
    assert [b.tolist() for b in ds] == [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]


def test_iterator_get_next_and_get_next_as_optional():
    it = iter(sluice.Dataset.range(2))
    assert it.get_next() == 0
    assert it.get_next_as_optional() == 1
    assert it.get_next_as_optional() is None
    with pytest.raises(StopIteration):
        it.get_next()


def test_errors_keep_code_and_message(tmp_path):
    with pytest.raises(ValueError) as bad:
        list(sluice.Dataset.range(3).batch(0))
    assert bad.value.code == "INVALID_ARGUMENT"
    assert str(bad.value) == "step 2 (batch): batch_size must be > 0, got 0"

    path = tmp_path / "p.yaml"
    path.write_text("pipeline:\n  - range: 3\n  - batch: {batch_size: 0}\n")
    with pytest.raises(ValueError) as located:
        list(sluice.Dataset.from_yaml(str(path)))
    assert str(located.value).startswith(f"{path}:3:5: step 2 (batch): ")

    with pytest.raises(FileNotFoundError) as missing:
        list(sluice.Dataset.text_line([str(tmp_path / "none.txt")]))
    assert missing.value.code == "NOT_FOUND"
    assert str(tmp_path / "none.txt") in str(missing.value)

    with pytest.raises(ValueError, match="processing_mode 'both' is not one of: parallel_epochs, distributed_epoch"):
        sluice.Dataset.range(3).distribute("both", "grpc://127.0.0.1:1")
    with pytest.raises(ValueError, match="num_consumers and consumer_index go together"):
        sluice.Dataset.range(3).distribute("parallel_epochs", "grpc://127.0.0.1:1", num_consumers=2)
    with pytest.raises(ValueError, match="function argument 'value' is a number, bool, str, list or dict"):
        sluice.Dataset.range(3).map("add", value=object())
    with pytest.raises(ValueError, match="function argument 'mean' is a number"):
        sluice.Dataset.range(3).map("normalize", mean=[0.5, object()], std=0.5)


def test_numpy_values_are_function_arguments():
    def images(**normalize):
        ds = sluice.Dataset.from_tensors(np.full((2, 2, 3), 255, dtype=np.uint8)).map("normalize", **normalize)
        return next(iter(ds))

    as_numpy = images(mean=np.array([0.5, 0.25, 0.0]), std=np.full(3, 0.5, dtype=np.float32))
    as_python = images(mean=[0.5, 0.25, 0.0], std=[0.5, 0.5, 0.5])
    assert np.array_equal(as_numpy, as_python)
    assert np.allclose(as_python[0, 0], [1.0, 1.5, 2.0])
    shifted = sluice.Dataset.range(3).map("add", value=np.int64(10))
    assert [int(x) for x in shifted] == [10, 11, 12]


def test_every_public_name_is_documented_and_stubbed():
    import pydoc

    text = pydoc.render_doc(sluice.Dataset.batch, renderer=pydoc.plaintext)
    assert "batch(self: sluice._sluice.Dataset, batch_size: int, drop_remainder: bool = False" in text
    assert "Stacks batch_size consecutive elements" in text
    for name in sluice.__all__:
        value = getattr(sluice, name)
        if callable(value):
            assert value.__doc__, f"sluice.{name} has no docstring"
    for name in dir(sluice.Dataset):
        if not name.startswith("_"):
            assert getattr(sluice.Dataset, name).__doc__, f"sluice.Dataset.{name} has no docstring"
    stub = open(os.path.join(os.path.dirname(sluice.__file__), "_sluice.pyi")).read()
    for name in dir(sluice._sluice):
        if not name.startswith("_"):
            assert name in stub, f"_sluice.pyi does not declare {name}"
    for name in dir(sluice.Dataset):
        if not name.startswith("_"):
            assert f"def {name}(" in stub, f"_sluice.pyi does not declare Dataset.{name}"
