"""Issue 35: Python functions of the operator's modules run on the workers
(`map: {fn: "py:MODULE.FUNCTION"}`), in a pool of Python processes, through
real daemons: values, keyword arguments, dicts and torch tensors; scan; an
exception reaching the reader with its type and message; a crash and a
memory hog that fail their task while the worker serves on; a module the
workers do not load; seeds that repeat; the pool dying with its worker;
client callables refused, then run where the operator allows them."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import sluice
from conftest import write_tokens  # pytest puts this folder on sys.path
from test_service import alive  # pytest puts this folder on sys.path

Dataset = sluice.Dataset

MODULE = '''
import ctypes
import numpy as np
import sluice.worker

def double(x):
    return x * 2

def scale(x, factor):
    return x * factor

def to_dict(x):
    return {"x": x, "half": np.float32(x) / 2}

def fail(x):
    if int(x) == 3:
        raise KeyError(f"no entry {int(x)}")
    return x

def crash(x):
    if int(x) == 2:
        ctypes.string_at(0)
    return x

def hog(x):
    if int(x) == 1:
        kept = np.ones(600 << 20, dtype=np.uint8)
        import time
        time.sleep(10)
        return kept[:1]
    return x

def noise(x):
    return np.random.default_rng(sluice.worker.seed()).integers(0, 1 << 40)

def as_torch(x):
    import torch
    return {"t": torch.full((2,), float(x)), "n": torch.tensor(int(x))}

def running_sum(state, x):
    return state + x, state + x
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("modules")
    (folder / "augment.py").write_text(MODULE)
    python = {
        "path": [str(folder)],
        "modules": ["augment"],
        "processes": 2,
        "call_timeout_ms": 20000,
        "max_rss_bytes": 300 << 20,
    }
    with sluice.LocalCluster(workers=1, worker_config={"python": python}, dispatcher_config={"python": python}) as c:
        yield c


def read(dataset, cluster):
    return [np.asarray(v).tolist() for v in dataset.distribute("parallel_epochs", cluster.service)]


def test_a_workers_python_functions_map_the_elements(cluster):
    assert read(Dataset.range(6).map("py:augment.double"), cluster) == [0, 2, 4, 6, 8, 10]
    assert read(Dataset.range(3).map("py:augment.scale", factor=7), cluster) == [0, 7, 14]
    halves = list(Dataset.range(3).map("py:augment.to_dict").distribute("parallel_epochs", cluster.service))
    assert [(int(e["x"]), float(e["half"])) for e in halves] == [(0, 0.0), (1, 0.5), (2, 1.0)]
    # torch tensors come back as arrays of their dtype.
    tensors = list(Dataset.range(2).map("py:augment.as_torch").distribute("parallel_epochs", cluster.service))
    assert [(e["t"].dtype.name, e["t"].tolist(), int(e["n"])) for e in tensors] == [
        ("float32", [0.0, 0.0], 0),
        ("float32", [1.0, 1.0], 1),
    ]
    # scan's function: (state, element) -> (new state, output).
    assert read(Dataset.range(5).scan("py:augment.running_sum", np.int64(0)), cluster) == [0, 1, 3, 6, 10]
    # In parallel on the pool, in order.
    assert read(Dataset.range(100).map("py:augment.double", num_parallel_calls=2), cluster) == list(range(0, 200, 2))


def test_an_exception_reaches_the_reader_and_the_next_read_works(cluster):
    with pytest.raises(ValueError, match=r"py:augment.fail: KeyError: 'no entry 3'"):
        read(Dataset.range(6).map("py:augment.fail"), cluster)
    assert read(Dataset.range(6).map("py:augment.fail").ignore_errors(quiet=True), cluster) == [0, 1, 2, 4, 5]


def test_a_crash_fails_its_task_and_the_worker_serves_on(cluster):
    with pytest.raises(Exception, match=r"its Python process ended .*signal 11"):
        read(Dataset.range(5).map("py:augment.crash"), cluster)
    assert cluster.workers[0].poll() is None
    assert read(Dataset.range(4).map("py:augment.double"), cluster) == [0, 2, 4, 6]


def test_a_memory_hog_fails_its_task_and_the_worker_serves_on(cluster):
    with pytest.raises(Exception, match=r"py:augment.hog: its Python process passed python.max_rss_bytes "
                       r"\(314572800 bytes resident\)") as e:
        read(Dataset.range(3).map("py:augment.hog"), cluster)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    assert cluster.workers[0].poll() is None
    assert read(Dataset.range(4).map("py:augment.double"), cluster) == [0, 2, 4, 6]


def test_a_module_the_workers_do_not_load_is_refused(cluster):
    with pytest.raises(Exception, match=r"does not load the Python module 'os' \(python.modules: \[augment\]\)") as e:
        read(Dataset.range(2).map("py:os.getcwd"), cluster)
    assert e.value.code == "FAILED_PRECONDITION"


def test_seeded_python_randomness_repeats(cluster):
    first = read(Dataset.range(8).map("py:augment.noise", seed=3), cluster)
    assert first == read(Dataset.range(8).map("py:augment.noise", seed=3), cluster)
    assert first != read(Dataset.range(8).map("py:augment.noise", seed=4), cluster)
    assert len(set(first)) == 8


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def test_a_killed_workers_python_processes_exit_with_it(tmp_path):
    (tmp_path / "augment.py").write_text(MODULE)
    python = {"path": [str(tmp_path)], "modules": ["augment"], "processes": 2}
    with sluice.LocalCluster(workers=1, worker_config={"python": python}, dispatcher_config={"python": python}) as c:
        assert read(Dataset.range(40).map("py:augment.double", num_parallel_calls=2), c) == list(range(0, 80, 2))
        pool = children(c.workers[0].pid)
        assert len(pool) == 2
        c.kill_worker(0)
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in pool):
            assert time.monotonic() < deadline, "the pool outlived its worker"
            time.sleep(0.05)


def test_a_client_callable_is_refused_where_the_operator_does_not_allow_them(cluster):
    with pytest.raises(ValueError, match=r"python.allow_client_functions \(and auth on\); or put the function in a "
                       r"module of the workers' python.modules") as e:
        read(Dataset.range(3).map(lambda x: x + 1), cluster)
    assert e.value.code == "INVALID_ARGUMENT"
    # After distribute, a callable runs here as always.
    assert [int(v) for v in Dataset.range(3).distribute("parallel_epochs", cluster.service).map(lambda x: x + 1)] == [
        1,
        2,
        3,
    ]


def test_allowing_client_functions_needs_auth():
    python = {"allow_client_functions": True}
    with pytest.raises(RuntimeError, match=r"python.allow_client_functions runs the Python code any client sends: "
                       r"it needs client authentication"):
        sluice.LocalCluster(workers=0, dispatcher_config={"python": python}).start()


CLIENT_SCRIPT = '''
import json, sys
import numpy as np
import sluice
flags = sys.argv[1:]
python = {"allow_client_functions": True, "processes": 2}
with sluice.LocalCluster(workers=1, dispatcher_args=flags, worker_args=flags,
                         worker_config={"python": python}, dispatcher_config={"python": python}) as c:
    offset = 100
    squares = sluice.Dataset.range(5).map(lambda x: x * x + offset, num_parallel_calls=2)
    evens = sluice.Dataset.range(10).filter(lambda x: x % 2 == 0)
    def noisy(x, seed):
        return np.random.default_rng(seed).integers(0, 1 << 40)
    seeded = sluice.Dataset.range(4).map(noisy)
    read = lambda ds: [int(v) for v in ds.distribute("parallel_epochs", c.service)]
    print(json.dumps([read(squares), read(evens), read(seeded), read(seeded)]))
'''


def test_a_client_callable_runs_on_workers_that_allow_them(tmp_path):
    flags, env = write_tokens(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_SCRIPT] + flags, capture_output=True, text=True, env=env, timeout=100
    )
    assert done.returncode == 0, done.stderr
    squares, evens, seeded, again = json.loads(done.stdout.strip().splitlines()[-1])
    assert squares == [100, 101, 104, 109, 116]
    assert evens == [0, 2, 4, 6, 8]
    assert seeded == again and len(set(seeded)) == 4


ATTACK_SCRIPT = '''
import json, sys
import sluice
folder, flags = sys.argv[1], sys.argv[2:]
python = {"path": [folder], "modules": ["augment"], "allow_client_functions": True, "processes": 2}
with sluice.LocalCluster(workers=1, dispatcher_args=flags, worker_args=flags,
                         worker_config={"python": python}, dispatcher_config={"python": python}) as c:
    def poison(x):
        # Issue 50, finding 7: a client's callable rewrites the operator's function.
        import augment
        augment.double = lambda value: 666
        return x + 1000
    poisoned = [int(v) for v in sluice.Dataset.range(40).map(poison, num_parallel_calls=2)
                .distribute("parallel_epochs", c.service)]
    doubled = [int(v) for v in sluice.Dataset.range(40).map("py:augment.double", num_parallel_calls=2)
               .distribute("parallel_epochs", c.service)]
    print(json.dumps([poisoned, doubled]))
'''


def test_a_client_callable_cannot_change_the_operators_functions(tmp_path):
    """The callables clients ship run in processes of their own: one that
    rewrites an operator module's function changes only its own copy."""
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "augment.py").write_text(MODULE)
    flags, env = write_tokens(tmp_path)
    done = subprocess.run([sys.executable, "-c", ATTACK_SCRIPT, str(folder)] + flags, capture_output=True,
                          text=True, env=env, timeout=100)
    assert done.returncode == 0, done.stderr
    poisoned, doubled = json.loads(done.stdout.strip().splitlines()[-1])
    assert poisoned == [x + 1000 for x in range(40)]
    assert doubled == [2 * x for x in range(40)]
