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

    def __init__(self, shape, dtype):
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r})"


def _element_spec(self):
    """The spec of the elements, shaped like them: a TensorSpec, a tuple of
    them, or a dict of them for named components. Builds the pipeline."""
    components = self._element_spec()
    specs = [TensorSpec(shape, dtype) for _, shape, dtype in components]
    if components and components[0][0] is not None:
        return {name: spec for (name, _, _), spec in zip(components, specs)}
    return specs[0] if len(specs) == 1 else tuple(specs)


Dataset.element_spec = property(_element_spec)


def _dataset_from_bytes(data, next_read_repetition=0):
    """Unpickles a Dataset (Dataset.__reduce__ names this function): its
    definition, and the repetition its next iterator reads."""
    dataset = Dataset.deserialize(data)
    dataset.next_read_repetition = next_read_repetition
    return dataset
