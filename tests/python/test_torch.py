"""sluice.torch: IterableDataset with DataLoader (0 and 2 workers over a
shared job) and under DDP on the gloo backend, with 2 processes."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is not installed")

import sluice  # noqa: E402
from sluice.torch import IterableDataset, to_torch  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with sluice.LocalCluster(workers=2) as running:
        yield running


def test_tensors_share_the_arrays_memory():
    batch = next(iter(sluice.Dataset.range(6).batch(6)))
    tensor = to_torch(batch)
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.int64
    assert tensor.data_ptr() == batch.__array_interface__["data"][0]  # DLPack, no copy
    assert to_torch({"a": (np.int32(3), b"x")}) == {"a": (torch.tensor(3, dtype=torch.int32), b"x")}


def test_dataloader_without_workers():
    ds = sluice.Dataset.from_tensor_slices({"x": np.arange(6.0, dtype=np.float32), "y": np.arange(6)}).batch(4)
    loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None)
    batches = list(loader)
    assert [b["x"].tolist() for b in batches] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]
    assert batches[0]["x"].dtype == torch.float32 and batches[1]["y"].dtype == torch.int64


def run_script(script, timeout=120):
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=os.environ, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_dataloader_with_two_workers_reads_a_shared_job_once(cluster):
    # A fresh process forks the DataLoader workers, as a trainer would.
    out = run_script(
        "import json, torch, sluice\n"
        "from sluice.torch import IterableDataset\n"
        f"ds = sluice.Dataset.range(200).batch(5).distribute('distributed_epoch', {cluster.service!r},"
        " job_name='torch_loader')\n"
        "loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None, num_workers=2)\n"
        "print(json.dumps([b.tolist() for b in loader]))\n"
    )
    batches = json.loads(out)
    assert all(len(b) == 5 for b in batches)
    assert sorted(x for b in batches for x in b) == list(range(200))


def test_spawned_dataloader_workers_after_the_parent_read(cluster, tmp_path):
    # Workers started with spawn get the dataset pickled (its serialized
    # definition); the parent has read through gRPC before it starts them.
    script = tmp_path / "spawned.py"
    script.write_text(
        "import json, torch, sluice\n"
        "from sluice.torch import IterableDataset\n"
        "def main():\n"
        f"    service = {cluster.service!r}\n"
        "    assert sorted(int(x) for x in sluice.Dataset.range(3).distribute('parallel_epochs', service)) =="
        " [0, 0, 1, 1, 2, 2]\n"
        "    ds = sluice.Dataset.range(60).batch(5).distribute('distributed_epoch', service, job_name='spawned')\n"
        "    loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None, num_workers=2,"
        " multiprocessing_context='spawn')\n"
        "    print(json.dumps(sorted(x for b in loader for x in b.tolist())))\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    out = run_script_file(str(script))
    assert json.loads(out) == list(range(60))


def run_script_file(path, timeout=120):
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, env=os.environ, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_dataloader_workers_shard_a_local_pipeline():
    ds = sluice.Dataset.range(12).batch(3)
    loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None, num_workers=2)
    batches = sorted(b.tolist() for b in loader)
    assert batches == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]


def test_dataloader_workers_refuse_a_local_order_that_does_not_repeat():
    # Each worker would shuffle its own way, so sharding by element would
    # give some elements twice and miss others.
    loader = torch.utils.data.DataLoader(
        IterableDataset(sluice.Dataset.range(12).shuffle(4)), batch_size=None, num_workers=2
    )
    with pytest.raises(Exception, match="step 2 is a shuffle without a seed"):
        list(loader)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DDP_RANK = """
import json, sys, torch, torch.distributed as dist, sluice
from sluice.torch import IterableDataset
rank, port, service = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
local = sluice.Dataset.range(16).batch(8)
def shared(name):
    return sluice.Dataset.range(40).batch(4).distribute("distributed_epoch", service, job_name=name)
def read(ds, batch):
    return [b.tolist() for b in torch.utils.data.DataLoader(IterableDataset(ds, batch=batch), batch_size=None)]
out = {"local": read(local, "per_rank"), "shared": read(shared("ddp_job"), "per_rank"),
       "local_global": read(local, "global"), "shared_global": read(shared("ddp_global"), "global")}
# 11 batches of one for 2 ranks: shards of 6 and 5. By default ("pad") the
# rank with 5 repeats a batch; with "drop" the 6th is dropped.
odd = IterableDataset(sluice.Dataset.range(11).batch(1))
out["odd"] = [b.tolist() for b in torch.utils.data.DataLoader(odd, batch_size=None)]
out["odd_repeated"] = odd.repeated_batches
odd_drop = IterableDataset(sluice.Dataset.range(11).batch(1), even_batches="drop")
out["odd_drop"] = [b.tolist() for b in torch.utils.data.DataLoader(odd_drop, batch_size=None)]
out["odd_dropped"] = odd_drop.dropped_batches
out["metric"] = sorted(l for l in sluice.metrics().splitlines()
                       if l.startswith(("sluice_torch_dropped_batches_total", "sluice_torch_repeated_batches_total")))
dist.barrier()
print(json.dumps(out))
dist.destroy_process_group()
"""


def test_ddp_ranks_per_rank_and_global_batches(cluster):
    port = str(free_port())
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", DDP_RANK, str(rank), port, cluster.service],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ,
        )
        for rank in range(2)
    ]
    outputs = []
    try:
        for rank in ranks:
            out, err = rank.communicate(timeout=120)
            assert rank.returncode == 0, err
            outputs.append(json.loads(out))
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
    # batch="per_rank" (PyTorch's convention): a local pipeline's batches of
    # 8 go whole to one rank each; a named job's batches of 4 are shared
    # between the ranks, each once, in equal numbers of steps.
    for name, rows, total in (("local", 8, 16), ("shared", 4, 40)):
        assert all(len(b) == rows for out in outputs for b in out[name])
        assert sorted(x for out in outputs for b in out[name] for x in b) == list(range(total))
        assert len(outputs[0][name]) == len(outputs[1][name])
    # batch="global" (tf.data's): each global batch is split between the
    # ranks, 4 and 2 rows each; every element still arrives once.
    for name, rows, total in (("local_global", 4, 16), ("shared_global", 2, 40)):
        assert all(len(b) == rows for out in outputs for b in out[name])
        assert sorted(x for out in outputs for b in out[name] for x in b) == list(range(total))
        assert len(outputs[0][name]) == len(outputs[1][name])
    # even_batches: equal steps. "pad" (the default): every element, one
    # batch repeated and counted on both ranks; "drop": the one batch that
    # cannot be spread dropped and counted.
    assert [len(out["odd"]) for out in outputs] == [6, 6]
    odd = sorted(x for out in outputs for b in out["odd"] for x in b)
    assert len(odd) == 12 and set(odd) == set(range(11))
    assert [out["odd_repeated"] for out in outputs] == [1, 1]
    assert [len(out["odd_drop"]) for out in outputs] == [5, 5]
    odd = sorted(x for out in outputs for b in out["odd_drop"] for x in b)
    assert len(odd) == 10 and len(set(odd)) == 10 and set(odd) <= set(range(11))
    assert [out["odd_dropped"] for out in outputs] == [1, 1]
    assert [out["metric"] for out in outputs] == [
        ["sluice_torch_dropped_batches_total 1", "sluice_torch_repeated_batches_total 1"]] * 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch on this machine")
def test_cuda_batches_arrive_on_the_gpu():
    loader = torch.utils.data.DataLoader(IterableDataset(sluice.Dataset.range(8).batch(4), device="cuda:0"),
                                         batch_size=None)
    batches = list(loader)
    assert all(b.device == torch.device("cuda:0") for b in batches)
    assert [b.cpu().tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
