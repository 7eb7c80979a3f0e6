#!/usr/bin/python3
"""The baseline: torchvision's standard ImageNet training input pipeline.

ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor +
Normalize, in a DataLoader(batch_size=64, shuffle=True, num_workers=2), as
the PyTorch ImageNet example has it. Prints images/s over --epochs full
passes; the last line is machine-readable:

    torchvision images/s: <float> (images <n>, seconds <s>, workers <w>, batch 64)

    /usr/bin/python3 bench/torchvision_baseline.py /tmp/sluice-imagenet-like
"""

import argparse
import os
import sys
import time

import PIL
import torch
import torchvision
from torchvision import datasets, transforms


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="ImageFolder root (class folders of images)")
    p.add_argument("--workers", type=int, default=2, help="DataLoader num_workers")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1, help="timed full passes")
    p.add_argument("--warmup-batches", type=int, default=2,
                   help="batches read, untimed, by a separate iterator before the timed epochs")
    p.add_argument("--pin-memory", action="store_true")
    return p.parse_args()


def report_worker_threads(worker_id):
    # Changes nothing: only reports what a worker runs with. The DataLoader
    # itself calls torch.set_num_threads(1) in each worker before this.
    if worker_id == 0:
        print(f"worker torch.get_num_threads(): {torch.get_num_threads()}", file=sys.stderr, flush=True)


def main():
    a = parse_args()
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, PIL {PIL.__version__}, "
          f"torchvision image backend {torchvision.get_image_backend()}")
    print(f"main process torch.get_num_threads(): {torch.get_num_threads()} (default), "
          f"cores available: {len(os.sched_getaffinity(0))}")
    # The main process only receives finished batches from the workers, so it
    # needs no intra-op threads; without this its idle thread pool would only
    # compete with the workers for the same cores.
    torch.set_num_threads(1)

    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    dataset = datasets.ImageFolder(a.root, transform=transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]))
    print(f"dataset: {len(dataset)} images, {len(dataset.classes)} classes in {a.root}")
    if len(dataset) == 0:
        sys.exit("no images")

    def loader():
        # persistent_workers=False (the default): each epoch starts new workers,
        # and the timed epochs include that start, as a training loop sees it.
        return torch.utils.data.DataLoader(
            dataset, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
            drop_last=False, persistent_workers=False, pin_memory=a.pin_memory,
            worker_init_fn=report_worker_threads if a.workers > 0 else None)

    # Warm-up on its own iterator, thrown away: imports, the page cache, lazy
    # initialisation. Timing the rest of this same pass instead would credit
    # the timed part with batches the workers prefetched during the warm-up.
    if a.warmup_batches > 0:
        it = iter(loader())
        for _ in range(a.warmup_batches):
            if next(it, None) is None:
                break
        del it

    images = 0
    start = time.perf_counter()
    for _ in range(a.epochs):
        for x, y in loader():
            images += x.shape[0]
    seconds = time.perf_counter() - start

    print(f"torchvision images/s: {images / seconds:.1f} (images {images}, seconds {seconds:.2f}, "
          f"workers {a.workers}, batch {a.batch_size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
