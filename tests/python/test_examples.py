"""client/examples/train_torch.py runs and its loss goes down."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is not installed")


def test_train_torch_learns_the_weights(source_dir):
    example = os.path.join(source_dir, "client", "examples", "train_torch.py")
    done = subprocess.run(
        [sys.executable, example, "--epochs", "3"], capture_output=True, text=True, env=os.environ, timeout=120
    )
    assert done.returncode == 0, done.stderr
    epochs = re.findall(r"^epoch (\d): (\d+) examples, loss ([\d.]+)$", done.stdout, re.MULTILINE)
    assert [(e, n) for e, n, _ in epochs] == [("1", "2048"), ("2", "2048"), ("3", "2048")]
    losses = [float(loss) for _, _, loss in epochs]
    assert losses[0] > 10 * losses[2]
    # Which worker serves which batch first varies, so the last digits do.
    learned = re.search(r"learned weights \[(.*)\], bias (\S+) ", done.stdout)
    weights = [float(w) for w in learned.group(1).split(", ")] + [float(learned.group(2))]
    assert all(abs(w - t) < 0.05 for w, t in zip(weights, [3.0, -2.0, 0.5, 0.0, 1.0])), weights
