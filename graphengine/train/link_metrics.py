"""Scores of a link predictor: ROC AUC over labelled edges, and MRR and Hits@K of each
positive edge ranked among negatives of its own (OGB's definitions)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """The area under the ROC curve: the chance that a random positive scores above a random
    negative, ties counting one half (the Mann-Whitney statistic).

    Args:
        scores: float ``[num_edges]``, higher meaning more likely an edge.
        labels: ``[num_edges]``, 1 for positives and 0 for negatives.

    Raises:
        ValueError: shapes differ, labels other than 0 and 1, or no positive or no negative.
    """
    scores = torch.as_tensor(scores).detach().double().view(-1)
    labels = torch.as_tensor(labels).detach().view(-1)
    if scores.shape != labels.shape:
        raise ValueError(
            f"'scores' and 'labels' must have the same shape (got {tuple(scores.shape)} and "
            f"{tuple(labels.shape)})"
        )
    if not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("'labels' must be 0 (negative) or 1 (positive)")
    positive = labels == 1
    num_pos, num_neg = int(positive.sum()), int((~positive).sum())
    if num_pos == 0 or num_neg == 0:
        raise ValueError(f"ROC AUC needs positives and negatives (got {num_pos} and {num_neg})")
    ranks = _average_ranks(scores)
    return float((ranks[positive].sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg))


def ranking_metrics(
    positive: torch.Tensor, negative: torch.Tensor, ks: Sequence[int] = (1, 3, 10)
) -> dict[str, float]:
    """MRR and Hits@K of each positive among its own negatives, as OGB's link evaluators:
    a positive's rank is one plus the negatives scoring above it, ties counting one half.

    Args:
        positive: float ``[num_pos]``, each positive edge's score.
        negative: float ``[num_pos, num_neg]``, the scores of that edge's negatives.
        ks: the K of each ``hits@K``.

    Returns:
        ``{'mrr': ..., 'hits@K': ...}``, means over the positives.
    """
    positive = torch.as_tensor(positive).detach().double().view(-1, 1)
    negative = torch.as_tensor(negative).detach().double()
    if negative.dim() != 2 or negative.size(0) != positive.size(0):
        raise ValueError(
            f"'negative' must have shape [num_pos={positive.size(0)}, num_neg] (got "
            f"{tuple(negative.shape)})"
        )
    if positive.size(0) == 0:
        raise ValueError("ranking metrics need at least one positive edge")
    above = (negative > positive).sum(dim=1).double()
    tied = (negative == positive).sum(dim=1).double()
    rank = 1 + above + tied / 2
    result = {"mrr": float((1 / rank).mean())}
    for k in ks:
        result[f"hits@{k}"] = float((rank <= k).double().mean())
    return result


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks of ``values`` (float64 ``[n]``), tied values sharing their mean rank."""
    order = torch.argsort(values)
    sorted_values = values[order]
    _, inverse, counts = torch.unique_consecutive(
        sorted_values, return_inverse=True, return_counts=True
    )
    ends = torch.cumsum(counts, 0).double()
    mean_rank = ends - (counts.double() - 1) / 2
    ranks = torch.empty_like(values)
    ranks[order] = mean_rank[inverse]
    return ranks
