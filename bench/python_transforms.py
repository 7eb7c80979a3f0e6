#!/usr/bin/python3
"""Python transforms on Sluice's workers against torchvision's DataLoader
(issue 35), on the same cores in one run:

- dataloader: torchvision's ImageFolder with RandomResizedCrop(224),
  RandomHorizontalFlip, ToTensor, Normalize in DataLoader(batch_size=64,
  shuffle=True, num_workers=P): P worker processes, batches collated and
  handed to the trainer through shared memory.
  Each epoch starts its worker processes again (fork; no
  persistent_workers), as the DataLoader does by default; timed: the
  second epoch.
- sluice: the same transform (bench/python_modules/tv_transforms.py, a
  module the worker loads) on one workerd with python.processes P,
  image_folder -> map(py:tv_transforms.train, num_parallel_calls=P) ->
  batch(64) -> distribute, read by this process; timed: the second epoch
  (the pool's processes are started with the worker and kept).
- alone: the transform in this one process, image after image (file read,
  decode, transform; no batching): the physical reference.
- hop: the pool's cost per element, a no-op Python function on int64
  scalars against the same pipeline without it (local, 1 process).

Prints one line per variant; the last lines are machine-readable.

    /usr/bin/python3 bench/python_transforms.py --images 512 --processes 2
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--processes", type=int, default=2, help="DataLoader workers and python.processes")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "sluice-python-transforms-images"))
    p.add_argument("--hop-elements", type=int, default=20000)
    return p.parse_args()


def dataloader(root, processes):
    import torch
    from torchvision import datasets

    sys.path.insert(0, os.path.join(HERE, "python_modules"))
    from tv_transforms import _TRANSFORM

    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(
        datasets.ImageFolder(root, transform=_TRANSFORM), batch_size=64, shuffle=True, num_workers=processes
    )
    start, images = time.perf_counter(), 0
    for batch, _ in loader:
        images += batch.shape[0]
    return images, time.perf_counter() - start


def alone(root):
    from PIL import Image

    sys.path.insert(0, os.path.join(HERE, "python_modules"))
    from tv_transforms import _TRANSFORM

    files = [os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith(".jpg")]
    start = time.perf_counter()
    for path in files:
        _TRANSFORM(Image.open(path).convert("RGB"))
    return len(files), time.perf_counter() - start


def sluice_service(root, processes):
    import sluice

    python = {"path": [os.path.join(HERE, "python_modules")], "modules": ["tv_transforms"], "processes": processes}
    with sluice.LocalCluster(workers=1, worker_config={"python": python}, dispatcher_config={"python": python}) as c:
        ds = (
            sluice.Dataset.image_folder(root, shuffle=True, seed=1)
            .map("py:tv_transforms.train", num_parallel_calls=processes)
            .batch(64)
            .distribute("parallel_epochs", c.service)
        )
        for _ in ds:  # an untimed epoch, as for the DataLoader
            pass
        start, images = time.perf_counter(), 0
        for batch in ds:
            images += batch["image"].shape[0]
        return images, time.perf_counter() - start


def hop(elements):
    import sluice

    os.environ["PYTHONPATH"] = os.path.join(HERE, "python_modules") + os.pathsep + os.environ.get("PYTHONPATH", "")
    plain = sluice.Dataset.range(elements)
    shipped = sluice.Dataset.range(elements).map("py:tv_transforms.noop")
    list(shipped.take(100))  # starts the pool's process

    def timed(ds):
        start = time.perf_counter()
        for _ in ds:
            pass
        return time.perf_counter() - start

    return (timed(shipped) - timed(plain)) / elements


def main():
    a = parse_args()
    subprocess.run(
        [sys.executable, os.path.join(HERE, "make_image_folder.py"), "--out", a.data, "--images", str(a.images)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"cores: {len(os.sched_getaffinity(0))}, images: {a.images}, processes: {a.processes}")
    dataloader(a.data, a.processes)  # warm the page cache and imports
    rates = {}
    for name, run in (
        ("dataloader", lambda: dataloader(a.data, a.processes)),
        ("sluice", lambda: sluice_service(a.data, a.processes)),
        ("alone", lambda: alone(a.data)),
    ):
        images, seconds = run()
        rates[name] = images / seconds
        print(f"{name}: {images} images in {seconds:.2f} s, {rates[name]:.1f} images/s")
    hop_us = hop(a.hop_elements) * 1e6
    print(f"sluice / dataloader: {rates['sluice'] / rates['dataloader']:.3f}")
    print(f"pool hop per element: {hop_us:.1f} us")


if __name__ == "__main__":
    main()
