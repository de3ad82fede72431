"""The threaded pipeline and the pipelined loader: order, errors, shutdown."""

import gc
import random
import threading
import time

import pytest
import torch

from graphengine import NeighborLoader
from graphengine.datasets import SyntheticSpec, generate
from graphengine.loader import pipeline as pipeline_module
from graphengine.loader.pipeline import Pipeline, Stage
from graphengine.nn.inference import layerwise_inference


def graphengine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("graphengine-")]


def wait_for_no_threads(timeout=6.0) -> None:
    deadline = time.monotonic() + timeout
    while graphengine_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not graphengine_threads()


def jitter(x):
    time.sleep(random.random() * 0.003)
    return x


def test_order_kept_with_many_workers():
    pipeline = Pipeline(range(200), [Stage("a", jitter, 4), Stage("b", lambda x: x * 3, 3)], 3)
    assert list(pipeline) == [3 * i for i in range(200)]
    times = pipeline.times.snapshot()
    assert set(times) == {"a", "b", "waiting"} and times["a"] > 0
    wait_for_no_threads()


@pytest.mark.parametrize("failing_stage", [0, 1, 2])
def test_exception_in_any_stage_reaches_caller_in_order(failing_stage):
    def maybe_fail(stage):
        def run(x):
            if stage == failing_stage and x == 13:
                raise KeyError(f"stage {stage} failed on 13")
            return jitter(x)

        return run

    stages = [Stage(f"s{i}", maybe_fail(i), workers=2) for i in range(3)]
    received = []
    with pytest.raises(KeyError, match=f"stage {failing_stage} failed on 13"):
        for item in Pipeline(range(40), stages):
            received.append(item)
    assert received == list(range(13))
    wait_for_no_threads()


def test_source_failure_reaches_caller():
    def source():
        yield 1
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(Pipeline(source(), [Stage("a", jitter)]))
    wait_for_no_threads()


def test_break_and_garbage_collection_stop_every_thread():
    pipeline = Pipeline(range(10_000), [Stage("a", jitter, 2), Stage("b", jitter)])
    for item in pipeline:
        if item == 5:
            break
    wait_for_no_threads()
    iterator = iter(pipeline)
    next(iterator)
    assert graphengine_threads()
    del iterator
    gc.collect()
    wait_for_no_threads()


def test_ctrl_c_while_threads_start_stops_the_started_ones(monkeypatch):
    """Ctrl-C lands in ``Thread.start`` (it waits for the new thread): the threads started
    by then must stop too, or they run on into the interpreter's exit and abort it."""
    real_start = threading.Thread.start
    started = []

    def start_then_interrupt(thread):
        real_start(thread)
        started.append(thread)
        if len(started) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        next(iter(Pipeline(range(10_000), [Stage("a", jitter, 2), Stage("b", jitter)])))
    monkeypatch.undo()
    assert len(started) == 2
    wait_for_no_threads(timeout=1.0)


def test_exit_stops_the_threads_of_a_pass_still_held():
    iterator = iter(Pipeline(range(10_000), [Stage("a", jitter, 2)]))
    next(iterator)
    assert graphengine_threads()
    pipeline_module._stop_live_runs()  # what the interpreter's exit runs
    wait_for_no_threads(timeout=1.0)
    del iterator


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least one worker"):
        Stage("a", jitter, 0)
    with pytest.raises(ValueError, match="'prefetch' must be at least 1"):
        Pipeline(range(3), [Stage("a", jitter)], prefetch=0)


def small_dataset():
    return generate("t", SyntheticSpec(3000, 40_000, 8, 3, 1500, 300))


@pytest.mark.parametrize("num_workers", [1, 3])
@pytest.mark.parametrize("filter_per_worker", [False, True])
def test_pipelined_loader_matches_inline_loader(num_workers, filter_per_worker):
    dataset = small_dataset()
    common = dict(batch_size=100, input_nodes=dataset.train_idx, shuffle=True, seed=5)
    inline = list(NeighborLoader(dataset, [6, 4], num_workers=0, **common))
    loader = NeighborLoader(
        dataset, [6, 4], num_workers=num_workers, filter_per_worker=filter_per_worker, **common
    )
    piped = list(loader)
    assert len(inline) == len(piped) == 15
    for a, b in zip(inline, piped, strict=True):
        for key in ("n_id", "e_id", "edge_index", "x", "y"):
            assert torch.equal(a[key], b[key])
    times = loader.stage_times
    assert times["sample"] > 0 and times["gather"] > 0
    wait_for_no_threads()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_stage_times_are_each_batchs_own_and_sum_to_the_stage_times(num_workers):
    dataset = small_dataset()
    loader = NeighborLoader(
        dataset, [6, 4], batch_size=100, input_nodes=dataset.train_idx, num_workers=num_workers
    )
    assert len(list(loader)) == 15
    per_batch, totals = loader.batch_stage_times, loader.stage_times
    for name in ("sample", "gather"):
        assert sorted(per_batch[name]) == list(range(15))
        assert sum(per_batch[name].values()) == pytest.approx(totals[name])
    wait_for_no_threads()


def test_a_slow_item_is_timed_as_its_own_however_far_the_stage_runs_ahead():
    def slow_third(item):
        time.sleep(0.05 if item == 3 else 0.001)
        return item

    pipeline = Pipeline(range(8), [Stage("work", slow_third)], prefetch=4)
    handed = []
    for item in pipeline:
        handed.append(item)
        time.sleep(0.01)  # the caller is slower: the stage runs up to 4 items ahead
    assert handed == list(range(8))
    per_item = pipeline.times.per_item()["work"]
    assert sorted(per_item) == list(range(8))
    assert per_item[3] >= 0.05
    assert max(v for k, v in per_item.items() if k != 3) < 0.05


def test_loader_transform_error_reaches_caller_and_threads_stop():
    dataset = small_dataset()

    def transform(batch):
        if int(batch.n_id[0]) == int(dataset.train_idx[300]):
            raise RuntimeError("bad batch")
        return batch

    loader = NeighborLoader(
        dataset, [3], batch_size=100, input_nodes=dataset.train_idx, transform=transform
    )
    with pytest.raises(RuntimeError, match="bad batch"):
        list(loader)
    wait_for_no_threads()
    for _ in NeighborLoader(dataset, [3], batch_size=10):
        break
    wait_for_no_threads()


def test_layerwise_inference_matches_full_graph_forward():
    from torch_geometric.nn import GAT, GraphSAGE

    dataset = small_dataset()
    x = torch.from_numpy(dataset.x)
    edge_index = dataset.graph.to_edge_index()
    for model_class in (GraphSAGE, GAT):
        torch.manual_seed(0)
        model = model_class(8, 16, num_layers=3, out_channels=3).eval()
        expected = model(x, edge_index)
        got = layerwise_inference(model, dataset.graph, x, chunk_size=700)
        assert torch.allclose(got, expected, atol=1e-4), model_class.__name__


def test_layerwise_inference_refuses_gcn():
    from torch_geometric.nn import GCN, GraphSAGE

    dataset = small_dataset()
    with pytest.raises(ValueError, match="layer-wise inference needs a PyG BasicGNN"):
        layerwise_inference(GCN(8, 16, 2, 3).eval(), dataset.graph, torch.from_numpy(dataset.x))
    with pytest.raises(ValueError, match=r"call model\.eval\(\) before layer-wise inference"):
        layerwise_inference(GraphSAGE(8, 16, 2, 3), dataset.graph, torch.from_numpy(dataset.x))


def wait_until(condition, timeout=3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


@pytest.mark.parametrize("prefetch", [1, 3])
def test_at_most_prefetch_items_in_flight_besides_the_held_one(prefetch):
    pulled = []
    admitted = []

    def source():
        for i in range(25):
            pulled.append(i)
            yield i

    def enter(x):
        admitted.append(x)  # items past the feeder's ticket
        return x

    pipeline = Pipeline(source(), [Stage("enter", enter), Stage("b", jitter, 3)], prefetch)
    for held, item in enumerate(pipeline):
        assert item == held
        limit = min(held + 1 + prefetch, 25)
        # The pipeline fills up to the bound (so the bound is checked, not idleness) ...
        assert wait_until(lambda limit=limit: len(admitted) >= limit)
        time.sleep(0.01)
        # ... and never past it; the feeder may hold one more item waiting for a ticket.
        assert len(admitted) == limit
        assert len(pulled) <= limit + 1
    wait_for_no_threads()
