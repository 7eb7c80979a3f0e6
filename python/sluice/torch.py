"""Sluice datasets for PyTorch trainers.

    from sluice.torch import IterableDataset
    loader = torch.utils.data.DataLoader(IterableDataset(ds, device="cuda:0"), batch_size=None)

Elements arrive as torch.Tensors made through DLPack from the C++ tensors:
no copy on the CPU; on a GPU each batch arrives through the SDK's
prefetcher (pinned staging, a copy stream of its own), and the tensor is
ordered on the current CUDA stream.

Who reads what:
  * Under torch.distributed (DDP), the rank and world size are the input
    pipeline id and count: `distribute_dataset` splits the pipeline's final
    batch to each rank's share and auto-shards the data across ranks,
    unless the dataset reads a named job (`distribute(..., job_name=...)`),
    whose consumers share its elements already.
  * DataLoader worker processes (num_workers > 1) of one rank read the same
    named job, so that in distributed_epoch each element arrives once across
    them. A dataset without a named job is sharded by element across the
    workers instead (correct, but each worker runs the whole pipeline: give
    `distribute` a job_name).
"""

import torch
import torch.utils.data
from torch.utils.dlpack import from_dlpack

from . import _sluice

__all__ = ["IterableDataset", "to_torch"]


def to_torch(value):
    """A value as sluice yields it (arrays, DeviceArrays, scalars, bytes,
    tuples, dicts), with every array made a torch.Tensor without a copy.
    NumPy scalars become 0-d tensors; bytes stay bytes."""
    if isinstance(value, dict):
        return {key: to_torch(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(to_torch(item) for item in value)
    if hasattr(value, "__dlpack__"):
        if getattr(value, "dtype", None) == object:
            return value  # strings: DLPack cannot describe them
        return from_dlpack(value)
    if isinstance(value, bytes):
        return value
    return torch.as_tensor(value)


def _reader_layout():
    """(ranks, rank, workers, worker): this process's place among the
    trainer's readers."""
    ranks, rank = 1, 0
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        ranks, rank = torch.distributed.get_world_size(), torch.distributed.get_rank()
    worker = torch.utils.data.get_worker_info()
    workers, worker_id = (worker.num_workers, worker.id) if worker is not None else (1, 0)
    return ranks, rank, workers, worker_id


class IterableDataset(torch.utils.data.IterableDataset):
    """A sluice.Dataset as a torch IterableDataset. Use it with
    DataLoader(batch_size=None): the dataset batches already.

    device: "cpu" (the default), "cuda", or "cuda:N".
    prefetch_buffer_size: GPU batches kept ready ahead of the trainer.
    auto_shard_policy: how DDP ranks shard a dataset that reads no named
        job ("AUTO", "FILE", "DATA" or "OFF"; see distribute_dataset).
    """

    def __init__(self, dataset, device="cpu", *, prefetch_buffer_size=2, auto_shard_policy="AUTO"):
        super().__init__()
        if not isinstance(dataset, _sluice.Dataset):
            raise TypeError(f"IterableDataset takes a sluice.Dataset, not {type(dataset).__name__}")
        self.dataset = dataset
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device {device!r} is neither cpu nor cuda")
        self.prefetch_buffer_size = prefetch_buffer_size
        self.auto_shard_policy = auto_shard_policy

    def _replica(self):
        if self.device.type == "cpu":
            return "CPU:0"
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return f"GPU:{index}"

    def __iter__(self):
        ranks, rank, workers, worker = _reader_layout()
        dataset = self.dataset
        if workers > 1:
            if self.device.type == "cuda":
                raise ValueError(
                    "IterableDataset(device='cuda') runs in the trainer process: use DataLoader(num_workers=0); "
                    "the SDK reads and copies on threads of its own"
                )
            if not dataset.reads_named_job():
                dataset = dataset.shard(workers, worker)
        if ranks == 1 and self.device.type == "cpu":
            for element in dataset:
                yield to_torch(element)
            return
        replica = self._replica()
        distributed = _sluice.distribute_dataset(
            dataset,
            [replica],
            num_input_pipelines=ranks,
            input_pipeline_id=rank,
            auto_shard_policy=self.auto_shard_policy,
            prefetch_buffer_size=self.prefetch_buffer_size,
        )
        for step in distributed:
            yield to_torch(step[replica])
