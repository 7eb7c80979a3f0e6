#!/usr/bin/python3
"""Trains a small PyTorch model on data served by a local Sluice cluster.

    PYTHONPATH=build/python /usr/bin/python3 client/examples/train_torch.py [--epochs 5]

A dispatcher and two workers start as child processes (sluice.LocalCluster).
The workers make the examples (x, y) with y = 3*x0 - 2*x1 + 0.5*x2 + 1
plus noise, batch them, and serve them in distributed_epoch, so that each
example arrives once per epoch; the trainer reads them through
sluice.torch.IterableDataset and a DataLoader, and prints the loss of each
epoch, which goes down.
"""

import argparse

import numpy as np
import torch

import sluice
from sluice.torch import IterableDataset

TRUE_WEIGHTS = np.array([3.0, -2.0, 0.5, 0.0], dtype=np.float32)
TRUE_BIAS = 1.0


def make_examples(count, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(count, 4)).astype(np.float32)
    y = (x @ TRUE_WEIGHTS + TRUE_BIAS + 0.01 * rng.normal(size=count)).astype(np.float32)
    return {"x": x, "y": y}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--examples", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with sluice.LocalCluster(workers=2) as cluster:
        ds = (
            sluice.Dataset.from_tensor_slices(make_examples(args.examples))
            .shuffle(512, seed=1)
            .batch(args.batch_size)
            .distribute("distributed_epoch", cluster.service)
        )
        loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None)
        for epoch in range(args.epochs):
            total, seen = 0.0, 0
            for batch in loader:  # each epoch is a new iteration of the job
                prediction = model(batch["x"]).squeeze(1)
                loss = torch.nn.functional.mse_loss(prediction, batch["y"])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(batch["y"])
                seen += len(batch["y"])
            print(f"epoch {epoch + 1}: {seen} examples, loss {total / seen:.4f}", flush=True)
    weights = ", ".join(f"{w:.2f}" for w in model.weight.detach().squeeze(0).tolist())
    print(f"learned weights [{weights}], bias {model.bias.item():.2f} (true: [3, -2, 0.5, 0], 1)")


if __name__ == "__main__":
    main()
