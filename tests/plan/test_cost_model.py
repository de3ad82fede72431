"""The cost model and the choice on synthetic rates and volumes, against predictions worked
out by hand; and the counts the volumes are built from against the code that sends them."""

import numpy as np
import pytest
import torch

from graphengine.datasets import load_dataset
from graphengine.loader import NeighborLoader
from graphengine.loader.hybrid_loader import pack_first_layer
from graphengine.plan import (
    BatchCounts,
    Link,
    Memory,
    Prediction,
    Rates,
    Volumes,
    choose,
    predict,
)
from graphengine.plan.volumes import cache_hit_rate, count_batches, ddp_buckets, structure_bytes

MB = 1e6


def rates() -> Rates:
    return Rates(
        sample_edges_per_s=1e6,
        gather_bytes_per_s=1e9,
        column_gather_bytes_per_s=5e8,
        compute_flops_per_s=1e10,
        hybrid_compute_flops_per_s=1e10,
        allreduce_latency_s=1e-3,
        allreduce_bytes_per_s=1e8,
        alltoall_latency_s=1e-3,
        alltoall_bytes_per_s=1e8,
    )


COUNTS = BatchCounts(
    seeds=512, n_src=1e4, n_dst=5e3, edges=1e5, hops=((5e3, 1e5),), structure_bytes=0
)


def data_volumes() -> Volumes:
    return Volumes(
        name="data",
        workers=2,
        steps=10,
        counts=COUNTS,
        flops=1e9,
        gathered_rows=1e4,
        gathered_bytes=5e7,
        gradient_bytes=1e6,
        gradient_buckets=[1_000_000],
        memory=Memory(features=800 * 10**6, graph=200 * 10**6),
    )


def hybrid_volumes() -> Volumes:
    return Volumes(
        name="hybrid",
        workers=2,
        steps=10,
        counts=COUNTS,
        flops=6e8,
        gathered_rows=2e4,
        gathered_bytes=5e7,
        gradient_bytes=5e5,
        gradient_buckets=[500_000],
        memory=Memory(features=400 * 10**6, graph=200 * 10**6),
        structure_bytes=1e6,
        partial_bytes=4e6,
    )


def link(r: Rates) -> Link:
    return Link.probed(r, workers=2)


def test_predictions_are_the_hand_computed_ones():
    r = rates()
    data = predict(data_volumes(), r, link(r), hybrid=False, partitioned=False)
    # compute 1e9/1e10 = 0.1, all-reduce 1e-3 + (2*1/2*1e6)/1e8 = 0.011: caller 0.111 per
    # step; sample 0.1, gather 0.05 in their threads. Ten steps and one batch through the
    # loader first.
    assert data.step_s == pytest.approx(0.111)
    assert data.epoch_s == pytest.approx(10 * 0.111 + 0.15)
    assert data.compute_s == pytest.approx(1.0)
    assert data.exchange_s == pytest.approx(0.11)
    hybrid = predict(hybrid_volumes(), r, link(r), hybrid=True, partitioned=False)
    # compute 0.06, all-reduce 1e-3 + 5e5/1e8 = 0.006, partials two all-to-alls
    # 2e-3 + 4e6/1e8 = 0.042: caller 0.108; loader: sample 0.1, share 2e-3 + 1e6/1e8 = 0.012,
    # gather 5e7/5e8 = 0.1.
    assert hybrid.step_s == pytest.approx(0.108)
    assert hybrid.epoch_s == pytest.approx(10 * 0.108 + 0.1 + 0.012 + 0.1)
    assert hybrid.exchange_s == pytest.approx(10 * (0.006 + 0.042 + 0.012))


def test_the_planner_picks_the_fastest_and_says_why():
    r = rates()
    volumes = {"data": data_volumes(), "hybrid": hybrid_volumes()}
    predictions = {n: predict(v, r, link(r), n == "hybrid", False) for n, v in volumes.items()}
    choice, reason, rows = choose(volumes, predictions, host_memory=None)
    assert choice == "data"  # 1.26 s against 1.292 s
    assert "hybrid" in reason and "1.29 s" in reason
    assert [row["fits"] for row in rows] == [True, True]


def prediction(name: str, epoch_s: float) -> Prediction:
    return Prediction(name, epoch_s, epoch_s / 10, 10, epoch_s, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("faster", [0.02, 0.045])
def test_a_near_tie_goes_to_data_parallelism_and_says_so(faster):
    volumes = {"data": data_volumes(), "hybrid": hybrid_volumes()}
    predictions = {"data": prediction("data", 1.0), "hybrid": prediction("hybrid", 1 - faster)}
    choice, reason, _ = choose(volumes, predictions, host_memory=None)
    assert choice == "data"
    assert "within 5% of hybrid's" in reason and "a tie" in reason
    # Among three, the tie is with the fastest: a candidate tied only with data is not in it.
    volumes["partitioned"] = data_volumes()
    predictions["partitioned"] = prediction("partitioned", 1 - faster)
    predictions["data"] = prediction("data", 1.2)
    assert choose(volumes, predictions, host_memory=None)[0] == "hybrid"


def test_beyond_the_tie_margin_the_fastest_is_chosen():
    volumes = {"data": data_volumes(), "hybrid": hybrid_volumes()}
    predictions = {"data": prediction("data", 1.0), "hybrid": prediction("hybrid", 0.94)}
    choice, reason, _ = choose(volumes, predictions, host_memory=None)
    assert choice == "hybrid" and reason.startswith("fastest predicted epoch")


def test_a_plan_over_the_memory_limit_is_excluded_and_says_so():
    r = rates()
    volumes = {"data": data_volumes(), "hybrid": hybrid_volumes()}
    predictions = {n: predict(v, r, link(r), n == "hybrid", False) for n, v in volumes.items()}
    choice, reason, rows = choose(volumes, predictions, host_memory=700 * MB)
    assert choice == "hybrid"
    data = next(row for row in rows if row["name"] == "data")
    assert not data["fits"] and "1.00 GB of host memory" in data["why_not"]
    assert "0.70 GB limit" in data["why_not"]
    assert "fits in memory" in reason
    with pytest.raises(ValueError, match="no candidate fits"):
        choose(volumes, predictions, host_memory=100 * MB)


def test_a_faster_link_moves_the_choice_to_hybrid():
    r = rates()
    volumes = {"data": data_volumes(), "hybrid": hybrid_volumes()}
    volumes["data"].flops = 1.5e9
    volumes["hybrid"].partial_bytes = 2e7
    slow, fast = link(r), Link(1e-5, 1e10, 1e-5, 1e10, workers=2)
    at_slow = {n: predict(v, r, slow, n == "hybrid", False) for n, v in volumes.items()}
    # data: 10 (0.15 + 0.011) + 0.15; hybrid: 10 (0.06 + 0.006 + 2e-3 + 2e7/1e8) + 0.212.
    assert at_slow["data"].epoch_s == pytest.approx(1.76)
    assert at_slow["hybrid"].epoch_s == pytest.approx(2.892)
    assert choose(volumes, at_slow, None)[0] == "data"
    at_fast = {n: predict(v, r, fast, n == "hybrid", False) for n, v in volumes.items()}
    # hybrid's caller 0.06 + 6e-5 + 2.02e-3 is shorter than its loader's 0.1 s stages.
    assert at_fast["hybrid"].epoch_s == pytest.approx(10 * 0.1 + 0.1 + 0.1 + 2e-5 + 1e-4)
    assert at_fast["data"].epoch_s == pytest.approx(10 * (0.15 + 1e-5 + 1e-4) + 0.15)
    assert choose(volumes, at_fast, None)[0] == "hybrid"


def test_latencies_scale_with_the_workers_on_the_link():
    base = Link(1e-3, 1e8, 2e-3, 1e8, workers=2)
    wide = base.at(8)
    assert wide.allreduce_latency_s == pytest.approx(7e-3)
    assert wide.alltoall_latency_s == pytest.approx(14e-3)
    assert wide.allreduce_s(8e6) == pytest.approx(7e-3 + 2 * 7 / 8 * 8e6 / 1e8)


def test_the_rates_steps_ran_at_replace_the_idle_links_and_the_local_samplers():
    r = rates()
    r.gradient_bytes_per_s = 2e7  # the all-reduce amid the loader's threads: slower
    r.dist_compute_flops_per_s = 5e9  # steps beside the distributed sampler: slower
    r.dist_sample_edges_per_s = 5e5
    # all-reduce: (2*1/2*1e6)/2e7 = 0.05 (latency inside the rate), not 1e-3 + 1e6/1e8.
    assert link(r).allreduce_s(1e6) == pytest.approx(0.05)
    data = predict(data_volumes(), r, link(r), hybrid=False, partitioned=False)
    assert data.step_s == pytest.approx(0.1 + 0.05)
    parted = predict(data_volumes(), r, link(r), hybrid=False, partitioned=True)
    # compute 1e9/5e9 = 0.2 and the all-reduce 0.05; sampling 1e5/5e5 = 0.2 in its thread.
    assert parted.step_s == pytest.approx(0.25)
    assert parted.sampling_s == pytest.approx(10 * 0.2)
    # A link given in Gbit/s (the projection's) is the link's bandwidth, not the steps' rate.
    assert Link.probed(r, 2, gbps=0.8).allreduce_s(1e6) == pytest.approx(1e-3 + 1e6 / 1e8)


def test_ddp_buckets_fill_in_reverse_and_close_at_their_caps():
    mib = 1024 * 1024
    assert ddp_buckets([100, 200]) == [300]
    assert ddp_buckets([20 * mib, mib // 2, mib // 2 + 1]) == [mib + 1, 20 * mib]
    assert ddp_buckets([30 * mib, 2 * mib]) == [2 * mib, 30 * mib]


def test_cache_hit_rate_counts_the_most_read_rows():
    counts = np.array([1, 5, 2, 2])
    assert cache_hit_rate(counts, 1) == pytest.approx(5 / 10)
    assert cache_hit_rate(counts, 2) == pytest.approx(7 / 10)
    assert cache_hit_rate(counts, 0) == 0.0


def test_counted_batches_match_the_packed_structure(tmp_path):
    dataset = load_dataset("synthetic-small", tmp_path)
    loader = NeighborLoader(dataset, [5, 5], batch_size=64, input_nodes=dataset.train_idx)
    batch = next(iter(loader))
    counts = count_batches([batch], whole=False)
    assert counts.structure_bytes == pack_first_layer(batch, False).nbytes
    hops = batch.num_sampled_nodes
    assert counts.n_dst == hops[0] + hops[1]
    assert counts.n_src == batch.num_nodes
    assert counts.hops[0] == (hops[0] + hops[1], batch.edge_index.shape[1])
    assert counts.hops[1] == (hops[0], batch.num_sampled_edges[0])
    assert structure_bytes(counts.n_src, counts.n_dst, counts.edges) == counts.structure_bytes
    assert torch.equal(batch.n_id[: batch.batch_size], batch.n_id[:64])


def test_host_memory_is_the_headroom_under_the_cgroup_limit_shared_by_local_workers(monkeypatch):
    from graphengine.plan import probes

    monkeypatch.setattr(probes, "available_memory", lambda: 3 * 2**30)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    measured = rates()
    probes.machine(measured, torch.device("cpu"))
    assert measured.host_memory_bytes == 3 * 2**30 // 2
