"""Hosts on one machine, for the multi-host tests (issue 64): each host a
network namespace with its own address on a private bridge, its processes
in a mount namespace of their own where chosen folders (the client's) are
an empty tmpfs - a host without the client's disk. The client is this
process, in the machine's own namespace, on the bridge's address.

The faults a network makes, with iproute2 only (no iptables or netem
needed; this machine's kernel has neither):

- :meth:`Hosts.cut` / :meth:`Hosts.mend`: the host's cable pulled (its
  bridge port down): every packet to and from it is dropped, silently -
  no reset, no refusal; TCP peers find out by their own timeouts.
- :meth:`Hosts.refuse` / :meth:`Hosts.allow`: the host's route to one
  address prohibited: its connections there fail at once (a firewall's
  REJECT), everything else goes through.
- :meth:`Hosts.throttle`: the host's link limited to a rate (a token
  bucket each way): a slow link.

Every address is on a /24 of 10.213.0.0/16 that no interface of the machine
uses; nothing leaves the machine. :meth:`Hosts.close` stops every process
started (by process group: SIGTERM, then SIGKILL) and removes every
namespace, link and the bridge, also after a failed test."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``ip ARGS`` (``tc ...`` when ARGS start with "tc"), inside namespace ``ns`` if given."""
    program = list(args) if args[0] == "tc" else ["ip", *args]
    cmd = (["ip", "netns", "exec", ns] if ns else []) + program
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def unavailable() -> str | None:
    """Why this machine cannot host the namespaces (None when it can): not
    root, no ``ip`` or ``unshare``, or the kernel refuses a namespace."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    for tool in ("ip", "unshare", "tc"):
        if shutil.which(tool) is None:
            return f"needs iproute2/util-linux's `{tool}`"
    probe = f"icprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"the kernel refused a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _free_subnet() -> int:
    """A third octet N such that no interface of the machine has an address
    in 10.213.N.0/24 (several test runs at once each get their own)."""
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True, check=True).stdout
    start = os.getpid() % 200
    for i in range(200):
        n = 10 + (start + i) % 200
        if f" 10.213.{n}." not in used:
            return n
    raise RuntimeError("no free 10.213.N.0/24 for the test hosts")


class Hosts:
    """A bridge and the hosts on it (see the module notes)."""

    def __init__(self) -> None:
        self.n = _free_subnet()
        self.bridge = f"icb{self.n}"
        self.client_address = f"10.213.{self.n}.1"
        self.hosts: dict[str, dict] = {}
        self.procs: list[subprocess.Popen] = []
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.client_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    def add(self, name: str) -> str:
        """A new host ``name`` (at most 6 characters); returns its address."""
        if len(name) > 6 or name in self.hosts:
            raise ValueError(f"host name {name!r}: at most 6 characters, and new")
        ns, veth = f"ic{self.n}-{name}", f"ic{self.n}{name}"
        address = f"10.213.{self.n}.{10 + len(self.hosts)}"
        self.hosts[name] = {"ns": ns, "veth": veth, "address": address}
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("addr", "add", f"{address}/24", "dev", "eth0", ns=ns)
        _ip("link", "set", "eth0", "up", ns=ns)
        return address

    def address(self, name: str) -> str:
        return self.hosts[name]["address"]

    def start(self, name: str, cmd: list[str], *, log: Path, cwd: Path, env: dict, hide: tuple = ()) -> subprocess.Popen:
        """``cmd`` on host ``name``, in its own process group, working in
        ``cwd``, with each folder of ``hide`` an empty tmpfs (that host does
        not have it), its output in ``log``."""
        mounts = "".join(f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(h))} && " for h in hide)
        script = f"{mounts}cd {shlex.quote(str(cwd))} && exec \"$@\""
        full = ["ip", "netns", "exec", self.hosts[name]["ns"], "unshare", "-m", "--propagation", "private", "--",
                "sh", "-c", script, "sh", *cmd]
        with open(log, "ab") as fh:
            proc = subprocess.Popen(full, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs.append(proc)
        return proc

    def cut(self, name: str) -> None:
        """Every packet to and from host ``name`` dropped, silently."""
        _ip("link", "set", self.hosts[name]["veth"], "down")

    def mend(self, name: str) -> None:
        _ip("link", "set", self.hosts[name]["veth"], "up")

    def refuse(self, name: str, address: str) -> None:
        """Host ``name``'s connections to ``address`` fail at once."""
        _ip("route", "add", "prohibit", f"{address}/32", ns=self.hosts[name]["ns"])

    def allow(self, name: str, address: str) -> None:
        _ip("route", "del", "prohibit", f"{address}/32", ns=self.hosts[name]["ns"])

    def throttle(self, name: str, rate: str | None) -> None:
        """Host ``name``'s link limited to ``rate`` (e.g. ``"8mbit"``) both
        ways; None lifts the limit."""
        h = self.hosts[name]
        for dev, ns in ((h["veth"], None), ("eth0", h["ns"])):
            _ip("tc", "qdisc", "del", "dev", dev, "root", ns=ns, check=False)
            if rate:
                # tbf: a token bucket; latency bounds the queue (packets beyond it are dropped, as a slow link does)
                _ip("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit", "latency",
                    "2s", ns=ns)

    def close(self) -> None:
        """Stop every process started here and remove every namespace, link
        and the bridge."""
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15.0
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for h in self.hosts.values():
            # any process left in the namespace (a grandchild that left the group) goes with it
            pids = _ip("netns", "pids", h["ns"], check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", h["ns"], check=False)
            _ip("link", "del", h["veth"], check=False)
        _ip("link", "del", self.bridge, check=False)
