"""Scale-out across hosts (issue 36, part 1): aggregate read throughput of
one reader from 1, 2, 4 and 8 workers, each worker on a host of its own
(a network namespace, tests/multihost/netns_hosts.py) whose link sends at
most --link (tc tbf), the reader's host unlimited; against the sum of the
workers' links, the physical limit, and (--baseline) against what plain
TCP streams get through the same links. Run by bench/scale_out.sh; needs
root.

  python3 bench/scale_out.py --build BUILD [--link 400mbit] [--workers 1,2,4,8] [--seconds 8]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import pathlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "multihost"))

ROWS = 131072  # int64 rows per batch: 1 MiB elements

# Streams zeros to HOST:PORT for SECONDS (a worker host's plain TCP).
_SENDER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
block, end = bytes(1 << 20), time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    s.sendall(block)
s.close()
"""
# Accepts N connections on PORT and prints the bytes they sent in the
# middle of the run (after WARM seconds, for SECONDS).
_RECEIVER = """
import socket, sys, threading, time
n, warm, seconds = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((sys.argv[1], int(sys.argv[2]))); server.listen(n)
print("ready", flush=True)
counts = [0] * n
def drain(i, conn):
    while True:
        data = conn.recv(1 << 20)
        if not data: return
        counts[i] += len(data)
threads = []
for i in range(n):
    conn, _ = server.accept()
    threads.append(threading.Thread(target=drain, args=(i, conn), daemon=True)); threads[-1].start()
time.sleep(warm); before = sum(counts); time.sleep(seconds); after = sum(counts)
print((after - before) / seconds, flush=True)
"""


def rate_bits(text):
    """tc's rate ("400mbit", "1gbit", "100kbit") in bits per second."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)bit", text.lower())
    if not match:
        raise SystemExit(f"scale_out: --link {text!r}: expected a rate such as 400mbit, 100mbit or 1gbit")
    return float(match.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]


def burst(bits_per_second):
    # tbf needs a bucket of at least one timer tick's bytes to reach its
    # rate: 4 ms of the rate, and never under 64 KiB.
    return f"{max(65536, int(bits_per_second / 8 * 0.004))}b"


def sluice_run(hosts, workers, link, seconds, tmp, build):
    from multihost_cluster import Cluster, SLUICE
    reader = workers + 1
    cluster = Cluster(hosts, tmp, workers=workers)
    for i in range(1, workers + 1):
        hosts.limit(i, link, burst(rate_bits(link)))
    pipeline = cluster.pipeline(f"scale{workers}", ["range: 9223372036854775807", f"batch: {ROWS}",
                                                    "distribute: {processing_mode: parallel_epochs}"])
    done = hosts.run(reader, [SLUICE, "bench", pipeline, "--service", cluster.service, "--seconds", str(seconds)],
                     capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise SystemExit(f"scale_out: sluice bench with {workers} workers failed: {done.stderr}{done.stdout}")
    out = done.stdout
    wall = float(re.search(r"time:\s+([\d.]+) s", out).group(1))
    total = int(re.search(r"bytes:\s+(\d+)", out).group(1))
    first = re.search(r"first:\s+([\d.]+) s", out)
    first = float(first.group(1)) if first else 0.0
    # From the first batch on: the job's start is not the links' doing.
    return total * 8 / (wall - first)


def tcp_run(hosts, workers, link, seconds):
    reader = workers + 1
    for i in range(1, workers + 1):
        hosts.limit(i, link, burst(rate_bits(link)))
    port, warm = 7000, 1.0
    receiver = hosts.popen(reader, [sys.executable, "-c", _RECEIVER, hosts.address(reader), str(port), str(workers),
                                    str(warm), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert receiver.stdout.readline().strip() == "ready"
    for i in range(1, workers + 1):
        hosts.popen(i, [sys.executable, "-c", _SENDER, hosts.address(reader), str(port), str(warm + seconds + 1)])
    return float(receiver.stdout.readline()) * 8


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True)
    parser.add_argument("--link", default="400mbit", help="each worker host's link rate, as tc writes it")
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--baseline", action="store_true", help="also plain TCP streams through the same links")
    args = parser.parse_args()
    os.environ["SLUICE_BUILD_DIR"] = os.path.abspath(args.build)
    from netns_hosts import Hosts, skip_reason
    why = skip_reason()
    if why is not None:
        print(f"scale_out: skipped: needs network namespaces (root): {why}")
        return 0
    link_bits = rate_bits(args.link)
    try:
        counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        raise SystemExit(f"scale_out: --workers {args.workers!r}: expected counts such as 1,2,4,8")
    if not counts or min(counts) < 1 or max(counts) > 64:
        raise SystemExit("scale_out: --workers: counts from 1 to 64")
    print(f"scale_out: {args.link} per worker link (tbf), reader link unlimited, 1 MiB int64 batches "
          f"(range, batch: {ROWS}), parallel_epochs, {args.seconds:g} s per run; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    header = "| workers | links (Mbit/s) | Sluice (Mbit/s) | Sluice / links |"
    rule = "| ---: | ---: | ---: | ---: |"
    if args.baseline:
        header += " plain TCP (Mbit/s) | TCP / links | Sluice / TCP |"
        rule += " ---: | ---: | ---: |"
    print(header)
    print(rule)
    for workers in counts:
        links = workers * link_bits
        with tempfile.TemporaryDirectory() as tmp, Hosts(workers + 2) as hosts:
            sluice = sluice_run(hosts, workers, args.link, args.seconds, pathlib.Path(tmp), args.build)
        row = f"| {workers} | {links / 1e6:.0f} | {sluice / 1e6:.0f} | {sluice / links:.2f} |"
        if args.baseline:
            with Hosts(workers + 2) as hosts:
                tcp = tcp_run(hosts, workers, args.link, args.seconds)
            row += f" {tcp / 1e6:.0f} | {tcp / links:.2f} | {sluice / tcp:.2f} |"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
