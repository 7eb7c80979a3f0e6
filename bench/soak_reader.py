"""The soak's reader processes and its copy of the build (bench/soak.py)."""

import json
import os
import subprocess
import sys
import time


# ---------------------------------------------------------------------------
# The reader: a child process that reads the jobs the driver hands it, one
# JSON line each on stdin, and answers one JSON line each on stdout.
# ---------------------------------------------------------------------------


def reader_main(service):
    import sluice

    out = sys.stdout
    for line in sys.stdin:
        job = json.loads(line)
        values = []
        result = {"id": job["id"], "ok": True}
        try:
            ds = sluice.Dataset.range(job["n"])
            if job.get("worker_batch"):
                ds = ds.batch(job["worker_batch"])
            options = {}
            if job.get("job_name"):
                options["job_name"] = job["job_name"]
            if job.get("exactly_once"):
                options["exactly_once"] = True
            if job.get("max_outstanding"):
                options["max_outstanding_requests"] = job["max_outstanding"]
            ds = ds.distribute(job["mode"], service, **options)
            if job.get("reader_batch"):
                ds = ds.batch(job["reader_batch"])
            # Paced to `rate` values a second: leaks and correctness over
            # time, not throughput, on a machine shared with builds.
            rate = job["rate"]
            began = time.monotonic()
            for element in ds:
                values.extend(element.ravel().tolist())
                ahead = len(values) / rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
        except sluice.Error as error:
            result.update(ok=False, code=error.code, message=str(error))
        except Exception as error:  # reported, not hidden
            result.update(ok=False, code=type(error).__name__, message=str(error))
        result["values"] = values
        result["end"] = time.time()
        out.write(json.dumps(result) + "\n")
        out.flush()


def snapshot_build(args):
    """Copies the daemons, Sluice's libraries and the Python package into
    OUT/build, under the build lock, and points the run at the copy: a build
    that relinks a library while the soak restarts a daemon (this machine is
    shared with builds) would otherwise fail that start ("file too short")."""
    import fcntl
    import shutil

    dest = os.path.join(args.out, "build")
    lock_path = "/tmp/sluice-build.lock"
    with open(lock_path, "a") as lock:
        deadline = time.time() + args.lock_wait
        told = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.time() > deadline:
                    print(f"soak: {lock_path} still held after {args.lock_wait:.0f} s; copying anyway, then checking "
                          "that the copy starts", flush=True)
                    break
                if not told:
                    print(f"soak: waiting up to {args.lock_wait:.0f} s for a build to finish ({lock_path}) to copy "
                          "the build", flush=True)
                    told = True
                time.sleep(2)
        os.makedirs(os.path.join(dest, "lib"), exist_ok=True)
        for binary in ("dispatcher/dispatcherd", "worker/workerd"):
            shutil.copy2(os.path.join(args.build, binary), os.path.join(dest, os.path.basename(binary)))
        for lib in ("pipeline/libsluice_core.so", "service/libsluice_service.so", "client/libsluice_client.so"):
            shutil.copy2(os.path.join(args.build, lib), os.path.join(dest, "lib"))
        shutil.copytree(os.path.join(args.build, "python", "sluice"), os.path.join(dest, "python", "sluice"),
                        dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    # RUNPATH (not RPATH) names the build's folders, so LD_LIBRARY_PATH wins.
    os.environ["LD_LIBRARY_PATH"] = os.path.join(dest, "lib") + (
        ":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
    os.environ["PYTHONPATH"] = os.path.join(dest, "python") + (
        ":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    args.dispatcherd = os.path.join(dest, "dispatcherd")
    args.workerd = os.path.join(dest, "workerd")
    for check in ([args.dispatcherd, "--help"], [args.workerd, "--help"], [sys.executable, "-c", "import sluice"]):
        result = subprocess.run(check, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"soak: the copy of the build in {dest} does not start ({' '.join(check)}): "
                             f"{result.stderr.strip()[-500:]}; a build is probably under way: start again later")
