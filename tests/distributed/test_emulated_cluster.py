"""The emulated cluster: hosts that reach each other on 198.18.0.0/15, links that hold their
tbf rate both ways, a teardown that leaves nothing behind; ``graphengine train`` across
hosts that each read only their own data directory (data, hybrid and partitioned on two and
three hosts, hybrid on partitions on two, to the single machine's test accuracy), and a cut
link that ends every host within the timeout, each naming the rank on the other side.
Skipped where the process is not root or cannot make network namespaces."""

import json
import os
import subprocess
import sys
import time

import pytest

from graphengine.distributed.emulated_cluster import (
    BRIDGE,
    PREFIX,
    EmulatedCluster,
    Link,
    emulation_unavailable,
    remove_stale_namespaces,
)

UNAVAILABLE = emulation_unavailable()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))


def ours(prefix: str) -> dict[str, list[str]]:
    """What of an emulated cluster is left: its namespaces, and any of its interfaces or a
    bridge in the root namespace."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "namespaces": [line for line in namespaces.splitlines() if line.startswith(prefix)],
        "links": [line for line in links.splitlines() if " gev" in line or " gep" in line],
    }


def root_has(interface: str) -> bool:
    """Whether the root namespace has an interface of that name."""
    shown = subprocess.run(["ip", "link", "show", "dev", interface], capture_output=True)
    return shown.returncode == 0


def test_two_hosts_reach_each_other_and_leave_nothing_behind(tmp_path):
    bridge_before = root_has(BRIDGE)
    with EmulatedCluster(2, tmp_path) as cluster:
        a, b = cluster.hosts
        assert cluster.prefix.startswith(PREFIX)
        bridged = subprocess.run(
            ["ip", "-n", cluster.bridge_namespace, "-o", "link", "show", "master", BRIDGE],
            capture_output=True,
            text=True,
        ).stdout
        assert " gep0@" in bridged and " gep1@" in bridged, bridged
        for host in cluster.hosts:
            shown = cluster.run(host, ["ip", "-o", "-4", "addr", "show", host.interface])
            assert f"inet {host.address}/24" in shown.stdout
            assert host.address.startswith("198.18.")
            qdisc = cluster.run(host, ["tc", "qdisc", "show", "dev", host.interface]).stdout
            assert "tbf" in qdisc and "rate 1Gbit" in qdisc, qdisc
        cluster.transfer_seconds(a, b, 4, timeout_s=30)
        cluster.transfer_seconds(b, a, 4, timeout_s=30)
        assert len(ours(cluster.prefix)["namespaces"]) == 3  # the bridge's and two hosts'
    assert ours(cluster.prefix) == {"namespaces": [], "links": []}
    assert root_has(BRIDGE) == bridge_before


def test_teardown_after_an_exception_stops_the_hosts_processes(tmp_path):
    cluster = EmulatedCluster(2, tmp_path)
    with pytest.raises(RuntimeError, match="the body failed"), cluster:
        sleeper = cluster.popen(cluster.hosts[1], ["sleep", "600"])
        raise RuntimeError("the body failed")
    assert sleeper.poll() is not None
    assert ours(cluster.prefix) == {"namespaces": [], "links": []}


def test_namespaces_of_dead_runs_are_removed_and_live_ones_kept():
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names a run that has ended
    dead = f"{PREFIX}{gone.pid}x0-h0"
    live = f"{PREFIX}{os.getpid()}x999-h0"
    for name in (dead, live):
        subprocess.run(["ip", "netns", "add", name], check=True, timeout=20)
    try:
        removed = remove_stale_namespaces()
        assert dead in removed and live not in removed
        assert ours(dead)["namespaces"] == [] and ours(live)["namespaces"] == [live]
    finally:
        for name in (dead, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)


def test_the_link_rate_holds_both_ways(tmp_path):
    link = Link(rate_mbit=20.0)
    num_bytes = 3_000_000
    # The bucket's first burst is free; every byte after it waits for its tokens, and the
    # frames' headers only make the transfer slower.
    floor = (num_bytes - link.bucket_bytes) / link.bytes_per_s
    with EmulatedCluster(2, tmp_path, link) as cluster:
        a, b = cluster.hosts
        for source, target in ((a, b), (b, a)):
            seconds = cluster.transfer_seconds(source, target, num_bytes, timeout_s=30)
            assert 0.95 * floor <= seconds < 10 * floor, (source.rank, seconds, floor)


EPOCHS = 3
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def train(*extra, epochs=EPOCHS, dist_timeout=60, batch_size=1024, evaluate=True) -> list:
    """The arguments after ``python`` (or torchrun's) of a seeded ``graphengine train``;
    without ``evaluate``, no evaluation at all."""
    args = ["-m", "graphengine", "train", "--epochs", epochs, "--seed", 0]
    args += ["--batch-size", batch_size, "--no-progress", "--dist-timeout", dist_timeout]
    return args + ([] if evaluate else ["--eval-every", 0]) + list(extra)


@pytest.fixture(scope="module")
def synthetic_small(tmp_path_factory):
    """A data root holding synthetic-small, and its test accuracy trained on one machine."""
    root = tmp_path_factory.mktemp("source")
    command = [sys.executable, *map(str, train("--dataset", "synthetic-small", "--root", root))]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=240, env={**os.environ, **ONE_THREAD}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return root, json.loads(done.stdout.splitlines()[-1])["test_acc"]


def copy_to_every_host(cluster, root) -> None:
    for host in cluster.hosts:
        for entry in root.iterdir():
            cluster.copy_to_host(host, entry)


def assert_every_host_trained(runs, single_acc: float, points: float = 1.5) -> dict:
    """Every host's torchrun succeeded and its worker joined as its rank; rank 0's final
    JSON line, which it returns, counts every worker and its test accuracy is within
    ``points`` of ``single_acc``."""
    for run in runs:
        assert run.returncode == 0, (run.host.rank, run.stderr[-3000:])
        assert f"rank {run.host.rank} of {len(runs)} joined (gloo)" in run.stderr
    final = json.loads(runs[0].stdout.splitlines()[-1])
    assert final["workers"] == len(runs) and final["epochs_run"] == EPOCHS
    assert single_acc > 0.8 and abs(final["test_acc"] - single_acc) <= points / 100, (
        final,
        single_acc,
    )
    return final


def points_for(num_hosts: int) -> float:
    """How far from the single machine's test accuracy a run on ``num_hosts`` hosts may end."""
    # Three workers split each step's seeds three ways and draw their neighborhoods from three
    # random streams (a partitioned run also cuts more edges): after these few epochs a run
    # lands further from the single machine's accuracy than on two.
    return 1.5 if num_hosts == 2 else 4


@pytest.mark.parametrize("num_hosts", [2, 3])
@pytest.mark.parametrize("parallel", ["data", "hybrid"])
def test_training_across_hosts_reaches_the_single_machine_accuracy(
    tmp_path, synthetic_small, parallel, num_hosts
):
    root, single_acc = synthetic_small
    with EmulatedCluster(num_hosts, tmp_path, subnet=num_hosts) as cluster:
        copy_to_every_host(cluster, root)  # each host its own copy of the dataset
        runs = cluster.torchrun(
            lambda host: train(
                "--dataset",
                "synthetic-small",
                "--root",
                host.data_dir,
                "--parallel",
                parallel,
                batch_size=1024 - 1024 % num_hosts,
            ),
            timeout_s=300,
            env=ONE_THREAD,
        )
    final = assert_every_host_trained(runs, single_acc, points=points_for(num_hosts))
    assert final["parallel"] == parallel


def partition(root, out, parts: int):
    """``graphengine partition`` of synthetic-small under ``root`` into ``parts`` at ``out``."""
    args = ["partition", "--dataset", "synthetic-small", "--root", root]
    args += ["--parts", parts, "--out", out]
    done = subprocess.run(
        [sys.executable, "-m", "graphengine", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def copy_parts(cluster: EmulatedCluster, parts) -> list:
    """Each host's copy of the partition, holding its own part and no other."""
    copies = cluster.copy_partition(parts)
    for rank, copy in enumerate(copies):
        assert sorted(p.name for p in copy.glob("part-*")) == [f"part-{rank}"]
    return copies


@pytest.mark.parametrize("num_hosts", [2, 3])
def test_partitioned_training_with_each_host_holding_only_its_part(
    tmp_path, synthetic_small, num_hosts
):
    root, single_acc = synthetic_small
    parts = partition(root, tmp_path / "parts", num_hosts)
    with EmulatedCluster(num_hosts, tmp_path / "cluster") as cluster:
        copies = copy_parts(cluster, parts)
        runs = cluster.torchrun(
            lambda host: train(
                "--partitions", copies[host.rank], batch_size=1024 - 1024 % num_hosts
            ),
            timeout_s=240,
            env=ONE_THREAD,
        )
    # Three parts also cut more edges, and each worker's seeds are its own part's nodes.
    final = assert_every_host_trained(runs, single_acc, points=points_for(num_hosts))
    assert final["dataset"] == "synthetic-small"


def test_hybrid_on_parts_with_each_host_holding_only_its_part(tmp_path, synthetic_small):
    root, single_acc = synthetic_small
    parts = partition(root, tmp_path / "parts", 2)
    with EmulatedCluster(2, tmp_path / "cluster") as cluster:
        copies = copy_parts(cluster, parts)
        runs = cluster.torchrun(
            lambda host: train("--partitions", copies[host.rank], "--parallel", "hybrid"),
            timeout_s=240,
            env=ONE_THREAD,
        )
    final = assert_every_host_trained(runs, single_acc)
    assert final["parallel"] == "hybrid" and final["dataset"] == "synthetic-small"
    for run in runs:  # each host built its columns from the parts' rows, then trained
        assert "redistributed the features to columns" in run.stderr, run.stderr[-3000:]


def test_a_cut_link_ends_every_host_within_the_timeout_naming_the_lost_rank(
    tmp_path, synthetic_small
):
    timeout = 10
    with EmulatedCluster(2, tmp_path) as cluster:
        copy_to_every_host(cluster, synthetic_small[0])
        metrics = cluster.hosts[0].log_dir / "metrics.jsonl"
        run = cluster.start_torchrun(
            lambda host: train(
                "--dataset",
                "synthetic-small",
                "--root",
                host.data_dir,
                "--metrics",
                metrics,
                epochs=100000,
                dist_timeout=timeout,
                evaluate=False,
            ),
            env=ONE_THREAD,
        )
        deadline = time.monotonic() + 180
        while not (metrics.exists() and metrics.read_text().strip()):
            assert None in run.poll(), "a host stopped before its first epoch"
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.5)
        cluster.cut(cluster.hosts[1])
        cut_after = time.monotonic() - run.started
        runs = run.wait(timeout_s=timeout + 60)
    for r in runs:
        # Nothing crosses a cut link, so no peer closes a socket: each worker waits out its
        # timeout in a collective, then names the other side from its heartbeat (host 0:
        # host 1's stopped; host 1: the store on host 0 stopped answering).
        assert r.returncode not in (None, 0), (r.host.rank, r.returncode)
        assert timeout - 1 <= r.seconds - cut_after < timeout + 15, r.seconds - cut_after
        lost = cluster.hosts[1 - r.host.rank]
        named = f"rank {r.host.rank}: lost worker {lost.rank} ({lost.address}, pid "
        assert named in r.stderr, r.stderr[-3000:]
        assert f"Timed out waiting {timeout * 1000}ms" in r.stderr, r.stderr[-3000:]
        # Each host's torchrun: its own worker failed, and the root cause says whom it lost.
        root_cause = r.stderr[r.stderr.index("Root Cause") :]
        assert f"rank      : {r.host.rank} (local_rank" in root_cause, root_cause
        assert f"WorkerLost: lost worker {lost.rank} ({lost.address}" in root_cause, root_cause
