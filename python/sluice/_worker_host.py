"""The Python process of a worker's pool (pipeline/python_pool.h): imports
the operator's modules, then calls their functions on elements for the
worker, one call at a time, until the worker closes the socket.

Run by workerd as `python3 -c <this file> FD --shared MEMFD SIZE --path DIR
... --module NAME ...` (the worker carries the file in its binary). Each
message is a frame: an 8-byte little-endian length, that many bytes of JSON
header, then the header's `payload_bytes` of raw tensor bytes, on the
socket or, with "shm" in the header, in the memory shared with the worker
(requests in its first half, replies in its second). Tensor bytes are never
pickled: arrays are made over the payload and written back as they lie.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import socket
import struct
import sys
import traceback

import numpy as np

# typing's constant without importing typing, which this process's start
# would otherwise pay for: mypy takes any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from numpy.typing import NDArray

_HEADER = struct.Struct("<Q")


def _read_exact(sock: socket.socket, n: int) -> memoryview:
    view = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError
        got += k
    return view


class _Shared:
    """The memory this process shares with its worker: requests' tensor
    bytes in the first half, replies' in the second (when they fit)."""

    def __init__(self, fd: int | None, size: int) -> None:
        import mmap

        self.view: memoryview | None = memoryview(mmap.mmap(fd, size)) if fd is not None else None
        self.half = size // 2


_shared = _Shared(None, 0)


def _read_frame(sock: socket.socket) -> tuple[dict[str, Any], memoryview]:
    (length,) = _HEADER.unpack(_read_exact(sock, _HEADER.size))
    header = json.loads(bytes(_read_exact(sock, length)))
    n = header.get("payload_bytes", 0)
    if header.get("shm"):
        # Views of the shared request half: valid during this call. (The
        # worker sends "shm" only with --shared, when the view is not None.)
        return header, _shared.view[:n]  # type: ignore[index]
    return header, _read_exact(sock, n)


def _write_frame(sock: socket.socket, header: dict[str, Any], chunks: Iterable[bytes | memoryview] = ()) -> None:
    views = [memoryview(c).cast("B") for c in chunks]
    total = sum(c.nbytes for c in views)
    header["payload_bytes"] = total
    shared = _shared.view if total <= _shared.half else None  # the view when the payload goes through it
    if shared is not None:
        offset = _shared.half
        for chunk in views:
            shared[offset : offset + chunk.nbytes] = chunk
            offset += chunk.nbytes
        header["shm"] = True
    data = json.dumps(header).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)
    if shared is None:
        for chunk in views:
            sock.sendall(chunk)


def _decode(header: dict[str, Any], payload: memoryview) -> Any:
    """The element as the function sees it: one unnamed component is its
    value, several a tuple, named ones a dict (as the sluice package gives
    them)."""
    values: list[Any] = []
    offset = 0
    for c in header["components"]:
        shape = tuple(c["shape"])
        value: Any
        if c["dtype"] == "string":
            items: list[bytes] = []
            for n in c["lengths"]:
                items.append(bytes(payload[offset : offset + n]))
                offset += n
            value = items[0] if shape == () else np.array(items, dtype=object).reshape(shape)
        else:
            n = c["nbytes"]
            value = np.frombuffer(payload[offset : offset + n], dtype=c["dtype"]).reshape(shape)
            offset += n
            if shape == ():
                value = value[()]
        values.append(value)
    names = header.get("names") or []
    if names:
        return dict(zip(names, values))
    return values[0] if len(values) == 1 else tuple(values)


def _as_array(value: Any) -> NDArray[Any]:
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().numpy()
    if isinstance(value, (bytes, str)):
        return np.array(value.encode() if isinstance(value, str) else value, dtype=object)
    array = np.asarray(value)
    if array.dtype.kind in "OSU":
        flat = [v.encode() if isinstance(v, str) else bytes(v) for v in array.reshape(-1)]
        return np.array(flat, dtype=object).reshape(array.shape)
    return np.asarray(array, order="C")  # ascontiguousarray would make a scalar a 1-element vector


def _encode(result: Any) -> tuple[dict[str, Any], list[bytes | memoryview]]:
    if isinstance(result, dict):
        names, values = [str(k) for k in result], list(result.values())
    elif isinstance(result, tuple):
        names, values = [], list(result)
    else:
        names, values = [], [result]
    components: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = []
    for value in values:
        array = _as_array(value)
        if array.dtype == object:
            items = [bytes(v) for v in array.reshape(-1)]
            components.append({"dtype": "string", "shape": list(array.shape), "lengths": [len(v) for v in items]})
            chunks.extend(items)
        else:
            if array.dtype.name not in _DTYPES:
                raise TypeError(f"returned an array of dtype {array.dtype.name}, which Sluice has no dtype for")
            components.append({"dtype": array.dtype.name, "shape": list(array.shape), "nbytes": array.nbytes})
            chunks.append(array.data.cast("B"))  # array.data is memoryview(array), which NumPy's stubs type
    return {"ok": True, "names": names, "components": components}, chunks


_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}


def _error(error: BaseException, frames: int) -> dict[str, Any]:
    # The frames below this file's own: the function's, and what it called.
    trace = [f for f in traceback.extract_tb(error.__traceback__) if f.filename != "<string>"][-frames:]
    return {"ok": False, "type": type(error).__name__, "message": str(error), "traceback": "".join(traceback.format_list(trace))}


def _scan_call(fn: Callable[..., Any], k: int, values: Any, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """scan's call: fn(state, element) -> (new state, output), the state
    being the first k components; the result flattened into components."""
    values = values if isinstance(values, tuple) else (values,)
    state = values[0] if k == 1 else tuple(values[:k])
    rest = values[k:]
    new_state, output = fn(state, rest[0] if len(rest) == 1 else tuple(rest), **kwargs)
    parts = [new_state] if k == 1 else list(new_state)
    parts += list(output) if isinstance(output, tuple) else [output]
    return tuple(parts)


def _takes_seed(fn: Callable[..., Any]) -> bool:
    try:
        return "seed" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def main(argv: list[str]) -> int:
    global _shared
    sock = socket.socket(fileno=int(argv[0]))
    if "--shared" in argv:
        at = argv.index("--shared")
        _shared = _Shared(int(argv[at + 1]), int(argv[at + 2]))
    paths = [argv[i + 1] for i, a in enumerate(argv) if a == "--path"]
    modules = [argv[i + 1] for i, a in enumerate(argv) if a == "--module"]
    import_on_call = "--import-on-call" in argv  # local use only: no daemon, no operator
    client_functions = "--client-functions" in argv  # python.allow_client_functions
    sys.path[:0] = paths
    try:
        for name in modules:
            importlib.import_module(name)
    except BaseException as error:  # told to the worker, which refuses to start the pool
        _write_frame(sock, {**_error(error, 3), "module": name})
        return 1
    _write_frame(sock, {"ok": True, "pid": os.getpid()})
    functions: dict[str, tuple[Callable[..., Any], bool]] = {}
    while True:
        try:
            header, payload = _read_frame(sock)
        except EOFError:
            return 0
        try:
            name = header["fn"]
            kwargs = dict(header.get("args") or {})
            if name == "__client__.call":
                # A callable the client shipped (cloudpickled), by its pickle.
                name = kwargs.pop("pickled", "")
                if name not in functions:
                    if not client_functions:
                        raise PermissionError("this worker does not run client functions")
                    import base64

                    import cloudpickle  # type: ignore[import]  # cloudpickle has no type hints

                    fn = cloudpickle.loads(base64.b64decode(name))
                    functions[name] = (fn, _takes_seed(fn))
            if name not in functions:
                module, _, attribute = name.rpartition(".")
                if module not in sys.modules:
                    if not import_on_call:
                        raise ImportError(f"module '{module}' is not loaded")
                    importlib.import_module(module)
                fn = getattr(sys.modules[module], attribute)
                functions[name] = (fn, _takes_seed(fn))
            fn, takes_seed = functions[name]
            worker = sys.modules.get("sluice.worker")
            if worker is not None:
                setattr(worker, "_seed", header["seed"])  # sluice.worker._seed (mypy sees a bare ModuleType)
            if takes_seed:
                kwargs["seed"] = header["seed"]
            k = header.get("state_components", 0)
            if k:
                reply, chunks = _encode(_scan_call(fn, k, _decode({**header, "names": []}, payload), kwargs))
            else:
                reply, chunks = _encode(fn(_decode(header, payload), **kwargs))
        except Exception as error:  # the element's error, with its traceback
            reply, chunks = _error(error, 4), []
        _write_frame(sock, reply, chunks)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
