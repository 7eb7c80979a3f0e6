"""Local stand-ins for object storage, for the integration tests of the s3:// and https:// sources.

S3Server: the npm s3rver (v3) on 127.0.0.1 with a throw-away data directory and buckets made at start.
HttpsFolderServer: nginx serving a folder over HTTPS with a CA of its own (Range requests work as nginx serves them).
FaultRelay: an HTTP/1.1 relay in front of a plain-HTTP upstream that counts requests and can fail, cut or stall
the next N matching ones.

Every one is a context manager; every wait is bounded, and stopping ends every process and thread it started.
"""

import collections
import http
import http.client
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

DEFAULT_S3RVER = "/opt/sluice-npm/node_modules/.bin/s3rver"  # SLUICE_S3RVER overrides it
NGINX = "/usr/sbin/nginx"
S3RVER_KEY = "S3RVER"  # s3rver's only account: access key and secret are both S3RVER


def free_port():
    """A port of 127.0.0.1 that was free a moment ago (whoever binds it next may race, so bind soon)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


class _ChildServer:
    """A server process with a temporary directory of its own. Subclasses define _launch(), which starts
    self._process and sets self.port; start() waits until the port answers and cleans up if anything fails."""

    _log_name = None  # the file in the temporary directory that tells why a start failed

    def __init__(self, startup_timeout_s):
        self.startup_timeout_s = startup_timeout_s
        self.port = None
        self._process = None
        self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self._dir = tempfile.mkdtemp(prefix=f"sluice-{type(self).__name__}-")
        try:
            self._launch(time.monotonic() + self.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        self._process = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _path(self, name):
        return os.path.join(self._dir, name)

    def _log(self):
        return _read_text(self._path(self._log_name))

    def _spawn_process(self, command, env=None):
        with open(self._path(self._log_name), "ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, env=env)

    def _wait_for_port(self, deadline):
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the server exited with {self._process.returncode} before it listened:\n"
                                   f"{self._log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nothing answered on 127.0.0.1:{self.port} in time:\n{self._log()}")


class S3Server(_ChildServer):
    """s3rver v3 on 127.0.0.1: `endpoint`, `port`, put/get/delete by path-style URL, `env()` for a client.

    s3rver takes anonymous requests, so put/get send no Authorization. Of a SigV4 request it checks only that
    the Authorization header parses, that the access key id is S3RVER (else 403 InvalidAccessKeyId) and that
    x-amz-content-sha256 is present (else 400 InvalidRequest); neither signature nor payload hash is verified,
    so a client's signer is not proven correct by it."""

    _log_name = "s3rver.log"

    def __init__(self, buckets=("sluice",), startup_timeout_s=20):
        super().__init__(startup_timeout_s)
        self.buckets = list(buckets)
        self.endpoint = None

    def start(self):
        self._s3rver = os.environ.get("SLUICE_S3RVER", DEFAULT_S3RVER)
        if not os.access(self._s3rver, os.X_OK) or shutil.which("node") is None:
            pytest.skip(f"s3rver (npm s3rver@3) at {self._s3rver} or node is missing: deploy/install_deps.sh installs "
                        "them (or point SLUICE_S3RVER at an s3rver)")
        super().start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        return self

    def _launch(self, deadline):
        os.mkdir(self._path("data"))
        # Port 0 and the port read back from the log: no race with another test for a port picked beforehand.
        command = [self._s3rver, "-d", self._path("data"), "-a", "127.0.0.1", "-p", "0", "--silent"]
        for bucket in self.buckets:
            command += ["--configure-bucket", bucket]
        # s3rver 3 makes a listing's continuation token with a cipher that
        # OpenSSL 3 (Node 17 and later) keeps in its legacy provider: without
        # it every listing past 1,000 keys answers 500 InternalError
        # (ERR_OSSL_EVP_UNSUPPORTED in its log).
        env = dict(os.environ)
        env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + " --openssl-legacy-provider").strip()
        self._spawn_process(command, env=env)
        while self.port is None:
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)", self._log())
            if found:
                self.port = int(found.group(1))
            elif self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"s3rver did not say where it listens:\n{self._log()}")
            else:
                time.sleep(0.05)
        self._wait_for_port(deadline)

    def env(self, endpoint=None):
        """The environment a client needs; `endpoint` overrides ours (e.g. a FaultRelay's in front of us)."""
        return {"AWS_ENDPOINT_URL": endpoint or self.endpoint, "AWS_ACCESS_KEY_ID": S3RVER_KEY,
                "AWS_SECRET_ACCESS_KEY": S3RVER_KEY, "AWS_REGION": "us-east-1"}

    def _request(self, method, bucket, key, body=None, ok=(200,)):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
            connection.request(method, f"/{bucket}/{urllib.parse.quote(key, safe='/~')}", body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if response.status not in ok:
            raise RuntimeError(f"{method} /{bucket}/{key}: {response.status} {data[:500]!r}")
        return data

    def put(self, bucket, key, data: bytes):
        self._request("PUT", bucket, key, body=bytes(data))

    def get(self, bucket, key) -> bytes:
        return self._request("GET", bucket, key)

    def delete(self, bucket, key):
        self._request("DELETE", bucket, key, ok=(200, 204))


class HttpsFolderServer(_ChildServer):
    """nginx serving `root_dir` at `url` over HTTPS, with a certificate for 127.0.0.1 and localhost signed by a
    CA made here (`ca_file`). `access_log()` gives one line per request: 'METHOD URI STATUS "RANGE" BYTES_SENT',
    RANGE being - when the request had none."""

    _log_name = "error.log"

    def __init__(self, root_dir, startup_timeout_s=20):
        super().__init__(startup_timeout_s)
        self.root_dir = os.path.abspath(root_dir)
        self.url = None
        self.ca_file = None

    def start(self):
        if not os.access(NGINX, os.X_OK):
            pytest.skip(f"{NGINX} is missing: install the Debian package nginx-light")
        if shutil.which("openssl") is None:
            pytest.skip("the openssl command is missing: install the Debian package openssl")
        super().start()
        self.url = f"https://127.0.0.1:{self.port}/"
        return self

    def access_log(self):
        with open(self._path("access.log")) as f:
            return f.read().splitlines()

    def ssl_context(self):
        """A client context that trusts our CA and nothing else."""
        return ssl.create_default_context(cafile=self.ca_file)

    def _launch(self, deadline):
        self._make_certificates()
        # nginx cannot listen on port 0 and report it, so a port picked beforehand may be taken meanwhile: retry.
        for attempt in range(3):
            self.port = free_port()
            self._write_conf()
            self._spawn_process([NGINX, "-c", self._path("nginx.conf"), "-p", self._dir, "-e", self._path("error.log")])
            try:
                return self._wait_for_port(deadline)
            except RuntimeError:
                if attempt == 2 or "in use" not in self._log():
                    raise

    def _openssl(self, *args):
        done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")

    def _make_certificates(self):
        self.ca_file = self._path("ca.pem")
        new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]  # EC: quick to make
        self._openssl("req", "-x509", *new_key, "-keyout", self._path("ca.key"), "-out", self.ca_file, "-days", "7",
                      "-subj", "/CN=Sluice test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self._openssl("req", *new_key, "-keyout", self._path("server.key"), "-out", self._path("server.csr"),
                      "-subj", "/CN=127.0.0.1")
        with open(self._path("server.ext"), "w") as f:
            # The key identifiers keep strict verifiers (Python 3.13's VERIFY_X509_STRICT) content.
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
        self._openssl("x509", "-req", "-in", self._path("server.csr"), "-CA", self.ca_file, "-CAkey",
                      self._path("ca.key"), "-CAcreateserial", "-CAserial", self._path("ca.srl"), "-days", "7",
                      "-extfile", self._path("server.ext"), "-out", self._path("server.pem"))

    def _write_conf(self):
        d = self._dir
        # Every path nginx writes lies under the temporary directory, so no root and no /var/lib/nginx are needed.
        temp_paths = "".join(f"    {kind}_temp_path {d}/{kind};\n"
                             for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(self._path("nginx.conf"), "w") as f:
            f.write(f"""daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log notice;
events {{ worker_connections 512; }}
http {{
    default_type application/octet-stream;
    log_format sluice '$request_method $request_uri $status "$http_range" $body_bytes_sent';
    access_log {d}/access.log sluice;
{temp_paths}    sendfile on;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{self.port} ssl;
        server_name localhost;
        ssl_certificate {d}/server.pem;
        ssl_certificate_key {d}/server.key;
        root {self.root_dir};
        location / {{ }}
    }}
}}
""")
        open(self._path("access.log"), "w").close()


# ---- FaultRelay ----

# ---- FaultRelay ----

_MAX_LINE = 65536
_PIECE = 65536


def _line(reader):
    line = reader.readline(_MAX_LINE)
    if not line.endswith(b"\n"):
        raise ConnectionError("the peer closed inside a message, or sent a line too long")
    return line


def _read_head(reader):
    """The lines of one message head up to and with its blank line, or None if the peer closed before it."""
    first = reader.readline(_MAX_LINE)
    while first in (b"\r\n", b"\n"):  # stray blank lines between messages are allowed (RFC 9112 2.2)
        first = reader.readline(_MAX_LINE)
    if not first:
        return None
    lines = [first]
    while lines[-1] not in (b"\r\n", b"\n"):
        if len(lines) > 256:
            raise ConnectionError("a message head of more than 256 lines")
        lines.append(_line(reader))
    return lines


def _headers(lines):
    """Lower-cased name -> value (a later repeat wins; nothing here needs repeats)."""
    pairs = (line.decode("latin-1").partition(":") for line in lines[1:-1])
    return {name.strip().lower(): value.strip() for name, _, value in pairs}


def _status(response_lines):
    return int(response_lines[0].split()[1])


def _exactly(reader, n):
    while n > 0:
        piece = reader.read1(min(n, _PIECE))  # read1: relay what came at once, not wait for a full piece
        if not piece:
            raise ConnectionError("the peer closed inside a body")
        n -= len(piece)
        yield piece


def _body_pieces(reader, headers, bodiless=False, until_close=False):
    """The body's bytes exactly as framed on the wire (chunk sizes and trailers included), piece by piece.
    `bodiless`: a response to HEAD, or 1xx/204/304. `until_close`: a response with neither length nor chunks."""
    if bodiless:
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = _line(reader)
            yield size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while (trailer := _line(reader)) not in (b"\r\n", b"\n"):  # trailers, then a blank line
                    yield trailer
                yield trailer
                return
            yield from _exactly(reader, size + 2)  # the chunk and its CRLF
    elif "content-length" in headers:
        yield from _exactly(reader, int(headers["content-length"]))
    elif until_close:
        while piece := reader.read1(_PIECE):
            yield piece


def _keeps_alive(version_token, headers):
    connection = headers.get("connection", "").lower()
    if version_token.upper() == b"HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


class _Fault:
    def __init__(self, kind, n, method, path_contains, **how):
        self.kind, self.remaining, self.method, self.path_contains, self.how = kind, n, method, path_contains, how

    def matches(self, method, path):
        return (self.remaining > 0 and (self.method is None or self.method.upper() == method)
                and (self.path_contains is None or self.path_contains in path))


class _Upstream:
    """One connection to the upstream, opened when first needed and again after the upstream closes it."""

    def __init__(self, relay):
        self._relay = relay
        self.sock = None
        self.reader = None
        self._used = False

    def close(self):
        if self.sock is not None:
            self._relay._forget(self.sock)
            self.sock = self.reader = None

    def exchange(self, request):
        """Sends the request; returns the head lines of the final (non-1xx) response."""
        for attempt in (1, 2):
            if self.sock is None:
                self.sock = socket.create_connection(self._relay.upstream_address, timeout=self._relay.io_timeout_s)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._relay._track(self.sock)
                self.reader = self.sock.makefile("rb")
                self._used = False
            reused = self._used
            self._used = True
            try:
                self.sock.sendall(request)
                lines = _read_head(self.reader)
                # 1xx interim answers (100 Continue) are dropped: the relay already answered the client's Expect.
                while lines is not None and 100 <= _status(lines) < 200 and _status(lines) != 101:
                    lines = _read_head(self.reader)
                if lines is None:
                    raise ConnectionError("the upstream closed the connection")
                return lines
            except ConnectionError:
                self.close()
                # A kept-alive connection the upstream closed while idle (s3rver: after 5 s): resend once.
                if not reused or attempt == 2:
                    raise


class FaultRelay:
    """An HTTP/1.1 relay on 127.0.0.1 (`endpoint`, `port`) in front of the plain-HTTP `upstream` ("host:port").

    Each client connection gets its own upstream connection; both are kept alive. Requests and responses are
    relayed byte for byte (bodies by Content-Length or chunked), except that the relay answers a client's
    `Expect: 100-continue` itself and forwards the request without it. Every request received, faulted or not,
    is recorded: `counts()` and `requests()`.

    Faults apply to the next n requests that match `method` (None: any) and `path_contains` (None: any), in the
    order they were set; they can be set while running:
      fail_next: answer `status` with an S3 XML error, never asking the upstream;
      cut_next: relay the head and `after_bytes` bytes of the body (as framed), then close the client connection;
      stall_next: relay the head (unless head=False) and `after_bytes` of the body, wait `seconds`, then close.
    `delay_s` is waited before each response is relayed (latency for benchmarks)."""

    def __init__(self, upstream, delay_s=0.0, io_timeout_s=60):
        host, _, port = upstream.rpartition(":")
        self.upstream_address = (host, int(port))
        self.delay_s = delay_s
        self.io_timeout_s = io_timeout_s
        self.port = None
        self.endpoint = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._faults = []
        self._requests = []
        self._sockets = set()
        self._threads = []
        self._listener = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)  # so the accept loop sees stop() soon
        self.port = self._listener.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._spawn(self._accept_loop)
        return self

    def stop(self):
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            self._forget(sock)  # shutdown wakes any thread blocked reading it
        deadline = time.monotonic() + 10
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def fail_next(self, n, status=503, method=None, path_contains=None, code=None):
        code = code or {503: "SlowDown", 429: "SlowDown", 500: "InternalError"}.get(status, "ServiceUnavailable")
        self._add(_Fault("fail", n, method, path_contains, status=status, code=code))

    def cut_next(self, n, after_bytes, method=None, path_contains=None):
        self._add(_Fault("cut", n, method, path_contains, after_bytes=after_bytes))

    def stall_next(self, n, seconds, after_bytes=0, head=True, method=None, path_contains=None):
        self._add(_Fault("stall", n, method, path_contains, seconds=seconds, after_bytes=after_bytes, head=head))

    def counts(self):
        """Requests received by method, e.g. {"GET": 3, "HEAD": 1}."""
        with self._lock:
            return dict(collections.Counter(method for method, _, _ in self._requests))

    def requests(self):
        """(method, path with query, Range header or None) of every request received, in order."""
        with self._lock:
            return list(self._requests)

    def clear(self):
        """Forgets the requests recorded so far (faults still pending stay)."""
        with self._lock:
            self._requests.clear()

    def _add(self, fault):
        with self._lock:
            self._faults.append(fault)

    def _spawn(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _track(self, sock):
        with self._lock:
            self._sockets.add(sock)
        if self._stopping.is_set():  # stop() may have run between the accept and now
            self._forget(sock)

    def _forget(self, sock):
        with self._lock:
            self._sockets.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # the listener was closed by stop()
            client.settimeout(self.io_timeout_s)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._track(client)
            self._spawn(self._serve, client)

    def _serve(self, client):
        upstream = _Upstream(self)
        try:
            reader = client.makefile("rb")
            while not self._stopping.is_set() and self._relay_one(client, reader, upstream):
                pass
        except (OSError, ValueError, IndexError):
            pass  # the client or upstream went away or spoke nonsense: drop the connection pair
        finally:
            upstream.close()
            self._forget(client)

    def _relay_one(self, client, reader, upstream):
        """Relays one request and its response; returns whether the client connection stays open."""
        lines = _read_head(reader)
        if lines is None:
            return False
        method, path, version = lines[0].split(b" ", 2)
        method, path, version = method.decode("latin-1"), path.decode("latin-1"), version.strip()
        headers = _headers(lines)
        if headers.get("expect", "").lower() == "100-continue":
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            lines = [line for line in lines if not line.lower().startswith(b"expect:")]
        request = b"".join(lines) + b"".join(_body_pieces(reader, headers))
        keep_alive = _keeps_alive(version, headers)
        with self._lock:
            self._requests.append((method, path, headers.get("range")))
            fault = next((f for f in self._faults if f.matches(method, path)), None)
            if fault is not None:
                fault.remaining -= 1
        if fault is not None and fault.kind == "fail":
            self._pause(self.delay_s)
            client.sendall(self._error_response(fault.how["status"], fault.how["code"], method, keep_alive))
            return keep_alive

        response_lines = upstream.exchange(request)
        response_headers = _headers(response_lines)
        status = _status(response_lines)
        pieces = _body_pieces(upstream.reader, response_headers, bodiless=method == "HEAD" or status in (204, 304),
                              until_close=True)
        self._pause(self.delay_s)
        if fault is not None:  # cut or stall: a part of the response, then the connection ends
            if fault.how.get("head", True):
                client.sendall(b"".join(response_lines))
                self._send_at_most(client, pieces, fault.how["after_bytes"])
            if fault.kind == "stall":
                self._pause(fault.how["seconds"])
            return False
        client.sendall(b"".join(response_lines))
        self._send_at_most(client, pieces, None)
        upstream_keeps = _keeps_alive(response_lines[0].split()[0], response_headers) and (
            "content-length" in response_headers or "chunked" in response_headers.get("transfer-encoding", "").lower()
            or method == "HEAD" or status in (204, 304))
        if not upstream_keeps:
            upstream.close()
        return keep_alive and upstream_keeps

    @staticmethod
    def _send_at_most(sock, pieces, limit):
        sent = 0
        for piece in pieces:
            if limit is not None:
                piece = piece[:limit - sent]
            if piece:
                sock.sendall(piece)
                sent += len(piece)
            if limit is not None and sent >= limit:
                return

    def _pause(self, seconds):
        if seconds and seconds > 0:
            self._stopping.wait(seconds)  # ends early when the relay stops

    @staticmethod
    def _error_response(status, code, method, keep_alive):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>injected by '
                f'FaultRelay</Message><RequestId>fault-relay</RequestId></Error>').encode()
        head = (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nContent-Type: application/xml\r\n"
                f"Content-Length: {len(body)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
        return head.encode() + (b"" if method == "HEAD" else body)
