"""How long `sluice read` of range(N) takes with its worker behind a link of
each one-way delay (tests/multihost/slow_link.py; no netem needed). The
baseline is the same read through the relay at 0 ms, in the same run.

    /usr/bin/python3 bench/slow_link_read.py [--build build] [--delays 0,60,150,400] [--workers 1]
"""

import argparse
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(HERE.parent / "build"))
    parser.add_argument("--delays", default="0,60,150,400", help="one-way delays in ms")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--elements", type=int, default=1000)
    args = parser.parse_args()
    os.environ["SLUICE_BUILD_DIR"] = os.path.abspath(args.build)
    sys.path.insert(0, str(HERE.parent / "tests" / "multihost"))
    from slow_link import SlowWorkerCluster  # after SLUICE_BUILD_DIR: it names the binaries

    print(f"{'one-way ms':>10} {'exit':>5} {'elements':>9} {'seconds':>8}  warnings")
    for delay in (int(d) for d in args.delays.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = SlowWorkerCluster(pathlib.Path(tmp), args.workers, delay)
            try:
                code, values, err, seconds = cluster.read(
                    [f"range: {args.elements}", "distribute: {processing_mode: distributed_epoch}"], timeout=300)
            finally:
                cluster.close()
        warnings = sum(1 for line in err.splitlines() if "warning" in line)
        print(f"{delay:>10} {code:>5} {len(values):>9} {seconds:>8.2f}  {warnings}")


if __name__ == "__main__":
    main()
