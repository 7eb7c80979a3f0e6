#!/usr/bin/python3
"""The soak (issue 36, part 4): a dispatcher (with a work dir), 4 workers and
8 readers for --minutes; jobs made and read to their end continuously in both
modes, a worker killed (SIGKILL) and restarted at its port every
--worker-kill-every, the dispatcher every --dispatcher-kill-every. Every read
is checked exactly, as a multiset of the values of range(N):

- distributed_epoch, exactly_once, sole reader: each value once.
- distributed_epoch, exactly_once, a named job shared by two readers: each
  value once over both (a consumer that finds the job already read to its end
  by the other ends with FailedPrecondition, which is fine: the union counts).
- distributed_epoch without exactly_once: each value at least once; a repeat
  only when a worker kill falls in the read (the documented cost).
- parallel_epochs: each value k times, the same k for all (every worker's
  whole epoch); k is the number of workers when no worker was killed around
  the read. Or the read fails with DataLoss naming a worker that was killed
  around it (an expected failure, counted apart), and what it delivered is
  still k whole epochs plus the counts the message names.

Anything else (a lost or repeated value, an error, a read past --read-timeout)
is a failed read. Every 10 s it samples RSS, open fds and threads of every
daemon (and of the readers, which run the client SDK) from /proc; a restarted
daemon continues its role's series. At the end: a table (value at the end of
the warm-up, at the end, min, max, % change), a PNG plot, and PASS/FAIL for
"every series flat within 10% after the warm-up" and "every read exact".
Exits 1 when a read failed, 3 when only a series was not flat.

    PYTHONPATH=build/python /usr/bin/python3 bench/soak.py --minutes 30 [--out DIR]

Run it through bench/soak.sh, which checks the build and matplotlib first.
Only 127.0.0.1; every process it starts is killed when it ends, however.
"""

import argparse
import collections
import ctypes
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import time

import soak_checks
import soak_reader
import soak_report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ---------------------------------------------------------------------------
# The driver.
# ---------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # Runs in the child before exec: its own process group (a Ctrl-C reaches
    # only the driver, which stops everything in order), and SIGKILL when the
    # driver dies however it dies.
    os.setpgid(0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def duration(text):
    """'40s', '2m', '90' (seconds) -> seconds."""
    text = str(text).strip()
    scale = 1
    if text.endswith("ms"):
        text, scale = text[:-2], 0.001
    elif text.endswith("s"):
        text = text[:-1]
    elif text.endswith("m"):
        text, scale = text[:-1], 60
    elif text.endswith("h"):
        text, scale = text[:-1], 3600
    return float(text) * scale


class Proc:
    """One role (dispatcher, worker2, reader5): its current process, and when
    it started."""

    def __init__(self, role, argv, log_path, pipes=False):
        self.role = role
        self.argv = argv
        self.log_path = log_path
        self.pipes = pipes
        self.popen = None
        self.started = 0.0
        self.starts = 0

    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"--- {time.strftime('%H:%M:%S')} start {self.starts}\n".encode())
        log.flush()
        kwargs = dict(stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if self.pipes:
            kwargs.update(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.popen = subprocess.Popen(self.argv, preexec_fn=_die_with_parent, **kwargs)
        log.close()
        self.started = time.time()
        self.starts += 1

    @property
    def pid(self):
        return self.popen.pid if self.popen else None

    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def kill(self):
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
        if self.popen is not None:
            self.popen.wait()


def wait_port_file(path, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.role} exited with {proc.popen.returncode} at start; see {proc.log_path}")
        try:
            with open(path) as f:
                if f.read().strip():
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{proc.role} did not write {path} within {timeout} s; see {proc.log_path}")


def proc_sample(pid):
    """RSS (MiB), open fds, threads of `pid`, or None when it is gone."""
    try:
        rss = threads = None
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024.0
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        if rss is None or threads is None:
            return None
        return rss, fds, threads
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def dir_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total




class Soak:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.rng = random.Random(args.seed)
        self.t0 = time.time()
        self.events = []  # (time, kind, role, detail)
        self.samples = collections.defaultdict(list)  # role -> [(t, rss, fds, threads, age)]
        self.journal = []  # (t, bytes)
        self.reads = []  # one dict per checked read (a shared job counts once)
        self.pending = {}  # job id -> job
        self.next_job = 0
        self.procs = {}
        self.judged_until = args.minutes * 60
        self.readers = []
        self.reader_job = {}  # reader role -> job id it reads now
        self.reader_buf = {}
        self.sel = selectors.DefaultSelector()
        self.worker_ports = [free_port() for _ in range(args.workers)]
        self.dispatcher_port = free_port()
        self.address_role = {f"127.0.0.1:{p}": f"worker{i}" for i, p in enumerate(self.worker_ports)}

    # --- processes ----------------------------------------------------------

    def log(self, text):
        stamp = time.time() - self.t0
        line = f"[{stamp:7.1f}s] {text}"
        print(line, flush=True)
        with open(os.path.join(self.out, "soak.log"), "a") as f:
            f.write(line + "\n")

    def event(self, kind, role, detail=""):
        self.events.append((time.time(), kind, role, detail))
        self.log(f"{kind} {role} {detail}".rstrip())

    def start_dispatcher(self):
        proc = self.procs.get("dispatcher")
        port_file = os.path.join(self.out, "dispatcher.port")
        if proc is None:
            argv = [
                self.args.dispatcherd,
                "--port", str(self.dispatcher_port),
                "--bind-address", "127.0.0.1",
                "--port-file", port_file,
                "--work-dir", os.path.join(self.out, "dispatcher-work"),
                "--job-retention-ms", str(int(self.args.job_retention * 1000)),
                "--log-level", self.args.log_level,
            ]
            proc = self.procs["dispatcher"] = Proc("dispatcher", argv, os.path.join(self.out, "dispatcher.log"))
        self.start_with_retries(proc, port_file)

    def start_worker(self, i):
        role = f"worker{i}"
        proc = self.procs.get(role)
        port_file = os.path.join(self.out, f"{role}.port")
        if proc is None:
            argv = [
                self.args.workerd,
                "--dispatcher", f"127.0.0.1:{self.dispatcher_port}",
                "--port", str(self.worker_ports[i]),
                "--bind-address", "127.0.0.1",
                "--port-file", port_file,
                "--log-level", self.args.log_level,
                # A soak reads small elements slowly: bound what each task
                # runs ahead, so the buffers do not swamp the samples.
                "--buffer-elements", "256",
            ]
            proc = self.procs[role] = Proc(role, argv, os.path.join(self.out, f"{role}.log"))
        self.start_with_retries(proc, port_file)

    def start_with_retries(self, proc, port_file):
        for attempt in range(5):
            if os.path.exists(port_file):
                os.unlink(port_file)
            try:
                proc.start()
                wait_port_file(port_file, proc)
                return
            except (RuntimeError, OSError) as error:
                # Its port may still be held for a moment by the killed one,
                # or a build may be replacing the binary.
                self.log(f"{proc.role} did not start ({error}); again")
                proc.kill()
                time.sleep(1 + 2 * attempt)
        raise RuntimeError(f"{proc.role} did not start 5 times; see {proc.log_path}")

    def start_reader(self, i):
        role = f"reader{i}"
        proc = self.procs.get(role)
        if proc is None:
            argv = [sys.executable, os.path.abspath(__file__), "--reader", "--service",
                    f"grpc://127.0.0.1:{self.dispatcher_port}"]
            proc = self.procs[role] = Proc(role, argv, os.path.join(self.out, f"{role}.log"), pipes=True)
            self.readers.append(role)
        proc.start()
        os.set_blocking(proc.popen.stdout.fileno(), False)
        self.sel.register(proc.popen.stdout, selectors.EVENT_READ, role)
        self.reader_buf[role] = b""
        self.reader_job.pop(role, None)

    def stop_all(self):
        for proc in self.procs.values():
            if proc.role.startswith("reader"):
                proc.kill()
        for proc in self.procs.values():
            if proc.alive():
                proc.popen.terminate()
        deadline = time.time() + 5
        for proc in self.procs.values():
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()

    # --- jobs ---------------------------------------------------------------

    def new_job(self, kind, readers):
        a = self.args
        job_id = self.next_job
        self.next_job += 1
        job = {
            "id": job_id,
            "kind": kind,
            "readers": readers,
            "start": time.time(),
            "results": {},
            "rate": a.rate,
        }
        if kind == "pe":
            job.update(mode="parallel_epochs", n=self.rng.randint(a.elements // 4, a.elements // 3))
        else:
            job.update(mode="distributed_epoch", n=self.rng.randint(a.elements // 2, a.elements))
            job["exactly_once"] = kind != "de_alo"
        if kind == "de_shared":
            job["job_name"] = f"soak-{job_id}"
        # Half the jobs batch on the workers (exactly_once allows one batch;
        # its batches are cut at splits' ends); the other distributed_epoch
        # ones batch in the reader. A parallel_epochs read that fails does so
        # at its end, and a batch in the reader would drop its last partial
        # batch with the error, so those read single values.
        if self.rng.random() < 0.5:
            job["worker_batch"] = self.rng.choice([8, 16, 10])
        elif kind != "pe":
            job["reader_batch"] = self.rng.choice([16, 25, 32])
        # Most reads bound what they fetch ahead (max_outstanding_requests),
        # so that they take from the workers as they go and a kill lands in
        # the middle of their tasks; the rest adapt (up to 8192 elements).
        if self.rng.random() < 0.75:
            job["max_outstanding"] = self.rng.choice([8, 16, 64])
        self.pending[job_id] = job
        line = {k: job[k] for k in ("id", "n", "mode", "rate")}
        for k in ("job_name", "exactly_once", "worker_batch", "reader_batch", "max_outstanding"):
            if k in job:
                line[k] = job[k]
        for role in readers:
            self.reader_job[role] = job_id
            proc = self.procs[role]
            proc.popen.stdin.write((json.dumps(line) + "\n").encode())
            proc.popen.stdin.flush()
        return job

    def idle_readers(self):
        return [r for r in self.readers if r not in self.reader_job and self.procs[r].alive()]

    def assign(self, stopping):
        if stopping:
            return
        idle = set(self.idle_readers())
        # reader0 and reader1 read named jobs together.
        pair = [r for r in ("reader0", "reader1") if r in self.procs]
        if len(pair) == 2 and all(r in idle for r in pair):
            self.new_job("de_shared", pair)
        kinds = ["de_eo", "pe", "de_alo", "pe", "de_eo"]
        for role in sorted(idle - set(pair)):
            kind = kinds[(self.next_job + int(role[6:])) % len(kinds)]
            self.new_job(kind, [role])

    def on_reader_output(self, role, data):
        self.reader_buf[role] += data
        while b"\n" in self.reader_buf[role]:
            line, self.reader_buf[role] = self.reader_buf[role].split(b"\n", 1)
            result = json.loads(line)
            job = self.pending.get(result["id"])
            self.reader_job.pop(role, None)
            if job is None:
                continue
            job["results"][role] = result
            if len(job["results"]) == len(job["readers"]):
                del self.pending[job["id"]]
                soak_checks.check(self, job)

    def kills_near(self, start, end, kind="kill-worker"):
        """Roles killed (SIGKILL) from `slack` before `start` to `end`."""
        slack = self.args.kill_slack
        return [(t, role) for t, k, role, _ in self.events if k == kind and start - slack <= t <= end + 1]

    def sample(self):
        now = time.time()
        for role, proc in self.procs.items():
            if not proc.alive():
                continue
            values = proc_sample(proc.pid)
            if values is not None:
                self.samples[role].append((now - self.t0, *values, now - proc.started))
        self.journal.append((now - self.t0, dir_bytes(os.path.join(self.out, "dispatcher-work"))))

    # --- the run ------------------------------------------------------------

    def run(self):
        a = self.args
        self.start_dispatcher()
        for i in range(a.workers):
            self.start_worker(i)
        for i in range(a.readers):
            self.start_reader(i)
        self.log(f"dispatcher on {self.dispatcher_port}, workers on {self.worker_ports}, {a.readers} readers; "
                 f"{a.minutes} min, warm-up {a.warmup_minutes} min")
        end_at = self.t0 + a.minutes * 60
        self.judged_until = end_at - self.t0
        next_sample = time.time()
        next_worker_kill = self.t0 + a.worker_kill_every
        next_dispatcher_kill = self.t0 + a.dispatcher_kill_every + a.worker_kill_every / 2
        restarts = []  # (when, role)
        victim = 0
        stopping = False
        while True:
            now = time.time()
            if now >= end_at and not stopping:
                stopping = True
                self.log("time is up: no new jobs; waiting for the reads under way")
                drain_deadline = now + a.read_timeout
            if stopping and (not self.pending or now > drain_deadline):
                break
            if now >= next_sample:
                self.sample()
                next_sample += a.sample_every
            if not stopping and now >= next_worker_kill:
                role = f"worker{victim % a.workers}"
                victim += 1
                self.procs[role].kill()
                self.event("kill-worker", role, f"pid {self.procs[role].popen.pid}")
                restarts.append((now + a.restart_delay, role))
                next_worker_kill += a.worker_kill_every
            if not stopping and now >= next_dispatcher_kill:
                self.procs["dispatcher"].kill()
                self.event("kill-dispatcher", "dispatcher", f"pid {self.procs['dispatcher'].popen.pid}")
                restarts.append((now + a.restart_delay, "dispatcher"))
                next_dispatcher_kill += a.dispatcher_kill_every
            # The dispatcher first: a worker registers before it writes its
            # port file, so it would wait for a dispatcher not yet restarted.
            for when, role in sorted(restarts, key=lambda r: (r[1] != "dispatcher", r[0])):
                if now >= when or (role == "dispatcher" and restarts and min(w for w, _ in restarts) <= now):
                    restarts.remove((when, role))
                    if role == "dispatcher":
                        self.start_dispatcher()
                    else:
                        self.start_worker(int(role[6:]))
                    self.event("restart", role, f"pid {self.procs[role].pid}")
            # A daemon that died by itself is a failure; start it again.
            for role, proc in self.procs.items():
                if role.startswith("reader") or any(r == role for _, r in restarts):
                    continue
                if not proc.alive():
                    self.event("died", role, f"exit {proc.popen.returncode}")
                    self.reads.append({"id": -1, "kind": "daemon", "verdict": "FAIL",
                                       "why": f"{role} exited by itself with {proc.popen.returncode}",
                                       "start": now - self.t0, "end": now - self.t0})
                    restarts.append((now, role))
            # Reads past their time: a hang.
            for job in list(self.pending.values()):
                if now - job["start"] > a.read_timeout:
                    del self.pending[job["id"]]
                    self.reads.append({"id": job["id"], "kind": job["kind"], "verdict": "FAIL",
                                       "why": f"hung: no end after {a.read_timeout:.0f} s",
                                       "start": job["start"] - self.t0, "end": now - self.t0})
                    self.log(f"read {job['id']} {job['kind']} hung; killing {job['readers']}")
                    for role in job["readers"]:
                        if role in job["results"]:
                            continue
                        self.sel.unregister(self.procs[role].popen.stdout)
                        self.procs[role].kill()
                        self.start_reader(int(role[6:]))
            for role in self.readers:
                proc = self.procs[role]
                if not proc.alive() and proc.popen is not None:
                    self.log(f"{role} exited with {proc.popen.returncode}; see {proc.log_path}")
                    for job in list(self.pending.values()):
                        if role in job["readers"]:
                            del self.pending[job["id"]]
                            self.reads.append({"id": job["id"], "kind": job["kind"], "verdict": "FAIL",
                                               "why": f"{role} died with {proc.popen.returncode}",
                                               "start": job["start"] - self.t0, "end": now - self.t0})
                    self.sel.unregister(proc.popen.stdout)
                    self.start_reader(int(role[6:]))
            self.assign(stopping)
            for key, _ in self.sel.select(timeout=0.2):
                try:
                    data = os.read(key.fileobj.fileno(), 1 << 20)
                except BlockingIOError:
                    continue
                if data:
                    self.on_reader_output(key.data, data)

    # --- the report ---------------------------------------------------------

    def report(self, interrupted):
        soak_report.report(self, interrupted)

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reader", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--service", help=argparse.SUPPRESS)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=None,
                        help="samples before this are not judged (default: 5, or a sixth of a run shorter than 30 min)")
    parser.add_argument("--worker-kill-every", type=duration, default=120, help="e.g. 2m, 40s (default 2m)")
    parser.add_argument("--dispatcher-kill-every", type=duration, default=600, help="default 10m")
    parser.add_argument("--restart-delay", type=duration, default=2.0, help="from a kill to the restart (2s)")
    parser.add_argument("--sample-every", type=duration, default=10.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--elements", type=int, default=4000,
                        help="distributed_epoch jobs read range(N) with N in [E/2, E]; parallel_epochs [E/4, E/3]")
    parser.add_argument("--rate", type=float, default=400, help="values a second each reader reads at most")
    parser.add_argument("--read-timeout", type=duration, default=180, help="a read longer than this has hung")
    parser.add_argument("--kill-slack", type=duration, default=15,
                        help="a kill this long before a read began still counts as in it")
    parser.add_argument("--tolerance", type=float, default=10.0, help="percent a series may rise after the warm-up")
    parser.add_argument("--settle", type=duration, default=None,
                        help="samples of a process younger than this are not judged (default: 60 s, less for short "
                             "warm-ups)")
    parser.add_argument("--job-retention", type=duration, default=None,
                        help="the dispatcher's --job-retention-ms (default: half the warm-up, at most 5 min), so the "
                             "state it holds is at its steady size when the warm-up ends")
    parser.add_argument("--allow-shared-repeats", action="store_true",
                        help="count values repeated across the consumers of a shared exactly_once job after a worker "
                             "kill apart (dup-shared) instead of as failed reads")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="log every read")
    parser.add_argument("--out", default=None, help="default /tmp/sluice-soak-TIME")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--lock-wait", type=duration, default=300,
                        help="how long to wait for a build to release /tmp/sluice-build.lock before copying the build")
    parser.add_argument("--no-snapshot", action="store_true",
                        help="run the build's daemons and package in place instead of a copy in OUT/build")
    args = parser.parse_args()
    if args.reader:
        soak_reader.reader_main(args.service)
        return 0
    if args.warmup_minutes is None:
        args.warmup_minutes = 5.0 if args.minutes >= 30 else args.minutes / 6
    if args.settle is None:
        args.settle = min(60.0, args.warmup_minutes * 60 / 2)
    if args.job_retention is None:
        args.job_retention = min(300.0, args.warmup_minutes * 60 / 2)
    args.dispatcherd = os.path.join(args.build, "dispatcher", "dispatcherd")
    args.workerd = os.path.join(args.build, "worker", "workerd")
    for binary in (args.dispatcherd, args.workerd):
        if not os.access(binary, os.X_OK):
            print(f"soak: {binary} is missing; build first", file=sys.stderr)
            return 2
    if args.out is None:
        args.out = f"/tmp/sluice-soak-{time.strftime('%Y%m%d-%H%M%S')}"
    os.makedirs(args.out, exist_ok=True)
    if not args.no_snapshot:
        soak_reader.snapshot_build(args)
    soak = Soak(args)

    def on_signal(signum, frame):
        # Once: a Ctrl-C reaches both soak.sh (which passes on a SIGTERM)
        # and this process, and the second must not cut the cleanup short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    interrupted = False
    try:
        soak.run()
    except KeyboardInterrupt:
        interrupted = True
        soak.log("interrupted: stopping")
    finally:
        soak.stop_all()
    return soak.report(interrupted)


if __name__ == "__main__":
    sys.exit(main())
