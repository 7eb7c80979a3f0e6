#include "dispatcher/status_page.h"

namespace sluice::dispatcher {
namespace {

// Kept as one raw literal so that the page can be read (and edited) as
// ordinary HTML. The data shape it expects is the one /status.json serves;
// see the header for the hooks the headless-browser test relies on.
constexpr std::string_view kStatusPageHtml = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice dispatcher</title>
<style>
  :root { --fg: #1d2330; --muted: #6b7280; --line: #e3e6eb; --bad: #b42318; --ok: #067647; --accent: #2f6fde; }
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
         margin: 0; background: #f6f7f9; }
  header { background: #1d2330; color: #fff; padding: 12px 24px; display: flex; gap: 24px; align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  header span { color: #c7ccd6; }
  #updated { margin-left: auto; }
  main { padding: 8px 24px 24px; max-width: 1200px; }
  h2 { font-size: 15px; margin: 20px 0 8px; }
  table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
  th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th { background: #eef0f3; font-weight: 600; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  .mono { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
  .muted { color: var(--muted); }
  .alive { color: var(--ok); font-weight: 600; }
  .lost { color: var(--bad); font-weight: 600; }
  .job { background: #fff; border: 1px solid var(--line); padding: 8px 12px; margin-bottom: 10px; }
  .job h3 { font-size: 14px; margin: 0 0 6px; }
  .job table { border: none; }
  .progress { display: flex; gap: 10px; align-items: center; }
  .progress progress { width: 220px; height: 14px; accent-color: var(--accent); }
  .progress progress:indeterminate { opacity: 0.4; }  /* no total: not a fraction */
  #banner { display: none; background: #fee4e2; color: var(--bad); border: 1px solid #fda29b;
            padding: 8px 12px; margin-top: 12px; }
  #banner.shown { display: block; }
  #errors { background: #fff; border: 1px solid var(--line); margin: 0; padding: 6px 12px 6px 30px; }
  #errors li { padding: 2px 0; }
</style>
</head>
<body>
<header>
  <h1>Sluice dispatcher</h1>
  <span id="version">&hellip;</span>
  <span>up <span id="uptime">&hellip;</span></span>
  <span id="updated">not yet updated</span>
</header>
<main>
  <div id="banner" role="alert"></div>
  <p id="scaling" class="muted"></p>
  <h2>Workers</h2>
  <table>
    <thead><tr><th>Address</th><th>Tags</th><th>State</th><th>Last heartbeat</th>
      <th class="num">Tasks</th><th class="num">Elements/s</th><th class="num">MB/s</th></tr></thead>
    <tbody id="workers"></tbody>
  </table>
  <h2>Jobs</h2>
  <div id="jobs"></div>
  <h2>Datasets</h2>
  <table>
    <thead><tr><th>Dataset</th><th>Fingerprint</th></tr></thead>
    <tbody id="datasets"></tbody>
  </table>
  <h2>Recent errors</h2>
  <ul id="errors"></ul>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let lastOk = null;

// Builds an element. Children that are not Nodes become text nodes, so
// data from the JSON is never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, String(v));
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}
const num = (x, digits) => Number(x).toLocaleString("en-US",
    {minimumFractionDigits: digits, maximumFractionDigits: digits});
const clock = (ms) => new Date(ms).toLocaleTimeString();
const when = (ms) => new Date(ms).toLocaleString();
function duration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  return m ? `${m} min ${s % 60} s` : `${s % 60} s`;
}
function emptyRow(cols, text) {
  return el("tr", {}, el("td", {colspan: cols, class: "muted"}, text));
}

function progress(it) {
  const done = it.splits_done, total = it.splits_total;
  const bar = el("progress");
  let text;
  if (it.finished) {
    bar.max = 1; bar.value = 1; text = "finished";
  } else if (total < 0) {
    text = `${done} splits, total unknown`;  // no value: an indeterminate bar
  } else {
    bar.max = Math.max(total, 1); bar.value = done; text = `${done} / ${total} splits`;
  }
  // A shared exactly_once read after a lost worker.
  if (it.held_splits) text += `, ${it.held_splits} held for ${it.awaiting_reports} report${it.awaiting_reports === 1 ? "" : "s"}`;
  return el("div", {class: "progress"}, bar, el("span", {}, text));
}

function renderWorkers(workers) {
  $("workers").replaceChildren(...workers.map((w) => el("tr", {"data-worker": w.address},
      el("td", {class: "mono"}, w.address),
      el("td", {}, (w.tags || []).join(", ")),
      el("td", {class: w.state === "alive" ? "alive" : w.state === "draining" ? "muted" : "lost"}, w.state),
      el("td", {}, `${num(w.last_heartbeat_ms_ago / 1000, 1)} s ago`),
      el("td", {class: "num"}, w.tasks),
      // A tenant's view has no throughput: the workers serve every tenant.
      el("td", {class: "num"}, w.elements_per_second === undefined ? "\u2013" : num(w.elements_per_second, 1)),
      el("td", {class: "num"}, w.bytes_per_second === undefined ? "\u2013" : num(w.bytes_per_second / 1e6, 2)))));
  if (!workers.length) $("workers").append(emptyRow(7, "No workers registered"));
}

function renderJobs(jobs, iterations) {
  $("jobs").replaceChildren(...jobs.map((j) => {
    const rows = iterations.filter((it) => it.job_id === j.job_id).map((it) =>
        el("tr", {"data-iteration-id": it.iteration_id},
           el("td", {}, `iteration ${it.iteration_id}`),
           el("td", {}, `repetition ${it.repetition}`),
           el("td", {}, `${it.clients} client${it.clients === 1 ? "" : "s"}`),
           el("td", {}, progress(it))));
    if (!rows.length) rows.push(emptyRow(4, "No iterations"));
    return el("section", {class: "job", "data-job-id": j.job_id},
        el("h3", {}, `Job ${j.job_id}`, j.name ? ` \u00b7 ${j.name}` : ""),
        el("div", {class: "muted"}, `dataset ${j.dataset_id} \u00b7 ${j.processing_mode}`,
           ` \u00b7 ${j.num_consumers ? j.num_consumers + " consumers" : "no fixed consumers"}`),
        el("table", {}, el("tbody", {}, ...rows)));
  }));
  if (!jobs.length) $("jobs").append(el("p", {class: "muted"}, "No jobs"));
}

// The autoscaling advice: the cluster's line, or (a tenant's view) one
// line per job of its own.
function renderScaling(sc) {
  const pct = (x) => `${num(x * 100, 0)}%`;
  const workers = (n) => `${n} worker${n === 1 ? "" : "s"}`;
  const lines = sc.advice !== undefined
      ? (sc.advice ? [`Scaling: ${sc.advice} (recommended: ${workers(sc.recommended_workers)}; ` +
                      `serving: ${sc.workers})`] : [])
      : (sc.jobs || []).map((j) => `Job ${j.job_id}: trainers wait ${pct(j.wait_fraction)}; ` +
                                   `recommended: ${workers(j.recommended_workers)} (serving: ${j.workers})`);
  $("scaling").replaceChildren(...lines.flatMap((l, i) => i ? [el("br"), l] : [l]));
}

function renderDatasets(datasets) {
  $("datasets").replaceChildren(...datasets.map((d) => el("tr", {"data-dataset-id": d.dataset_id},
      el("td", {}, d.dataset_id), el("td", {class: "mono"}, d.fingerprint))));
  if (!datasets.length) $("datasets").append(emptyRow(2, "No datasets"));
}

function renderErrors(errors) {
  $("errors").replaceChildren(...errors.map((e) =>
      el("li", {}, el("span", {class: "muted"}, when(e.time_ms) + "  "), e.message)));
  if (!errors.length) $("errors").append(el("li", {class: "muted"}, "None"));
}

function render(s) {
  $("version").textContent = s.version;
  $("uptime").textContent = duration(s.uptime_seconds);
  renderWorkers(s.workers || []);
  renderJobs(s.jobs || [], s.iterations || []);
  renderScaling(s.scaling || {});
  renderDatasets(s.datasets || []);
  renderErrors(s.recent_errors || []);
}

async function refresh() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    const r = await fetch("status.json", {cache: "no-store", signal: abort.signal});
    if (!r.ok) throw new Error(`HTTP ${r.status} ${r.statusText}`);
    render(await r.json());
    lastOk = Date.now();
    $("updated").textContent = `updated ${clock(lastOk)}`;
    $("banner").classList.remove("shown");
  } catch (err) {
    const kept = lastOk ? `showing data from ${clock(lastOk)}` : "no data yet";
    $("banner").textContent = `Could not fetch status.json (${err.message || err}); ${kept}.`;
    $("banner").classList.add("shown");
  } finally {
    clearTimeout(timer);
    setTimeout(refresh, 2000);  // after the fetch ends, so slow fetches never pile up
  }
}
refresh();
</script>
</body>
</html>
)html";

}  // namespace

std::string_view StatusPageHtml() { return kStatusPageHtml; }

}  // namespace sluice::dispatcher
