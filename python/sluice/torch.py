"""Sluice datasets for PyTorch trainers.

    from sluice.torch import IterableDataset
    loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None)

Elements arrive as torch.Tensors made through DLPack from the C++ tensors:
no copy on the CPU; on a GPU each batch arrives through the SDK's
prefetcher (pinned staging, a copy stream of its own), and the tensor is
ordered on the current CUDA stream.

Who reads what (every element once per epoch, whatever the layout):
  * A dataset that reads from the service (`distribute`) is read by all of
    a trainer's readers as one shared job: its DataLoader worker processes
    and its DDP ranks are peers that split each repetition of the job, so
    the pipeline runs once on the service. Without a `job_name` on
    `distribute`, IterableDataset makes one (once, carried to the workers).
    Each epoch (each `iter()`) reads the job's next repetition.
  * A local pipeline (no `distribute`) is sharded by element across the
    DataLoader workers and DDP ranks: its order is deterministic.
  * `num_workers` usually buys nothing: reading, decoding and copying run
    on the SDK's C++ threads with the GIL released. Each worker process
    costs a Python interpreter, a gRPC channel and its own read-ahead.
  * Under DDP every rank yields the same number of batches per epoch
    (`even_batches=True`), so collective calls always match; see
    IterableDataset.
"""

import secrets
import sys

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


def _map_tensors(fn, value):
    if isinstance(value, dict):
        return {key: _map_tensors(fn, item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(fn, item) for item in value)
    return fn(value) if isinstance(value, torch.Tensor) else value


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
    batch: what the pipeline's batch size means under DDP.
        "per_rank" (the default, PyTorch's convention, as DDP users pass a
        per-rank batch_size to DataLoader): each batch the pipeline makes
        goes whole to one rank. "global" (tf.data's convention): the
        pipeline's last batch is the global batch, and each rank gets its
        1/world_size slice of it (distribute_dataset's rebatching).
    even_batches: under DDP, every rank yields the same number of batches
        per epoch, so that collective calls always match. The ranks agree
        before each batch (a one-integer all-reduce on a gloo group of this
        dataset's own); when one runs out, the batches the others still
        hold are spread evenly and the remainder (fewer than world_size
        batches, so at most one global batch) is dropped, counted in
        `dropped_batches` and named in one line on stderr. Each element is
        read at most once per epoch across ranks. It needs the reading in
        the trainer process (DataLoader num_workers=0). False gives each
        rank what it reads, unequal counts included: unsafe with
        collectives.
    auto_shard_policy: with batch="global", how distribute_dataset shards
        a local pipeline across ranks ("AUTO", "FILE", "DATA" or "OFF").
    """

    def __init__(
        self,
        dataset,
        device="cpu",
        *,
        prefetch_buffer_size=2,
        batch="per_rank",
        even_batches=True,
        auto_shard_policy="AUTO",
    ):
        super().__init__()
        if not isinstance(dataset, _sluice.Dataset):
            raise TypeError(f"IterableDataset takes a sluice.Dataset, not {type(dataset).__name__}")
        self.dataset = dataset
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"IterableDataset(device={device!r}): neither cpu nor cuda")
        if batch not in ("per_rank", "global"):
            raise ValueError(f"IterableDataset(batch={batch!r}): 'per_rank' or 'global'")
        self.prefetch_buffer_size = prefetch_buffer_size
        self.batch = batch
        self.even_batches = even_batches
        self.auto_shard_policy = auto_shard_policy
        # The job every reader of this dataset shares when `distribute`
        # names none: made once here, it reaches DataLoader workers by fork
        # or pickling (DDP ranks take rank 0's).
        self.job_name = f"sluice-torch-{secrets.token_hex(8)}"
        self.dropped_batches = 0
        self._epochs = 0
        self._rank_group = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_rank_group"] = None  # a process group belongs to its process
        return state

    def _replica(self):
        if self.device.type == "cpu":
            return "CPU:0"
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return f"GPU:{index}"

    def _group(self):
        # A gloo group of its own, so that these small CPU collectives never
        # interleave with the trainer's (NCCL or not) on the default group.
        if self._rank_group is None:
            self._rank_group = torch.distributed.new_group(backend="gloo")
        return self._rank_group

    def _readers_dataset(self, ranks, rank, workers, worker):
        """This reader's dataset for the epoch starting now."""
        dataset = self.dataset
        epoch = self._epochs
        self._epochs += 1
        if dataset.reads_from_service():
            if workers > 1:
                # The workers of one DataLoader epoch share its base seed;
                # persistent workers count their epochs.
                info = torch.utils.data.get_worker_info()
                key = f"loader-{(info.seed - info.id) & 0xFFFFFFFFFFFFFFFF:x}-{epoch}"
                return dataset.read_as_peer(self.job_name, key)
            if ranks > 1:
                agreed = [self.job_name, f"ranks-{secrets.token_hex(8)}"]
                torch.distributed.broadcast_object_list(agreed, src=0, group=self._group())
                return dataset.read_as_peer(agreed[0], agreed[1])
            return dataset
        readers, reader = workers, worker
        if self.batch == "per_rank":
            readers, reader = ranks * workers, rank * workers + worker
        return dataset.shard(readers, reader) if readers > 1 else dataset

    def __iter__(self):
        ranks, rank, workers, worker = _reader_layout()
        if workers > 1 and self.device.type == "cuda":
            raise ValueError(
                "IterableDataset(device='cuda') runs in the trainer process: use DataLoader(num_workers=0); "
                "the SDK reads and copies on threads of its own"
            )
        if ranks > 1 and workers > 1 and self.even_batches:
            raise ValueError(
                "IterableDataset(even_batches=True) under DDP needs DataLoader(num_workers=0): the ranks "
                "agree before each batch, which only the trainer process can do (the reading runs on C++ "
                "threads anyway); or pass even_batches=False, unsafe with collectives"
            )
        dataset = self._readers_dataset(ranks, rank, workers, worker)
        source = self._elements(dataset, ranks, rank)
        if ranks > 1 and self.even_batches:
            source = self._even(source, ranks, rank)
        yield from source

    def _elements(self, dataset, ranks, rank):
        global_batch = self.batch == "global" and ranks > 1
        if not global_batch and self.device.type == "cpu":
            for element in dataset:
                yield to_torch(element)
            return
        replica = self._replica()
        distributed = _sluice.distribute_dataset(
            dataset,
            [replica],
            num_input_pipelines=ranks if global_batch else 1,
            input_pipeline_id=rank if global_batch else 0,
            auto_shard_policy=self.auto_shard_policy,
            prefetch_buffer_size=self.prefetch_buffer_size,
        )
        for step in distributed:
            yield to_torch(step[replica])

    def _even(self, source, ranks, rank):
        group = self._group()
        flag = torch.zeros(1, dtype=torch.int64)
        while True:
            batch = next(source, None)
            flag.fill_(0 if batch is None else 1)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MIN, group=group)
            if flag.item() == 1:
                yield batch
                continue
            # Some rank has run out. What the others still hold (what their
            # readers buffered of a shared job, or the end of a shard) is
            # pooled and spread in whole rounds of one batch per rank.
            # Copied one by one: a GPU reader's prefetch buffers go back
            # only as the batches holding them are dropped.
            left = []
            while batch is not None:
                left.append(_map_tensors(lambda t: t.to("cpu", copy=True), batch))
                batch = next(source, None)
            counts = [None] * ranks
            torch.distributed.all_gather_object(counts, len(left), group=group)
            rounds = sum(counts) // ranks
            dropped = sum(counts) - rounds * ranks
            self.dropped_batches += dropped
            if dropped and rank == 0:
                print(
                    f"sluice: warning: IterableDataset(even_batches=True): {dropped} batch(es) dropped at the "
                    f"end of the epoch so that {ranks} ranks take equal steps",
                    file=sys.stderr,
                )
            if rounds == 0:
                return
            pooled = [None] * ranks
            torch.distributed.all_gather_object(pooled, left, group=group)
            everything = [b for held in pooled for b in held]
            for b in everything[rank * rounds : (rank + 1) * rounds]:
                yield _map_tensors(lambda t: t.to(self.device), b)
            return
