#!/usr/bin/python3
"""What token auth and TLS cost the data plane: `sluice bench` against a local
dispatcher and worker, with no security (the baseline, measured in the same
run), with both tokens, and with tokens over mutual TLS (a throwaway CA made
by openssl). Two pipelines: scalar int64 elements (the per-element cost, one
RPC per few elements) and 1 MiB batches (the bytes rate, where TLS's
encryption shows).

    PYTHONPATH=build/python /usr/bin/python3 bench/security_overhead.py [--seconds 5] [--runs 3]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import sluice

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("SLUICE_CLI", os.path.join(HERE, "..", "build", "cli", "sluice"))

PIPELINES = {
    "scalars": "pipeline:\n  - range: 1000000000000\n",
    "1 MiB batches": "pipeline:\n  - range: 1000000000000\n  - batch: 131072\n",
}


def make_security(directory):
    key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    with open(os.path.join(directory, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    script = (
        f"set -e; cd {directory}; "
        f"openssl req -x509 {key} -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca; "
        f"openssl req {key} -keyout d.key -out d.csr -subj /CN=127.0.0.1; "
        "openssl x509 -req -in d.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out d.pem -days 1 -extfile san.ext"
    )
    subprocess.run(["bash", "-c", script], check=True, capture_output=True)
    for name in ("cluster", "client"):
        path = os.path.join(directory, f"{name}.token")
        with open(path, "w") as f:
            f.write(f"{name}-{os.urandom(16).hex()}\n")
        os.chmod(path, 0o600)
    tokens = ["--auth-cluster-token-file", os.path.join(directory, "cluster.token"),
              "--auth-client-token-file", os.path.join(directory, "client.token")]
    tls = ["--tls-cert-file", os.path.join(directory, "d.pem"), "--tls-key-file", os.path.join(directory, "d.key"),
           "--tls-ca-file", os.path.join(directory, "ca.pem"), "--tls-require-client-cert"]
    client_tokens = ["--token-file", os.path.join(directory, "client.token")]
    client_tls = ["--tls-ca-file", os.path.join(directory, "ca.pem"), "--tls-cert-file",
                  os.path.join(directory, "d.pem"), "--tls-key-file", os.path.join(directory, "d.key")]
    return {
        "none (baseline)": ([], []),
        "tokens": (tokens, client_tokens),
        "tokens + mutual TLS": (tokens + tls, client_tokens + client_tls),
    }


def bench(cluster, pipeline_file, client_args, seconds):
    out = subprocess.run([CLI, *client_args, "bench", pipeline_file, "--service", cluster.service, "--seconds",
                          str(seconds)], capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        sys.exit(f"sluice bench failed: {out.stdout}{out.stderr}")
    elements = float(re.search(r"elements: +\d+ \(([\d.]+) elements/s\)", out.stdout).group(1))
    megabytes = float(re.search(r"bytes: +\d+ \(([\d.]+) MB/s\)", out.stdout).group(1))
    return elements, megabytes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        configs = make_security(directory)
        files = {}
        for name, text in PIPELINES.items():
            files[name] = os.path.join(directory, name.replace(" ", "_") + ".yaml")
            with open(files[name], "w") as f:
                f.write(text)
        results = {}
        for run in range(args.runs):
            # Configurations interleaved within each run, so that drift in
            # the machine hits them alike.
            for config, (daemon_args, client_args) in configs.items():
                with sluice.LocalCluster(workers=1, dispatcher_args=daemon_args, worker_args=daemon_args) as cluster:
                    for pipeline, path in files.items():
                        results.setdefault((pipeline, config), []).append(
                            bench(cluster, path, client_args, args.seconds))
        print(f"{os.cpu_count()} cores, {args.runs} runs of {args.seconds:g} s each; median, and ratio to the "
              "baseline of the same run order")
        for pipeline in PIPELINES:
            base = sorted(r[0] for r in results[(pipeline, "none (baseline)")])[args.runs // 2]
            base_mb = sorted(r[1] for r in results[(pipeline, "none (baseline)")])[args.runs // 2]
            for config in configs:
                rates = sorted(r[0] for r in results[(pipeline, config)])
                mbs = sorted(r[1] for r in results[(pipeline, config)])
                median, median_mb = rates[args.runs // 2], mbs[args.runs // 2]
                print(f"{pipeline:14} {config:20} {median:12.0f} elements/s {median_mb:9.1f} MB/s "
                      f"({median / base:.2f}x elements, {median_mb / base_mb:.2f}x MB/s; runs: "
                      + ", ".join(f"{r:.0f}" for r in rates) + ")")


if __name__ == "__main__":
    main()
