#!/usr/bin/python3
"""object_storage.py: the same data read from local disk, from an S3 server on
loopback (s3rver), and through a relay that adds latency each way
(tests/multihost/slow_link.py), in one run on the same cores:

  tfrecord   --shards shards of --shard-mib MiB (records of 256 KiB), read in
             this process with sluice.Dataset.tfrecord: MB/s
  images     --images JPEGs through the image pipeline (image_folder, decode
             with a random crop to 224x224, flip, normalize, batch 32): images/s

Each variant runs in a child process of its own (the object-storage settings
are read once per process, from AWS_ENDPOINT_URL and the keys). The baseline
is (a) local disk, the page cache warm (each file read once before), in the
same run. s3rver is Node.js on the same 2 cores: its own cost is part of (b)
and (c), so each of those rows also gives the server's ceiling through the same
link, the curl command fetching the same ranges and images to /dev/null (no
parsing, no decoding), as a second baseline. Where s3fs and FUSE work, the
same pipelines also read the bucket through an s3fs mount (its defaults),
the way to read a bucket without native support.

    /usr/bin/python3 bench/object_storage.py [--shards 16] [--shard-mib 64]
        [--images 2000] [--delays-ms 20,50]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "multihost"))
BUCKET = "bench"
RECORD_BYTES = 256 << 10
OBJECTS_IN_FLIGHT = 128  # object_storage.objects_in_flight's default


def measure(kind, target, seconds):
    """In the child: read `target` (files or a root) and print one JSON line."""
    import sluice

    start = time.monotonic()
    if kind == "tfrecord":
        total = 0
        for record in sluice.Dataset.tfrecord(json.loads(target)):
            total += len(bytes(record))
        elapsed = time.monotonic() - start
        print(json.dumps({"bytes": total, "seconds": elapsed, "rate": total / elapsed / 1e6}))
        return
    ds = (sluice.Dataset.image_folder(target)
          .map("decode_and_random_crop", size=[224, 224], seed=1, num_parallel_calls=-1)
          .map("random_flip_left_right", seed=2)
          .map("normalize", mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], layout="CHW")
          .batch(32).prefetch(2))
    images = 0
    for batch in ds:
        images += len(batch["label"])
        if time.monotonic() - start > seconds:
            break
    elapsed = time.monotonic() - start
    print(json.dumps({"images": images, "seconds": elapsed, "rate": images / elapsed}))


def run_child(kind, target, env, seconds):
    result = subprocess.run([sys.executable, __file__, "--measure", kind, "--target", target,
                             "--seconds", str(seconds)], env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"}
    return json.loads(result.stdout.strip().splitlines()[-1])


def curl_ranges(urls, size, curl_args=()):
    """MB/s of the curl command fetching `urls` (each `size` bytes) as the
    reader does, in 8 MiB ranges with 8 in flight, to /dev/null."""
    part = 8 << 20
    ranges = []
    for url in urls:
        for start in range(0, size, part):
            end = min(start + part, size) - 1
            # "-:" (--next): each transfer its own range; without it the
            # last -r would apply to all.
            ranges += ["-:", "--fail", *curl_args, "-r", f"{start}-{end}", "-o", "/dev/null", url]
    started = time.monotonic()
    subprocess.run(["curl", "-sS", "--parallel", "--parallel-max", "8"] + ranges[1:], check=True, timeout=900,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return len(urls) * size / (time.monotonic() - started) / 1e6


def curl_ceiling(endpoint, shard_keys, shard_bytes, image_keys, objects_in_flight):
    """The server's own ceiling through the same link: the curl command
    fetching the same byte ranges (8 MiB, 8 in flight) and the same images
    (as many in flight as the reader) to /dev/null, with no parsing or
    decoding."""
    large = curl_ranges([f"{endpoint}/{BUCKET}/{key}" for key in shard_keys], shard_bytes)
    gets = []
    for key in image_keys:
        gets += ["-:", "--fail", "-o", "/dev/null", f"{endpoint}/{BUCKET}/{key}"]
    started = time.monotonic()
    subprocess.run(["curl", "-sS", "--parallel", "--parallel-max", str(objects_in_flight)] + gets[1:], check=True,
                   timeout=900, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    small = len(image_keys) / (time.monotonic() - started)
    return large, small


class S3fsMount:
    """The bucket mounted with s3fs (FUSE), its default options: the way to
    read a bucket without native support. None where s3fs or FUSE is not
    there."""

    def __init__(self, endpoint, work_dir):
        self.path = os.path.join(work_dir, "s3fs-mount")
        self._password = os.path.join(work_dir, "s3fs-password")
        self.mounted = False
        if not shutil.which("s3fs") or not os.path.exists("/dev/fuse"):
            return
        os.makedirs(self.path, exist_ok=True)
        with open(self._password, "w") as f:
            f.write("S3RVER:S3RVER\n")
        os.chmod(self._password, 0o600)
        result = subprocess.run(["s3fs", BUCKET, self.path, "-o", f"url={endpoint}", "-o", "use_path_request_style",
                                 "-o", f"passwd_file={self._password}"], capture_output=True, text=True, timeout=60)
        self.mounted = result.returncode == 0 and os.path.isdir(os.path.join(self.path, "shards"))
        if not self.mounted:
            print(f"s3fs: no mount ({result.stderr.strip()[-200:]})", flush=True)

    def close(self):
        if self.mounted:
            subprocess.run(["fusermount", "-u", self.path], timeout=60)


def write_shards(folder, shards, shard_mib):
    # One record repeated per shard: its frame (pure-Python CRC-32C) is
    # computed once.
    from test_object_storage import tfrecord_file

    os.makedirs(folder, exist_ok=True)
    records_per_shard = (shard_mib << 20) // RECORD_BYTES
    paths = []
    for s in range(shards):
        path = os.path.join(folder, f"shard-{s:03d}-{shard_mib}m.tfrecord")
        if not os.path.exists(path):
            frame = tfrecord_file([bytes([s % 251]) * RECORD_BYTES])
            with open(path + ".tmp", "wb") as f:
                for _ in range(records_per_shard):
                    f.write(frame)
            os.rename(path + ".tmp", path)
        paths.append(path)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--shard-mib", type=int, default=64)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--delays-ms", default="20,50")
    parser.add_argument("--seconds", type=float, default=30, help="the image runs' limit each")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "sluice-object-bench"))
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.target, args.seconds)
        return

    from object_storage_servers import HttpsFolderServer, S3Server
    from slow_link import SlowLink

    shards = write_shards(os.path.join(args.work_dir, "shards"), args.shards, args.shard_mib)
    images_dir = os.path.join(args.work_dir, "images")
    subprocess.run([sys.executable, os.path.join(HERE, "make_image_folder.py"), "--out", images_dir,
                    "--images", str(args.images)], check=True, capture_output=True)
    delays = [int(d) for d in args.delays_ms.split(",") if d]
    rows = []
    with S3Server(buckets=(BUCKET,)) as s3:
        started = time.monotonic()
        for path in shards:
            with open(path, "rb") as f:
                s3.put(BUCKET, "shards/" + os.path.basename(path), f.read())
        image_keys = []  # uploaded below
        for folder, _, names in os.walk(images_dir):
            for name in sorted(names):
                if name.endswith(".jpg"):
                    full = os.path.join(folder, name)
                    key = "images/" + os.path.relpath(full, images_dir)
                    with open(full, "rb") as f:
                        s3.put(BUCKET, key, f.read())
                    image_keys.append(key)
        print(f"uploaded {len(shards)} shards and {len(image_keys)} images in {time.monotonic() - started:.1f} s",
              flush=True)
        port_file = os.path.join(args.work_dir, "s3.port")
        with open(port_file, "w") as f:
            f.write(str(s3.port))
        base_env = dict(os.environ, **s3.env())
        base_env["PYTHONPATH"] = os.environ.get("PYTHONPATH", os.path.join(ROOT, "build", "python"))
        urls = json.dumps([f"s3://{BUCKET}/shards/" + os.path.basename(p) for p in shards])
        for path in shards:  # the page cache warm for (a)
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass
        shard_keys = ["shards/" + os.path.basename(p) for p in shards]
        shard_bytes = os.path.getsize(shards[0])
        variants = [("local disk", None, json.dumps(shards), images_dir)]
        variants.append(("s3rver, loopback", s3.endpoint, urls, f"s3://{BUCKET}/images"))
        links = []
        for delay in delays:
            link = SlowLink(port_file, delay)
            links.append(link)
            variants.append((f"s3rver + {delay} ms each way", f"http://127.0.0.1:{link.port}", urls,
                             f"s3://{BUCKET}/images"))
        for name, endpoint, shard_target, image_target in variants:
            env = dict(base_env)
            if endpoint is not None:
                env["AWS_ENDPOINT_URL"] = endpoint
            large = run_child("tfrecord", shard_target, env, args.seconds)
            small = run_child("images", image_target, env, args.seconds)
            ceiling = (curl_ceiling(endpoint, shard_keys, shard_bytes, image_keys, OBJECTS_IN_FLIGHT)
                       if endpoint else None)
            rows.append((name, large, small, ceiling))
            print(name, large, small, ceiling, flush=True)
        for link in links:
            link.close()
        # A server that is not the limit: nginx (C, several requests at
        # once) over HTTPS, for the shards (a web server has no listing, so
        # no image_folder).
        with HttpsFolderServer(os.path.dirname(shards[0])) as web:
            env = dict(base_env, AWS_CA_BUNDLE=web.ca_file)
            web_urls = [web.url + os.path.basename(p) for p in shards]
            large = run_child("tfrecord", json.dumps(web_urls), env, args.seconds)
            ceiling = (curl_ranges(web_urls, shard_bytes, ("--cacert", web.ca_file)), None)
            rows.append(("nginx https, loopback", large, {}, ceiling))
            print(rows[-1], flush=True)
        mount = S3fsMount(s3.endpoint, args.work_dir)
        try:
            if mount.mounted:
                mounted = json.dumps([os.path.join(mount.path, key) for key in shard_keys])
                large = run_child("tfrecord", mounted, base_env, args.seconds)
                small = run_child("images", os.path.join(mount.path, "images"), base_env, args.seconds)
                rows.append(("s3fs mount of s3rver, loopback", large, small, None))
                print(rows[-1], flush=True)
        finally:
            mount.close()
    base_large = rows[0][1].get("rate")
    base_small = rows[0][2].get("rate")
    print(f"\n{args.shards} x {args.shard_mib} MiB TFRecord shards; {args.images} JPEGs; default object "
          f"settings (8 MiB parts, 8 in flight, {OBJECTS_IN_FLIGHT} objects in flight); {os.cpu_count()} cores")
    print("| source | shards MB/s | x local | curl MB/s | x curl | images/s | x local | curl objects/s | x curl |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, large, small, ceiling in rows:
        def cell(result, base):
            if not result:
                return "-", "-"
            if "rate" not in result:
                return f"FAILED ({result.get('error')})", "-"
            return f"{result['rate']:.1f}", f"{result['rate'] / base:.2f}" if base else "-"
        l_rate, l_ratio = cell(large, base_large)
        s_rate, s_ratio = cell(small, base_small)
        c_large, c_small = ceiling if ceiling else (None, None)
        l_curl = f"{c_large:.1f} | {large['rate'] / c_large:.2f}" if c_large and "rate" in large else "- | -"
        s_curl = f"{c_small:.1f} | {small['rate'] / c_small:.2f}" if c_small and "rate" in small else "- | -"
        print(f"| {name} | {l_rate} | {l_ratio} | {l_curl} | {s_rate} | {s_ratio} | {s_curl} |")


if __name__ == "__main__":
    main()
