"""Self-tests of the object storage stand-ins (object_storage_servers.py); they need no Sluice build."""

import http.client
import http.server
import ssl
import threading
import time
import xml.etree.ElementTree as ElementTree

import pytest

from object_storage_servers import FaultRelay, HttpsFolderServer, S3Server

pytestmark = pytest.mark.timeout(60)

S3_NS = "{http://doc.s3.amazonaws.com/2006-03-01/}"
BLOB = bytes(range(256)) * 4


@pytest.fixture
def s3():
    with S3Server(buckets=("sluice",)) as server:
        yield server


@pytest.fixture
def relay(s3):
    with FaultRelay(f"127.0.0.1:{s3.port}") as relay:
        yield relay


def fetch(connection, method, path, headers=None):
    connection.request(method, path, headers=headers or {})
    response = connection.getresponse()
    return response.status, response.read()


def test_s3rver_put_get_delete(s3):
    s3.put("sluice", "dir/a b.bin", BLOB)
    assert s3.get("sluice", "dir/a b.bin") == BLOB
    s3.delete("sluice", "dir/a b.bin")
    with pytest.raises(RuntimeError, match="404"):
        s3.get("sluice", "dir/a b.bin")
    assert s3.env() == {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": "S3RVER",
                        "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1"}
    assert s3.endpoint == f"http://127.0.0.1:{s3.port}"


def test_relay_lists_reads_and_counts_on_one_connection(s3, relay):
    for key in ("shards/0.bin", "shards/1.bin", "other/x.bin"):
        s3.put("sluice", key, BLOB)
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    status, body = fetch(connection, "GET", "/sluice?list-type=2&prefix=shards/")
    assert status == 200
    keys = [e.text for e in ElementTree.fromstring(body).iter(S3_NS + "Key")]
    assert keys == ["shards/0.bin", "shards/1.bin"]
    assert fetch(connection, "GET", "/sluice/shards/1.bin", {"Range": "bytes=2-5"}) == (206, BLOB[2:6])
    assert fetch(connection, "HEAD", "/sluice/shards/0.bin") == (200, b"")
    assert fetch(connection, "GET", "/sluice/shards/0.bin") == (200, BLOB)
    connection.close()
    assert relay.counts() == {"GET": 3, "HEAD": 1}
    assert relay.requests() == [("GET", "/sluice?list-type=2&prefix=shards/", None),
                                ("GET", "/sluice/shards/1.bin", "bytes=2-5"),
                                ("HEAD", "/sluice/shards/0.bin", None),
                                ("GET", "/sluice/shards/0.bin", None)]
    assert s3.env(relay.endpoint)["AWS_ENDPOINT_URL"] == relay.endpoint


def test_fail_next_answers_the_status_then_passes(s3, relay):
    s3.put("sluice", "k", BLOB)
    relay.fail_next(1, status=503, method="GET", path_contains="/k")
    relay.fail_next(1, status=429, method="HEAD")
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    assert fetch(connection, "GET", "/sluice/other")[0] == 404  # path does not match: the upstream answers
    status, body = fetch(connection, "GET", "/sluice/k")
    assert status == 503
    assert ElementTree.fromstring(body).findtext("Code") == "SlowDown"
    assert fetch(connection, "HEAD", "/sluice/k") == (429, b"")  # and the connection is still in step
    assert fetch(connection, "GET", "/sluice/k") == (200, BLOB)
    connection.close()
    assert relay.counts() == {"GET": 3, "HEAD": 1}


def test_cut_next_ends_the_body_early(s3, relay):
    s3.put("sluice", "k", BLOB)
    relay.cut_next(1, after_bytes=10)
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    connection.request("GET", "/sluice/k")
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") == str(len(BLOB))
    with pytest.raises(http.client.IncompleteRead) as cut:
        response.read()
    assert cut.value.partial == BLOB[:10]
    connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    assert fetch(connection, "GET", "/sluice/k") == (200, BLOB)
    connection.close()


def test_stall_next_holds_then_closes(s3, relay):
    s3.put("sluice", "k", BLOB)
    relay.stall_next(1, seconds=1.0, after_bytes=3)
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    start = time.monotonic()
    connection.request("GET", "/sluice/k")
    response = connection.getresponse()
    with pytest.raises(http.client.IncompleteRead) as cut:
        response.read()
    assert cut.value.partial == BLOB[:3]
    assert 0.9 <= time.monotonic() - start < 5
    connection.close()


def test_stall_without_head_and_stop_ends_every_thread(s3):
    relay = FaultRelay(f"127.0.0.1:{s3.port}").start()
    relay.stall_next(1, seconds=30, head=False)
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    connection.request("GET", "/sluice/none")
    time.sleep(0.3)
    start = time.monotonic()
    relay.stop()
    assert time.monotonic() - start < 5
    assert not any(thread.is_alive() for thread in relay._threads)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        connection.getresponse()


def test_delay_and_a_kept_alive_upstream_closed_while_idle(s3, relay):
    s3.put("sluice", "k", b"xyz")
    relay.delay_s = 0.3
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    start = time.monotonic()
    assert fetch(connection, "GET", "/sluice/k") == (200, b"xyz")
    assert time.monotonic() - start >= 0.3
    relay.delay_s = 0
    time.sleep(6)  # s3rver closes a connection idle for 5 s; the relay reconnects and resends
    assert fetch(connection, "GET", "/sluice/k") == (200, b"xyz")
    connection.close()


class ChunkedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in (b"hello ", b"chunked ", b"world"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\n\r\n")

    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_relay_passes_chunked_bodies_and_expect_continue():
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChunkedHandler)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        with FaultRelay(f"127.0.0.1:{upstream.server_address[1]}") as relay:
            connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
            for _ in range(2):
                assert fetch(connection, "GET", "/c") == (200, b"hello chunked world")
            assert fetch(connection, "PUT", "/p", {"Expect": "100-continue", "Content-Length": "0"}) == (200, b"")
            connection.close()
            assert relay.counts() == {"GET": 2, "PUT": 1}
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_https_folder_serves_ranges_with_its_own_ca(tmp_path):
    (tmp_path / "blob.bin").write_bytes(BLOB)
    with HttpsFolderServer(str(tmp_path)) as server:
        assert server.url == f"https://127.0.0.1:{server.port}/"
        context = ssl.create_default_context(cafile=server.ca_file)  # the CA is the only trust
        for host in ("127.0.0.1", "localhost"):
            connection = http.client.HTTPSConnection(host, server.port, context=context, timeout=10)
            assert fetch(connection, "GET", "/blob.bin", {"Range": "bytes=2-5"}) == (206, BLOB[2:6])
            assert fetch(connection, "GET", "/blob.bin") == (200, BLOB)
            connection.close()
        with pytest.raises(ssl.SSLCertVerificationError):
            connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=ssl.create_default_context(),
                                                     timeout=10)
            connection.request("GET", "/blob.bin")
        time.sleep(0.1)  # the access log line follows the response
        assert server.access_log() == ['GET /blob.bin 206 "bytes=2-5" 4', f'GET /blob.bin 200 "-" {len(BLOB)}'] * 2
