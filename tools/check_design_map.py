#!/usr/bin/python3
"""Checks docs/design.md's map against the tree, and the includes against the layering rule.

Run as the ctest `design_map_check`; it needs no build:

    /usr/bin/python3 tools/check_design_map.py [--root DIR] [--design FILE]

It prints one line per problem and exits 1, or prints a one-line summary and
exits 0. Standard library only.

The map's convention
--------------------
The map is every table in the section "## Where the code is" of design.md.
Each row is `| folder | files | what they do |`:

- Folder (first cell): a backticked path ending in `/`, such as `client/`
  or `proto/sluice/`. An empty first cell carries the folder of the row above.
- Files (second cell), relative to the folder, each in backticks and
  separated by commas:
    `name.h`, `sub/name.cc`   one file;
    `name.{h,cc}`             name.h and name.cc (any brace list expands);
    `*.proto`                 a glob: the matching files in the folder;
    `sub/`                    a subfolder: the backticked file names in the
                              third cell are its files (`functions/`,
                              `image/`); when the third cell names none, the
                              whole subfolder is mapped (`pipelines/`), as
                              it is when the cell names other entries too;
    tests (a bare word)       the folder's tests: every test file below the
                              folder (see below) is mapped; backticked file
                              names in the third cell are test helpers in
                              the folder (`drain_test.cc`);
    (empty)                   the first cell's folders are described as a
                              whole (`cmake/`, `deploy/`): nothing below
                              them is checked file by file; not allowed
                              for a folder of MAPPED_ROOTS.
- Test files are `*_test.cc`, `*_test.sh`, `test_*.py` and `conftest.py`.
  They need no row of their own ("Each unit is a `name.h` / `name.cc` pair
  with its test beside it as `name_test.cc`"): a `tests` row or a
  subfolder row at their folder or above maps them. Test helpers (headers a
  test includes, such as `tests/integration/read_helpers.h`) are named.

Which files must be mapped: the files git knows (tracked, or new and not
ignored) under MAPPED_ROOTS whose extension is in MAPPED_EXTENSIONS. Build
files (CMakeLists.txt, cmake/), deploy/ (deploy/check_deploy.sh checks it),
docs and the top-level files are not. A name the map gives must exist,
whatever its extension; the problem line gives its line in design.md.

The layering rule
-----------------
MAY_INCLUDE encodes the "## Layering" section of design.md; the lines it
comes from are quoted above it. Every `#include "..."` of a C++ file in a
layer is checked. Skipped: `<...>` includes, generated headers (`*.pb.h`,
from proto/ or bench/), and third-party headers (a first path component
that is not a first-party folder: absl/, google/, grpcpp/, hwy/, CLI/).
`sluice/x.h` is the public SDK header client/include/sluice/x.h.

Allowed beyond MAY_INCLUDE: DOCUMENTED_EXCEPTIONS, the exceptions design.md
states, each with its reason. KNOWN_VIOLATIONS_TO_FIX is a separate list:
includes that break the rule today and are to be fixed in the sources. An
include in neither list fails the check, and so does an entry of
KNOWN_VIOLATIONS_TO_FIX that no longer occurs, so that list only shrinks.
"""

import argparse
import fnmatch
import os
import re
import subprocess
import sys

# --- What must be mapped -----------------------------------------------------

# First-party source folders: every file in them with an extension below
# must be in the map.
MAPPED_ROOTS = (
    "bench", "cli", "client", "common", "config", "dispatcher", "pipeline",
    "proto", "python", "service", "tests", "tools", "worker",
)
MAPPED_EXTENSIONS = (".h", ".cc", ".cu", ".proto", ".py", ".pyi", ".sh")

# The section of design.md that holds the map: from this heading to the next
# "## " heading.
MAP_HEADING = "## Where the code is"


def is_test_file(path):
    name = os.path.basename(path)
    return (name.endswith("_test.cc") or name.endswith("_test.sh")
            or (name.startswith("test_") and name.endswith(".py"))
            or name == "conftest.py")


# --- The layering rule ---------------------------------------------------------
#
# design.md, "## Layering":
#   "A request travels client → service → worker or dispatcher → pipeline →
#    common. In the includes, `service/` is the wire that both ends of a call
#    share, so the order is: the four top folders, then `service/`, then
#    `config/`, `pipeline/` and `common/`. Nothing points back up:"
#   "- `client/`, `worker/`, `dispatcher/` and `cli/` are the top. None
#      includes another's files; the CLI uses the SDK's public headers, plus
#      `pipeline/` for YAML and local runs, `service/` for `sluice status` and
#      `common/json.h` for its output."
#   "- `service/` is the wire between them, so both ends of every call use
#      it. It includes `pipeline/` (sharding rules), `config/` (the daemon
#      runner) and `common/`, never a folder above it."
#   "- `config/` uses `pipeline/` (repeated YAML keys) and `common/`."
#   "- `pipeline/` uses `common/`; `common/` uses only the protos and the
#      value-type headers below."
#   "Only `client/include/sluice/` is installed."  (So a public header
#      includes only public headers.)
# design.md's map, python/ row:
#   "the `_sluice` extension module (pybind11, over the public SDK only)"
#
#   "Inside `client/`, the service reader `client/read/` and device prefetch
#    `client/device/` are layers of their own below the SDK's code: the
#    GetElements path runs `client/read` → `service` → `worker`, one way.
#    Neither includes `client/`'s own files."
#
# Layers are the top folders, except that client/include/sluice/ (the public
# SDK headers) is the layer "sdk", and client/read/ and client/device/ are
# the layers "client/read" and "client/device". Every layer may include
# itself; "client" includes its own public headers. The CLI may include common/ as a whole:
# the bullet names `common/json.h`, and the map names `common/atomic_file`
# "for `sluice run --save-state`".
_BELOW_THE_TOP = {"service", "config", "pipeline", "common"}
MAY_INCLUDE = {
    "client": _BELOW_THE_TOP | {"sdk", "client/read", "client/device"},
    "client/read": _BELOW_THE_TOP | {"sdk"},
    "client/device": {"sdk", "common"},
    "worker": _BELOW_THE_TOP,
    "dispatcher": _BELOW_THE_TOP,
    "cli": {"sdk", "service", "pipeline", "common"},
    "python": {"sdk"},
    "service": {"pipeline", "config", "common"},
    "config": {"pipeline", "common"},
    "pipeline": {"common"},
    "common": set(),
    "sdk": set(),
}

# Folders outside the layers: test and benchmark harnesses, which may include
# any layer (design.md's rule is about the request's path; their own files
# are not included by any layer, which the check does enforce).
UNLAYERED = {"tests", "bench", "tools"}

# The exceptions design.md states: (from, to, tests_only, reason). `from` and
# `to` are fnmatch patterns over repository paths ("*" crosses "/");
# tests_only limits `from` to test files and test helpers (is_test_source).
DOCUMENTED_EXCEPTIONS = [
    ("*", "client/include/sluice/tensor.h", False,
     'design.md Layering: "The one exception everyone includes: the public value-type headers '
     'in `client/include/sluice/` (`tensor.h`, `element.h`, `dtype.h`, `half.h`)"'),
    ("*", "client/include/sluice/element.h", False, "the same value-type exception"),
    ("*", "client/include/sluice/dtype.h", False, "the same value-type exception"),
    ("*", "client/include/sluice/half.h", False, "the same value-type exception"),
    ("*", "client/include/sluice/cardinality.h", False, "the same value-type exception"),
    ("pipeline/*", "client/dataset_internal.h", True,
     'design.md Layering: "Tests may reach up: pipeline and dispatcher tests build definitions '
     "with the SDK's `Dataset` (`client/dataset_internal.h`)\""),
    ("pipeline/*", "client/include/sluice/*", True, "the same: the SDK's `Dataset` is public"),
    ("client/read/*", "client/dataset_internal.h", True, "the same tests-may-reach-up exception"),
    ("dispatcher/*", "client/dataset_internal.h", True, "the same tests-may-reach-up exception"),
    ("dispatcher/*", "client/include/sluice/*", True, "the same: the SDK's `Dataset` is public"),
    ("worker/*", "client/dataset_internal.h", True, "the same tests-may-reach-up exception"),
    ("worker/*", "client/include/sluice/*", True, "the same: the SDK's `Dataset` is public"),
    ("*", "tests/testing/*", True,
     'design.md map, tests/ row: `testing/` holds "the test binaries\' ... shared helpers"'),
]

# Includes that break the rule today, to be fixed in the sources (not here):
# (file, included path as written, note). Remove an entry once it is fixed;
# the check fails while a listed include no longer occurs.
KNOWN_VIOLATIONS_TO_FIX = [
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
CPP_EXTENSIONS = (".h", ".cc", ".cu")


def is_test_source(path):
    """Test files and the helpers only tests include."""
    name = os.path.basename(path)
    return (is_test_file(path) or path.startswith("tests/")
            or re.search(r"(^|_)test_(util|helpers|images)\.(h|cc)$", name) is not None)


def layer_of(path):
    if path.startswith("client/include/sluice/"):
        return "sdk"
    for sub in ("client/read/", "client/device/"):
        if path.startswith(sub):
            return sub.rstrip("/")
    return path.split("/", 1)[0]


# --- Listing the tree -----------------------------------------------------------


def list_files(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, stdout=subprocess.PIPE).stdout.decode()
    files = sorted({p for p in out.split("\0") if p and os.path.isfile(os.path.join(root, p))})
    return files


# --- Parsing the map --------------------------------------------------------------

FILE_TOKEN_RE = re.compile(
    r"^[\w.\-/*]*[\w*]\.(\{[\w,]+\}|h|cc|cu|proto|py|pyi|sh|txt|md|yaml|typed|cmake|in|toml)$")


def expand_braces(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(token[:m.start()] + alt + token[m.end():]))
    return out


def split_cells(line):
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


class MapEntry:
    def __init__(self, line, pattern, kind):
        self.line = line          # design.md line number
        self.pattern = pattern    # repository path or glob; folders end in "/"
        self.kind = kind          # "file", "glob", "folder" (whole), "tests"


def parse_map(design_text):
    """Returns (entries, problems); problems are (line, message)."""
    lines = design_text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if line.strip() == MAP_HEADING:
            start = i + 1
            break
    if start is None:
        return [], [(0, "no section %r" % MAP_HEADING)]
    entries, problems = [], []
    folders = None
    for i in range(start, len(lines)):
        line = lines[i]
        lineno = i + 1
        if line.startswith("## "):
            break
        if not line.lstrip().startswith("|"):
            continue
        cells = split_cells(line)
        if all(re.fullmatch(r":?-+:?", c) for c in cells) or cells[0] == "folder":
            continue  # the separator and the header
        if len(cells) != 3:
            problems.append((lineno, "a map row needs 3 cells, this has %d" % len(cells)))
            continue
        folder_cell, files_cell, what_cell = cells
        if folder_cell:
            folders = re.findall(r"`([^`]+)`", folder_cell)
            if not folders or any(not f.endswith("/") for f in folders) or \
                    re.sub(r"`[^`]+`|[,\s]", "", folder_cell):
                problems.append((lineno, "the first cell must be backticked folders ending in /"))
                folders = None
                continue
        if folders is None:
            problems.append((lineno, "no folder for this row"))
            continue
        tokens = re.findall(r"`([^`]+)`", files_cell)
        bare = re.sub(r"`[^`]+`|,", " ", files_cell).split()
        if not files_cell:
            for f in folders:
                entries.append(MapEntry(lineno, f, "folder"))
            continue
        if len(folders) != 1:
            problems.append((lineno, "a row that names files must have one folder"))
            continue
        folder = folders[0]
        if bare == ["tests"] and not tokens:
            entries.append(MapEntry(lineno, folder, "tests"))
            for t in re.findall(r"`([^`]+)`", what_cell):
                if FILE_TOKEN_RE.match(t) and "*" not in t:  # `*_test.cc` describes the row
                    for name in expand_braces(t):
                        entries.append(MapEntry(lineno, folder + name, "file"))
            continue
        if bare:
            problems.append((lineno, "unexpected text in the file cell: %s" % " ".join(bare)))
            continue
        subfolders = [t for t in tokens if t.endswith("/")]
        named = [t for t in re.findall(r"`([^`]+)`", what_cell) if FILE_TOKEN_RE.match(t)]
        if tokens == subfolders and len(subfolders) == 1 and named:
            entries.append(MapEntry(lineno, folder + subfolders[0], "subfolder"))
            for t in named:
                for name in expand_braces(t):
                    entries.append(MapEntry(lineno, folder + subfolders[0] + name, "file"))
            continue
        for s in subfolders:
            entries.append(MapEntry(lineno, folder + s, "folder"))
        for t in tokens:
            if t.endswith("/"):
                continue
            if not FILE_TOKEN_RE.match(t):
                problems.append((lineno, "not a file name: `%s`" % t))
                continue
            for name in expand_braces(t):
                kind = "glob" if any(c in name for c in "*?[") else "file"
                entries.append(MapEntry(lineno, folder + name, kind))
    return entries, problems


# --- The checks -----------------------------------------------------------------


def check_map(root, files, entries, design_label):
    problems = []
    mapped = set()
    test_roots = []   # folders whose test files are mapped
    whole = []        # folders mapped as a whole
    for e in entries:
        if e.kind == "file":
            if not os.path.isfile(os.path.join(root, e.pattern)):
                problems.append("%s:%d: the map names %s, which does not exist"
                                % (design_label, e.line, e.pattern))
            mapped.add(e.pattern)
        elif e.kind == "glob":
            hits = [f for f in files if fnmatch.fnmatchcase(f, e.pattern)
                    and "/" not in f[len(os.path.dirname(e.pattern)) + 1:]]
            if not hits:
                problems.append("%s:%d: the map names %s, which matches no file"
                                % (design_label, e.line, e.pattern))
            mapped.update(hits)
        else:
            if not os.path.isdir(os.path.join(root, e.pattern)):
                problems.append("%s:%d: the map names %s, which does not exist"
                                % (design_label, e.line, e.pattern))
            if e.kind == "folder":
                if e.pattern.rstrip("/") in MAPPED_ROOTS:
                    problems.append("%s:%d: the map describes %s as a whole: name its files"
                                    % (design_label, e.line, e.pattern))
                whole.append(e.pattern)
            test_roots.append(e.pattern)
    checked = 0
    for f in files:
        top = f.split("/", 1)[0]
        if top not in MAPPED_ROOTS or not f.endswith(MAPPED_EXTENSIONS) or "/" not in f:
            continue
        checked += 1
        if f in mapped or any(f.startswith(w) for w in whole):
            continue
        if is_test_file(f) and any(f.startswith(t) for t in test_roots):
            continue
        problems.append("%s: not in %s's map" % (f, design_label))
    return problems, checked


def resolve_include(inc):
    """The repository path an include names, or None when it is not first-party."""
    if inc.endswith(".pb.h"):
        return None  # generated: proto/sluice/proto/*.proto, bench/bench_stream.proto
    if inc.startswith("sluice/"):
        return "client/include/" + inc
    top = inc.split("/", 1)[0]
    if "/" in inc and (top in MAY_INCLUDE or top in UNLAYERED):
        return inc
    return None


def exception_allows(path, target):
    for frm, to, tests_only, _ in DOCUMENTED_EXCEPTIONS:
        if tests_only and not is_test_source(path):
            continue
        if fnmatch.fnmatchcase(path, frm) and fnmatch.fnmatchcase(target, to):
            return True
    return False


def check_layers(root, files):
    problems = []
    known = {(f, inc): False for f, inc, _ in KNOWN_VIOLATIONS_TO_FIX}
    checked = 0
    for f in files:
        if not f.endswith(CPP_EXTENSIONS):
            continue
        layer = layer_of(f)
        if layer not in MAY_INCLUDE:
            continue  # tests/, bench/ and folders outside the layers
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if inc.endswith(".pb.h") and inc.startswith("sluice/") and not inc.startswith("sluice/proto/"):
                    problems.append("%s:%d: includes %s: generated headers are sluice/proto/NAME.pb.h, "
                                    "apart from the public sluice/NAME.h" % (f, lineno, inc))
                    continue
                target = resolve_include(inc)
                if target is None:
                    continue
                checked += 1
                to_layer = layer_of(target)
                if to_layer == layer or to_layer in MAY_INCLUDE[layer]:
                    continue
                if exception_allows(f, target):
                    continue
                if (f, inc) in known:
                    known[(f, inc)] = True
                    continue
                problems.append("%s:%d: includes %s (layer %s may not include layer %s)"
                                % (f, lineno, inc, layer, to_layer))
    for (f, inc), seen in known.items():
        if not seen:
            problems.append("tools/check_design_map.py: KNOWN_VIOLATIONS_TO_FIX lists %s including "
                            "%s, which no longer occurs: remove the entry" % (f, inc))
    return problems, checked


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(here),
                        help="the repository (default: this script's)")
    parser.add_argument("--design", help="the design document (default: ROOT/docs/design.md)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    design = args.design or os.path.join(root, "docs", "design.md")
    design_label = os.path.relpath(os.path.abspath(design), root)
    if design_label.startswith(".."):
        design_label = design
    with open(design, encoding="utf-8") as fh:
        entries, parse_problems = parse_map(fh.read())
    files = list_files(root)
    problems = ["%s:%d: %s" % (design_label, line, msg) for line, msg in parse_problems]
    map_problems, mapped = check_map(root, files, entries, design_label)
    layer_problems, includes = check_layers(root, files)
    problems += map_problems + layer_problems
    for p in problems:
        print(p)
    if problems:
        return 1
    print("design_map_check: %d source files all in the map, %d first-party includes all within "
          "the layering rule (%d known violations to fix)"
          % (mapped, includes, len(KNOWN_VIOLATIONS_TO_FIX)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
