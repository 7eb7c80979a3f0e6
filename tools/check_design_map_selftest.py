#!/usr/bin/python3
"""Shows that tools/check_design_map.py catches what it is for (ctest design_map_check_selftest).

1. This repository with a copy of docs/design.md from which one row is gone
   (`http_request.{h,cc}`) and to which a row naming no file is added: the
   check prints exactly the two missing files and the two stale names (with
   the line of the added row) beyond what it prints for the unchanged copy.
2. A small tree of its own (a temporary git repository): a file missing from
   its map, includes against the layering rule (and some within it or its
   documented exceptions), and every KNOWN_VIOLATIONS_TO_FIX entry reported
   as no longer occurring there.

Exits 0 when every expectation holds; otherwise prints what differed and exits 1.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHECK = os.path.join(HERE, "check_design_map.py")
sys.path.insert(0, HERE)
import check_design_map  # noqa: E402


def run_check(*args):
    proc = subprocess.run([sys.executable, CHECK, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return proc.returncode, set(proc.stdout.splitlines())


def expect(name, rc, got, want_rc, want):
    if rc == want_rc and got == want:
        print("ok: %s" % name)
        return True
    print("FAILED: %s (exit %d, wanted %d)" % (name, rc, want_rc))
    for line in sorted(want - got):
        print("  missing: " + line)
    for line in sorted(got - want):
        print("  unexpected: " + line)
    return False


def modified_map(tmp):
    with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    unchanged = os.path.join(tmp, "unchanged.md")
    with open(unchanged, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    removed = [i for i, l in enumerate(lines) if l.startswith("| | `http_request.{h,cc}` |")]
    anchor = [i for i, l in enumerate(lines) if l.startswith("| | `dispatcher_client.{h,cc}` |")]
    assert len(removed) == 1 and len(anchor) == 1, "the map's service rows moved: update this test"
    del lines[removed[0]]
    fake_at = anchor[0] + 1 if anchor[0] < removed[0] else anchor[0]
    lines.insert(fake_at, "| | `no_such_unit.{h,cc}` | a unit that does not exist |")
    modified = os.path.join(tmp, "modified.md")
    with open(modified, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    _, base = run_check("--design", unchanged)
    rc, got = run_check("--design", modified)
    # The unchanged copy's lines, as the modified copy names itself.
    base = {l.replace(unchanged, modified) for l in base if not l.startswith("design_map_check:")}
    line = fake_at + 1
    want = base | {
        "%s:%d: the map names service/no_such_unit.h, which does not exist" % (modified, line),
        "%s:%d: the map names service/no_such_unit.cc, which does not exist" % (modified, line),
        "service/http_request.h: not in %s's map" % modified,
        "service/http_request.cc: not in %s's map" % modified,
    }
    return expect("a row removed from the map and a stale row added", rc, got, 1, want)


TREE = {
    "docs/design.md": """# Design

## Where the code is

| folder | file | what it does |
| --- | --- | --- |
| `common/` | `a.h` | value types |
| `pipeline/` | `p.h` | the engine |
| | tests | one per unit |
| `worker/` | `b.h` | the worker |
| `client/read/` | `r.cc` | the reader |
| `tests/` | `testing/test_util.h` | helpers |

## Layering
""",
    "common/a.h": '#include "sluice/tensor.h"\n#include "worker/b.h"\n#include "sluice/proto/service.pb.h"\n'
                  '#include "absl/status/status.h"\n#include <vector>\n',
    "common/unmapped.cc": '#include "common/a.h"\n',
    "pipeline/p.h": '#include "client/dataset_internal.h"\n#include "common/a.h"\n'
                    '#include "sluice/dataset.pb.h"\n',
    "client/read/r.cc": '#include "service/s.h"\n#include "client/dataset_internal.h"\n',
    "pipeline/p_test.cc": '#include "client/dataset_internal.h"\n#include "sluice/dataset.h"\n'
                          '#include "tests/testing/test_util.h"\n',
    "worker/b.h": '#include "tests/testing/test_util.h"\n#include "pipeline/p.h"\n',
    "tests/testing/test_util.h": '#include "worker/b.h"\n',
}


def own_tree(tmp):
    root = os.path.join(tmp, "tree")
    for path, text in TREE.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as fh:
            fh.write(text)
    subprocess.run(["git", "init", "-q", root], check=True)
    rc, got = run_check("--root", root)
    want = {
        "common/unmapped.cc: not in docs/design.md's map",
        "common/a.h:2: includes worker/b.h (layer common may not include layer worker)",
        "pipeline/p.h:1: includes client/dataset_internal.h (layer pipeline may not include layer client)",
        "worker/b.h:1: includes tests/testing/test_util.h (layer worker may not include layer tests)",
        "pipeline/p.h:3: includes sluice/dataset.pb.h: generated headers are sluice/proto/NAME.pb.h, "
        "apart from the public sluice/NAME.h",
        "client/read/r.cc:2: includes client/dataset_internal.h (layer client/read may not include "
        "layer client)",
    }
    for f, inc, _ in check_design_map.KNOWN_VIOLATIONS_TO_FIX:
        want.add("tools/check_design_map.py: KNOWN_VIOLATIONS_TO_FIX lists %s including %s, "
                 "which no longer occurs: remove the entry" % (f, inc))
    return expect("a tree of its own: an unmapped file, five bad includes, and the known "
                  "violations that do not occur there", rc, got, 1, want)


def main():
    with tempfile.TemporaryDirectory(prefix="design_map_selftest.") as tmp:
        results = [modified_map(tmp), own_tree(tmp)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
