"""A Sluice data service on this machine: a dispatcherd and workerds as
child processes on free ports of 127.0.0.1, for tests, examples and
single-host training."""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn, cast

from . import _grpc_env

if TYPE_CHECKING:
    import types

    # A request to the launcher: Popen's arguments, and where to answer.
    _Request = tuple[tuple[Any, ...], dict[str, Any], queue.SimpleQueue[tuple[bool, Any]]]

if TYPE_CHECKING:
    # CMake makes _paths in the build tree and the install, not in the source
    # tree: mypy checks either without knowing which.
    _paths: types.ModuleType | None
else:
    try:
        from . import _paths  # made by CMake in the build tree
    except ImportError:  # a package without a build's or an install's daemons
        _paths = None  # the source tree, where CMake made no _paths

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # In the child, before exec: the kernel kills it when the process that
    # started it dies, however that happens.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Launcher:
    """Starts the daemons from one thread that lives as long as the process.
    PR_SET_PDEATHSIG fires when the *thread* that forked a child exits, so a
    cluster started from a short-lived thread (a DataLoader's, a web
    server's) would lose its daemons the moment that thread ended."""

    _lock = threading.Lock()
    _requests: queue.SimpleQueue[_Request] | None = None

    @classmethod
    def popen(cls, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        with cls._lock:
            if cls._requests is None:
                cls._requests = queue.SimpleQueue()
                threading.Thread(target=cls._serve, name="sluice-launcher", daemon=True).start()
        answer: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        cls._requests.put((args, kwargs, answer))
        try:
            ok, result = answer.get()
        except BaseException:
            # Interrupted (Ctrl-C): the launcher still starts the daemon,
            # which nobody would stop.
            ok, result = answer.get()
            if ok:
                result.kill()
                result.wait()
            raise
        if not ok:
            raise result
        return cast("subprocess.Popen[bytes]", result)

    @classmethod
    def forget(cls) -> None:
        # In a forked child: the launcher thread was not forked with it.
        cls._lock = threading.Lock()
        cls._requests = None

    @classmethod
    def _serve(cls) -> NoReturn:
        while True:
            args, kwargs, answer = cast("queue.SimpleQueue[_Request]", cls._requests).get()  # popen made it first
            try:
                answer.put((True, subprocess.Popen(*args, **kwargs)))
            except BaseException as error:  # handed to the caller
                answer.put((False, error))


# Clusters still running, stopped when the process ends by SIGTERM or exit.
_running: weakref.WeakSet[LocalCluster] = weakref.WeakSet()


def _stop_all() -> None:
    # Only this process's clusters: a forked child (a DataLoader worker, a
    # Pool) shares the parent's memory, not its daemons.
    for cluster in list(_running):
        if cluster._owner_pid == os.getpid():
            cluster.stop()


def _on_sigterm(signum: int, frame: types.FrameType | None) -> None:
    # A trainer stopped with SIGTERM (a scheduler, `kill`) removes its
    # daemons and their temporary directory, then dies of the signal.
    try:
        _stop_all()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _watch_sigterm() -> None:
    # Only a handler nobody set, and only where Python lets one be set.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _unwatch_sigterm() -> None:
    # With no cluster left, SIGTERM kills at once again (also a process
    # stuck in C++, which a Python handler would wait for).
    if not _running and threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _after_fork_in_child() -> None:
    _running.clear()
    _Launcher.forget()
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


atexit.register(_stop_all)
os.register_at_fork(after_in_child=_after_fork_in_child)


def _daemon(name: str, variable: str) -> str:
    path = os.environ.get(variable) or (getattr(_paths, name.upper(), None) if _paths else None)
    if not path or not os.path.exists(path):
        raise FileNotFoundError(
            f"cannot find {name}: set {variable}, or build Sluice (its package then knows the build's daemons)"
        )
    return path


class LocalCluster:
    """A dispatcher and `workers` workers, stopped on exit.

        with sluice.LocalCluster(workers=2) as cluster:
            ds = sluice.Dataset.range(10).distribute("parallel_epochs", cluster.service)

    `work_dir` gives the dispatcher a journal. `dispatcher_config` and
    `worker_config` are settings as in the daemons' YAML files (a dict, or
    the path of such a file); `dispatcher_args` and `worker_args` are extra
    command-line flags, which win over the files (docs/configuration.md).
    The cluster's own settings (127.0.0.1, a free port, the dispatcher's
    address) win over both. The children die with this process, also when
    it is killed and whichever thread started them; SIGTERM (when no
    handler of the program's own is set) and exit stop them and remove
    their temporary directory.
    """

    def __init__(
        self,
        workers: int = 2,
        work_dir: str | os.PathLike[str] | None = None,
        dispatcher_args: Iterable[str] = (),
        worker_args: Iterable[str] = (),
        start_timeout: float = 30.0,
        dispatcher_config: dict[str, Any] | str | os.PathLike[str] | None = None,
        worker_config: dict[str, Any] | str | os.PathLike[str] | None = None,
    ) -> None:
        self._workers_wanted = workers
        self._work_dir = work_dir
        self._configs = {"dispatcher": dispatcher_config, "worker": worker_config}
        self._dispatcher_args = list(dispatcher_args)
        self._worker_args = list(worker_args)
        self._start_timeout = start_timeout
        self._dir: Any = None  # the temporary directory (a str) while started
        self._dispatcher: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []
        self._port: int | None = None
        self._owner_pid = os.getpid()

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def service(self) -> str:
        """grpc://127.0.0.1:PORT of the dispatcher."""
        return f"grpc://127.0.0.1:{self._port}"

    @property
    def dispatcher_address(self) -> str:
        return f"127.0.0.1:{self._port}"

    @property
    def workers(self) -> list[subprocess.Popen[bytes]]:
        """The worker processes (subprocess.Popen), in the order started."""
        return list(self._workers)

    def start(self) -> LocalCluster:
        self._dir = tempfile.mkdtemp(prefix="sluice-cluster-")
        self._owner_pid = os.getpid()
        _running.add(self)
        _watch_sigterm()
        args = self._config_args("dispatcher") + self._dispatcher_args + ["--port", "0", "--bind-address", "127.0.0.1"]
        if self._work_dir is not None:
            args += ["--work-dir", str(self._work_dir)]
        try:
            self._dispatcher, self._port = self._launch(_daemon("dispatcherd", "SLUICE_DISPATCHERD"), "dispatcher", args)
            for _ in range(self._workers_wanted):
                self.add_worker()
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self) -> int:
        """Starts one more worker; returns its index once the worker has
        registered with the dispatcher (its port file is written then)."""
        index = len(self._workers)
        args = self._config_args("worker") + self._worker_args
        args += ["--dispatcher", self.dispatcher_address, "--port", "0", "--bind-address", "127.0.0.1"]
        process, _ = self._launch(_daemon("workerd", "SLUICE_WORKERD"), f"worker{index}", args)
        self._workers.append(process)
        return index

    def kill_worker(self, index: int) -> None:
        """Kills worker `index` with SIGKILL, as a machine failure would."""
        process = self._workers[index]
        process.kill()
        process.wait()

    def stop(self) -> None:
        """Stops every process (SIGINT for the workers, which would drain
        on SIGTERM, and SIGTERM for the dispatcher; SIGKILL after 5 s)."""
        processes = [p for p in self._workers + [self._dispatcher] if p is not None]
        for process in processes:
            if process.poll() is None:
                if process is self._dispatcher:
                    process.terminate()
                else:
                    process.send_signal(signal.SIGINT)
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._workers = []
        self._dispatcher = None
        _running.discard(self)
        _unwatch_sigterm()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def log(self, name: str) -> str:
        """What process `name` ("dispatcher", "worker0", ...) logged so far."""
        with open(os.path.join(self._dir, name + ".log"), errors="replace") as f:
            return f.read()

    def _config_args(self, daemon: str) -> list[str]:
        config = self._configs[daemon]
        if config is None:
            return []
        if isinstance(config, (str, os.PathLike)):
            return ["--config", os.fspath(config)]
        if not isinstance(config, dict):
            raise TypeError(f"{daemon}_config is a dict of settings or a YAML file's path, not {type(config).__name__}")
        path = os.path.join(self._dir, f"{daemon}.yaml")
        with open(path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        return ["--config", path]

    def _launch(self, program: str, name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
        port_file = os.path.join(self._dir, name + ".port")
        log = open(os.path.join(self._dir, name + ".log"), "wb")
        process = _Launcher.popen(
            [program, "--port-file", port_file] + args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            env=_grpc_env.daemon_environment(),
        )
        log.close()
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode} at start:\n{self.log(name)}")
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    return process, int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        process.kill()
        raise TimeoutError(f"{name} did not start within {self._start_timeout} s:\n{self.log(name)}")
