"""Sluice for Python: build input pipelines, run them here or on a Sluice
data service, and read their elements as NumPy arrays.

    import sluice

    ds = sluice.Dataset.range(10).map("square").batch(4)
    for batch in ds:          # a local pipeline iterates directly
        print(batch)          # [0 1 4 9], [16 25 36 49], [64 81]

    with sluice.LocalCluster(workers=2) as cluster:
        remote = sluice.Dataset.range(100).distribute("distributed_epoch", cluster.service)
        assert sorted(int(x) for x in remote) == list(range(100))

The data path is the C++ SDK's: arrays share the C++ tensors' buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _grpc_env  # noqa: F401  (before the native module: gRPC's poller for forks)
from ._sluice import (
    INFINITE,
    UNKNOWN,
    Dataset,
    DeviceArray,
    DistributedDataset,
    DistributedIterator,
    Error,
    InputContext,
    Iterator,
    distribute_dataset,
    distribute_datasets_from_function,
    merge_saved_states,
    metrics,
)
from .local_cluster import LocalCluster

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "Dataset",
    "DeviceArray",
    "DistributedDataset",
    "DistributedIterator",
    "Error",
    "INFINITE",
    "InputContext",
    "Iterator",
    "LocalCluster",
    "TensorSpec",
    "UNKNOWN",
    "distribute_dataset",
    "merge_saved_states",
    "distribute_datasets_from_function",
    "metrics",
]


class TensorSpec:
    """The shape and dtype of one component of a dataset's elements.

    `shape` is a tuple whose unknown dimensions are None (None altogether when
    even the rank is unknown); `dtype` is a NumPy dtype name ("int64",
    "float32", ...) or "bytes" for strings.
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Iterable[int | None] | None, dtype: str) -> None:
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r})"


def _element_spec(self: Dataset) -> Any:  # Dataset.element_spec's type in _sluice.pyi
    """The spec of the elements, shaped like them: a TensorSpec, a tuple of
    them, or a dict of them for named components. Builds the pipeline."""
    components = self._element_spec()
    specs = [TensorSpec(shape, dtype) for _, shape, dtype in components]
    if components and components[0][0] is not None:
        return {name: spec for (name, _, _), spec in zip(components, specs)}
    return specs[0] if len(specs) == 1 else tuple(specs)


# setattr: _sluice.pyi declares element_spec, as a read-only property, and
# mypy refuses an assignment to it; the same assignment, on the class.
setattr(Dataset, "element_spec", property(_element_spec))


def _dataset_from_bytes(data: bytes, next_read_repetition: int = 0) -> Dataset:
    """Unpickles a Dataset (Dataset.__reduce__ names this function): its
    definition, and the repetition its next iterator reads."""
    dataset = Dataset.deserialize(data)
    dataset.next_read_repetition = next_read_repetition
    return dataset
