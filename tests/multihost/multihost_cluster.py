"""A Sluice cluster on network-namespace hosts (netns_hosts.Hosts), for the
multi-host tests: the dispatcher on host 0, a workerd on each host named,
and `sluice read` on any host, each daemon logging to a file of its own."""

import os
import subprocess
import threading
import time

BUILD = os.environ.get("SLUICE_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
DISPATCHERD = os.path.join(BUILD, "dispatcher", "dispatcherd")
WORKERD = os.path.join(BUILD, "worker", "workerd")
SLUICE = os.path.join(BUILD, "cli", "sluice")
DISPATCHER_PORT, WORKER_PORT = 5000, 6000


def wait_for(path, process, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert process.poll() is None, f"{what} exited with {process.returncode}"
        assert time.monotonic() < deadline, f"{what} did not start within {timeout} s"
        time.sleep(0.05)


class Cluster:
    """Host 0: the dispatcher (started with `dispatcher_flags` too); hosts
    1..workers (or `worker_hosts`): a worker each, started with
    `worker_flags` too; the rest: readers."""

    def __init__(self, hosts, tmp_path, workers=0, worker_link=None, worker_timeout_ms=1500, worker_hosts=None,
                 worker_flags=(), dispatcher_flags=()):
        self.hosts, self.tmp = hosts, tmp_path
        self.service = f"grpc://{hosts.address(0)}:{DISPATCHER_PORT}"
        self.worker_hosts = list(worker_hosts) if worker_hosts is not None else list(range(1, workers + 1))
        log = open(tmp_path / "dispatcher.log", "w")
        dispatcher = hosts.popen(0, [DISPATCHERD, "--port", str(DISPATCHER_PORT), "--bind-address", hosts.address(0),
                                     "--insecure", "--worker-timeout-ms", str(worker_timeout_ms), "--port-file",
                                     str(tmp_path / "dispatcher.port"), *dispatcher_flags],
                                stdout=log, stderr=subprocess.STDOUT)
        wait_for(tmp_path / "dispatcher.port", dispatcher, "dispatcherd")
        for i in self.worker_hosts:
            if worker_link:
                hosts.limit(i, worker_link)
            log = open(tmp_path / f"worker{i}.log", "w")
            worker = hosts.popen(i, [WORKERD, "--dispatcher", f"{hosts.address(0)}:{DISPATCHER_PORT}", "--port",
                                     str(WORKER_PORT), "--bind-address", hosts.address(i), "--insecure",
                                     "--heartbeat-interval-ms", "200", "--port-file", str(tmp_path / f"worker{i}.port"),
                                     *worker_flags],
                                 stdout=log, stderr=subprocess.STDOUT)
            wait_for(tmp_path / f"worker{i}.port", worker, f"workerd on host {i}")

    def worker(self, i):
        """Host i's worker as the dispatcher and readers name it."""
        return f"{self.hosts.address(i)}:{WORKER_PORT}"

    def log(self, name):
        return (self.tmp / f"{name}.log").read_text()

    def pipeline(self, name, steps):
        path = self.tmp / f"{name}.yaml"
        path.write_text("pipeline:\n" + "".join(f"  - {step}\n" for step in steps))
        return str(path)

    def reader(self, host, pipeline, *flags):
        return self.hosts.popen(host, [SLUICE, "read", pipeline, "--service", self.service, *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class Lines:
    """A running `sluice read`'s output lines, gathered as they come."""

    def __init__(self, reader):
        self.reader, self.lines, self._errors = reader, [], []
        self._threads = [threading.Thread(target=lambda: self.lines.extend(reader.stdout)),
                         threading.Thread(target=lambda: self._errors.append(reader.stderr.read()))]
        for thread in self._threads:
            thread.start()

    def wait_for_lines(self, count, timeout=60):
        deadline = time.monotonic() + timeout
        while len(self.lines) < count and self.reader.poll() is None:
            assert time.monotonic() < deadline, f"the read did not reach {count} lines within {timeout} s"
            time.sleep(0.01)

    def finish(self, timeout):
        """(exit code, lines, stderr) once the read ends, killed past
        `timeout` seconds (a hang is a failure, never a wait)."""
        try:
            self.reader.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.reader.kill()
            self.reader.wait()
            for thread in self._threads:
                thread.join()
            raise AssertionError(f"the read did not end within {timeout} s; its stderr: "
                                 f"{self._errors[0].decode() if self._errors else ''}")
        for thread in self._threads:
            thread.join()
        return self.reader.returncode, [line.decode() for line in self.lines], self._errors[0].decode()
