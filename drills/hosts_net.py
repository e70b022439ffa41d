"""Hosts on one machine for the ``hosts`` drill: each worker host is a Linux network
namespace (``ip netns``) joined to the services host (the root namespace, where the
embedded stack runs) by a veth pair on a bridge; cutting a host sets its bridge-side
link down, so its packets vanish as on a pulled cable (no reset, no error: the
host's clients wait and time out, exactly as across a real partition).

The embedded stack listens on 127.0.0.1 and Kafka advertises ``127.0.0.1:port``, so
every worker reaches the services through two ``socat`` relays per port, one per
side, like a sidecar proxy and a host's published port:

    worker (host netns) -> 127.0.0.1:P  [socat in the host]
                        -> 10.231.N.1:P [socat on the services host] -> 127.0.0.1:P

The workers' settings stay those of the services host (loopback addresses), and
nothing of the stack listens beyond loopback: the relays on the services host bind
the bridge address only, which exists only while the drill runs.

Needs root (``ip netns``, veth, bridge) and ``socat`` (scripts/bootstrap.sh installs
it).  The hosts share the file system, unlike real hosts: the Milvus Lite flush lock
(adapters/vector_store.py, a file lock) still spans them.  Always :meth:`close`
(idempotent; a run killed before it leaves ``rsd<id>*`` names, which the next run
with the same id removes first).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


class HostNetError(RuntimeError):
    """The namespaces or relays could not be set up (not root, no ``ip``/``socat``,
    or a command failed); the message names the command and its error."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise HostNetError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


@dataclass
class Host:
    """One worker host: its namespace, address and the bridge side of its veth."""

    name: str
    netns: str
    address: str
    link: str  # the veth end on the services host's bridge
    relays: list[subprocess.Popen] = field(default_factory=list)

    def exec_prefix(self) -> list[str]:
        """The command prefix that runs a process on this host."""
        return ["ip", "netns", "exec", self.netns]

    def pids(self) -> list[int]:
        """Every process in the host's namespace (``ip netns pids``)."""
        out = _ip("netns", "pids", self.netns, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]


class HostNet:
    """The services host (bridge ``rsd<id>br``, address ``10.231.<id % 250>.1``) and
    worker hosts ``rsd<id>-<name>`` (``.2``, ``.3``, …).

    ``ports``: the TCP ports of the services host that the workers use (every
    devstack service's ports and the drill's callback receiver)."""

    def __init__(self, names: Sequence[str], ports: Sequence[int], log_path: Path,
                 ident: int | None = None):
        self.log_path = log_path  # the relays' stderr (socat's errors), appended
        ident = os.getpid() % 10000 if ident is None else ident
        self.prefix = f"rsd{ident}"
        self.subnet = f"10.231.{ident % 250}"
        self.bridge = f"{self.prefix}br"
        self.gateway = f"{self.subnet}.1"
        self.ports = sorted(set(ports))
        self.hosts = {n: Host(n, f"{self.prefix}-{n}", f"{self.subnet}.{i + 2}", f"{self.prefix}{n}")
                      for i, n in enumerate(names)}
        self.relays: list[subprocess.Popen] = []  # the services host's

    # ------------------------------------------------------------------ set-up
    def open(self) -> "HostNet":
        """Create the bridge, the namespaces, their links and every relay.
        Raises HostNetError (and removes what it made) when any step fails."""
        if os.geteuid() != 0:
            raise HostNetError("the hosts drill needs root (ip netns, veth, bridge)")
        for tool in ("ip", "socat"):
            if not shutil.which(tool):
                raise HostNetError(f"{tool} not found (scripts/bootstrap.sh installs it)")
        self.close()  # leftovers of a killed run with this id
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in self.hosts.values():
                self._add_host(host)
            for port in self.ports:
                self.relays.append(self._relay([], f"TCP-LISTEN:{port},bind={self.gateway}",
                                               f"TCP:127.0.0.1:{port}"))
            for host in self.hosts.values():
                for port in self.ports:
                    host.relays.append(self._relay(host.exec_prefix(),
                                                   f"TCP-LISTEN:{port},bind=127.0.0.1",
                                                   f"TCP:{self.gateway}:{port}"))
            self._wait_relays()
        except Exception:
            self.close()
            raise
        return self

    def _add_host(self, host: Host) -> None:
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        _ip("link", "set", host.link, "master", self.bridge)
        _ip("link", "set", host.link, "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.netns, "link", "set", "eth0", "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")

    def _relay(self, prefix: list[str], listen: str, target: str) -> subprocess.Popen:
        # fork: one child per connection (in the relay's own process group, killed with
        # it); reuseaddr: a relay restarted on a port in TIME_WAIT binds at once
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            return subprocess.Popen([*prefix, "socat", f"{listen},fork,reuseaddr", target],
                                    stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)

    def _wait_relays(self, timeout_s: float = 10.0) -> None:
        """Every relay process is alive and its port accepts in its namespace."""
        end = time.monotonic() + timeout_s
        pending = [(None, p) for p in self.ports] + \
                  [(h, p) for h in self.hosts.values() for p in self.ports]
        while pending and time.monotonic() < end:
            for relay in self.relays + [r for h in self.hosts.values() for r in h.relays]:
                if relay.poll() is not None:
                    raise HostNetError(f"socat {relay.args[-2]} exited with {relay.returncode} "
                                       f"(its errors: {self.log_path})")
            pending = [(h, p) for h, p in pending if not self._listening(h, p)]
            time.sleep(0.1)
        if pending:
            raise HostNetError(f"relays not listening after {timeout_s:.0f} s: "
                               f"{[(h.name if h else 'services', p) for h, p in pending][:5]}")

    def _listening(self, host: Host | None, port: int) -> bool:
        addr = self.gateway if host is None else "127.0.0.1"
        cmd = ["ss", "-Hltn", f"sport = :{port}"]
        if host is not None:
            cmd = [*host.exec_prefix(), *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        return f"{addr}:{port}" in out

    # ------------------------------------------------------------------ faults
    def cut(self, name: str) -> None:
        """Take host ``name`` off the network: its packets are dropped silently."""
        _ip("link", "set", self.hosts[name].link, "down")

    def restore(self, name: str) -> None:
        """Put host ``name`` back on the network (its connections resume)."""
        _ip("link", "set", self.hosts[name].link, "up")

    def kill(self, name: str) -> int:
        """SIGKILL every process of host ``name`` (its workers, their pools and its
        relays), as a host that dies; returns how many were killed."""
        pids = self.hosts[name].pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for relay in self.hosts[name].relays:
            relay.wait(5)
        return len(pids)

    # ------------------------------------------------------------------ clean-up
    def close(self) -> None:
        """Kill every relay and every process left in the hosts, delete the
        namespaces and the bridge.  Never raises."""
        for host in self.hosts.values():
            for pid in host.pids() if _ip("netns", "pids", host.netns, check=False).returncode == 0 else []:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for relay in self.relays + [r for h in self.hosts.values() for r in h.relays]:
            try:
                os.killpg(relay.pid, signal.SIGKILL)  # the relay and its connections
            except ProcessLookupError:
                pass
            try:
                relay.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.relays = []
        for host in self.hosts.values():
            host.relays = []
            _ip("link", "del", host.link, check=False)
            _ip("netns", "del", host.netns, check=False)
        _ip("link", "del", self.bridge, check=False)
