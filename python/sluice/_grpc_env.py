"""gRPC's poller for a process that may fork.

gRPC's default poller on Linux (epoll1) keeps one epoll set per process for
good once a channel has existed. Children forked after that (a DataLoader's
workers, a multiprocessing.Pool) share it with each other and steal each
other's events: segfaults in gRPC and 60 s hangs. The poll poller keeps
nothing between calls, so a child forked between reads starts gRPC afresh
(measured: no difference in throughput). Set before the native module loads,
unless the user chose a poller; the daemons a LocalCluster starts are
servers that never fork, and keep gRPC's default."""

import gc
import os

SET_BY_SLUICE = "GRPC_POLL_STRATEGY" not in os.environ
if SET_BY_SLUICE:
    os.environ["GRPC_POLL_STRATEGY"] = "poll"


def daemon_environment() -> dict[str, str]:
    """The environment for a daemon this process starts: its own, without
    the poller Sluice chose for this process."""
    env = dict(os.environ)
    if SET_BY_SLUICE:
        env.pop("GRPC_POLL_STRATEGY", None)
    return env


# An iterator or dataset of a finished read that sits in a reference cycle
# keeps its gRPC channel, and so gRPC, alive until the next collection; a
# child forked then would be refused as if forked mid-read (seen after the
# trainer tests ran in one process). Collecting just before each fork
# releases them; a read really in progress stays live, and is refused.
os.register_at_fork(before=gc.collect)
