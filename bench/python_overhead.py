#!/usr/bin/python3
"""What the Python loop costs over C++: `for x in ds` in Python against the
C++ `sluice bench` on the same YAML pipeline, in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--seconds 3] [--repeats 3]

Two element sizes, each read in this process (a local pipeline) and from a
LocalCluster with one worker (distributed_epoch, a fresh job per run):

  * 64-byte elements: range -> batch(8) (eight int64 values each);
  * 1 MiB batches:   range -> batch(131072).

The C++ side is `sluice bench PIPELINE --seconds S`: the SDK's Iterator in
a loop that only counts (and sizes) each element. The Python side iterates
Dataset.from_yaml(the same file) and counts each element, which NumPy
arrays over the C++ buffers then hold. Both include everything the reading
process does; the daemons are the same for both. Each figure is the best of
`repeats` runs, C++ and Python alternating.

The goals (issue 16): Python costs under 2 us per element over C++, and
1 MiB batches run at >= 95% of the C++ rate.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import sluice

try:
    from sluice import _paths
except ImportError:  # an installed package without its programs
    _paths = None

CASES = [
    ("64-byte elements", 10**12, 8),
    ("1 MiB batches", 10**15, 131072),
]


def write_pipeline(folder, name, count, batch, service):
    path = os.path.join(folder, f"{name}.yaml")
    steps = [f"  - range: {count}", f"  - batch: {batch}"]
    if service:
        steps.append(f"  - distribute: {{processing_mode: distributed_epoch, service: '{service}'}}")
    with open(path, "w") as f:
        f.write("pipeline:\n" + "\n".join(steps) + "\n")
    return path


def cpp_rate(sluice_cli, pipeline, seconds):
    out = subprocess.run(
        [sluice_cli, "bench", pipeline, "--seconds", str(seconds)], capture_output=True, text=True, check=True
    ).stdout
    return float(re.search(r"batches:\s+\d+ \(([\d.]+) batches/s\)", out).group(1))


def python_rate(pipeline, seconds):
    ds = sluice.Dataset.from_yaml(pipeline)
    count = 0
    it = iter(ds)
    start = time.perf_counter()
    deadline = start + seconds
    for _ in it:
        count += 1
        if count % 256 == 0 and time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    del it
    return count / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sluice", default=getattr(_paths, "SLUICE", None), help="the sluice CLI")
    parser.add_argument("--local-only", action="store_true", help="skip the LocalCluster runs")
    args = parser.parse_args()
    if not args.sluice or not os.path.exists(args.sluice):
        sys.exit("python_overhead: cannot find the sluice CLI; pass --sluice PATH")

    print(f"{'where':8} {'case':18} {'C++ el/s':>12} {'Python el/s':>12} {'ratio':>7} {'us/el over C++':>15}")
    with tempfile.TemporaryDirectory() as folder:
        modes = [("local", None)]
        cluster = None
        if not args.local_only:
            cluster = sluice.LocalCluster(workers=1).start()
            modes.append(("service", cluster.service))
        try:
            for where, service in modes:
                for name, count, batch in CASES:
                    pipeline = write_pipeline(folder, f"{where}_{batch}", count, batch, service)
                    cpp, py = 0.0, 0.0
                    for _ in range(args.repeats):
                        cpp = max(cpp, cpp_rate(args.sluice, pipeline, args.seconds))
                        py = max(py, python_rate(pipeline, args.seconds))
                    overhead_us = 1e6 * (1.0 / py - 1.0 / cpp)
                    print(f"{where:8} {name:18} {cpp:12,.0f} {py:12,.0f} {py / cpp:7.1%} {overhead_us:15.2f}",
                          flush=True)
        finally:
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    main()
