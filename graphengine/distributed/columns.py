"""Feature columns of every node from the parts' rows: the start of hybrid (P3) training on a
partitioned graph.

Worker ``p`` holds only its part's rows (all columns) on disk; hybrid training needs, on
worker ``r``, columns ``[c_r, c_{r+1})`` of *every* node. One all-to-all turns the one split
into the other: worker ``p`` sends worker ``r`` columns ``[c_r, c_{r+1})`` of its part's rows,
and worker ``r`` stacks what it receives in part order, which is new-id order (part ``p``
owns new ids ``[bounds[p], bounds[p + 1])``). No worker reads another part's files.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from graphengine.data.columns import FeatureColumns, column_ranges
from graphengine.data.partition import Part
from graphengine.distributed.exchange import Exchange

log = logging.getLogger(__name__)


def redistribute_columns(part: Part, exchange: Exchange) -> FeatureColumns:
    """This worker's columns of every node's features, by one all-to-all of the parts' rows.

    A collective over ``exchange``: every worker calls it with its own part. Each worker sends
    ``n_p * F`` values and ends up holding ``num_nodes * (c_{r+1} - c_r)``; on the way it holds
    its part's rows twice (the slices and the send buffer) and its share twice (the received
    buffer and the table).

    Args:
        part: this worker's part (:func:`graphengine.data.partition.open_part`); ``part.x``
            is float ``[n_p, F]``, the part's rows in local order.
        exchange: an exchange of every part's worker, ``part.part`` its rank in it.

    Returns:
        :class:`~graphengine.data.columns.FeatureColumns` of columns
        ``column_ranges(F, num_parts)[part.part]`` of all ``num_nodes`` rows, row ``i`` the
        node of new id ``i`` (``part.book.to_orig`` maps it to the original id).

    Raises:
        ValueError: ``exchange`` is not one worker per part with ``part.part`` its rank, or
            the features have fewer columns than there are parts.
    """
    book = part.book
    if exchange.world_size != book.num_parts or exchange.rank != part.part:
        raise ValueError(
            f"part {part.part} of {book.num_parts} needs worker {part.part} of "
            f"{book.num_parts} (got worker {exchange.rank} of {exchange.world_size})"
        )
    num_columns = int(part.x.shape[1])
    ranges = column_ranges(num_columns, book.num_parts)
    started = time.perf_counter()
    # Copies (the part's rows are a read-only memory map), flat, so that slices of unequal
    # widths travel in one exchange of one dtype.
    sends = [np.array(part.x[:, start:stop], order="C").reshape(-1) for start, stop in ranges]
    received = exchange.all_to_all(sends)
    del sends
    start, stop = ranges[part.part]
    table = torch.cat(received).view(book.num_nodes, stop - start)
    width, own = stop - start, part.num_nodes
    log.info(
        "part %d: redistributed the features to columns [%d, %d) of %d nodes in %.2f s "
        "(%.1f MB sent, %.1f MB received)",
        part.part,
        start,
        stop,
        book.num_nodes,
        time.perf_counter() - started,
        own * (num_columns - width) * table.element_size() / 1e6,
        (book.num_nodes - own) * width * table.element_size() / 1e6,
    )
    return FeatureColumns(table, start, stop, num_columns)
