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
    DataLoader workers and DDP ranks, which needs an order that repeats
    (seeded shuffles; refused, naming the step, otherwise).
  * Under DDP the reading runs in the trainer process (DataLoader
    num_workers=0, refused otherwise), and every rank iterates: the first
    epoch agrees on the job over a collective.
  * `num_workers` usually buys nothing: reading, decoding and copying run
    on the SDK's C++ threads with the GIL released. Each worker process
    costs a Python interpreter, a gRPC channel and its own read-ahead.
  * Under DDP every rank yields the same number of batches per epoch
    (`even_batches=True`), so collective calls always match; see
    IterableDataset.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

# torch leaves torch.utils.data.get_worker_info and torch.distributed's
# collectives unannotated: their calls carry type: ignore[no-untyped-call].
import torch
import torch.utils.data
from torch.utils.dlpack import from_dlpack

from . import _sluice

if TYPE_CHECKING:
    # torch.distributed.ProcessGroup, which torch.distributed does not export
    # explicitly (mypy --strict takes no implicit re-export).
    from torch.distributed.distributed_c10d import ProcessGroup

    # What an epoch reads from: a local pipeline's iterator or distribute_dataset's.
    _EpochIterator = _sluice.Iterator | _sluice.DistributedIterator

    # torch's IterableDataset, of what it yields.
    _TorchIterableDataset = torch.utils.data.IterableDataset[Any]
else:  # unsubscripted at run time: the class's bases stay torch's class alone
    _TorchIterableDataset = torch.utils.data.IterableDataset

__all__ = ["IterableDataset", "merge_state_dicts", "to_torch"]

_STATE_VERSION = 1


def to_torch(value: Any) -> Any:
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


def _map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _map_tensors(fn, item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(fn, item) for item in value)
    return fn(value) if isinstance(value, torch.Tensor) else value


def _ranks() -> tuple[int, int]:
    """(world size, rank) of torch.distributed in this process, or (1, 0)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size(), torch.distributed.get_rank()
    return 1, 0


def _loader_key(token: str, info: Any, epoch: int) -> str:
    """A key the worker processes of one DataLoader iterator share, and no
    other: the dataset's random token (another trainer's differs), the pid
    of the process that started them, the multiprocessing identity of its
    worker 0 (a new one for each DataLoader iterator, even when the user
    reseeds every epoch), the base seed, and the epoch a persistent worker
    counts."""
    import multiprocessing

    identity = multiprocessing.current_process()._identity
    first = identity[-1] - info.id if identity else 0
    return f"loader-{token}-{os.getppid()}-{first}-{(info.seed - info.id) & 0xFFFFFFFFFFFFFFFF:x}-{epoch}"


class IterableDataset(_TorchIterableDataset):
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
    even_batches: under DDP, how ranks that read different numbers of
        batches in an epoch are made equal, so that collective calls always
        match. The ranks agree before each batch (a one-integer all-reduce
        on a gloo group of this dataset's own); when one runs out, the
        batches the others still hold are pooled and spread in whole rounds
        of one per rank.
        "pad" (or True, the default), as DistributedSampler(drop_last=False)
        and Accelerate's even_batches do: the last round is filled with
        batches repeated from the pool's start, so every element is read at
        least once; the repeats are counted in `repeated_batches` and
        sluice.metrics()'s sluice_torch_repeated_batches_total.
        "drop": the remainder (fewer than world_size batches) is dropped,
        counted in `dropped_batches` and sluice_torch_dropped_batches_total,
        and named on stderr; each element is read at most once.
        "uneven" (or False): each rank yields what it reads, unequal counts
        included: unsafe with collectives.
        A reading error on one rank stops every rank, each raising.
    auto_shard_policy: with batch="global", how distribute_dataset shards
        a local pipeline across ranks ("AUTO", "FILE", "DATA" or "OFF").
    checkpointable: True when the trainer will call state_dict(): the
        pipeline and the layout are checked now, and one that could not be
        saved or restored exactly raises ValueError naming the step and a
        fix, rather than at the first state_dict(), hours into training.
    """

    def __init__(
        self,
        dataset: _sluice.Dataset,
        device: str | torch.device = "cpu",
        *,
        prefetch_buffer_size: int = 2,
        batch: str = "per_rank",
        even_batches: str | bool = "pad",
        auto_shard_policy: str = "AUTO",
        checkpointable: bool = False,
    ) -> None:
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
        if even_batches is True:
            even_batches = "pad"
        elif even_batches is False:
            even_batches = "uneven"
        if even_batches not in ("pad", "drop", "uneven"):
            raise ValueError(f"IterableDataset(even_batches={even_batches!r}): 'pad' (or True), 'drop' or 'uneven' "
                             "(or False)")
        self.even_batches = even_batches
        self.auto_shard_policy = auto_shard_policy
        if checkpointable:
            self._check_checkpointable()
        # The job every reader of this dataset shares when `distribute`
        # names none: made once here, it reaches DataLoader workers by fork
        # or pickling (DDP ranks take rank 0's). The token also tells this
        # dataset's DataLoader epochs from another trainer's.
        self._token = secrets.token_hex(8)
        self.job_name = f"sluice-torch-{self._token}"
        self.dropped_batches = 0
        self.repeated_batches = 0
        self._epochs = 0
        self._rank_group: ProcessGroup | None = None
        self._live: _EpochIterator | None = None  # the epoch's sluice iterator, for state_dict
        self._restore: dict[str, Any] | None = None  # a state from load_state_dict, for the next epoch
        self._pending: list[Any] = []  # pooled batches of the epoch's tail not yet yielded
        self._run_token: str | None = None  # DDP: this run's, agreed at the first epoch
        # (world size, rank) of the process that pickled this dataset: a
        # DataLoader worker started with spawn has no torch.distributed.
        self._pickled_ranks = (1, 0)

    def _check_checkpointable(self) -> None:
        if self.device.type != "cpu" or self.batch != "per_rank":
            raise ValueError(
                f"IterableDataset(checkpointable=True): device={str(self.device)!r} with batch={self.batch!r} "
                "reads through distribute_dataset, which does not save its position; saving and restoring are "
                "built for device='cpu' with batch='per_rank' (move each batch to the GPU in the training loop)"
            )
        try:
            self.dataset.check_savable()
        except (_sluice.Error, ValueError) as error:
            raise ValueError(f"IterableDataset(checkpointable=True): {error}") from None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_rank_group"] = None  # a process group belongs to its process
        state["_live"] = None
        state["_pickled_ranks"] = _ranks()
        return state

    def _layout(self) -> tuple[int, int, Any]:
        """(ranks, rank, worker_info): this process's place among the
        trainer's readers; worker_info is None in the trainer process."""
        info = torch.utils.data.get_worker_info()  # type: ignore[no-untyped-call]
        ranks, rank = _ranks()
        if info is not None and ranks == 1:
            ranks, rank = self._pickled_ranks
        return ranks, rank, info

    def state_dict(self) -> dict[str, Any]:
        """Where this process's reading stands, as of the last batch it
        yielded: PyTorch's convention (torchdata's StatefulDataLoader and
        Lightning call it). Under DDP each rank saves its own; restore them
        together with merge_state_dicts, on any number of ranks. With
        DataLoader workers it describes the reading of the process it is
        called in (StatefulDataLoader calls it in each worker).

        Saving needs a pipeline that can resume exactly: a local one, or a
        distributed_epoch read with exactly_once=True (or deterministic);
        anything else is refused naming why, from the epoch's first batch on
        (iterator.save() refuses before the first element too). Between
        epochs the state is the next epoch's start."""
        ranks, _, info = self._layout()
        return {
            "version": _STATE_VERSION,
            "iterator": None if self._live is None else self._live.save(),
            "next_read_repetition": self.dataset.next_read_repetition,
            "dropped_batches": self.dropped_batches,
            "repeated_batches": self.repeated_batches,
            # Readers that shared the job with this one: its state alone
            # misses what they took.
            "readers": ranks * (info.num_workers if info is not None else 1),
            # The epoch's last steps hand out batches pooled across the
            # ranks (even_batches), which no reader holds any more: the
            # state keeps those not yet yielded.
            "pending": list(self._pending),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes the next epoch from a state_dict() (one process's), or
        from merge_state_dicts([...]) of all ranks' states (needed when the
        ranks read a shared job, as a service read under DDP does: each
        rank's own state knows only the batches it took)."""
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            raise ValueError(
                f"IterableDataset.load_state_dict: not a state of this version ({_STATE_VERSION}) of "
                "IterableDataset.state_dict() or sluice.torch.merge_state_dicts()"
            )
        ranks, _, info = self._layout()
        shared = "merged" not in state and state.get("readers", 1) > 1 and state.get("iterator") is not None
        if shared and self.dataset.reads_from_service():
            raise ValueError(
                "IterableDataset.load_state_dict: this state is one of "
                f"{state['readers']} readers' (DDP ranks or DataLoader workers) of one shared job, so it misses "
                "the batches the others took: restore from sluice.torch.merge_state_dicts([state of each "
                "reader, ...])"
            )
        if info is not None:
            raise ValueError(
                "IterableDataset.load_state_dict: restoring runs in the trainer process (DataLoader "
                "num_workers=0): each worker process would restore the same state on its own"
            )
        self.dataset.next_read_repetition = max(self.dataset.next_read_repetition, state["next_read_repetition"])
        self.dropped_batches = state["dropped_batches"]
        self.repeated_batches = state.get("repeated_batches", 0)
        self._restore = state

    def _replica(self) -> str:
        if self.device.type == "cpu":
            return "CPU:0"
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return f"GPU:{index}"

    def _group(self) -> ProcessGroup:
        # A gloo group of its own, so that these small CPU collectives never
        # interleave with the trainer's (NCCL or not) on the default group.
        if self._rank_group is None:
            self._rank_group = torch.distributed.new_group(backend="gloo")  # type: ignore[no-untyped-call]
        return self._rank_group

    def _readers_dataset(self, ranks: int, rank: int, info: Any) -> _sluice.Dataset:
        """This reader's dataset for the epoch starting now."""
        dataset = self.dataset
        epoch = self._epochs
        self._epochs += 1
        if dataset.reads_from_service():
            if info is not None:
                return dataset.read_as_peer(self.job_name, _loader_key(self._token, info, epoch))
            if ranks > 1:
                # One collective, at the first epoch: the job and a token
                # of this run, from which every rank makes the same key.
                if self._run_token is None:
                    agreed = [self.job_name, secrets.token_hex(8)]
                    torch.distributed.broadcast_object_list(agreed, src=0, group=self._group())  # type: ignore[no-untyped-call]
                    self.job_name, self._run_token = agreed
                return dataset.read_as_peer(self.job_name, f"ranks-{self._run_token}-{epoch}")
            return dataset
        readers, reader = 1, 0
        if info is not None:
            readers, reader = info.num_workers, info.id
        if self.batch == "per_rank":
            readers, reader = ranks * readers, rank * readers + reader
        if readers == 1:
            return dataset
        dataset.check_repeatable_order()  # each reader keeps its share of one order
        return dataset.shard(readers, reader)

    def __iter__(self) -> Iterator[Any]:
        ranks, rank, info = self._layout()
        if info is not None and self.device.type == "cuda":
            raise ValueError(
                "IterableDataset(device='cuda') runs in the trainer process: use DataLoader(num_workers=0); "
                "the SDK reads and copies on threads of its own"
            )
        if ranks > 1 and info is not None:
            raise ValueError(
                "IterableDataset under DDP needs DataLoader(num_workers=0): the ranks agree on their job and "
                "(even_batches) before each batch, which only the trainer process can do; the reading, "
                "decoding and copying run on the SDK's C++ threads anyway"
            )
        if self._restore is not None and info is not None:
            raise ValueError(
                "IterableDataset: a state loaded with load_state_dict is restored in the trainer process "
                "(DataLoader num_workers=0): each worker process would restore it on its own"
            )
        dataset = self._readers_dataset(ranks, rank, info)
        restore, self._restore = self._restore, None
        self._live, self._pending = None, []
        if restore is not None and restore.get("pending"):
            # A restored tail first, in equal shares, evened as the epoch's
            # end is.
            self._pending = self._shares(list(restore["pending"]), ranks, rank)
            yield from self._yield_pending()
        source = self._elements(dataset, ranks, rank, restore)
        if ranks > 1 and self.even_batches != "uneven":
            source = self._even(source, ranks, rank)
        yield from source
        # Between epochs a state starts the next one.
        self._live, self._pending = None, []

    def _yield_pending(self) -> Iterator[Any]:
        while self._pending:
            batch = self._pending.pop(0)
            yield _map_tensors(lambda t: t.to(self.device), batch)

    def _elements(
        self, dataset: _sluice.Dataset, ranks: int, rank: int, restore: dict[str, Any] | None
    ) -> Iterator[Any]:
        global_batch = self.batch == "global" and ranks > 1
        if not global_batch and self.device.type == "cpu":
            if restore is None or (restore.get("iterator") is None and restore.get("merged") is None):
                self._live = iter(dataset)  # saved before its first batch
            elif restore.get("merged") is not None:
                self._live = dataset.iterator(restore_from=restore["merged"], consumer_index=rank, num_consumers=ranks)
            else:
                self._live = dataset.iterator(restore_from=restore["iterator"])
            for element in self._live:
                yield to_torch(element)
            return
        if restore is not None and (restore.get("iterator") is not None or restore.get("merged") is not None):
            raise ValueError(
                "IterableDataset.load_state_dict: restoring is built for device='cpu' with batch='per_rank'; "
                "this dataset reads through distribute_dataset"
            )
        replica = self._replica()
        distributed = _sluice.distribute_dataset(
            dataset,
            [replica],
            num_input_pipelines=ranks if global_batch else 1,
            input_pipeline_id=rank if global_batch else 0,
            auto_shard_policy=self.auto_shard_policy,
            prefetch_buffer_size=self.prefetch_buffer_size,
        )
        self._live = iter(distributed)
        for step in self._live:
            yield to_torch(step[replica])

    def _even(self, source: Iterator[Any], ranks: int, rank: int) -> Iterator[Any]:
        group = self._group()
        flag = torch.zeros(1, dtype=torch.int64)
        while True:
            error, batch = None, None
            try:
                batch = next(source, None)
            except Exception as failed:  # every rank must hear of it, or the others wait for good
                error = failed
            flag.fill_(-1 if error is not None else (0 if batch is None else 1))
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MIN, group=group)  # type: ignore[no-untyped-call]
            if flag.item() == -1:
                _raise_with_ranks(error)
            if flag.item() == 1:
                yield batch
                continue
            # Some rank has run out. What the others still hold (what their
            # readers buffered of a shared job, or the end of a shard) is
            # pooled and spread in whole rounds of one batch per rank.
            # Copied one by one: a GPU reader's prefetch buffers go back
            # only as the batches holding them are dropped.
            left = []
            try:
                while batch is not None:
                    left.append(_map_tensors(lambda t: t.to("cpu", copy=True), batch))
                    batch = next(source, None)
            except Exception as failed:
                error = failed
            counts: list[Any] = [None] * ranks
            torch.distributed.all_gather_object(counts, -1 if error is not None else len(left), group=group)  # type: ignore[no-untyped-call]
            if min(counts) < 0:
                _raise_with_ranks(error)
            if sum(counts) == 0:
                return
            pooled: list[Any] = [None] * ranks
            torch.distributed.all_gather_object(pooled, left, group=group)  # type: ignore[no-untyped-call]
            self._pending = self._shares([b for held in pooled for b in held], ranks, rank)
            yield from self._yield_pending()
            return

    def _shares(self, everything: list[Any], ranks: int, rank: int) -> list[Any]:
        """This rank's share of the pooled batches, in whole rounds of one per
        rank: the last round filled with repeats ("pad") or left out ("drop")."""
        if self.even_batches == "pad":
            rounds = -(-len(everything) // ranks)
            repeated = rounds * ranks - len(everything)
            # Repeats from the pool's start, round and round if it is short.
            everything = everything + [everything[i % len(everything)] for i in range(repeated)]
            self.repeated_batches += repeated
            _sluice._count_repeated_batches(repeated)
        else:
            rounds = len(everything) // ranks
            dropped = len(everything) - rounds * ranks
            self.dropped_batches += dropped
            _sluice._count_dropped_batches(dropped)
            if dropped and rank == 0:
                print(
                    f"sluice: warning: IterableDataset(even_batches='drop'): {dropped} batch(es) dropped at the "
                    f"end of the epoch so that {ranks} ranks take equal steps",
                    file=sys.stderr,
                )
        return everything[rank * rounds : (rank + 1) * rounds]


def _raise_with_ranks(error: BaseException | None) -> NoReturn:
    """Raises this rank's reading error, or says another rank's failed."""
    if error is not None:
        raise error
    raise RuntimeError(
        "IterableDataset(even_batches=True): another rank's reading failed (its own error says why), so this "
        "rank stops too rather than wait for it at the next batch"
    )

def merge_state_dicts(states: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One state from the IterableDataset.state_dict() of every rank (or
    reader) of a shared job, saved at the same step, that
    IterableDataset.load_state_dict resumes on any number of ranks: the
    rest of the epoch, each batch exactly once (sluice.merge_saved_states
    underneath)."""
    states = list(states)
    if not states or any(not isinstance(s, dict) or s.get("version") != _STATE_VERSION for s in states):
        raise ValueError(f"sluice.torch.merge_state_dicts: takes states of IterableDataset.state_dict() "
                         f"(version {_STATE_VERSION}), at least one")
    iterators = [s["iterator"] for s in states if s["iterator"] is not None]
    return {
        "version": _STATE_VERSION,
        "merged": _sluice.merge_saved_states(iterators) if iterators else None,
        "iterator": None,
        "next_read_repetition": max(s["next_read_repetition"] for s in states),
        "dropped_batches": max(s["dropped_batches"] for s in states),
        "repeated_batches": max(s.get("repeated_batches", 0) for s in states),
        "pending": [batch for s in states for batch in s.get("pending", [])],
    }
