"""s3:// and https:// sources through real daemons (issue 51): an s3rver on
loopback (deploy/install_deps.sh installs it from npm), nginx serving a
folder over HTTPS with a CA the test makes, and a relay in front of s3rver
that drops, refuses and stalls answers. Every read is checked element by
element: each exactly once, in both processing modes."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

import sluice
from object_storage_servers import FaultRelay, HttpsFolderServer, S3Server

# The TFRecord framing (masked CRC-32C), as the fuzz corpus writes it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import make_corpus  # noqa: E402

BUCKET = "train"


def tfrecord_file(records):
    return make_corpus.tfrecord(records)


def webdataset_tar(samples):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for key, parts in samples.items():
            for extension, data in parts.items():
                info = tarfile.TarInfo(f"{key}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# Four shards of 500 records of 252 bytes: 134,000 bytes each, so with the
# workers' 64 KiB parts every shard is read as three ranged GETs at once,
# the last of 2,928 bytes.
SHARDS = {
    f"shards/part-{s}.tfrecord": [(f"shard{s}-record{r:04d}-".encode() * 14)[:300] for r in range(500)]
    for s in range(4)
}
ALL_RECORDS = sorted(r for records in SHARDS.values() for r in records)
TARS = {
    f"wds/part-{t}.tar": {f"sample{t}{i:03d}": {"txt": f"text {t} {i}".encode(), "cls": str(i % 7).encode()}
                          for i in range(60)}
    for t in range(2)
}
JSONL = {f"text/part-{p}.jsonl": [{"id": p * 100 + i, "text": f"line {p} {i}"} for i in range(100)] for p in range(2)}
IMAGES = {f"images/{label}/{i:03d}.jpg": f"{label}-image-{i}".encode() * 50 for label in ("ant", "bee") for i in range(12)}


def upload(server):
    for key, records in SHARDS.items():
        server.put(BUCKET, key, tfrecord_file(records))
    for key, samples in TARS.items():
        server.put(BUCKET, key, webdataset_tar(samples))
    for key, rows in JSONL.items():
        server.put(BUCKET, key, "".join(json.dumps(row) + "\n" for row in rows).encode())
    for key, data in IMAGES.items():
        server.put(BUCKET, key, data)
    server.put(BUCKET, "images/README", b"not an image")
    server.put("other", "secret.tfrecord", tfrecord_file([b"other tenant's data"]))


class Environment:
    """os.environ with `values` while it is open: the daemons a cluster
    starts inherit it, and so does this process's own client."""

    def __init__(self, values):
        self._values = values
        self._saved = {}

    def __enter__(self):
        for name, value in self._values.items():
            self._saved[name] = os.environ.get(name)
            os.environ[name] = value

    def __exit__(self, *exc):
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


WORKER_CONFIG = {"data_roots": [f"s3://{BUCKET}/"], "object_storage": {"part_bytes": 65536, "parts_in_flight": 4}}


@pytest.fixture(scope="module")
def s3():
    with S3Server(buckets=(BUCKET, "other")) as server:
        upload(server)
        yield server


@pytest.fixture(scope="module")
def cluster(s3):
    with Environment(s3.env()), sluice.LocalCluster(workers=2, worker_config=WORKER_CONFIG) as running:
        yield running


def strings(ds):
    return sorted(bytes(x) for x in ds)


SHARD_URLS = [f"s3://{BUCKET}/{key}" for key in SHARDS]


@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_tfrecord_shards_from_s3_every_record_exactly_once(cluster, mode):
    ds = sluice.Dataset.tfrecord(SHARD_URLS).distribute(mode, cluster.service)
    expected = ALL_RECORDS if mode == "distributed_epoch" else sorted(ALL_RECORDS * 2)
    assert strings(ds) == expected


@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_webdataset_and_json_lines_from_s3(cluster, mode):
    copies = 1 if mode == "distributed_epoch" else 2
    tars = [f"s3://{BUCKET}/{key}" for key in TARS]
    samples = list(sluice.Dataset.webdataset(tars).distribute(mode, cluster.service))
    got = sorted((bytes(s["__key__"]).decode(), bytes(s["txt"]), bytes(s["cls"])) for s in samples)
    want = sorted((k, p["txt"], p["cls"]) for shard in TARS.values() for k, p in shard.items()) * 1
    assert got == sorted(want * copies)
    files = [f"s3://{BUCKET}/{key}" for key in JSONL]
    rows = list(sluice.Dataset.json_lines(files, ["id", "text"]).distribute(mode, cluster.service))
    got_rows = sorted((int(bytes(r["id"])), bytes(r["text"]).decode()) for r in rows)
    assert got_rows == sorted([(row["id"], row["text"]) for rows_ in JSONL.values() for row in rows_] * copies)


@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_image_folder_over_a_bucket_takes_classes_from_the_prefixes(cluster, mode):
    root = f"s3://{BUCKET}/images"
    elements = list(sluice.Dataset.image_folder(root).distribute(mode, cluster.service))
    got = sorted((bytes(e["path"]).decode(), int(e["label"]), bytes(e["image"])) for e in elements)
    want = [(f"s3://{BUCKET}/{key}", 0 if "/ant/" in key else 1, data) for key, data in IMAGES.items()]
    copies = 1 if mode == "distributed_epoch" else 2
    assert got == sorted(want * copies)


def test_list_files_globs_a_listing(cluster):
    files = sluice.Dataset.list_files([f"s3://{BUCKET}/shards/part-[12].tfrecord"], shuffle=False)
    urls = [bytes(f).decode() for f in files]
    assert urls == [f"s3://{BUCKET}/shards/part-1.tfrecord", f"s3://{BUCKET}/shards/part-2.tfrecord"]
    assert [bytes(f).decode() for f in sluice.Dataset.list_files([f"s3://{BUCKET}/*/part-0.*"], shuffle=False)] == [
        f"s3://{BUCKET}/shards/part-0.tfrecord", f"s3://{BUCKET}/text/part-0.jsonl", f"s3://{BUCKET}/wds/part-0.tar"]
    ds = sluice.Dataset.tfrecord(urls).distribute("distributed_epoch", cluster.service)
    assert strings(ds) == sorted(SHARDS["shards/part-1.tfrecord"] + SHARDS["shards/part-2.tfrecord"])


def test_listings_past_one_page_follow_their_continuation_tokens(cluster, s3):
    # 1,100 keys: S3 (and s3rver) answer at most 1,000 a page.
    for i in range(1100):
        s3.put(BUCKET, f"many/{'ab'[i % 2]}/{i:05d}.png", str(i).encode())
    elements = list(sluice.Dataset.image_folder(f"s3://{BUCKET}/many").distribute("distributed_epoch",
                                                                                    cluster.service))
    got = sorted((int(bytes(e["image"])), int(e["label"])) for e in elements)
    assert got == [(i, i % 2) for i in range(1100)]
    files = sluice.Dataset.list_files([f"s3://{BUCKET}/many/b/*.png"], shuffle=False)
    assert [bytes(f).decode() for f in files] == [f"s3://{BUCKET}/many/b/{i:05d}.png" for i in range(1, 1100, 2)]


def test_a_listing_past_max_listed_objects_is_refused_naming_the_prefix(cluster, s3):
    # The 1,100 keys of the test above, against a dispatcher that holds at
    # most 1,000 listed objects: a tenant's pattern cannot make it hold
    # millions.
    for i in range(1100):
        s3.put(BUCKET, f"bounded/c/{i:05d}.png", b"x")
    config = {"data_roots": [f"s3://{BUCKET}/"], "object_storage": {"max_listed_objects": 1000}}
    with Environment(s3.env()), sluice.LocalCluster(workers=1, dispatcher_config=config,
                                                    worker_config=config) as bounded:
        ds = sluice.Dataset.image_folder(f"s3://{BUCKET}/bounded").distribute("distributed_epoch", bounded.service)
        with pytest.raises(sluice.Error) as refused:
            list(ds)
    assert (f"listing 's3://{BUCKET}/bounded/' holds more than 1000 objects (object_storage.max_listed_objects): "
            "list a narrower prefix, or pack the objects into shards (tfrecord, webdataset)") in str(refused.value)


def test_a_url_outside_the_roots_is_refused_naming_the_roots(cluster):
    ds = sluice.Dataset.tfrecord(["s3://other/secret.tfrecord"]).distribute("distributed_epoch", cluster.service)
    with pytest.raises(sluice.Error) as error:
        list(ds)
    message = str(error.value)
    assert "'s3://other/secret.tfrecord' is outside the data roots of worker" in message
    assert f"(s3://{BUCKET}/)" in message
    assert "other tenant's data" not in message


def test_a_missing_object_fails_naming_the_url_and_status(cluster):
    ds = sluice.Dataset.tfrecord([f"s3://{BUCKET}/shards/missing.tfrecord"]).distribute(
        "distributed_epoch", cluster.service)
    with pytest.raises(FileNotFoundError,
                       match=f"HEAD s3://{BUCKET}/shards/missing.tfrecord: HTTP 404 \\(no such object\\)"):
        list(ds)


def test_a_pipeline_carrying_a_credential_is_refused(cluster):
    ds = sluice.Dataset.text_line(["https://example.com/a.txt?X-Amz-Credential=AKIA&X-Amz-Signature=ab"])
    with pytest.raises(ValueError, match=r"it carries a credential \(X-Amz-Credential\)"):
        list(ds.distribute("distributed_epoch", cluster.service))


def test_a_saved_read_restores_inside_an_object(cluster):
    ds = sluice.Dataset.tfrecord(SHARD_URLS).distribute("distributed_epoch", cluster.service, exactly_once=True)
    it = iter(ds)
    first = [bytes(next(it)) for _ in range(777)]
    state = it.save()
    rest = [bytes(x) for x in ds.iterator(restore_from=state)]
    assert sorted(first + rest) == ALL_RECORDS
    # A local read, saved in the middle of the second shard.
    local = sluice.Dataset.tfrecord(SHARD_URLS)
    reader = iter(local)
    head = [bytes(next(reader)) for _ in range(650)]
    tail = [bytes(x) for x in local.iterator(restore_from=reader.save())]
    assert head + tail == [r for records in SHARDS.values() for r in records]


def test_a_link_local_address_is_never_fetched_unless_a_root_names_it():
    ds = sluice.Dataset.text_line(["http://169.254.169.254/latest/meta-data/iam/security-credentials/"])
    with pytest.raises(sluice.Error, match="is on a link-local address"):
        list(ds)


# Through a relay that fails, cuts and stalls answers: workers retry with
# backoff and resume cut bodies by Range from the last byte received.
FAST_RETRIES = {"initial_backoff_ms": 10, "max_backoff_ms": 50, "max_attempts": 8, "stall_timeout_ms": 1000}


@pytest.fixture(scope="module")
def relay(s3):
    with FaultRelay(s3.endpoint.split("//", 1)[1]) as running:
        yield running


@pytest.fixture(scope="module")
def relayed_cluster(s3, relay):
    config = {"data_roots": [f"s3://{BUCKET}/"],
              "object_storage": {"part_bytes": 65536, "parts_in_flight": 4, **FAST_RETRIES}}
    with Environment(s3.env(endpoint=relay.endpoint)), sluice.LocalCluster(workers=1, worker_config=config) as running:
        yield running


def test_reads_stay_exact_through_503_429_cut_bodies_and_stalls(relayed_cluster, relay):
    relay.clear()
    relay.fail_next(2, status=503, method="GET", path_contains="part-0")
    relay.fail_next(1, status=429, method="HEAD")
    # Under 2,928 bytes, so that each fault cuts whichever of the shard's
    # three parts it meets first.
    relay.cut_next(1, after_bytes=2000, method="GET", path_contains="part-1")
    relay.stall_next(1, seconds=4, after_bytes=1000, method="GET", path_contains="part-2")
    ds = sluice.Dataset.tfrecord(SHARD_URLS).distribute("distributed_epoch", relayed_cluster.service)
    assert strings(ds) == ALL_RECORDS
    counts = relay.counts()
    # 4 shards of 3 parts each, plus each fault's one retry; a HEAD per
    # shard plus the 429's retry.
    assert counts == {"GET": 12 + 2 + 1 + 1, "HEAD": 4 + 1}
    # The cut body was resumed from its 2,000th byte, not fetched again.
    part1 = [r for method, path, r in relay.requests() if method == "GET" and "part-1" in path]
    starts = sorted(int(r.split("=")[1].split("-")[0]) for r in part1)
    assert len(starts) == 4
    assert any(start % 65536 == 2000 for start in starts)


def test_403_fails_at_once_naming_the_url_status_and_code(relayed_cluster, relay):
    relay.clear()
    relay.fail_next(1, status=403, method="GET", path_contains="part-3", code="AccessDenied")
    ds = sluice.Dataset.tfrecord([SHARD_URLS[3]]).distribute("distributed_epoch", relayed_cluster.service)
    with pytest.raises(sluice.Error, match=f"GET s3://{BUCKET}/shards/part-3.tfrecord: HTTP 403 AccessDenied"):
        list(ds)
    assert sum(1 for method, path, _ in relay.requests() if method == "GET" and "part-3" in path) <= 3


@pytest.fixture(scope="module")
def cached_cluster(s3, relay, tmp_path_factory):
    cache = tmp_path_factory.mktemp("object-cache")
    config = {"data_roots": [f"s3://{BUCKET}/"],
              "object_storage": {"part_bytes": 65536, **FAST_RETRIES,
                                 "cache": {"dir": str(cache), "max_bytes": 10 << 20}}}
    with Environment(s3.env(endpoint=relay.endpoint)), sluice.LocalCluster(workers=1, worker_config=config) as running:
        yield running, cache


def test_the_local_cache_serves_the_second_epoch_without_a_get(cached_cluster, relay):
    cluster, cache = cached_cluster
    ds = sluice.Dataset.tfrecord(SHARD_URLS).distribute("distributed_epoch", cluster.service)
    relay.clear()
    assert strings(ds) == ALL_RECORDS
    assert relay.counts().get("GET") == 12
    cached = sorted(p for p in os.listdir(cache) if p.endswith(".object"))
    assert len(cached) == 4
    assert all(os.stat(os.path.join(cache, p)).st_mode & 0o777 == 0o600 for p in cached)
    relay.clear()
    assert strings(ds) == ALL_RECORDS
    assert relay.counts() == {"HEAD": 4}


@pytest.fixture(scope="module")
def https_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "sets").mkdir()
    (root / "private").mkdir()
    for part in range(2):
        # 5,000 lines of 30 bytes: 150 KB, three 64 KiB ranges.
        (root / "sets" / f"lines-{part}.txt").write_text("".join(f"part {part} line {i:05d} {'.' * 11}\n"
                                                                 for i in range(5000)))
    (root / "private" / "secret.txt").write_text("secret\n")
    with HttpsFolderServer(str(root)) as server:
        yield server


@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_https_files_read_by_ranges_with_the_operators_ca(https_site, mode):
    config = {"data_roots": [https_site.url + "sets/"],
              "object_storage": {"part_bytes": 65536, "ca_file": https_site.ca_file}}
    urls = [f"{https_site.url}sets/lines-{part}.txt" for part in range(2)]
    with sluice.LocalCluster(workers=2, worker_config=config) as cluster:
        lines = strings(sluice.Dataset.text_line(urls).distribute(mode, cluster.service))
        expected = sorted(f"part {p} line {i:05d} {'.' * 11}".encode() for p in range(2) for i in range(5000))
        assert lines == (expected if mode == "distributed_epoch" else sorted(expected * 2))
        ranged = [line for line in https_site.access_log() if "/sets/lines-0.txt 206" in line]
        assert {line.split('"')[1] for line in ranged} == {"bytes=0-65535", "bytes=65536-131071", "bytes=131072-149999"}
        with pytest.raises(sluice.Error, match="is outside the data roots of worker"):
            list(sluice.Dataset.text_line([https_site.url + "private/secret.txt"]).distribute(
                "distributed_epoch", cluster.service))


def test_sluice_inspect_and_read_take_the_same_urls(s3, tmp_path):
    cli = os.environ.get("SLUICE_CLI") or os.path.join(os.path.dirname(sluice.__file__), "..", "..", "cli", "sluice")
    if not os.path.exists(cli):
        pytest.skip("SLUICE_CLI (the sluice command) is not set: run through ctest")
    pipeline = tmp_path / "shards.yaml"
    pipeline.write_text(f"pipeline:\n  - tfrecord: {{files: [{SHARD_URLS[0]}, {SHARD_URLS[1]}]}}\n"
                        f"  - take: 3\n")
    env = dict(os.environ, **s3.env())
    sizes = sum(len(tfrecord_file(SHARDS[key])) for key in list(SHARDS)[:2])
    inspected = subprocess.run([cli, "inspect", str(pipeline)], env=env, capture_output=True, text=True, timeout=60)
    assert inspected.returncode == 0, inspected.stderr
    assert f"objects:      2 ({sizes} bytes) from 2 URLs" in inspected.stdout
    read = subprocess.run([cli, "run", str(pipeline)], env=env, capture_output=True, text=True, timeout=60)
    assert read.returncode == 0, read.stderr
    assert len(read.stdout.splitlines()) == 3
    # Without credentials s3rver refuses nothing (it is anonymous-friendly);
    # with a wrong access key it answers 403, which the CLI names.
    wrong = dict(env, AWS_ACCESS_KEY_ID="WRONG")
    refused = subprocess.run([cli, "run", str(pipeline)], env=wrong, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert f"HEAD {SHARD_URLS[0]}: HTTP 403" in refused.stderr


def test_an_image_folder_shard_that_gets_no_object_is_empty_not_a_crash(s3, tmp_path):
    # FILE sharding (or num_shards) over fewer objects than shards leaves
    # some shards none: their mean object size once divided by zero
    # (SIGFPE), which the dispatcher's check of a pipeline would hit too.
    cli = os.environ.get("SLUICE_CLI") or os.path.join(os.path.dirname(sluice.__file__), "..", "..", "cli", "sluice")
    if not os.path.exists(cli):
        pytest.skip("SLUICE_CLI (the sluice command) is not set: run through ctest")
    s3.put(BUCKET, "lone/ant/0.jpg", b"only one")
    env = dict(os.environ, **s3.env())
    lines = {}
    for index in range(3):
        pipeline = tmp_path / f"shard{index}.yaml"
        pipeline.write_text(f"pipeline:\n  - image_folder: {{root: s3://{BUCKET}/lone, num_shards: 3, "
                            f"shard_index: {index}}}\n  - map: {{fn: select, components: [label]}}\n")
        read = subprocess.run([cli, "run", str(pipeline)], env=env, capture_output=True, text=True, timeout=60)
        assert read.returncode == 0, read.stderr
        lines[index] = read.stdout.splitlines()
    assert lines == {0: ['{"label": 0}'], 1: [], 2: []}


def test_a_restore_over_changed_objects_is_refused_naming_both_layouts(cluster, s3):
    for i in range(6):
        s3.put(BUCKET, f"layout/c/{i}.jpg", f"first {i}".encode())
    ds = sluice.Dataset.image_folder(f"s3://{BUCKET}/layout").distribute("distributed_epoch", cluster.service,
                                                                         exactly_once=True)
    it = iter(ds)
    first = bytes(next(it)["image"])
    state = it.save()
    rest = [bytes(e["image"]) for e in ds.iterator(restore_from=state)]
    assert sorted([first] + rest) == sorted(f"first {i}".encode() for i in range(6))
    # The same count of objects, one of another size: split numbers would
    # name other bytes.
    s3.put(BUCKET, "layout/c/3.jpg", b"a second, longer version")
    with pytest.raises(Exception, match=r"saved under split layout '[^']*,objects=[0-9a-f]{16}' and this "
                                        r"dispatcher cuts '[^']*,objects=[0-9a-f]{16}'"):
        list(ds.iterator(restore_from=state))


def test_a_weights_file_in_the_bucket_is_read_by_the_workers(cluster, s3):
    # All the weight on the second input: every element is 100 + i.
    s3.put(BUCKET, "mix/weights.txt", b"0, 1\n")
    ds = sluice.Dataset.sample_from_datasets(
        [sluice.Dataset.range(5), sluice.Dataset.range(100, 110)], seed=3, stop_on_empty_dataset=True,
        weights_file=f"s3://{BUCKET}/mix/weights.txt").distribute("parallel_epochs", cluster.service)
    assert sorted(int(x) for x in ds) == sorted(list(range(100, 110)) * 2)
    missing = sluice.Dataset.sample_from_datasets(
        [sluice.Dataset.range(5), sluice.Dataset.range(100, 110)], seed=3,
        weights_file=f"s3://{BUCKET}/mix/none.txt").distribute("parallel_epochs", cluster.service)
    with pytest.raises(FileNotFoundError, match=f"HEAD s3://{BUCKET}/mix/none.txt: HTTP 404"):
        list(missing)
