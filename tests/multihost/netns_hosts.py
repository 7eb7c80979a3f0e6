"""Hosts as network namespaces on one machine, for tests of Sluice across
hosts (issue 36): N namespaces, each with one link (a veth pair) to a bridge
in a namespace of its own, addresses 10.X.Y.i/24 that the fixture makes and
removes itself, per-link bandwidth limits (tc tbf) and partitions (a link
set down, or two hosts cut off from each other alone). Nothing is added to
the machine's own namespace. Needs root (or CAP_NET_ADMIN and
CAP_SYS_ADMIN); `skip_reason()` says when it is missing.
"""

import os
import subprocess
import time


# A locally administered unicast address that no host here has: frames to
# it are flooded by the bridge and dropped by every host.
_NOWHERE = "02:00:00:00:00:00"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def skip_reason():
    """Why namespaces cannot be made here, or None when they can."""
    name = f"slcheck{os.getpid() % 100000}"
    try:
        done = _ip("netns", "add", name, check=False)
    except FileNotFoundError:
        return "no `ip` command (iproute2)"
    if done.returncode != 0:
        return f"`ip netns add` is not permitted here: {done.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


class Hosts:
    """`count` hosts; host i has address `address(i)` on its link `eth0`.

    with Hosts(4) as hosts:
        process = hosts.popen(1, ["workerd", ...])
        hosts.partition(1); hosts.heal(1)
    """

    def __init__(self, count):
        tag = os.getpid() % 10000
        self._prefix = f"sl{tag}"
        self._subnet = f"10.{100 + tag % 100}.{tag // 100 % 250}"
        self._switch = f"{self._prefix}sw"
        self._hosts = [f"{self._prefix}h{i}" for i in range(count)]
        self._processes = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def address(self, i):
        return f"{self._subnet}.{i + 1}"

    def _build(self):
        _ip("netns", "add", self._switch)
        _ip("-n", self._switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self._switch, "link", "set", "br0", "up")
        for i, host in enumerate(self._hosts):
            _ip("netns", "add", host)
            _ip("-n", host, "link", "set", "lo", "up")
            port = f"p{i}"
            # Made in the host's namespace, its peer moved to the switch's.
            _ip("-n", host, "link", "add", "eth0", "type", "veth", "peer", "name", port)
            _ip("-n", host, "link", "set", port, "netns", self._switch)
            _ip("-n", self._switch, "link", "set", port, "master", "br0")
            _ip("-n", self._switch, "link", "set", port, "up")
            _ip("-n", host, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _ip("-n", host, "link", "set", "eth0", "up")

    def popen(self, i, argv, **kwargs):
        """Starts `argv` on host i; stopped by close()."""
        process = subprocess.Popen(["ip", "netns", "exec", self._hosts[i], *argv], **kwargs)
        self._processes.append(process)
        return process

    def run(self, i, argv, **kwargs):
        return subprocess.run(["ip", "netns", "exec", self._hosts[i], *argv], **kwargs)

    def partition(self, i):
        """Cuts host i off from every other host (its switch port down)."""
        _ip("-n", self._switch, "link", "set", f"p{i}", "down")

    def heal(self, i):
        _ip("-n", self._switch, "link", "set", f"p{i}", "up")

    def cut(self, i, j):
        """Cuts hosts i and j off from each other alone, both ways: each
        knows the other's address at a hardware address no host has, so
        what they send each other is dropped without an error, as a broken
        path drops it, while both still reach every other host."""
        for a, b in ((i, j), (j, i)):
            _ip("-n", self._hosts[a], "neigh", "replace", self.address(b), "lladdr", _NOWHERE, "dev", "eth0",
                "nud", "permanent")

    def mend(self, i, j):
        """Undoes cut(i, j): the addresses are resolved again (ARP)."""
        for a, b in ((i, j), (j, i)):
            _ip("-n", self._hosts[a], "neigh", "del", self.address(b), "dev", "eth0", check=False)

    def limit(self, i, rate, burst="256kbit"):
        """Host i's link sends at most `rate` (tc's units: "400mbit"); a
        fast rate needs a larger `burst` (a timer tick's bytes)."""
        subprocess.run(
            ["ip", "netns", "exec", self._hosts[i], "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
             "rate", rate, "burst", burst, "latency", "400ms"],
            check=True, capture_output=True)

    def close(self):
        for process in self._processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 5
        for process in self._processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes = []
        for name in self._hosts + [self._switch]:
            _ip("netns", "del", name, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
