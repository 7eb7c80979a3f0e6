"""_sluice.pyi against the built sluice._sluice: mypy's stubtest, and the
signatures that pybind11 writes into the docstrings (stubtest cannot read
those: pybind11's functions have no inspectable signature)."""

import ast
import os
import re
import subprocess
import sys

import pytest

import sluice
from sluice import _sluice

ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubtest_allowlist.txt")
STUB = os.path.join(os.path.dirname(sluice.__file__), "_sluice.pyi")
REQUIRED = "<required>"  # a parameter's default when it has none


def _run_mypy_module(module, args, tmp_path, timeout):
    """`python -m module args` in tmp_path, where mypy leaves its .mypy_cache
    (so PYTHONPATH's entries are made absolute)."""
    pytest.importorskip(module, reason=f"{module} is not importable: Debian's mypy is not installed")
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
        timeout=timeout,
    )


def test_stubtest_finds_no_difference(tmp_path):
    done = _run_mypy_module("mypy.stubtest", ["sluice._sluice", "--allowlist", ALLOWLIST], tmp_path, 120)
    assert done.returncode == 0, f"stubtest failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"


def _parameters(args: ast.arguments, skip_first: bool):
    """(name, kind, default) for each parameter; default is REQUIRED when there
    is none, Ellipsis when the stub leaves it out (`= ...`), else its literal."""

    def default(node):
        if node is None:
            return REQUIRED
        try:
            return ast.literal_eval(node)
        except ValueError:
            return ast.unparse(node)

    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    result = [(a.arg, "positional", default(d)) for a, d in zip(positional, defaults)]
    if skip_first:
        result = result[1:]
    if args.vararg:
        result.append(("*", "var_positional", REQUIRED))
    result += [(a.arg, "keyword_only", default(d)) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:  # its name is free: the stubs say **args where pybind11 says **kwargs
        result.append(("**", "var_keyword", REQUIRED))
    return result


def _stub_functions():
    """{qualified name: [signature, ...]} for the stub's functions, one
    signature per overload."""
    functions = {}

    def add(node, prefix, in_class):
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        is_property = any(
            (isinstance(d, ast.Name) and d.id == "property")
            or (isinstance(d, ast.Attribute) and d.attr in ("getter", "setter", "deleter"))
            for d in node.decorator_list
        )
        if not is_property:
            functions.setdefault(prefix + node.name, []).append(_parameters(node.args, in_class and not static))

    with open(STUB) as stub:
        tree = ast.parse(stub.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            add(node, "", False)
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    add(member, node.name + ".", True)
    return functions


def _runtime_signatures(name, function):
    """The signatures in a pybind11 function's docstring."""
    lines = (function.__doc__ or "").splitlines()
    pattern = re.compile(r"^(?:\d+\. )?" + re.escape(name) + r"\((.*)\)(?: -> .*)?$")
    if not lines or not pattern.match(lines[0]):
        pytest.fail(f"{name}'s docstring does not start with pybind11's signature: {lines[:1]}")
    if lines[0] == f"{name}(*args, **kwargs)":  # overloaded: "1. name(...)", "2. name(...)"
        lines = [line for line in lines[1:] if re.match(r"^\d+\. ", line)]
    else:
        lines = lines[:1]
    signatures = []
    for line in lines:
        source = f"def _({pattern.match(line).group(1)}): pass"
        try:
            tree = ast.parse(source)
        except SyntaxError:
            pytest.fail(f"cannot parse pybind11's signature of {name}: {line}")
        args = tree.body[0].args
        signatures.append(_parameters(args, bool(args.args) and args.args[0].arg == "self"))
    return signatures


def _matches(stub, runtime):
    if len(stub) != len(runtime):
        return False
    for (s_name, s_kind, s_default), (r_name, r_kind, r_default) in zip(stub, runtime):
        if s_name != r_name or s_kind != r_kind or (s_default is REQUIRED) != (r_default is REQUIRED):
            return False
        if s_default is not Ellipsis and s_default != r_default:
            return False
    return True


def _text(signature):
    parts = []
    for name, kind, default in signature:
        if kind == "keyword_only" and "*" not in parts:
            parts.append("*")
        parts.append(name if default is REQUIRED else f"{name}={default!r}")
    return "(" + ", ".join(parts) + ")"


def test_stub_signatures_match_pybind11s():
    stub = _stub_functions()
    checked = 0
    problems = []
    for qualified, signatures in sorted(stub.items()):
        owner, _, name = qualified.rpartition(".")
        scope = getattr(_sluice, owner) if owner else _sluice
        function = getattr(scope, name, None)
        # Skip what stubtest reports (a name the module lacks) and what
        # pybind11 did not make (Python's functions, object's methods): a
        # pybind11 function's __self__ is the capsule of its C++ record.
        if type(getattr(function, "__self__", None)).__name__ != "PyCapsule":
            continue
        runtime = _runtime_signatures(name, function)
        checked += 1
        unmatched = [r for r in runtime if not any(_matches(s, r) for s in signatures)]
        extra = [s for s in signatures if not any(_matches(s, r) for r in runtime)]
        if unmatched or extra:
            problems.append(
                f"{qualified}: the module has {' | '.join(map(_text, runtime))}, "
                f"the stub {' | '.join(map(_text, signatures))}"
            )
    assert checked > 40, f"only {checked} of the stub's functions were compared"
    assert not problems, "_sluice.pyi differs from pybind11's signatures:\n" + "\n".join(problems)


# The package's pure-Python modules, which py.typed says are typed.
TYPED_MODULES = ("torch.py", "local_cluster.py", "worker.py")


def _unannotated(path):
    """'name: what' for each function of the module at `path` that lacks an
    annotation: of a parameter (not a method's self or cls) or the return."""
    with open(path) as source:
        tree = ast.parse(source.read())
    missing = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        parameters = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        for parameter in parameters:
            if parameter.annotation is None and parameter.arg not in ("self", "cls"):
                missing.append(f"{node.name}: parameter {parameter.arg}")
        if node.returns is None:
            missing.append(f"{node.name}: return")
    return missing


def test_the_pure_python_modules_annotate_every_function():
    package = os.path.dirname(sluice.__file__)
    missing = {name: _unannotated(os.path.join(package, name)) for name in TYPED_MODULES}
    assert all(not m for m in missing.values()), f"functions without annotations: {missing}"
    # The check sees a missing one.
    assert _unannotated(__file__)  # this file's own helpers are not all annotated


def test_mypy_strict_finds_no_error_in_the_package(tmp_path):
    # The whole package, as a user's `mypy --strict` sees it: every module
    # (the worker pool's _worker_host.py too) and the native module's stubs;
    # mypy analyses torch too, from a cold cache (about 80 s).
    done = _run_mypy_module("mypy", ["--strict", "-p", "sluice"], tmp_path, 300)
    assert done.returncode == 0, f"mypy --strict failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert done.stdout.startswith("Success: no issues found in "), done.stdout
