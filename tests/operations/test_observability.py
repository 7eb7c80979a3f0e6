"""Observability on real daemons (issue 18): /metrics checked by promtool and
scraped by a real Prometheus server, the dispatcher's status page in headless
Chromium, /status.json, gRPC health checking and reflection, JSON logs, and
the client's metrics from the Python package and `sluice bench`."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

import sluice

SOURCE_DIR = os.environ.get("SLUICE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers.get("Content-Type"), response.read().decode()


def wait_for_file(path, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        time.sleep(0.05)
    raise TimeoutError(f"{path} was not written within {timeout} s")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_flags(directory):
    """Writes cluster.token and client.token (0600) into `directory`; the
    daemon flags that name them. The client token is client-token-0123456789."""
    flags = []
    for name in ("cluster", "client"):
        path = directory / f"{name}.token"
        path.write_text(f"{name}-token-0123456789\n")
        path.chmod(0o600)
        flags += [f"--auth-{name}-token-file", str(path)]
    return flags


def sample(text, name, labels=""):
    """The value of one sample line `name{labels} value` in exposition text."""
    prefix = name + ("{" + labels + "}" if labels else "") + " "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    raise AssertionError(f"no sample {prefix.strip()} in:\n{text[:3000]}")


@pytest.fixture(scope="module")
def cluster():
    """One dispatcher and one worker with HTTP ports, after one read of a
    named distributed_epoch job (range 640, 64 elements a split: 10 splits)."""
    directory = tempfile.mkdtemp(prefix="sluice-ops-")
    files = {name: os.path.join(directory, name + ".http") for name in ("dispatcher", "worker")}
    with sluice.LocalCluster(
        workers=1,
        dispatcher_args=["--http-port", "0", "--http-port-file", files["dispatcher"], "--log-format", "json"],
        worker_args=["--http-port", "0", "--http-port-file", files["worker"]],
    ) as local:
        ports = {name: wait_for_file(path) for name, path in files.items()}
        ds = sluice.Dataset.range(640).distribute("distributed_epoch", local.service, job_name="ops")
        values = sorted(int(v) for v in ds)
        assert values == list(range(640))
        yield local, ports
    shutil.rmtree(directory, ignore_errors=True)


def test_a_host_header_naming_another_site_is_refused(cluster):
    """Issue 32, finding 16: DNS rebinding. A page at attacker.example whose
    name resolves to the daemon's address sends Host: attacker.example."""
    _, ports = cluster
    for name, port in ports.items():
        for path in ("/status.json", "/metrics", "/healthz"):
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": "attacker.example"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 421
            assert refused.value.read().decode() == (
                "this daemon does not answer to the name 'attacker.example' (a guard against DNS rebinding): "
                "use its IP address, or add the name to http_host_names\n"
            )
        # Its own names and addresses are served.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/healthz", headers={"Host": host})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200


def test_health_and_metrics_endpoints(cluster):
    _, ports = cluster
    for name, port in ports.items():
        assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        status, content_type, text = http_get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert content_type == "text/plain; version=0.0.4; charset=utf-8"
        assert sample(text, "process_open_fds") > 0
        with pytest.raises(urllib.error.HTTPError) as missing:
            http_get(f"http://127.0.0.1:{port}/nothing-here")
        assert missing.value.code == 404
    _, _, dispatcher = http_get(f"http://127.0.0.1:{ports['dispatcher']}/metrics")
    _, _, worker = http_get(f"http://127.0.0.1:{ports['worker']}/metrics")
    assert sample(dispatcher, "sluice_workers") == 1
    assert sample(dispatcher, "sluice_jobs") == 1
    assert sample(dispatcher, "sluice_iterations", 'state="finished"') == 1
    assert sample(dispatcher, "sluice_splits_leased_total") == 10
    assert sample(dispatcher, "sluice_rpc_requests_total", 'method="GetOrCreateJob",code="OK"') == 1
    assert sample(dispatcher, "sluice_rpc_duration_seconds_count", 'method="GetOrCreateJob"') == 1
    assert sample(worker, "sluice_worker_elements_sent_total") == 640
    assert sample(worker, "sluice_worker_elements_produced_total") == 640
    assert sample(worker, "sluice_worker_bytes_produced_total") == 640 * 8
    assert sample(worker, "sluice_worker_bytes_sent_total") > 640 * 8
    assert sample(worker, "sluice_rpc_requests_total", 'method="GetElements",code="OK"') >= 1
    # The client side: this process read the 640 elements.
    client = sluice.metrics()
    assert sample(client, "sluice_client_bytes_received_total") > 640 * 8
    assert sample(client, "sluice_client_wait_seconds_total") > 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_accepts_the_metrics(cluster):
    _, ports = cluster
    for name, port in ports.items():
        _, _, text = http_get(f"http://127.0.0.1:{port}/metrics")
        checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                                 timeout=30)
        assert checked.returncode == 0, f"{name}: {checked.stdout}{checked.stderr}"
        assert checked.stdout + checked.stderr == "", f"{name}: {checked.stdout}{checked.stderr}"


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed (Debian package prometheus)")
def test_a_prometheus_server_scrapes_both_daemons(cluster, tmp_path):
    _, ports = cluster
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: sluice\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{ports['dispatcher']}', '127.0.0.1:{ports['worker']}']}}]\n"
    )
    web = free_port()
    log = open(tmp_path / "prometheus.log", "wb")
    server = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{web}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def query(expression):
            url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
            try:
                return json.loads(http_get(url, timeout=5)[2])["data"]["result"]
            except (OSError, ValueError, KeyError):
                return []

        deadline = time.monotonic() + 60
        workers = elements = []
        while time.monotonic() < deadline and not (workers and elements):
            workers = query("sluice_workers")
            elements = query("sluice_worker_elements_sent_total")
            time.sleep(0.5)
        assert workers, (tmp_path / "prometheus.log").read_text()[-3000:]
        assert float(workers[0]["value"][1]) == 1
        assert float(elements[0]["value"][1]) == 640
        up = query("up")
        assert sorted(float(r["value"][1]) for r in up) == [1.0, 1.0]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_status_json_shows_workers_jobs_and_split_progress(cluster):
    local, ports = cluster
    status, content_type, text = http_get(f"http://127.0.0.1:{ports['dispatcher']}/status.json")
    assert status == 200 and content_type == "application/json"
    data = json.loads(text)
    assert data["version"] == "sluice 0.1.0"
    # Milliseconds since the epoch, exact: not rounded to a double's six digits.
    assert isinstance(data["now_ms"], int) and abs(data["now_ms"] - time.time() * 1000) < 60000
    assert data["uptime_seconds"] > 0
    assert len(data["workers"]) == 1
    worker = data["workers"][0]
    assert worker["address"].startswith("127.0.0.1:")
    assert worker["state"] == "alive"
    assert 0 <= worker["last_heartbeat_ms_ago"] < 10000
    assert [(j["job_id"], j["name"], j["processing_mode"]) for j in data["jobs"]] == [
        (1, "ops", "distributed_epoch")]
    [iteration] = data["iterations"]
    assert (iteration["job_id"], iteration["finished"], iteration["splits_done"], iteration["splits_total"]) == (
        1, True, 10, 10)
    assert [d["dataset_id"] for d in data["datasets"]] == [data["jobs"][0]["dataset_id"]]
    assert len(data["datasets"][0]["fingerprint"]) == 32


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed (Debian package chromium)")
def test_status_page_in_headless_chromium(cluster, tmp_path):
    local, ports = cluster
    data = json.loads(http_get(f"http://127.0.0.1:{ports['dispatcher']}/status.json")[2])
    screenshot = os.environ.get("SLUICE_STATUS_SCREENSHOT", str(tmp_path / "status.png"))
    checked = subprocess.run(
        [sys.executable, os.path.join(SOURCE_DIR, "tests", "web", "check_status_page.py"),
         f"http://127.0.0.1:{ports['dispatcher']}/", "--expect-worker", data["workers"][0]["address"],
         "--expect-job", "1", "--expect-iteration", str(data["iterations"][0]["iteration_id"]),
         "--screenshot", screenshot, "--timeout", "60"],
        capture_output=True, text=True, timeout=180)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert os.path.getsize(screenshot) > 5000


@pytest.mark.parametrize("daemon", ["dispatcher", "worker"])
def test_grpc_health_and_reflection(cluster, daemon):
    grpc = pytest.importorskip("grpc", reason="python3-grpcio not installed")
    local, _ = cluster
    address = local.dispatcher_address
    if daemon == "worker":
        address = json.loads(http_get(
            f"http://127.0.0.1:{cluster[1]['dispatcher']}/status.json")[2])["workers"][0]["address"]
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        # HealthCheckRequest{service: ""} is empty; the answer is
        # HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
        assert check(b"", timeout=10) == b"\x08\x01"
        reflection = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        # ServerReflectionRequest{list_services: ""}: field 7, length 0.
        answers = list(reflection(iter([b"\x3a\x00"]), timeout=10))
        assert len(answers) == 1
        service = b"sluice.proto.DispatcherService" if daemon == "dispatcher" else b"sluice.proto.WorkerService"
        assert service in answers[0]
        assert b"grpc.health.v1.Health" in answers[0]


def test_health_and_reflection_need_no_token_where_every_rpc_does(tmp_path):
    grpc = pytest.importorskip("grpc", reason="python3-grpcio not installed")
    tokens = token_flags(tmp_path)
    with sluice.LocalCluster(workers=0, dispatcher_args=tokens) as local:
        with grpc.insecure_channel(local.dispatcher_address) as channel:
            assert channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=10) == b"\x08\x01"
            version = channel.unary_unary("/sluice.proto.DispatcherService/GetVersion")
            with pytest.raises(grpc.RpcError) as refused:
                version(b"", timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert refused.value.details() == (
                "GetVersion needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or --token-file)")
            answer = version(b"", timeout=10, metadata=[("authorization", "Bearer client-token-0123456789")])
            assert b"sluice 0.1.0" in answer


def test_json_logs_are_one_object_per_line(cluster):
    local, _ = cluster
    lines = [line for line in local.log("dispatcher").splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    assert all(set(r) >= {"time", "level", "pid", "thread", "message"} for r in records)
    assert any(r["message"].startswith("listening on 127.0.0.1:") for r in records)
    messages = [r["message"] for r in records]
    assert "job 1 created ('ops'): dataset " in " ".join(messages)
    assert any(m.startswith("iteration 1 (job 1, repetition 0) has 1 tasks") for m in messages)
    assert "iteration 1 (job 1, repetition 0) finished" in messages


def test_sluice_bench_writes_the_client_metrics(cluster, tmp_path):
    local, _ = cluster
    cli = os.environ.get("SLUICE_CLI")
    if not cli:
        pytest.skip("SLUICE_CLI not set (ctest sets it)")
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("pipeline:\n  - range: {stop: 100000}\n  - batch: {batch_size: 100}\n"
                        "  - distribute: {processing_mode: parallel_epochs, service: " + local.service + "}\n")
    metrics = tmp_path / "client.prom"
    bench = subprocess.run([cli, "bench", str(pipeline), "--seconds", "2", "--metrics-file", str(metrics)],
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    text = metrics.read_text()
    assert sample(text, "sluice_client_bytes_received_total") >= 100000 * 8
    assert sample(text, "sluice_client_wait_seconds_total") > 0


def test_status_json_shows_a_reading_worker_s_throughput(cluster):
    # Last in the file: it adds a job, which the tests above count.
    local, ports = cluster
    ds = sluice.Dataset.range(1 << 20).repeat().batch(64).distribute("parallel_epochs", local.service)
    deadline = time.monotonic() + 30
    rate = 0
    for count, _ in enumerate(ds):
        if count % 64 == 0:
            worker = json.loads(http_get(f"http://127.0.0.1:{ports['dispatcher']}/status.json")[2])["workers"][0]
            rate = worker["elements_per_second"]
            if rate > 0 or time.monotonic() > deadline:
                break
    assert rate > 0
    assert worker["bytes_per_second"] > rate * 64 * 8 * 0.5


def test_a_lost_worker_s_splits_are_counted_as_returned(tmp_path):
    port_file = tmp_path / "dispatcher.http"
    with sluice.LocalCluster(
        workers=2,
        # Leases of at most 4 splits: neither worker can take the whole epoch
        # early, so the one killed surely holds leased splits.
        dispatcher_args=[
            "--http-port", "0", "--http-port-file", str(port_file), "--worker-timeout-ms", "1000",
            "--splits-per-request", "4",
        ],
    ) as local:
        port = wait_for_file(str(port_file))
        ds = sluice.Dataset.range(1 << 20).batch(64).distribute("distributed_epoch", local.service)
        batches = 0
        for _ in ds:
            batches += 1
            if batches == 100:
                local.kill_worker(0)  # mid-epoch, holding leased splits
        # At least once: every batch arrives, some twice.
        assert batches >= 1 << 14
        # The read can end on the other worker before the dispatcher's
        # worker_timeout_ms has passed: wait for it to declare the loss.
        deadline = time.monotonic() + 30
        text = http_get(f"http://127.0.0.1:{port}/metrics")[2]
        while "sluice_workers_lost_total " not in text and time.monotonic() < deadline:
            time.sleep(0.1)
            text = http_get(f"http://127.0.0.1:{port}/metrics")[2]
        assert sample(text, "sluice_workers_lost_total") == 1
        assert sample(text, "sluice_splits_returned_total") > 0
        assert sample(text, "sluice_workers") == 1


def test_the_python_package_reads_with_the_token_from_sluice_token_file(tmp_path):
    args = token_flags(tmp_path)
    script = (
        "import sluice, sys\n"
        f"args = {args!r}\n"
        "with sluice.LocalCluster(workers=1, dispatcher_args=args, worker_args=args) as c:\n"
        "    try:\n"
        "        print(sorted(int(v) for v in sluice.Dataset.range(5).distribute('parallel_epochs', c.service)))\n"
        "    except Exception as e:\n"
        "        print('error:', type(e).__name__, e)\n"
    )
    env = dict(os.environ, SLUICE_TOKEN_FILE=str(tmp_path / "client.token"))
    read = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "[0, 1, 2, 3, 4]"
    # Without it the read fails, saying which token is missing.
    env.pop("SLUICE_TOKEN_FILE")
    refused = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 0, refused.stderr
    assert refused.stdout.startswith("error: ")
    assert "needs the client token and the call carried none (set SLUICE_TOKEN_FILE, or --token-file)" in refused.stdout
    # A token file that cannot be read is named.
    env["SLUICE_TOKEN_FILE"] = str(tmp_path / "missing.token")
    missing = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert missing.stdout.startswith("error: ValueError "), missing.stdout + missing.stderr
    assert f"token file '{tmp_path / 'missing.token'}': cannot read: No such file or directory" in missing.stdout
