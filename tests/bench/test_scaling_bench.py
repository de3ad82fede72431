"""bench scaling: a peer that runs out of memory on a larger graph keeps the costs it had."""

from graphengine.bench import peers, scaling


def test_a_peer_out_of_memory_on_a_larger_graph_keeps_its_smaller_graphs_costs(monkeypatch):
    calls = []

    def pyg(graph, fanouts, batch_size, seeds, batches):
        calls.append(graph.num_nodes)
        if graph.num_nodes > 2**10:
            raise MemoryError
        return peers.Timed(0.0, 0.0, seconds=2.0, batches=batches, seeds=1, nodes=1, edges=1000)

    monkeypatch.setattr(peers, "check_peers", lambda vs: None)
    monkeypatch.setattr(scaling, "check_peers", lambda vs: None)
    monkeypatch.setitem(scaling.TIME_PEER, "pyg", pyg)
    summary = scaling.run([10, 11, 12], [5, 5], 64, 2, 1, vs=["pyg"])
    assert calls == [2**10, 2**11]  # not tried again after it failed
    assert summary["pyg_ns_per_edge"] == {"2^10": 2.0 / 1000 * 1e9}
    assert summary["pyg"] == "out of memory on the graph of 2^11 nodes"
    assert set(summary["ns_per_edge"]) == {"2^10", "2^11", "2^12"}
