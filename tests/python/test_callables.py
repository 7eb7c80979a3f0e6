"""Python callables in map and filter: where they run, what they take and
return, their errors, and the refusal before `distribute`."""

import functools
import pickle
import re
import threading
import traceback

import numpy as np
import pytest

import sluice


def test_map_and_filter_take_callables_in_a_local_pipeline():
    ds = sluice.Dataset.range(6).filter(lambda x: x % 2 == 1).map(lambda x: x * 10)
    assert [int(x) for x in ds] == [10, 30, 50]
    # Registered functions and callables mix.
    mixed = sluice.Dataset.range(4).map("square").map(lambda x: x + 1).map("add", value=100)
    assert [int(x) for x in mixed] == [101, 102, 105, 110]


def test_a_callable_takes_and_returns_structures():
    ds = sluice.Dataset.from_tensor_slices({"x": np.arange(4.0), "y": np.arange(4)})
    swapped = ds.map(lambda e: (e["y"], np.float32(e["x"]) * 2, b"tag"))
    assert list(swapped) == [(0, 0.0, b"tag"), (1, 2.0, b"tag"), (2, 4.0, b"tag"), (3, 6.0, b"tag")]
    batches = list(ds.map(lambda e: {"sum": e["x"] + e["y"], "row": np.full(2, e["y"])}).batch(3))
    assert [b["sum"].tolist() for b in batches] == [[0.0, 2.0, 4.0], [6.0]]
    assert batches[0]["row"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert batches[0]["row"].dtype == np.int64


def test_parallel_calls_run_on_engine_threads_and_keep_order():
    seen = set()
    lock = threading.Lock()

    def record(x):
        with lock:
            seen.add(threading.get_ident())
        return x * 2

    ds = sluice.Dataset.range(200).map(record, num_parallel_calls=4)
    assert [int(x) for x in ds] == [2 * i for i in range(200)]
    assert threading.get_ident() not in seen  # never the reading thread


def test_a_callables_exception_reaches_the_caller_as_itself():
    def parse(x):
        return int("nope")

    with pytest.raises(ValueError) as bad:
        list(sluice.Dataset.range(3).map(parse))
    assert str(bad.value) == "invalid literal for int() with base 10: 'nope'"
    assert bad.value.code == "INVALID_ARGUMENT"
    # Sluice's context rides along as a note.
    assert bad.value.__notes__[0].startswith(
        "map(test_a_callables_exception_reaches_the_caller_as_itself.<locals>.parse) raised ValueError: "
    )

    def divide(x):
        return 1 // int(x)

    with pytest.raises(ZeroDivisionError) as other:
        list(sluice.Dataset.range(3).map(divide))
    assert str(other.value) == "integer division or modulo by zero"
    assert other.value.code == "UNKNOWN"
    # The traceback goes on into the callable, where it raised.
    assert "return 1 // int(x)" in "".join(traceback.format_exception(other.value))
    with pytest.raises(ValueError, match=r"The truth value of an array") as truth:
        list(sluice.Dataset.range(3).filter(lambda x: np.array([1, 2])))
    assert re.match(r"filter\(.*<lambda>\) raised ValueError: The truth value", truth.value.__notes__[0])
    with pytest.raises(ValueError, match="function argument 'value'"):
        sluice.Dataset.range(3).map("add", value=object())
    with pytest.raises(ValueError, match="map takes a registered function's name or a Python callable, not int"):
        sluice.Dataset.range(3).map(5)
    with pytest.raises(ValueError, match=r"map: keyword arguments \(\['value'\]\) go to registered functions"):
        sluice.Dataset.range(3).map(lambda x: x, value=1)
    assert [int(x) for x in sluice.Dataset.range(3).map(functools.partial(np.add, 5))] == [5, 6, 7]


def test_a_callable_before_distribute_is_shipped_to_the_workers():
    # Pickled (cloudpickle) into a py:__client__.call step, which workers run
    # only where their operator allows client functions
    # (test_python_transforms.py reads both kinds of cluster).
    shipped = sluice.Dataset.range(4).map(lambda x: x).distribute("distributed_epoch", "grpc://127.0.0.1:1")
    assert b"py:__client__.call" in shipped.serialize()
    assert b"local:" not in shipped.serialize()
    filtered = sluice.Dataset.range(4).batch(2).filter(lambda b: True).distribute("parallel_epochs", "grpc://127.0.0.1:1")
    assert b"py:__client__.call" in filtered.serialize()
    # After distribute, callables stay in this process.
    after = sluice.Dataset.range(4).distribute("parallel_epochs", "grpc://127.0.0.1:1").map(lambda x: x)
    assert b"py:__client__.call" not in after.serialize()


def test_datasets_pickle_unless_they_hold_a_callable():
    ds = sluice.Dataset.range(5).map("square").batch(2)
    again = pickle.loads(pickle.dumps(ds))
    assert again.fingerprint() == ds.fingerprint()
    assert [b.tolist() for b in again] == [[0, 1], [4, 9], [16]]
    with pytest.raises(ValueError, match="a dataset with a Python callable cannot be pickled"):
        pickle.dumps(sluice.Dataset.range(5).map(lambda x: x))
