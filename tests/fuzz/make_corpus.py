#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into tests/fuzz/corpus/<target>/.

    /usr/bin/python3 tests/fuzz/make_corpus.py [--build-dir build-fuzz]

Seeds made here (YAML, TFRecord, JSON lines, tar, JPEG, PNG) are files
named seed-*; the targets whose input is a serialized proto or a file of
Sluice's own format write theirs (SLUICE_FUZZ_WRITE_SEEDS, tests/fuzz/
fuzz_util.h) when the fuzz build exists. Other files in a corpus folder
(regression inputs: crash-*, the inputs that once crashed a target) are
left as they are. Needs Debian's Python (PIL: python3-pil).
"""
import argparse
import gzip
import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")

# Targets that write their own seeds.
SELF_SEEDED = ["checkpoint_restore", "compression", "element_frame", "element_proto", "journal_replay",
               "parse_example", "snapshot_replay"]


def _crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def masked_crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(records):
    out = b""
    for r in records:
        length = struct.pack("<Q", len(r))
        out += length + struct.pack("<I", masked_crc32c(length)) + r + struct.pack("<I", masked_crc32c(r))
    return out


def yaml_seeds():
    seeds = {}
    pipelines = os.path.join(ROOT, "config", "pipelines")
    for name in sorted(os.listdir(pipelines)):
        with open(os.path.join(pipelines, name), "rb") as f:
            text = f.read()
        if b"plugin" not in text:
            seeds["config-" + name] = text
    seeds["steps.yaml"] = b"""pipeline:
  - range: {start: 2, stop: 40, step: 3}
  - map: {fn: add, value: 1, num_parallel_calls: 2}
  - filter: {fn: less, value: 30}
  - shuffle: {buffer_size: 8, seed: 3}
  - batch: {batch_size: 4, drop_remainder: true}
  - padded_batch: {batch_size: 2}
  - prefetch: 2
"""
    seeds["tensors.yaml"] = b"""pipeline:
  - from_tensor_slices: {a: [[1, 2], [3, 4]], b: [x, y], c: [1.5, -2.0]}
  - zip: [[{range: 3}], {pipeline: [{range: 4}, {skip: 2}]}]
  - interleave: {pipeline: [{range: 2}, {repeat: 3}], cycle_length: 2, block_length: 1}
  - window: {size: 3, shift: 2, drop_remainder: false}
"""
    seeds["anchors.yaml"] = b"""defaults: &d {buffer_size: 4, seed: 1}
pipeline:
  - range: 10
  - shuffle: *d
  - map: {fn: cast, dtype: float32}
  - take: -1
"""
    seeds["files.yaml"] = b"""pipeline:
  - tfrecord: {files: [a.tfrecord, b.tfrecord], compression_type: GZIP}
  - map: {fn: parse_example, features: {label: {dtype: int64}, x: {dtype: float32, shape: [2, -1]}}}
  - json_lines: {files: [x.jsonl], fields: [text]}
"""
    seeds["bad-indent.yaml"] = b"pipeline:\n  - range: 3\n   - batch: 2\n"
    seeds["empty.yaml"] = b""
    seeds["scalar.yaml"] = b"pipeline: 7\n"
    return seeds


def tfrecord_seeds():
    records = [b"", b"a", b"hello record", bytes(range(256))]
    plain = tfrecord(records)
    seeds = {
        "plain": b"\0" + plain,
        "gzip": b"\1" + gzip.compress(plain, mtime=0),
        "zlib": b"\2" + zlib.compress(plain),
        "truncated": b"\0" + plain[:-3],
        "bad-crc": b"\0" + plain[:12] + b"X" + plain[13:],
        "lines": b"\0first line\r\nsecond\n\nlast without newline",
    }
    return seeds


def json_lines_seeds():
    return {
        "lines.jsonl": b'{"text": "hello", "id": 1, "meta": {"a": [1, 2.5, null]}}\n'
                       b'{"text": "caf\\u00e9 \\ud83d\\ude00", "id": -2, "meta": true}\n'
                       b'{"id": 3}\n[1, 2]\n{"text": "x", "id": 1e308, "meta": "\\"q\\""}\n',
        "broken.jsonl": b'{"text": "unterminated\n{"text": 1, "id": {}, "meta": []}\n\n{\n',
    }


def webdataset_seeds():
    def tar(members, fmt=tarfile.USTAR_FORMAT):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
            for name, data in members:
                if data is None:
                    info = tarfile.TarInfo(name)
                    info.type = tarfile.DIRTYPE
                    t.addfile(info)
                    continue
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 0
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    samples = [("shard/", None), ("shard/000.txt", b"a cat"), ("shard/000.cls", b"3"),
               ("shard/001.txt", b"a dog"), ("shard/001.cls", b"5")]
    return {
        "ustar.tar": tar(samples),
        "pax.tar": tar([("p/" + "long" * 40 + ".txt", b"pax path"), ("p/" + "long" * 40 + ".cls", b"1")],
                       tarfile.PAX_FORMAT),
        "gnu.tar": tar([("g/" + "n" * 120 + ".txt", b"gnu long name"), ("g/" + "n" * 120 + ".cls", b"2")],
                       tarfile.GNU_FORMAT),
        "missing-key.tar": tar([("s/0.txt", b"x"), ("s/1.cls", b"1")]),
        "truncated.tar": tar(samples)[:700],
    }


def image_seeds():
    from PIL import Image
    jpeg, png = {}, {}

    def save(image, fmt, **kwargs):
        buf = io.BytesIO()
        image.save(buf, fmt, **kwargs)
        return buf.getvalue()

    rgb = Image.new("RGB", (9, 7))
    rgb.putdata([(x * 28, y * 36, (x * y) % 256) for y in range(7) for x in range(9)])
    gray = rgb.convert("L")
    jpeg["rgb.jpg"] = save(rgb, "JPEG", quality=80)
    jpeg["gray.jpg"] = save(gray, "JPEG", quality=60)
    jpeg["progressive.jpg"] = save(rgb.resize((17, 11)), "JPEG", progressive=True)
    jpeg["subsampled.jpg"] = save(rgb.resize((33, 16)), "JPEG", subsampling=2)
    jpeg["cmyk.jpg"] = save(rgb.convert("CMYK"), "JPEG")
    png["rgb.png"] = save(rgb, "PNG")
    png["gray.png"] = save(gray, "PNG")
    png["rgba.png"] = save(rgb.convert("RGBA"), "PNG")
    png["palette.png"] = save(rgb.convert("P"), "PNG")
    png["interlaced.png"] = save(rgb, "PNG", interlace=1)
    png["gray16.png"] = save(gray.convert("I"), "PNG")
    png["bilevel.png"] = save(gray.convert("1"), "PNG")
    return jpeg, png


def write(target, seeds):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith("seed-"):
            os.remove(os.path.join(folder, name))
    for name, data in seeds.items():
        with open(os.path.join(folder, "seed-" + name), "wb") as f:
            f.write(data)


def s3_listing_seeds():
    # A truncated ListObjectsV2 page (quotes as entities and as text, a
    # common prefix, a continuation token) and an error document.
    page = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
        "<Contents><Key>p/a.jpg</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>&quot;abc&quot;</ETag>"
        '<Size>12</Size></Contents><Contents><Key>p/b c.jpg</Key><ETag>"d-2"</ETag><Size>0</Size></Contents>'
        "<CommonPrefixes><Prefix>p/x/</Prefix></CommonPrefixes><NextContinuationToken>tok==</NextContinuationToken>"
        "</ListBucketResult>\n")
    error = ('<?xml version="1.0"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>'
             "</Error>")
    return {"page.xml": page.encode(), "error.xml": error.encode()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build-fuzz"))
    args = parser.parse_args()
    jpeg, png = image_seeds()
    write("yaml_loader", yaml_seeds())
    write("tfrecord", tfrecord_seeds())
    write("json_lines", json_lines_seeds())
    write("webdataset", webdataset_seeds())
    write("jpeg_decode", jpeg)
    write("png_decode", png)
    write("s3_listing", s3_listing_seeds())
    for target in SELF_SEEDED:
        binary = os.path.join(args.build_dir, "tests", "fuzz", target + "_fuzzer")
        if not os.path.exists(binary):
            print(f"make_corpus: {binary} is not built; {target}'s seeds left as they are", file=sys.stderr)
            continue
        folder = os.path.join(CORPUS, target)
        scratch = folder + ".new"
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        env = dict(os.environ, SLUICE_FUZZ_WRITE_SEEDS=scratch)
        subprocess.run([binary], env=env, check=True, stdout=subprocess.DEVNULL)
        write(target, {name: open(os.path.join(scratch, name), "rb").read() for name in sorted(os.listdir(scratch))})
        shutil.rmtree(scratch)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(CORPUS) for f in files)
    print(f"make_corpus: {total} bytes in {CORPUS}")


if __name__ == "__main__":
    main()
