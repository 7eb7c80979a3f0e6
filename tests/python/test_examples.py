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
    assert "learned weights [3.00, -2.00, 0.50, 0.00], bias 1.00" in done.stdout
