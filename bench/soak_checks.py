"""The soak's verdict on each finished job (bench/soak.py): every value counted, and
a failure accepted only when it names what was killed and delivered exactly what
it says."""

import collections
import json
import os
import re

# A DataLoss message's lost worker: address, task, reason, elements it had sent.
LOST_WORKER = re.compile(r"worker (\S+) \(task (\d+), ([^)]*)\) after (\d+)")


def check(soak, job):
    """Judges one finished job: appends a record to soak.reads."""
    n = job["n"]
    end = max(r["end"] for r in job["results"].values())
    counts = collections.Counter()
    for r in job["results"].values():
        counts.update(r["values"])
    total = sum(counts.values())
    stray = [v for v in counts if not (0 <= v < n)]
    missing = [v for v in range(n) if counts[v] == 0]
    repeated = [v for v in range(n) if counts[v] > 1]
    worker_kills = soak.kills_near(job["start"], end)
    dispatcher_kills = soak.kills_near(job["start"], end, "kill-dispatcher")
    errors = {role: r for role, r in job["results"].items() if not r["ok"]}
    record = {
        "id": job["id"], "kind": job["kind"], "n": n, "start": job["start"] - soak.t0, "end": end - soak.t0,
        "values": total, "worker_kills": [r for _, r in worker_kills],
        "dispatcher_kills": len(dispatcher_kills), "worker_batch": job.get("worker_batch"),
        "reader_batch": job.get("reader_batch"), "max_outstanding": job.get("max_outstanding"),
    }
    verdict, why = "ok", ""

    def fail(text):
        return "FAIL", text

    if stray:
        verdict, why = fail(f"values outside range({n}): {sorted(stray)[:5]}")
    elif job["kind"] == "de_shared":
        # A consumer that came after the other had read the job to its end.
        late = {role: r for role, r in errors.items()
                if r["code"] == "FAILED_PRECONDITION" and "already read to its end" in r["message"]}
        # Several consumers keep exactly_once through a lost worker: the
        # dispatcher holds its splits until both say what they took
        # (docs/design.md, "Shared exactly_once reads after a lost worker").
        bad = {role: r for role, r in errors.items() if role not in late}
        if bad:
            role, r = next(iter(bad.items()))
            verdict, why = fail(f"{role}: {r['code']}: {r['message'][:300]}")
        elif missing:
            verdict, why = fail(f"{len(missing)} values lost (first {missing[:5]})")
        elif repeated:
            # Trees before the held splits reran a lost task's splits whole,
            # giving one consumer what the other had: --allow-shared-repeats
            # lists those apart, to soak such a tree.
            if worker_kills and soak.args.allow_shared_repeats:
                verdict, why = "dup-shared", f"{len(repeated)} values twice across consumers, worker killed"
            elif worker_kills:
                verdict, why = fail(f"{len(repeated)} values repeated across the two consumers (first "
                                    f"{repeated[:5]}), without a word, after a worker kill")
            else:
                verdict, why = fail(f"{len(repeated)} values repeated (first {repeated[:5]}) with no worker kill")
        if late and verdict == "ok":
            record["late_consumer"] = True
    elif errors:
        r = next(iter(errors.values()))
        lost = LOST_WORKER.findall(r["message"])
        killed = {role for _, role in worker_kills}
        lost_roles = {soak.address_role.get(address, address) for address, *_ in lost}
        if job["kind"] == "pe" and r["code"] == "DATA_LOSS" and lost and lost_roles <= killed:
            # What it delivered before the error: k whole epochs and the
            # lost workers' parts, which the message counts in elements
            # (batches of `b` values when the workers batch; the last
            # one of an epoch is short).
            b = job.get("worker_batch") or 1
            short = b - (n % b or b)
            elements = [int(m) for *_, m in lost]
            partial_low = sum(m * b - short for m in elements if m)
            partial_high = sum(m * b for m in elements)
            k = (total - partial_low) // n
            rest = total - k * n
            low = min(counts[v] for v in range(n))
            high = max(counts[v] for v in range(n))
            if not partial_low <= rest <= partial_high or low < k or high > k + len(lost):
                verdict, why = fail(
                    f"DataLoss naming {sorted(lost_roles)}, but the {total} values delivered are not whole "
                    f"epochs plus the {sum(elements)} elements it names (counts {low}..{high})")
            else:
                verdict, why = "expected-failure", f"DataLoss naming {sorted(lost_roles)} (killed)"
        else:
            verdict, why = fail(f"{r['code']}: {r['message'][:400]}")
    elif job["kind"] == "pe":
        low = min(counts[v] for v in range(n)) if n else 0
        high = max(counts[v] for v in range(n)) if n else 0
        if low != high:
            verdict, why = fail(f"uneven epochs: counts from {low} to {high} "
                                f"({sum(1 for v in range(n) if counts[v] == low)} values at {low})")
        elif low == 0:
            verdict, why = fail("no values")
        elif low != soak.args.workers and not worker_kills:
            verdict, why = fail(f"{low} epochs with {soak.args.workers} workers and none killed")
        record["epochs"] = low
    elif missing:
        verdict, why = fail(f"{len(missing)} values lost (first {missing[:5]})")
    elif repeated:
        if job["kind"] == "de_alo" and worker_kills:
            verdict, why = "ok", f"{len(repeated)} repeats after a worker kill (at least once)"
            record["repeats"] = len(repeated)
        else:
            verdict, why = fail(f"{len(repeated)} values repeated (first {repeated[:5]})"
                                + ("" if worker_kills else " with no worker kill"))
    record["verdict"], record["why"] = verdict, why
    soak.reads.append(record)
    with open(os.path.join(soak.out, "reads.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
    if verdict != "ok" or soak.args.verbose:
        soak.log(f"read {job['id']} {job['kind']} n={n}: {verdict} {why}")

# --- sampling -----------------------------------------------------------
