"""Real PyTorch trainers reading an image pipeline from a LocalCluster, as
users run them: DataLoader worker processes (fresh and persistent) over
several epochs, and 2 DDP ranks (gloo, torch.multiprocessing.spawn) with an
all-reduce every step. Each image is counted by its path in every epoch.

Every trainer runs in a fresh process (as a user's would, and because gRPC
does not promise a forked child of a process that used it works)."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow (Debian's python3-pil) is not installed")

import sluice  # noqa: E402

NUM_IMAGES = 42  # 3 classes of 14: an odd number of batches of 4 per worker
BATCH = 4


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(7)
    paths = []
    for i in range(NUM_IMAGES):
        folder = root / f"class{i % 3}"
        folder.mkdir(exist_ok=True)
        out = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(out, format="JPEG")
        path = folder / f"img{i:03d}.jpg"
        path.write_bytes(out.getvalue())
        paths.append(str(path))
    return str(root), sorted(paths)


@pytest.fixture(scope="module")
def cluster():
    with sluice.LocalCluster(workers=2) as running:
        yield running


# The pipeline every trainer reads: the ImageNet training steps, seeded.
PIPELINE = """
import sluice
def pipeline(root, service, **distribute):
    return (
        sluice.Dataset.image_folder(root, shuffle=True, seed=11)
        .map("decode_and_random_crop", size=[8, 8], seed=3)
        .map("random_flip_left_right", seed=4)
        .map("normalize", mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25], layout="CHW")
        .batch(%d)
        .distribute("distributed_epoch", service, **distribute)
    )
def paths(batch):
    return [p.decode() for p in batch["path"]]
""" % BATCH


def run_trainer(tmp_path, body, timeout=150):
    script = tmp_path / "trainer.py"
    script.write_text(PIPELINE + body)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=os.environ, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("num_workers,persistent", [(0, False), (2, False), (2, True)])
def test_dataloader_reads_each_image_once_per_epoch(images, cluster, tmp_path, num_workers, persistent):
    root, expected = images
    done = run_trainer(
        tmp_path,
        f"""
import json, torch
from sluice.torch import IterableDataset
loader = torch.utils.data.DataLoader(
    IterableDataset(pipeline({root!r}, {cluster.service!r})), batch_size=None,
    num_workers={num_workers}, persistent_workers={persistent})
epochs = []
for epoch in range(3):
    seen = []
    for batch in loader:
        assert batch["image"].dtype == torch.float32 and tuple(batch["image"].shape[1:]) == (3, 8, 8)
        seen += paths(batch)
    epochs.append(seen)
print(json.dumps(epochs))
""",
    )
    epochs = json.loads(done.stdout)
    assert len(epochs) == 3
    for seen in epochs:
        assert sorted(seen) == expected  # each path exactly once per epoch
    assert "warning" not in done.stderr, done.stderr


def test_ddp_ranks_take_equal_steps_and_never_share_an_image(images, cluster, tmp_path):
    root, expected = images
    out = tmp_path / "ranks"
    out.mkdir()
    run_trainer(
        tmp_path,
        f"""
import json, os, socket, torch, torch.distributed as dist, torch.multiprocessing as mp
from sluice.torch import IterableDataset

def rank_main(rank, world, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{{port}}", rank=rank, world_size=world)
    dataset = IterableDataset(pipeline({root!r}, {cluster.service!r}))
    loader = torch.utils.data.DataLoader(dataset, batch_size=None)
    epochs = []
    for epoch in range(2):
        seen, steps = [], 0
        for batch in loader:
            total = torch.tensor([float(batch["image"].sum())])
            dist.all_reduce(total)  # the trainer's own collective, every step
            seen += paths(batch)
            steps += 1
        epochs.append({{"steps": steps, "paths": seen}})
    with open(os.path.join({str(out)!r}, f"{{rank}}.json"), "w") as f:
        json.dump({{"epochs": epochs, "dropped": dataset.dropped_batches}}, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(2, port), nprocs=2, join=True)
""",
    )
    ranks = [json.loads((out / f"{rank}.json").read_text()) for rank in range(2)]
    for epoch in range(2):
        r0, r1 = (ranks[rank]["epochs"][epoch] for rank in range(2))
        assert r0["steps"] == r1["steps"] > 0
        both = r0["paths"] + r1["paths"]
        assert len(set(both)) == len(both)  # no image twice in an epoch
        assert set(both) <= set(expected)
        # At most one global batch (2 ranks x 4 images) is dropped.
        assert len(both) >= NUM_IMAGES - 2 * BATCH
    assert ranks[0]["dropped"] == ranks[1]["dropped"]


def test_a_named_job_read_again_is_its_next_repetition(cluster):
    ds = sluice.Dataset.range(100).distribute("distributed_epoch", cluster.service, job_name="epochs_again")
    assert [len(list(ds)) for _ in range(3)] == [100, 100, 100]
    assert ds.next_read_repetition == 3
    # A copy made by adding steps shares the counter.
    assert sorted(int(x) for b in ds.batch(10) for x in b) == list(range(100))
    assert ds.next_read_repetition == 4
    # Another dataset object starts at repetition 0, which was read to its
    # end: an error naming the job and the repetition, never [].
    again = sluice.Dataset.range(100).distribute("distributed_epoch", cluster.service, job_name="epochs_again")
    with pytest.raises(sluice.Error) as error:
        list(again)
    assert "job 'epochs_again' repetition 0 was already read to its end by other consumers" in str(error.value)


def test_a_pickled_dataset_carries_its_next_repetition(cluster):
    import pickle

    ds = sluice.Dataset.range(10).distribute("distributed_epoch", cluster.service, job_name="pickled_epochs")
    assert len(list(ds)) == 10
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.next_read_repetition == 1
    assert sorted(int(x) for x in copy) == list(range(10))  # repetition 1, not the finished 0


def test_peers_skip_a_repetition_finished_by_an_earlier_epoch(cluster):
    ds = sluice.Dataset.range(20).distribute("distributed_epoch", cluster.service, job_name="stale_epochs")
    first = ds.read_as_peer("unused", "epoch-a")
    assert len(list(first)) == 20
    # A fresh copy (a DataLoader worker forked for the next epoch) counts
    # from 0 again: repetition 0 finished under another key, so it reads 1.
    fresh = sluice.Dataset.range(20).distribute("distributed_epoch", cluster.service, job_name="stale_epochs")
    second = fresh.read_as_peer("unused", "epoch-b")
    assert sorted(int(x) for x in second) == list(range(20))
    assert fresh.next_read_repetition == 2
    # A peer of the same epoch that joins after the others finished reads
    # nothing: its peers had the elements.
    late = sluice.Dataset.range(20).distribute("distributed_epoch", cluster.service, job_name="stale_epochs")
    late.next_read_repetition = 1
    assert list(late.read_as_peer("unused", "epoch-b")) == []
