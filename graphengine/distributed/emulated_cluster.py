"""An emulated cluster on this machine: K hosts as network namespaces on a bridge, each link
rate-limited, torchrun across them with every host reading its own data directory.

The layout, all of it inside namespaces this module creates (the root namespace's
interfaces and routes are never touched)::

    <prefix>-br        a namespace holding the bridge ``br0`` and one port ``gep<i>`` a host
    <prefix>-h<i>      host i: loopback up, ``gev<i>`` (the other end of ``gep<i>``) with
                       address 198.18.<subnet>.<i + 1>/24

Addresses come only from the benchmarking range 198.18.0.0/15 (RFC 2544), so nothing here
can shadow a real network. Each link is shaped by ``tc qdisc ... tbf`` (rate, burst,
latency) on both of its ends, so traffic is limited in both directions; a link can be cut
(:meth:`EmulatedCluster.cut`) and mended. ``<prefix>`` is ``gecl<pid>x<n>``: parallel runs
cannot collide, and :func:`remove_stale_namespaces` deletes the namespaces of runs whose
process is gone.

Training across the hosts is what a real cluster runs, one torchrun per host with a static
rendezvous (:func:`torchrun_command`)::

    GLOO_SOCKET_IFNAME=<host's interface> python -m torch.distributed.run \\
        --nnodes K --node-rank i --master-addr <host 0's address> --master-port P \\
        --nproc-per-node N -m graphengine train --root <host's data directory> ...

On real machines only the addresses and the interface name change: ``--master-addr`` is an
address of host 0 the others reach, ``GLOO_SOCKET_IFNAME`` the interface each host reaches
it by, and each host's data directory holds that host's copy of the dataset or its parts
of a partition (:meth:`EmulatedCluster.copy_partition`). ``docs/cluster.md`` says more.

Every command this module runs has a timeout, and :meth:`EmulatedCluster.down` (also run
when the ``with`` block raises) stops the processes started in the hosts and deletes the
namespaces, which removes their interfaces and the bridge with them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from graphengine.distributed.launch import cores_per_worker

log = logging.getLogger(__name__)

PREFIX = "gecl"
BENCHMARKING = ipaddress.ip_network("198.18.0.0/15")
BRIDGE = "br0"
COMMAND_TIMEOUT_S = 20.0
STOP_GRACE_S = 5.0
MASTER_PORT = 29500
# tbf refills its bucket on the kernel's timer, so the bucket holds a few ticks of the rate
# (else the link runs below it), and no less than the largest packet veth's segmentation
# offload hands it (a packet larger than the bucket is dropped).
BURST_S = 0.004
MIN_BURST_BYTES = 65536
_SERIAL = itertools.count()
TRANSFER_PORT = 5301
# Reads exactly N bytes on (address, port), answers one byte, prints the bytes it read.
_RECEIVER = """
import socket, sys
address, port, n, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
server = socket.create_server((address, port))
server.settimeout(timeout)
conn, _ = server.accept()
conn.settimeout(timeout)
got = 0
while got < n:
    chunk = conn.recv(1 << 20)
    if not chunk:
        break
    got += len(chunk)
conn.sendall(b"k")
print(got)
"""
# Connects (retrying while the receiver starts), sends N zero bytes, waits for the answer,
# prints the seconds from the first byte sent to the answer.
_SENDER = """
import socket, sys, time
address, port, n, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
deadline = time.monotonic() + 20
while True:
    try:
        conn = socket.create_connection((address, port), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
conn.settimeout(timeout)
payload = bytes(n)
start = time.monotonic()
conn.sendall(payload)
assert conn.recv(1) == b"k"
print(time.monotonic() - start)
"""
_STALE = re.compile(rf"^{PREFIX}(\d+)x\d+-(br|h\d+)$")


@dataclass(frozen=True)
class Link:
    """The shaping of every host's link, applied by ``tbf`` at both of its ends.

    Attributes:
        rate_mbit: the rate in Mbit/s (10^6 bits) each way.
        burst_bytes: the token bucket's size; ``None``: the bytes of :data:`BURST_S`
            seconds at the rate, at least :data:`MIN_BURST_BYTES`.
        latency_ms: the longest a packet may wait in the queue before tbf drops it.
    """

    rate_mbit: float = 1000.0
    burst_bytes: int | None = None
    latency_ms: float = 50.0

    def __post_init__(self):
        if not self.rate_mbit > 0:
            raise ValueError(f"'rate_mbit' must be positive (got {self.rate_mbit})")
        if self.burst_bytes is not None and self.burst_bytes < 2048:
            raise ValueError(f"'burst_bytes' must be at least 2048 (got {self.burst_bytes})")
        if not self.latency_ms > 0:
            raise ValueError(f"'latency_ms' must be positive (got {self.latency_ms})")

    @property
    def bytes_per_s(self) -> float:
        return self.rate_mbit * 1e6 / 8

    @property
    def bucket_bytes(self) -> int:
        """The token bucket's size in bytes."""
        if self.burst_bytes is not None:
            return self.burst_bytes
        return max(MIN_BURST_BYTES, int(self.bytes_per_s * BURST_S))

    def tbf_args(self) -> list[str]:
        """The arguments of ``tc qdisc add dev X root`` that shape a link this way."""
        return [
            "tbf",
            "rate",
            f"{self.rate_mbit}mbit",
            "burst",
            str(self.bucket_bytes),
            "latency",
            f"{self.latency_ms}ms",
        ]


@dataclass(frozen=True)
class Host:
    """One emulated host.

    Attributes:
        rank: the host's node rank (torchrun's ``--node-rank``).
        namespace: its network namespace.
        interface: its end of its link, in its namespace (``GLOO_SOCKET_IFNAME``).
        address: its IPv4 address on the cluster's /24.
        data_dir: the only data directory its commands are given.
        log_dir: where the output of its torchrun goes.
    """

    rank: int
    namespace: str
    interface: str
    address: str
    data_dir: Path
    log_dir: Path


@dataclass(frozen=True)
class HostRun:
    """What one host's command did: its exit code (``None``: still running when the wait
    ended, then stopped), its output and its seconds from start to exit."""

    host: Host
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float


def emulation_unavailable() -> str | None:
    """Why an emulated cluster cannot be brought up here, or ``None`` when it can: it needs
    root, ``ip`` and ``tc``, and a kernel that creates network namespaces."""
    if os.geteuid() != 0:
        return "an emulated cluster needs root (network namespaces, veth pairs, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"an emulated cluster needs the '{tool}' command (iproute2)"
    probe = f"{PREFIX}{os.getpid()}x{next(_SERIAL)}-h0"
    done = _run(["ip", "netns", "add", probe], check=False)
    if done.returncode != 0:
        return f"'ip netns add' failed: {done.stderr.strip()}"
    _run(["ip", "netns", "del", probe], check=False)
    return None


def remove_stale_namespaces() -> list[str]:
    """Delete the namespaces of emulated clusters whose process is gone (one killed before
    its teardown); returns their names. Namespaces of live processes are kept."""
    listed = _run(["ip", "netns", "list"], check=False).stdout.split("\n")
    removed = []
    for line in listed:
        name = line.split(" ")[0]
        match = _STALE.match(name)
        dead = match is not None and not Path(f"/proc/{match.group(1)}").exists()
        if dead and _run(["ip", "netns", "del", name], check=False).returncode == 0:
            removed.append(name)
    if removed:
        log.info("removed the namespaces of dead emulated clusters: %s", ", ".join(removed))
    return removed


def torchrun_command(
    host: Host,
    num_hosts: int,
    master: Host,
    args: Sequence[str],
    nproc_per_node: int = 1,
    master_port: int = MASTER_PORT,
) -> list[str]:
    """Host ``host``'s torchrun with a static rendezvous at ``master``'s address, running
    ``args`` (e.g. ``["-m", "graphengine", "train", ...]``) in ``nproc_per_node`` workers:
    global ranks ``host.rank * nproc_per_node + local_rank``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={num_hosts}",
        f"--node-rank={host.rank}",
        f"--master-addr={master.address}",
        f"--master-port={master_port}",
        f"--nproc-per-node={nproc_per_node}",
        *args,
    ]


class ClusterRun:
    """Commands started in every host (:meth:`EmulatedCluster.start_torchrun`), awaited by
    :meth:`wait`; ``started`` is their start on ``time.monotonic``'s clock."""

    def __init__(self, hosts: list[Host], processes: list[subprocess.Popen]):
        self.hosts = hosts
        self.processes = processes
        self.started = time.monotonic()
        self._ended: dict[int, float] = {}

    def poll(self) -> list[int | None]:
        """Each host's exit code so far (``None``: running)."""
        codes = [process.poll() for process in self.processes]
        for rank, code in enumerate(codes):
            if code is not None and rank not in self._ended:
                self._ended[rank] = time.monotonic()
        return codes

    def wait(self, timeout_s: float) -> list[HostRun]:
        """Wait up to ``timeout_s`` seconds for every host's command, stop those still
        running, and return what each did."""
        deadline = time.monotonic() + timeout_s
        while None in self.poll() and time.monotonic() < deadline:
            time.sleep(0.2)
        codes = self.poll()
        running = [p for p, code in zip(self.processes, codes, strict=True) if code is None]
        for process in running:
            _stop(process)
        runs = []
        for rank, (host, process) in enumerate(zip(self.hosts, self.processes, strict=True)):
            ended = self._ended.get(rank, time.monotonic())
            runs.append(
                HostRun(
                    host,
                    None if process in running else process.returncode,
                    (host.log_dir / "stdout.log").read_text(errors="replace"),
                    (host.log_dir / "stderr.log").read_text(errors="replace"),
                    ended - self.started,
                )
            )
        return runs


class EmulatedCluster:
    """K emulated hosts on one bridge; a context manager that brings them up and down.

    Args:
        num_hosts: hosts, at least 2.
        workdir: where each host's data and log directories go (``host-<i>/data``,
            ``host-<i>/log``).
        link: the shaping of every host's link.
        subnet: the third octet of the hosts' 198.18.<subnet>.0/24 (0 to 255).

    Example::

        with EmulatedCluster(2, tmp, Link(rate_mbit=1000)) as cluster:
            for host in cluster.hosts:
                cluster.copy_to_host(host, "datasets/synthetic-small")
            runs = cluster.torchrun(lambda host: ["-m", "graphengine", "train",
                                                  "--root", str(host.data_dir)])
    """

    def __init__(self, num_hosts: int, workdir: str | Path, link: Link = Link(), subnet: int = 0):
        if num_hosts < 2:
            raise ValueError(f"'num_hosts' must be at least 2 (got {num_hosts})")
        if not 0 <= subnet <= 255:
            raise ValueError(f"'subnet' must be in [0, 255] (got {subnet})")
        network = ipaddress.ip_network(f"198.18.{subnet}.0/24")
        if num_hosts > network.num_addresses - 2:
            raise ValueError(f"'num_hosts' must be at most 254 (got {num_hosts})")
        assert network.subnet_of(BENCHMARKING)
        self.link = link
        self.prefix = f"{PREFIX}{os.getpid()}x{next(_SERIAL)}"
        self.bridge_namespace = f"{self.prefix}-br"
        workdir = Path(workdir)
        self.hosts = [
            Host(
                rank=i,
                namespace=f"{self.prefix}-h{i}",
                interface=f"gev{i}",
                address=str(network.network_address + i + 1),
                data_dir=workdir / f"host-{i}" / "data",
                log_dir=workdir / f"host-{i}" / "log",
            )
            for i in range(num_hosts)
        ]
        self._network = network
        self._processes: list[subprocess.Popen] = []
        self._created: list[str] = []

    def __enter__(self) -> EmulatedCluster:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        """Create the namespaces, the bridge, one shaped link a host and the directories;
        on a failure, remove what was made and raise."""
        remove_stale_namespaces()
        try:
            self._add_namespace(self.bridge_namespace)
            bridge = ["ip", "-n", self.bridge_namespace, "link"]
            _run([*bridge, "add", BRIDGE, "type", "bridge"])
            _run([*bridge, "set", BRIDGE, "up"])
            for host in self.hosts:
                self._add_host(host)
        except BaseException:
            self.down()
            raise
        log.info(
            "emulated cluster %s up: %d hosts on %s, links %s Mbit/s",
            self.prefix,
            len(self.hosts),
            self._network,
            self.link.rate_mbit,
        )

    def _add_namespace(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self._created.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _add_host(self, host: Host) -> None:
        port = f"gep{host.rank}"
        self._add_namespace(host.namespace)
        # Made inside the host's namespace with its peer straight in the bridge's: neither
        # end ever exists in the root namespace.
        peer = ["peer", "name", port, "netns", self.bridge_namespace]
        _run(["ip", "-n", host.namespace, "link", "add", host.interface, "type", "veth", *peer])
        _run(["ip", "-n", self.bridge_namespace, "link", "set", port, "master", BRIDGE, "up"])
        address = f"{host.address}/{self._network.prefixlen}"
        _run(["ip", "-n", host.namespace, "addr", "add", address, "dev", host.interface])
        _run(["ip", "-n", host.namespace, "link", "set", host.interface, "up"])
        tbf = self.link.tbf_args()
        _run(["tc", "-n", host.namespace, "qdisc", "add", "dev", host.interface, "root", *tbf])
        _run(["tc", "-n", self.bridge_namespace, "qdisc", "add", "dev", port, "root", *tbf])
        host.data_dir.mkdir(parents=True, exist_ok=True)
        host.log_dir.mkdir(parents=True, exist_ok=True)

    def down(self) -> None:
        """Stop every process started in the hosts, then delete the namespaces (their
        interfaces, the bridge and the shaping go with them). Safe to call twice."""
        for process in self._processes:
            if process.poll() is None:
                _stop(process)
        self._processes.clear()
        for name in reversed(self._created):
            self._stop_leftovers(name)
            done = _run(["ip", "netns", "del", name], check=False)
            if done.returncode != 0:
                log.warning("could not delete namespace %s: %s", name, done.stderr.strip())
        self._created.clear()

    def _stop_leftovers(self, namespace: str) -> None:
        """Kill what still runs in ``namespace``: only processes this cluster started (the
        namespace is its own), e.g. workers whose launcher was killed before them."""
        pids = _run(["ip", "netns", "pids", namespace], check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)

    def env(self, host: Host, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a command in ``host``: this process's, with the package on
        ``PYTHONPATH``, gloo on the host's interface, and ``extra``.

        A real host has cores of its own, while the emulated ones share this machine's: each
        host's torch and Numba get ``cores // num_hosts`` threads (``OMP_NUM_THREADS``,
        ``NUMBA_NUM_THREADS``) unless this process's environment or ``extra`` sets them, so
        that one host's idle threads do not spin on the cores another host computes on."""
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH", "")
        share = str(cores_per_worker(len(self.hosts)))
        return {
            "OMP_NUM_THREADS": share,
            "NUMBA_NUM_THREADS": share,
            **os.environ,
            "PYTHONPATH": package_root + (os.pathsep + path if path else ""),
            "GLOO_SOCKET_IFNAME": host.interface,
            **(extra or {}),
        }

    def popen(self, host: Host, argv: Sequence[str], env: dict[str, str] | None = None, **kw):
        """Start ``argv`` in ``host``'s namespace (its own process group); stopped by
        :meth:`down` if still running."""
        process = subprocess.Popen(
            ["ip", "netns", "exec", host.namespace, *map(str, argv)],
            env=self.env(host, env),
            start_new_session=True,
            **kw,
        )
        self._processes.append(process)
        return process

    def run(
        self,
        host: Host,
        argv: Sequence[str],
        timeout_s: float = COMMAND_TIMEOUT_S,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``host``'s namespace; its output captured as text. Raises
        ``subprocess.TimeoutExpired`` (the command stopped) past ``timeout_s``."""
        process = self.popen(
            host, argv, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(process)
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def transfer_seconds(
        self,
        source: Host,
        target: Host,
        num_bytes: int,
        port: int = TRANSFER_PORT,
        timeout_s: float = 120.0,
    ) -> float:
        """Send ``num_bytes`` zero bytes from ``source`` to ``target`` over one TCP
        connection; the seconds from the first byte sent to the receiver's answer after the
        last. Raises ``RuntimeError`` when either side fails or fewer bytes arrive."""
        args = [target.address, str(port), str(num_bytes), str(timeout_s)]
        receiver = self.popen(
            target,
            [sys.executable, "-c", _RECEIVER, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        sent = self.run(source, [sys.executable, "-c", _SENDER, *args], timeout_s=timeout_s)
        try:
            received, errors = receiver.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(receiver)
            raise
        if sent.returncode != 0 or receiver.returncode != 0 or int(received or 0) != num_bytes:
            raise RuntimeError(
                f"the transfer from host {source.rank} to host {target.rank} failed: "
                f"{sent.stderr[-500:]} {errors[-500:]}"
            )
        return float(sent.stdout)

    def copy_to_host(self, host: Host, source: str | Path, name: str | None = None) -> Path:
        """Copy the file or directory ``source`` into ``host``'s data directory (as
        ``name``, default its own name); returns the copy's path."""
        source = Path(source)
        target = host.data_dir / (name or source.name)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
        return target

    def copy_partition(
        self, partition: str | Path, nproc_per_node: int = 1, name: str = "parts"
    ) -> list[Path]:
        """Give each host its share of the partition at ``partition``: the manifest and id
        maps, and the directories of the parts its workers open (``part-<r>`` for global
        ranks ``r`` of the host), nothing of the other parts. Returns each host's copy."""
        partition = Path(partition)
        copies = []
        for host in self.hosts:
            target = host.data_dir / name
            target.mkdir(parents=True, exist_ok=True)
            for entry in partition.iterdir():
                if entry.is_file():
                    shutil.copy2(entry, target / entry.name)
            for local in range(nproc_per_node):
                part = f"part-{host.rank * nproc_per_node + local}"
                shutil.copytree(partition / part, target / part, dirs_exist_ok=True)
            copies.append(target)
        return copies

    def start_torchrun(
        self,
        args_for: Callable[[Host], Sequence[str]],
        nproc_per_node: int = 1,
        master_port: int = MASTER_PORT,
        env: dict[str, str] | None = None,
    ) -> ClusterRun:
        """Start one torchrun a host (:func:`torchrun_command`) running ``args_for(host)``,
        its output in ``host.log_dir`` (``stdout.log``, ``stderr.log``), its working
        directory its data directory."""
        processes = []
        for host in self.hosts:
            command = torchrun_command(
                host,
                len(self.hosts),
                self.hosts[0],
                [str(arg) for arg in args_for(host)],
                nproc_per_node,
                master_port,
            )
            # The command writes to its own copies of the files' descriptors.
            with (
                open(host.log_dir / "stdout.log", "w") as out,
                open(host.log_dir / "stderr.log", "w") as err,
            ):
                process = self.popen(host, command, env, stdout=out, stderr=err, cwd=host.data_dir)
            processes.append(process)
        return ClusterRun(self.hosts, processes)

    def torchrun(
        self,
        args_for: Callable[[Host], Sequence[str]],
        nproc_per_node: int = 1,
        timeout_s: float = 600.0,
        master_port: int = MASTER_PORT,
        env: dict[str, str] | None = None,
    ) -> list[HostRun]:
        """:meth:`start_torchrun`, then wait up to ``timeout_s`` seconds for every host."""
        return self.start_torchrun(args_for, nproc_per_node, master_port, env).wait(timeout_s)

    def cut(self, host: Host) -> None:
        """Cut ``host``'s link: its bridge port goes down, and from then on nothing crosses
        it either way (the host keeps its address; its packets are lost)."""
        _run(["ip", "-n", self.bridge_namespace, "link", "set", f"gep{host.rank}", "down"])

    def mend(self, host: Host) -> None:
        """Bring ``host``'s cut link back."""
        _run(["ip", "-n", self.bridge_namespace, "link", "set", f"gep{host.rank}", "up"])


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """Run an ``ip`` or ``tc`` command; with ``check``, raise naming it when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if check and done.returncode != 0:
        raise RuntimeError(f"'{' '.join(argv)}' failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM ``process``'s group (torchrun then stops its workers), SIGKILL after
    :data:`STOP_GRACE_S`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait(timeout=STOP_GRACE_S)
