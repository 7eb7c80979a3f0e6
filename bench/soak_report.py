"""The soak's report (bench/soak.py): the table of every daemon's series after
the warm-up, the verdicts, and the plot (matplotlib)."""

import collections
import json
import os
import statistics


def series_table(soak):
    """One row per (role, metric): the judged values after the warm-up."""
    a = soak.args
    warm = a.warmup_minutes * 60
    rows = []
    for role in sorted(soak.samples, key=lambda r: (not r.startswith("dispatcher"), r.startswith("reader"), r)):
        points = soak.samples[role]
        for index, metric in ((1, "rss_mib"), (2, "fds"), (3, "threads")):
            # Samples after the warm-up, from a process that has itself
            # run past the settle time (a restarted daemon starts small).
            # Samples after the warm-up and before the time was up (the
            # last reads drain with no new jobs), from a process that has
            # itself run past the settle time (a restarted daemon starts
            # small).
            judged = [(p[0], p[index]) for p in points
                      if warm <= p[0] <= soak.judged_until and p[4] >= a.settle]
            if not judged:
                rows.append({"role": role, "metric": metric, "verdict": "n/a"})
                continue
            values = [v for _, v in judged]
            # Start and end: medians of the first and last sixth of the
            # judged samples (at least 3), so that a sample that fell on
            # a busy moment (a worker's threads follow its tasks) does
            # not decide alone.
            window = max(3, len(values) // 6)
            start = statistics.median(values[:window])
            end = statistics.median(values[-window:])
            low, high = min(values), max(values)
            change = 100.0 * (end - start) / start if start else 0.0
            growth = 100.0 * (high - start) / start if start else 0.0
            # Flat: the end within the tolerance of the start, either
            # way (counts of threads and fds get one unit more: 10% of 9
            # threads is 0.9).
            slack = start * a.tolerance / 100.0 + (0 if metric == "rss_mib" else 1)
            verdict = "PASS" if abs(end - start) <= slack else "FAIL"
            if not role.startswith(("dispatcher", "worker")):
                # Readers: judged apart, and on RSS only: a reader's
                # threads and fds are its read's (1 thread between reads,
                # about 12 in one), so they follow when the sample fell.
                verdict = verdict.lower() if metric == "rss_mib" else "info"
            rows.append({"role": role, "metric": metric, "start": start, "end": end, "min": low, "max": high,
                         "change": change, "growth": growth, "verdict": verdict, "samples": len(judged)})
    return rows

def report(soak, interrupted):
    a = soak.args
    rows = series_table(soak)
    with open(os.path.join(soak.out, "samples.json"), "w") as f:
        json.dump({"t0": soak.t0, "samples": soak.samples, "journal": soak.journal,
                   "events": [(t - soak.t0, k, r, d) for t, k, r, d in soak.events]}, f)
    lines = []
    lines.append(f"Soak: {a.minutes} min, warm-up {a.warmup_minutes} min, {a.workers} workers, {a.readers} readers, "
                 f"worker kill every {a.worker_kill_every:.0f} s, dispatcher kill every "
                 f"{a.dispatcher_kill_every:.0f} s; out {soak.out}")
    lines.append("")
    lines.append("warm, end: medians of the first and last sixth of the samples after the warm-up; min, max: "
                 "of all of them; change: end against warm; max-rise: max against warm")
    lines.append(f"{'series':<22} {'warm':>9} {'end':>9} {'min':>9} {'max':>9} {'change':>8} {'max-rise':>8}  flat")
    for r in rows:
        name = f"{r['role']}.{r['metric']}"
        if r["verdict"] == "n/a":
            lines.append(f"{name:<22} {'(no samples after the warm-up)':>55}")
            continue
        fmt = (lambda v: f"{v:9.1f}") if r["metric"] == "rss_mib" else (lambda v: f"{v:9.0f}")
        lines.append(f"{name:<22} {fmt(r['start'])} {fmt(r['end'])} {fmt(r['min'])} {fmt(r['max'])} "
                     f"{r['change']:+7.1f}% {r['growth']:+7.1f}%  {r['verdict']}")
    if soak.journal:
        sizes = [b for t, b in soak.journal if t >= a.warmup_minutes * 60] or [soak.journal[-1][1]]
        lines.append(f"{'dispatcher work dir':<22} {sizes[0] / 1024:8.0f}K {sizes[-1] / 1024:8.0f}K "
                     f"{min(sizes) / 1024:8.0f}K {max(sizes) / 1024:8.0f}K  (journal and snapshots; not judged)")
    lines.append("")
    by = collections.Counter(r["verdict"] for r in soak.reads)
    kinds = collections.Counter((r["kind"], r["verdict"]) for r in soak.reads)
    lines.append(f"reads checked: {len(soak.reads)}: " + ", ".join(f"{v} {c}" for v, c in sorted(by.items())))
    for (kind, verdict), count in sorted(kinds.items()):
        lines.append(f"  {kind:<10} {verdict:<17} {count}")
    repeats = sum(r.get("repeats", 0) for r in soak.reads)
    late = sum(1 for r in soak.reads if r.get("late_consumer"))
    epochs = collections.Counter(r.get("epochs") for r in soak.reads if r.get("epochs"))
    lines.append(f"  at-least-once repeats after kills: {repeats} values; shared jobs whose second consumer "
                 f"came late: {late}; parallel_epochs epochs per read: {dict(sorted(epochs.items()))}")
    kills = collections.Counter(k for _, k, _, _ in soak.events)
    lines.append(f"kills: {kills.get('kill-worker', 0)} workers, {kills.get('kill-dispatcher', 0)} dispatcher; "
                 f"daemons that died by themselves: {kills.get('died', 0)}")
    failed = [r for r in soak.reads if r["verdict"] == "FAIL"]
    for r in failed[:20]:
        lines.append(f"  FAILED read {r['id']} ({r['kind']}, {r['start']:.0f}-{r['end']:.0f} s): {r['why']}")
    lines.append("")
    daemon_rows = [r for r in rows if r["verdict"] in ("PASS", "FAIL")]
    flat = bool(daemon_rows) and all(r["verdict"] == "PASS" for r in daemon_rows)
    readers_flat = all(r["verdict"] == "pass" for r in rows if r["verdict"] in ("pass", "fail"))
    reader_rise = ", ".join(f"{r['role']} {r['change']:+.1f}%" for r in rows if r["verdict"] == "fail")
    exact = not failed and len(soak.reads) > 0
    if interrupted:
        lines.append("INTERRUPTED: the figures are of a partial run")
    lines.append(f"{'PASS' if flat else 'FAIL'}: every daemon series flat within {a.tolerance:.0f}% after the "
                 f"{a.warmup_minutes} min warm-up" + ("" if flat else ": " + ", ".join(
                     f"{r['role']}.{r['metric']} {r['change']:+.1f}%" for r in daemon_rows
                     if r["verdict"] == "FAIL")))
    lines.append(f"{'PASS' if readers_flat else 'WARN'}: every reader's RSS (the client SDK) flat within "
                 f"{a.tolerance:.0f}% (shown, not judged)" + (f": {reader_rise}" if reader_rise else ""))
    lines.append(f"{'PASS' if exact else 'FAIL'}: every read exact ({len(soak.reads)} reads, {len(failed)} failed, "
                 f"{by.get('expected-failure', 0)} expected failures"
                 + (f", {by.get('dup-shared', 0)} shared-job repeats under a kill counted apart)"
                    if a.allow_shared_repeats else ")"))
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    with open(os.path.join(soak.out, "report.txt"), "w") as f:
        f.write(text + "\n")
    plot(soak)
    if failed:
        return 1
    if not flat:
        return 3
    return 0 if not interrupted else 130

def plot(soak):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("soak: no plot: matplotlib is missing (deploy/install_deps.sh --bench installs "
              "python3-matplotlib)", flush=True)
        return
    a = soak.args
    fig, axes = plt.subplots(3, 2, figsize=(16, 11), sharex=True)
    for column, group in enumerate(("daemons", "readers")):
        for row, (index, label) in enumerate(((1, "RSS (MiB)"), (2, "open fds"), (3, "threads"))):
            ax = axes[row][column]
            for role in sorted(soak.samples):
                is_reader = role.startswith("reader")
                if is_reader != (group == "readers"):
                    continue
                points = soak.samples[role]
                # A gap where the role had no process (killed, not yet
                # restarted): a new line segment per process.
                xs, ys = [], []
                last_age = None
                for p in points:
                    if last_age is not None and p[4] < last_age:
                        xs.append(float("nan"))
                        ys.append(float("nan"))
                    xs.append(p[0] / 60)
                    ys.append(p[index])
                    last_age = p[4]
                ax.plot(xs, ys, label=role, linewidth=1.2)
            ax.axvspan(0, a.warmup_minutes, color="0.9", zorder=0)
            for t, kind, role, _ in soak.events:
                if kind == "kill-worker":
                    ax.axvline((t - soak.t0) / 60, color="0.35", linewidth=0.8, linestyle=":")
                elif kind == "kill-dispatcher":
                    ax.axvline((t - soak.t0) / 60, color="red", linewidth=0.8, linestyle="--")
            ax.set_ylabel(label)
            ax.grid(True, alpha=0.3)
            if row == 0:
                ax.set_title(f"{group} (grey: warm-up; dotted: worker kill; red dashed: dispatcher kill)",
                             fontsize=9)
                ax.legend(fontsize=7, ncol=4, loc="upper left")
            if row == 2:
                ax.set_xlabel("minutes")
    fig.suptitle(f"Sluice soak: {a.minutes} min, {a.workers} workers, {a.readers} readers")
    fig.tight_layout()
    path = os.path.join(soak.out, "soak.png")
    fig.savefig(path, dpi=90)
    print(f"plot: {path}", flush=True)
