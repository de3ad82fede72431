"""The samplers at their limits: fanouts too large to size a hop's buffers with are refused
before any kernel runs, and the samplers run under Numba's ``NUMBA_DISABLE_JIT`` switch."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from samplers import HeteroNeighborSampler, LaborSampler, NeighborSampler, SamplerInput
from samplers.hop import MAX_FANOUT, MAX_HOP_EDGES
from tests.helpers.graphs import id_graph, id_hetero, random_csc
from tests.helpers.processes import REPO

GRAPH = "import numpy as np; indptr = np.array([0, 1, 2, 3, 4]); indices = np.array([1, 2, 3, 0]);"
SAMPLE = "s.sample_from_nodes(SamplerInput(np.arange(4), np.arange(4), 0))"
# Each wrapped int64 when sizing its hop (frontier * fanout) and died with SIGSEGV.
CRASHED = {
    "sampler-2^62": f"from samplers import NeighborSampler, SamplerInput; {GRAPH}"
    f"s = NeighborSampler(indptr, indices, [2**62], replace=True); {SAMPLE}",
    "sampler-hop-past-limit": f"from samplers import NeighborSampler, SamplerInput; {GRAPH}"
    f"s = NeighborSampler(indptr, indices, [{MAX_FANOUT}], replace=True); {SAMPLE}",
    "loader-2^62": "from graphengine import NeighborLoader; from tests.helpers.graphs import "
    "id_graph; next(iter(NeighborLoader(id_graph(), [2**62], replace=True, batch_size=4)))",
}


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """``python -c code`` from the repository root, so that a crash fails the test only."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("code", CRASHED.values(), ids=CRASHED.keys())
def test_fanouts_that_overflow_a_hop_are_refused_not_a_crash(code):
    done = run_python(code)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: "), last
    assert "'num_neighbors'" in last or "'fanouts'" in last, last
    assert str(MAX_FANOUT) in last or str(MAX_HOP_EDGES) in last, last


def test_a_hop_past_the_limit_names_the_fanout_the_frontier_and_the_limit():
    indptr, indices = random_csc(50, 400, 0, np.int64)
    sampler = NeighborSampler(indptr, indices, [MAX_FANOUT // 2], replace=True)
    seeds = np.arange(5, dtype=np.int64)
    with pytest.raises(ValueError) as raised:
        sampler.sample_from_nodes(SamplerInput(seeds, seeds, 0))
    message = str(raised.value)
    assert f"a hop of 5 nodes with fanout {MAX_FANOUT // 2}" in message
    assert f"above the {MAX_HOP_EDGES}" in message and "'num_neighbors'" in message
    # Without replacement a node gets at most its in-degree: the same fanout means all.
    everything = NeighborSampler(indptr, indices, [MAX_FANOUT // 2]).sample_from_nodes(
        SamplerInput(seeds, seeds, 0)
    )
    assert everything.edge.shape[0] == int((indptr[1:6] - indptr[:5]).sum())


def hetero_sampler(num_neighbors):
    data = id_hetero()
    csc = {}
    for edge_type in data.edge_types:
        src, dst = data[edge_type].edge_index.numpy()
        num_dst = data[edge_type[2]].num_nodes
        order = np.argsort(dst, kind="stable")
        indptr = np.zeros(num_dst + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
        csc[edge_type] = (indptr, src[order])
    num_nodes = {t: data[t].num_nodes for t in data.node_types}
    return HeteroNeighborSampler(data.node_types, num_nodes, csc, num_neighbors)


def labor_loader(num_neighbors):
    from graphengine import LaborLoader

    return LaborLoader(id_graph(), num_neighbors, batch_size=4)


def link_loader(num_neighbors):
    from graphengine import LinkNeighborLoader

    return LinkNeighborLoader(id_graph(), num_neighbors, batch_size=4)


def neighbor_loader_hetero(num_neighbors):
    from graphengine import NeighborLoader

    return NeighborLoader(id_hetero(), num_neighbors, input_nodes="paper", batch_size=4)


INDPTR, INDICES = random_csc(20, 80, 0, np.int64)
BUILDERS = {
    "NeighborSampler": lambda f: NeighborSampler(INDPTR, INDICES, f),
    "LaborSampler": lambda f: LaborSampler(INDPTR, INDICES, f),
    "HeteroNeighborSampler": hetero_sampler,
    "LaborLoader": labor_loader,
    "LinkNeighborLoader": link_loader,
    "NeighborLoader-hetero": neighbor_loader_hetero,
}


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS.keys())
def test_every_sampler_and_loader_bounds_its_fanouts(build):
    build([MAX_FANOUT, 2])  # the largest is taken
    with pytest.raises(ValueError, match=rf"entries must be ints >= -1 and at most {MAX_FANOUT}"):
        build([2, MAX_FANOUT + 1])


def test_hetero_fanouts_per_edge_type_are_bounded():
    from samplers.hetero import hetero_fanouts

    edge_types = [("a", "to", "b")]
    with pytest.raises(ValueError, match=r"'num_neighbors\[\('a', 'to', 'b'\)\]' entries"):
        hetero_fanouts({edge_types[0]: [2**62]}, edge_types)


# The batch of a small graph, drawn as JSON: under NUMBA_DISABLE_JIT the kernels run as Python.
NO_JIT_BATCH = """
import json, numpy as np
from samplers import LaborSampler, NeighborSampler, SamplerInput
from tests.helpers.graphs import random_csc
indptr, indices = random_csc(40, 200, 1, np.int64)
weights = np.random.default_rng(0).random(indices.shape[0])
samplers = [
    NeighborSampler(indptr, indices, [3, 2], num_threads={threads}),
    NeighborSampler(indptr, indices, [3, 2], replace=True, num_threads={threads}),
    NeighborSampler(indptr, indices, [3, 2], weights=weights, num_threads={threads}),
    LaborSampler(indptr, indices, [3, 2], num_threads={threads}, importance_sampling=1),
]
for sampler in samplers:
    out = sampler.sample_from_nodes(SamplerInput(np.array([0, 5, 5, 9]), np.arange(4), 7))
    print(json.dumps([out.node.tolist(), out.row.tolist(), out.col.tolist(), out.edge.tolist()]))
"""


def test_samplers_run_under_numba_disable_jit_as_they_do_compiled():
    code = NO_JIT_BATCH.format(threads=2)
    done = run_python(code, NUMBA_DISABLE_JIT="1", PYTHONWARNINGS="ignore")
    assert done.returncode == 0, done.stderr[-2000:]
    compiled = run_python(code)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    assert batches == [json.loads(line) for line in compiled.stdout.splitlines()]
    assert len(batches) == 4 and all(len(batch[1]) > 0 for batch in batches)
