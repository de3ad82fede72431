"""Hybrid parallelism (P3, OSDI 2021): the first layer model-parallel over feature columns,
the layers after it data-parallel.

Each of ``N`` workers holds columns ``[c_r, c_{r+1})`` of every node's features
(:class:`~graphengine.data.columns.FeatureColumns`) and the same columns of the first
layer's weights (:func:`~graphengine.nn.column_layers.split_first_layer`). A step:

1. every worker samples its own batch; the loader shares each batch's first-layer structure
   and gathers this worker's columns of every batch's inputs
   (:class:`~graphengine.loader.hybrid_loader.HybridNeighborLoader`);
2. each worker computes its columns' partial first-layer output for every batch;
3. one ``all_to_all`` sends each partial to the batch's owner, who sums them
   (:class:`SumToOwners`): a reduce-scatter of ``[num_dst_j, hidden]`` rows;
4. the bias, nonlinearity and layers 2.. run under ``DistributedDataParallel``;
5. backward, the gradient of each owner's first-layer output goes back to every worker by the
   same ``all_to_all`` reversed, and each worker updates its weight columns.

The gradients equal data parallelism's: DDP averages the later layers' gradients over the
workers, and :class:`SumToOwners` scales the ones it returns by ``1 / N`` alike.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch_geometric.nn.models.basic_gnn import BasicGNN

from graphengine.batch.blocks import to_blocks
from graphengine.batch.hybrid import HybridBatch
from graphengine.data.columns import FeatureColumns, column_ranges
from graphengine.distributed.exchange import Exchange, ExchangeStats
from graphengine.nn.blocks import block_conv, normalizes_by_degree
from graphengine.nn.column_layers import finish_of, split_first_layer
from graphengine.nn.forward import SeedLogits
from graphengine.parallel.data_parallel import DataParallel


class SumToOwners(torch.autograd.Function):
    """``partials[j]`` (``[n_j, hidden]``, this worker's share of worker ``j``'s first-layer
    output) -> the sum of every worker's share of this worker's output ``[n_rank, hidden]``;
    backward, the gradient of that sum goes to every worker, times ``1 / world_size``."""

    @staticmethod
    def forward(ctx, strategy: HybridParallel, *partials: torch.Tensor) -> torch.Tensor:
        sizes = [int(p.shape[0]) for p in partials]
        own = sizes[strategy.rank]
        width = partials[0].shape[1]
        send = torch.cat(partials).to(strategy.collective_device)
        received = torch.empty(
            (strategy.world_size * own, width), dtype=send.dtype, device=send.device
        )
        strategy.all_to_all(received, send, [own] * strategy.world_size, sizes)
        ctx.strategy, ctx.sizes, ctx.device = strategy, sizes, partials[0].device
        return received.view(strategy.world_size, own, width).sum(0).to(ctx.device)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        strategy, sizes = ctx.strategy, ctx.sizes
        scaled = grad.to(strategy.collective_device) * (1.0 / strategy.world_size)
        send = scaled.repeat(strategy.world_size, 1)
        received = torch.empty((sum(sizes), grad.shape[1]), dtype=grad.dtype, device=send.device)
        strategy.all_to_all(received, send, sizes, [grad.shape[0]] * strategy.world_size)
        return (None, *torch.split(received.to(ctx.device), sizes))


class HybridRest(torch.nn.Module):
    """Everything after the first layer's weights: its bias (or GIN's MLP after its first
    linear), then the nonlinearity, dropout and layers 2.. of ``model`` on this worker's
    batch; returns its seeds' logits. Shares ``model``'s parameters."""

    def __init__(self, model: BasicGNN, whole: bool):
        super().__init__()
        self.finish = finish_of(model.convs[0])
        self.convs = torch.nn.ModuleList(list(model.convs)[1:])
        self.act = model.act
        self.dropout = model.dropout
        self.whole = whole

    def forward(self, h: torch.Tensor, batch: HybridBatch) -> torch.Tensor:
        x = self.finish(h)
        own = batch.batch
        if self.whole:
            blocks = [batch.blocks[batch.rank]] * len(self.convs)
        else:
            blocks = to_blocks(own.edge_index, own.num_sampled_nodes, own.num_sampled_edges)[1:]
        for conv, block in zip(self.convs, blocks, strict=True):
            x = self.act(x) if self.act is not None else x
            x = self.dropout(x)
            x = block_conv(conv, x, block)
        return x[: own.batch_size]


def runs_whole(seed_logits: SeedLogits) -> bool:
    """Whether hybrid batches of ``seed_logits``'s model run every layer on the whole batch:
    its forward mode is ``'whole'``, or it normalizes by degree (GCN: the first layer's split
    computes on the whole batch, whose degrees :mod:`graphengine.nn.gcn_blocks` does not
    bring to the column shares)."""
    return seed_logits.mode == "whole" or normalizes_by_degree(seed_logits.model)


class HybridSeedLogits(torch.nn.Module):
    """A PyG ``BasicGNN`` run hybrid-parallel on :class:`HybridBatch` es: this worker's
    columns of the first layer (its own parameters), the rest under DDP (the model's).

    Its parameters are what this worker trains; the user's model keeps the whole first
    layer, brought up to date by :meth:`HybridParallel.assemble_model`.
    """

    def __init__(self, seed_logits: SeedLogits, strategy: HybridParallel):
        super().__init__()
        model = seed_logits.model
        plain = model.jk_mode is None and all(
            isinstance(norm, torch.nn.Identity) for norm in model.norms
        )
        if seed_logits.mode not in ("blocks", "whole") or not plain:
            raise ValueError(
                "--parallel hybrid runs a BasicGNN's layers one after another; this one has "
                "norms or jumping knowledge, which it does not split: use --parallel data"
            )
        first = model.convs[0]
        self.start, self.stop = strategy.column_range(model.in_channels)
        self.columns = split_first_layer(first, self.start, self.stop)
        rest = HybridRest(model, runs_whole(seed_logits))
        # DDP refuses a module without parameters (one bias-free layer): nothing to average.
        has_parameters = next(rest.parameters(), None) is not None
        self.rest = strategy.replicate(rest) if has_parameters else rest
        self.strategy = strategy
        object.__setattr__(self, "_model", model)  # not a submodule: its first layer is not ours

    @property
    def model(self) -> BasicGNN:
        """The user's model (its first layer whole after :meth:`HybridParallel.assemble_model`)."""
        return self._model

    def forward(self, batch: HybridBatch) -> torch.Tensor:
        pairs = zip(batch.inputs, batch.blocks, strict=True)
        partials = [self.columns(x, block) for x, block in pairs]
        h = SumToOwners.apply(self.strategy, *partials)
        return self.rest(h, batch)


class HybridParallel(DataParallel):
    """P3-style hybrid parallelism across the workers of the joined process group (2 or more).

    Args:
        device: this worker's device (``cuda:LOCAL_RANK`` with NCCL).

    Attributes:
        structure: the exchange its loaders share first-layer structures over: a gloo group
            on the CPU whatever the backend (the payload is host memory, and an NCCL
            collective in a loader thread would queue on the training thread's stream).
    """

    parameters_per_worker = True

    def __init__(self, device: str | torch.device = "cpu"):
        super().__init__(device)
        if self.world_size < 2:
            raise ValueError(
                "--parallel hybrid needs 2 or more workers (--nproc N or torchrun); "
                f"this group has {self.world_size}"
            )
        self.structure = Exchange(dist.new_group(backend="gloo"), torch.device("cpu"))
        self._partials = dist.new_group(backend=self.backend)
        self.partial_stats = ExchangeStats()  # the partial results' all_to_all

    def column_range(self, num_columns: int) -> tuple[int, int]:
        """This worker's ``[start, stop)`` of ``num_columns`` feature columns."""
        return column_ranges(num_columns, self.world_size)[self.rank]

    def feature_columns(self, x) -> FeatureColumns:
        """This worker's columns of feature table ``x`` ``[num_nodes, num_columns]``."""
        return FeatureColumns.from_table(x, *self.column_range(int(x.shape[1])))

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        if not isinstance(module, SeedLogits) or not isinstance(module.model, BasicGNN):
            raise ValueError(
                "--parallel hybrid splits the first layer of a PyG BasicGNN (GraphSAGE, GCN, "
                f"GIN); got {type(getattr(module, 'model', module)).__name__}: use --parallel data"
            )
        self._broadcast(module.model)
        return HybridSeedLogits(module, self)

    def all_to_all(self, out: torch.Tensor, send: torch.Tensor, out_sizes, in_sizes) -> None:
        """``all_to_all_single`` over the partial results' own group, counted."""
        started = time.perf_counter()
        dist.all_to_all_single(out, send, out_sizes, in_sizes, group=self._partials)
        if out.is_cuda:  # NCCL returns once queued: wait, so that the seconds are the exchange's
            torch.cuda.current_stream(out.device).synchronize()
        row = send.element_size() * (send.shape[1] if send.dim() > 1 else 1)
        self.partial_stats.calls += 1
        self.partial_stats.sent_bytes += row * (sum(in_sizes) - in_sizes[self.rank])
        self.partial_stats.received_bytes += row * (sum(out_sizes) - out_sizes[self.rank])
        self.partial_stats.seconds += time.perf_counter() - started

    def reset_stats(self) -> dict:
        stats = super().reset_stats()
        partials, self.partial_stats = self.partial_stats, ExchangeStats()
        stats["partial_sent_bytes"] = partials.sent_bytes
        stats["partial_seconds"] = partials.seconds
        return stats

    def assemble_model(self, module: torch.nn.Module) -> None:
        """Write every worker's first-layer weight columns into the user's model (a
        collective: every worker calls it)."""
        for piece, full in module.columns.weight_pairs:
            widths = [stop - start for start, stop in column_ranges(full.shape[1], self.world_size)]
            padded = torch.zeros(
                (full.shape[0], max(widths)), dtype=piece.dtype, device=self.collective_device
            )
            padded[:, : piece.shape[1]] = piece.detach()
            gathered = [torch.empty_like(padded) for _ in range(self.world_size)]
            dist.all_gather(gathered, padded)
            whole = torch.cat([g[:, :w] for g, w in zip(gathered, widths, strict=True)], dim=1)
            with torch.no_grad():
                full.copy_(whole.to(full.device))

    def reshard_model(self, module: torch.nn.Module) -> None:
        """Take this worker's first-layer weight columns from the user's model again (after
        it was loaded from a checkpoint)."""
        with torch.no_grad():
            for piece, full in module.columns.weight_pairs:
                piece.copy_(full[:, module.start : module.stop])

    def _broadcast(self, model: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers on every worker, before the first layer is split
        (DDP does this for the layers it wraps)."""
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                on_backend = tensor.detach().to(self.collective_device)
                dist.broadcast(on_backend, src=0)
                tensor.copy_(on_backend.to(tensor.device))
