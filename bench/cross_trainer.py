#!/usr/bin/env python3
"""Cross-trainer sharing (issue 37): K trainers of one shared job against K
separate jobs, the same image pipeline on the same cores, in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/cross_trainer.py \
        [--trainers 4] [--seconds 20] [--images 600] [--build build]

Both variants start a fresh dispatcher and one worker (sluice.LocalCluster,
the worker with --threads 2 on this machine's cores) and K `sluice bench`
processes that read an endless ImageNet-style pipeline (image_folder,
decode_and_random_crop to 224x224, a random flip, batches of 32 uint8
images) for --seconds each:
  separate  K anonymous jobs: the worker runs K pipelines, each trainer gets
            its own elements (what K trainers of a sweep do today).
  shared    one job named for the sweep with cross_trainer_cache: the worker
            runs one pipeline, and every trainer gets every element.
It reports, per variant: images/s per trainer, the worker's CPU seconds per
delivered image, and all CPU (worker and trainers) per delivered image;
and the shared/separate ratio of CPU per image. The goal of issue 37: at
most 0.35 with 4 trainers.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BATCH = 32


def cpu_seconds(pid):
    """utime + stime of a live process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pipeline_yaml(data_dir, service, shared, trainer, max_bytes):
    distribute = f'processing_mode: parallel_epochs, service: "{service}"'
    if shared:
        distribute += (f', job_name: "sweep", cross_trainer_cache: '
                       f'{{trainer_id: "{trainer}", max_bytes: {max_bytes}}}')
    return "\n".join([
        "pipeline:",
        f'  - image_folder: {{root: "{data_dir}", shuffle: true, seed: 1}}',
        "  - repeat",
        "  - map: {fn: decode_and_random_crop, size: [224, 224], num_parallel_calls: 2}",
        "  - map: {fn: random_flip_left_right, num_parallel_calls: 2}",
        f"  - batch: {{batch_size: {BATCH}, num_parallel_calls: 2}}",
        "  - prefetch: 2",
        f"  - distribute: {{{distribute}}}",
        "",
    ])


def run_variant(sluice, args, data_dir, shared, workdir):
    import sluice as sl
    name = "shared" if shared else "separate"
    with sl.LocalCluster(workers=1, worker_args=["--log-level", "warn"],
                         dispatcher_args=["--log-level", "warn"]) as cluster:
        worker = cluster.workers[0]
        trainers = []
        for k in range(args.trainers):
            path = os.path.join(workdir, f"{name}-{k}.yaml")
            with open(path, "w") as f:
                f.write(pipeline_yaml(data_dir, cluster.service, shared, f"trainer-{k}",
                                      args.max_bytes))
            log = open(os.path.join(workdir, f"{name}-{k}.log"), "w")
            trainers.append((subprocess.Popen(
                [sluice, "bench", path, "--seconds", str(args.seconds)],
                stdout=log, stderr=subprocess.STDOUT), log))
        worker_start = cpu_seconds(worker.pid)
        wall_start = time.monotonic()
        images = []
        trainer_cpu = 0.0
        deadline = time.monotonic() + args.seconds + 120
        for proc, log in trainers:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid != 0:
                    break
                if time.monotonic() > deadline:
                    proc.kill()
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.2)
            proc.returncode = os.waitstatus_to_exitcode(status)
            trainer_cpu += usage.ru_utime + usage.ru_stime
            log.close()
            text = open(log.name).read()
            m = re.search(r"elements:\s+(\d+) \(([\d.]+) elements/s\)", text)
            if proc.returncode != 0 or m is None:
                sys.exit(f"{name}: trainer {log.name} failed (exit {proc.returncode}):\n{text[-2000:]}")
            # `sluice bench` counts the rows of its batches: images.
            images.append(int(m.group(1)))
        # The worker's CPU while the trainers read (they start together and
        # read for the same --seconds).
        worker_cpu = cpu_seconds(worker.pid) - worker_start
        wall = time.monotonic() - wall_start
    total = sum(images)
    return {
        "variant": name,
        "images": total,
        "per_trainer": [i / args.seconds for i in images],
        "worker_cpu_per_image_ms": 1000 * worker_cpu / total,
        "all_cpu_per_image_ms": 1000 * (worker_cpu + trainer_cpu) / total,
        "worker_cpu": worker_cpu,
        "trainer_cpu": trainer_cpu,
        "wall": wall,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainers", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "sluice-cross-trainer-images"))
    args = parser.parse_args()
    sluice = os.path.join(args.build, "cli", "sluice")
    if not os.path.isdir(args.data_dir):
        subprocess.run([sys.executable, os.path.join(HERE, "make_image_folder.py"), "--out", args.data_dir,
                        "--images", str(args.images), "--classes", "10"], check=True)
    with tempfile.TemporaryDirectory(prefix="sluice-cross-trainer-") as workdir:
        results = [run_variant(sluice, args, args.data_dir, shared, workdir) for shared in (False, True)]
    print(f"{args.trainers} trainers, {args.seconds} s each, batches of {BATCH} 224x224 uint8 images, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print("| variant | images delivered | images/s per trainer | worker CPU ms/image | all CPU ms/image |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        per = ", ".join(f"{x:.0f}" for x in r["per_trainer"])
        print(f"| {r['variant']} | {r['images']} | {per} | {r['worker_cpu_per_image_ms']:.2f} | "
              f"{r['all_cpu_per_image_ms']:.2f} |")
    separate, shared = results
    print(f"shared/separate worker CPU per image: "
          f"{shared['worker_cpu_per_image_ms'] / separate['worker_cpu_per_image_ms']:.2f}; "
          f"all CPU per image: {shared['all_cpu_per_image_ms'] / separate['all_cpu_per_image_ms']:.2f} "
          f"(goal: at most 0.35)")


if __name__ == "__main__":
    main()
