#!/usr/bin/python3
"""Checks the dispatcher's status page in headless Chromium.

Loads URL (the page at `/`, which fetches `status.json` itself) twice: once
with --dump-dom to read the DOM after the page's script has rendered the
data, and once with --screenshot. Checks that each expected worker has a
`data-worker` row, that the expected job and its iterations are there, that
each iteration's `.progress` element says how far it got, and that the
screenshot is a real PNG of some size.

    check_status_page.py http://127.0.0.1:8080/ --expect-worker 127.0.0.1:40001 \
        --expect-job 1 --expect-iteration 1 --screenshot /tmp/status.png

Exit status: 0 on success, 1 on a failed check (the message names what is
missing and shows the start of the DOM), 77 if chromium is not installed
(the CTest/automake code for "skipped"). Standard library only.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser

SKIPPED = 77
PROGRESS_RE = re.compile(r"\d+ / \d+ splits|finished|total unknown")
PAGE_IDS = ("workers", "jobs", "datasets", "errors", "updated")
# Enough virtual time for the first status.json fetch and a couple of
# 2-second refreshes; virtual time stands still while a fetch is in flight.
VIRTUAL_TIME_BUDGET_MS = 5000


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children = []  # Nodes and strings, in document order

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()

    def find(self, pred):
        return next((n for n in self.walk() if pred(n)), None)

    def classes(self):
        return (self.attrs.get("class") or "").split()


class TreeBuilder(HTMLParser):
    """A minimal DOM: enough for Chromium's serialization, which is well formed."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def run_chromium(chromium, extra_args, url, timeout):
    """Runs one headless Chromium in its own process group, killed on expiry.

    Returns (returncode, stdout, stderr). Raises TimeoutError.
    """
    with tempfile.TemporaryDirectory(prefix="sluice-chromium-", ignore_cleanup_errors=True) as profile:
        args = [
            chromium,
            "--headless=new",
            "--no-sandbox",  # we run as root, where the sandbox refuses to start
            "--disable-gpu",
            "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--mute-audio",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
            *extra_args,
            url,
        ]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Chromium forks a zygote, renderers and a GPU process: kill them all.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TimeoutError(f"chromium did not finish within {timeout} s: {' '.join(args)}")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers that outlive the browser
            except ProcessLookupError:
                pass
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def check_dom(dom, workers, job_id, iteration_ids):
    """Returns a list of problems with the rendered page; empty when it is fine."""
    builder = TreeBuilder()
    builder.feed(dom)
    builder.close()
    root = builder.root
    problems = []

    banner = root.find(lambda n: n.attrs.get("id") == "banner")
    if banner is not None and "shown" in banner.classes():
        problems.append(f"the page shows an error banner: {banner.text().strip()!r}")
    for page_id in PAGE_IDS:
        if root.find(lambda n: n.attrs.get("id") == page_id) is None:
            problems.append(f'no element with id="{page_id}"')
    for address in workers:
        if root.find(lambda n: n.tag == "tr" and n.attrs.get("data-worker") == address) is None:
            problems.append(f'no worker row <tr data-worker="{address}">')

    job = root.find(lambda n: n.attrs.get("data-job-id") == job_id)
    if job is None:
        problems.append(f'no job element with data-job-id="{job_id}"')
        return problems
    for iteration_id in iteration_ids:
        it = job.find(lambda n: n.attrs.get("data-iteration-id") == iteration_id)
        if it is None:
            where = "on the page" if root.find(lambda n: n.attrs.get("data-iteration-id") == iteration_id) else ""
            problems.append(f'no iteration data-iteration-id="{iteration_id}" inside job {job_id}'
                            + (f" (it is {where}, under another job)" if where else ""))
            continue
        progress = it.find(lambda n: "progress" in n.classes())
        if progress is None:
            problems.append(f'iteration {iteration_id} has no element with class "progress"')
            continue
        text = " ".join(progress.text().split())
        if not PROGRESS_RE.search(text):
            problems.append(f"iteration {iteration_id}'s progress text {text!r} does not match "
                            f"/{PROGRESS_RE.pattern}/")
        elif progress.find(lambda n: n.tag == "progress") is None:
            problems.append(f"iteration {iteration_id}'s .progress element holds no <progress> bar")
    return problems


def fail(message, dom=None):
    print(f"check_status_page: FAIL: {message}", file=sys.stderr)
    if dom is not None:
        # From <body> on: the head is mostly CSS, which says nothing about what rendered.
        body = dom.find("<body")
        print(f"--- first 2000 characters of the DOM from <body> ---\n{dom[max(body, 0):][:2000]}",
              file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the status page, e.g. http://127.0.0.1:8080/")
    parser.add_argument("--expect-worker", action="append", default=[], metavar="ADDR",
                        help="a worker address that must have a row (repeatable)")
    parser.add_argument("--expect-job", required=True, metavar="ID", help="a job id that must be listed")
    parser.add_argument("--expect-iteration", action="append", default=[], metavar="ID",
                        help="an iteration id that must be listed under the job, with its progress (repeatable)")
    parser.add_argument("--screenshot", required=True, metavar="OUT.png", help="where to write a screenshot")
    parser.add_argument("--timeout", type=float, default=60, help="seconds allowed for each chromium run")
    parser.add_argument("--chromium", default=None, help="the browser binary (default: chromium on PATH)")
    args = parser.parse_args()

    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not shutil.which(chromium):
        print("check_status_page: SKIP: chromium not installed", file=sys.stderr)
        return SKIPPED

    start = time.monotonic()
    try:
        rc, dom, err = run_chromium(chromium, ["--dump-dom"], args.url, args.timeout)
    except TimeoutError as e:
        return fail(str(e))
    if rc != 0 or not dom.strip():
        return fail(f"chromium --dump-dom exited with {rc} and {len(dom)} bytes of DOM; stderr:\n{err[-2000:]}")
    problems = check_dom(dom, args.expect_worker, args.expect_job, args.expect_iteration)
    if problems:
        return fail("; ".join(problems), dom)
    dom_seconds = time.monotonic() - start

    screenshot = os.path.abspath(args.screenshot)
    if os.path.exists(screenshot):
        os.remove(screenshot)  # so a stale file cannot pass the check
    try:
        rc, _, err = run_chromium(chromium, [f"--screenshot={screenshot}", "--window-size=1280,900"], args.url,
                                  args.timeout)
    except TimeoutError as e:
        return fail(str(e))
    if not os.path.exists(screenshot):
        return fail(f"chromium --screenshot exited with {rc} and wrote no {screenshot}; stderr:\n{err[-2000:]}")
    size = os.path.getsize(screenshot)
    with open(screenshot, "rb") as f:
        signature = f.read(8)
    if signature != b"\x89PNG\r\n\x1a\n" or size <= 5 * 1024:
        return fail(f"{screenshot} is not a plausible screenshot ({size} bytes, signature {signature!r})")

    print(f"check_status_page: OK: {len(args.expect_worker)} worker(s), job {args.expect_job}, "
          f"{len(args.expect_iteration)} iteration(s) rendered; DOM check {dom_seconds:.1f} s, "
          f"total {time.monotonic() - start:.1f} s; screenshot {screenshot} ({size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
