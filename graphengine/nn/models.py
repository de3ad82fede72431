"""The PyG models the CLI trains, by name."""

from __future__ import annotations

import torch
from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE, to_hetero

from graphengine.data.memory import available_memory

#: The models ``graphengine train --model`` builds, by name: PyG's ``GraphSAGE``, ``GCN``,
#: ``GIN`` and ``GAT`` (:func:`build_model`).
MODELS = {"sage": GraphSAGE, "gcn": GCN, "gin": GIN, "gat": GAT}

# The models to_hetero cannot make heterogeneous here, and why.
NOT_HETERO = {
    "gcn": "GCN's degree normalization needs one node type at both ends of an edge",
    "gin": "GIN adds a node's own features to its neighbors' sum, which needs one feature "
    "width at both ends of an edge",
    "gat": "heterogeneous GAT (attention without self loops) is not available yet",
}


def build_model(
    name: str,
    in_channels: int | dict[str, int],
    hidden_channels: int,
    out_channels: int,
    num_layers: int,
    dropout: float = 0.5,
    metadata: tuple[list[str], list[tuple[str, str, str]]] | None = None,
) -> torch.nn.Module:
    """A PyG ``BasicGNN`` (``sage``, ``gcn``, ``gin`` or ``gat``) with ``num_layers`` layers.

    With ``metadata`` (a ``HeteroData``'s ``(node types, edge types)``) and ``in_channels``
    the feature columns per node type, a heterogeneous model instead: PyG's
    ``to_hetero(GraphSAGE, metadata, aggr='sum')``, one ``SAGEConv`` per edge type and layer,
    the edge types into a node type summed. It is called as ``model(x_dict, edge_index_dict)``
    (float32 ``[num_nodes[t], in_channels[t]]`` per node type, int64 ``[2, num_edges]`` per
    edge type) and returns float32 ``[num_nodes[t], out_channels]`` per node type that is
    some edge type's destination. Its weights are initialized here (by torch's global
    generator), so it is ready for an optimizer.

    Raises:
        ValueError: an unknown ``name``; with ``metadata``, a model other than ``sage`` or
            ``in_channels`` that does not give every node type's width; a homogeneous
            model too large to train in the memory available (:func:`check_training_memory`).
    """
    if name not in MODELS:
        raise ValueError(f"'model' must be one of {sorted(MODELS)} (got {name!r})")
    if metadata is not None:
        return _hetero_model(
            name, in_channels, hidden_channels, out_channels, num_layers, dropout, metadata
        )
    if isinstance(in_channels, dict):
        raise ValueError(
            "'in_channels' per node type builds a heterogeneous model: pass the data's "
            "'metadata' too"
        )

    def build() -> torch.nn.Module:
        return MODELS[name](
            in_channels=in_channels,
            hidden_channels=hidden_channels,
            out_channels=out_channels,
            num_layers=num_layers,
            dropout=dropout,
        )

    with torch.device("meta"):  # shapes only: nothing allocated
        shapes = build()
    check_training_memory(shapes, f"the {name} model of {hidden_channels} hidden channels")
    return build()


def check_training_memory(model: torch.nn.Module, what: str) -> None:
    """Refuse ``model`` (``what``, in the error) when training it would take more memory
    than the process can still allocate (:func:`~graphengine.data.memory.available_memory`):
    its parameters, their gradients and Adam's two moments, four float copies. Else the
    allocator fails with a traceback as the model is built, or the machine swaps.

    Raises ``ValueError`` naming ``what``, the bytes needed and the bytes available."""
    needed = 4 * sum(p.numel() * p.element_size() for p in model.parameters())
    available = available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"{what} needs {needed / 2**30:.1f} GiB to train (parameters, gradients and "
            f"Adam's moments), more than the {available / 2**30:.1f} GiB of memory available: "
            "lower the hidden channels (--hidden)"
        )


def check_hetero_model(name: str) -> None:
    """Raise ``ValueError`` unless model ``name`` can be built for a heterogeneous graph."""
    if name in NOT_HETERO:
        raise ValueError(
            f"'model' {name!r} cannot be made heterogeneous ({NOT_HETERO[name]}); "
            "heterogeneous graphs train with 'sage' (--model sage)"
        )
    if name not in MODELS:
        raise ValueError(f"'model' must be one of {sorted(MODELS)} (got {name!r})")


def _hetero_model(
    name: str,
    in_channels,
    hidden_channels: int,
    out_channels: int,
    num_layers: int,
    dropout: float,
    metadata,
) -> torch.nn.Module:
    check_hetero_model(name)
    node_types, edge_types = metadata
    if not isinstance(in_channels, dict) or set(in_channels) != set(node_types):
        raise ValueError(
            f"'in_channels' of a heterogeneous model must give the feature columns of every "
            f"node type {sorted(node_types)} (got {in_channels!r})"
        )
    base = GraphSAGE(
        in_channels=(-1, -1),  # per edge type, the widths of its two ends: set below
        hidden_channels=hidden_channels,
        out_channels=out_channels,
        num_layers=num_layers,
        dropout=dropout,
    )
    model = to_hetero(base, (list(node_types), [tuple(t) for t in edge_types]), aggr="sum")
    # An empty graph of the right widths initializes the lazy weights.
    x = {t: torch.zeros(0, int(in_channels[t])) for t in node_types}
    edge_index = {tuple(t): torch.zeros(2, 0, dtype=torch.long) for t in edge_types}
    with torch.no_grad():
        model(x, edge_index)
    return model
