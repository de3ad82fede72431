"""Property tests of the feature store and the partition book over generated tables, ids and
partitions, valid and malformed: every read returns the rows plain NumPy indexing gives, every
update writes the rows NumPy assignment writes, the book's maps are inverse permutations that
agree with its bounds; bad ids raise ``IndexError`` (the store's documented out-of-range error)
or ``ValueError``/``TypeError`` naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.data.partition.book import PartitionBook
from graphengine.data.partition.partitioner import assign_parts, renumber

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TABLE_DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8]


@st.composite
def tables(draw, min_rows=0, max_rows=20):
    """A 1-D or 2-D table of ``[0, max_rows]`` rows (a NumPy array), of a generated dtype."""
    rows = draw(st.integers(min_rows, max_rows))
    shape = (rows,) if draw(st.booleans()) else (rows, draw(st.integers(1, 4)))
    return draw(hnp.arrays(draw(st.sampled_from(TABLE_DTYPES)), shape))


@st.composite
def valid_ids(draw, num_rows, max_ids=15):
    """Ids in ``[0, num_rows)`` (repeats allowed) as a NumPy array or tensor of int32 or
    int64, or a boolean mask of ``num_rows`` entries; returns ``(ids, positions)``, the
    positions as an int64 array for NumPy's reference indexing."""
    kind = draw(st.sampled_from(["int32", "int64", "mask"]))
    if kind == "mask":
        positions = draw(hnp.arrays(np.bool_, num_rows))
    else:
        count = draw(st.integers(0, max_ids)) if num_rows else 0
        ids = st.integers(0, max(num_rows - 1, 0))
        positions = draw(hnp.arrays(np.dtype(kind), count, elements=ids))
    ids = torch.from_numpy(positions.copy()) if draw(st.booleans()) else positions.copy()
    return ids, np.flatnonzero(positions) if kind == "mask" else positions.astype(np.int64)


@st.composite
def bad_ids(draw, num_rows):
    """Ids that no read may take: ``(ids, error types, message pattern)``."""
    kind = draw(
        st.sampled_from(
            ["negative", "too-high", "float", "int16", "2-D", "mask-length", "mask-2-D", "list"]
        )
    )
    if kind in ("negative", "too-high"):
        count = draw(st.integers(1, 6)) if num_rows else 1  # no row: any other id is bad too
        ids = draw(hnp.arrays(np.int64, count, elements=st.integers(0, max(num_rows - 1, 0))))
        bad = -draw(st.integers(1, 9)) if kind == "negative" else num_rows + draw(st.integers(0, 9))
        ids[draw(st.integers(0, count - 1))] = bad
        ids = ids.astype(draw(st.sampled_from([np.int32, np.int64])))
        return ids, IndexError, rf"'(ids|index)'.*{bad}.*\[0, {num_rows}\)"
    if kind == "float":
        return np.zeros(draw(st.integers(0, 4)), dtype=np.float32), TypeError, "'ids'"
    if kind == "int16":
        return np.zeros(draw(st.integers(0, 4)), dtype=np.int16), TypeError, "'ids'"
    if kind == "2-D":
        return np.zeros((draw(st.integers(0, 3)), 2), dtype=np.int64), ValueError, "'ids'"
    if kind == "mask-length":
        length = draw(st.integers(0, num_rows + 3).filter(lambda n: n != num_rows))
        return np.ones(length, dtype=bool), ValueError, "'ids'"
    if kind == "mask-2-D":
        return np.ones((num_rows, 1), dtype=bool), ValueError, "'ids'"
    return [0] * draw(st.integers(0, 3)), TypeError, "'ids'"


def as_given(table: np.ndarray, tensor: bool):
    """The table as the store is handed it: the array itself or a tensor of it."""
    return torch.from_numpy(table) if tensor else table


@SETTINGS
@given(tables(), st.booleans(), st.data())
def test_reads_return_the_rows_numpy_indexing_gives(table, tensor, data):
    """``read`` and ``gather`` (with and without ``out``) of valid ids or a mask give
    ``table[ids]`` as NumPy indexes it, and leave the table unchanged."""
    store = FeatureStore({"x": as_given(table.copy(), tensor)})
    ids, positions = data.draw(valid_ids(table.shape[0]))
    expected = table[positions]
    np.testing.assert_array_equal(store.read("x", ids).numpy(), expected)
    np.testing.assert_array_equal(store.gather("x", ids).numpy(), expected)
    out = torch.empty(expected.shape, dtype=torch.from_numpy(table).dtype)
    np.testing.assert_array_equal(store.gather("x", ids, out=out).numpy(), expected)
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(store.read("x").numpy(), table)  # reads change nothing


@SETTINGS
@given(
    st.integers(0, 15), st.lists(st.sampled_from(TABLE_DTYPES), min_size=1, max_size=3), st.data()
)
def test_multi_read_returns_each_tables_rows(num_rows, dtypes, data):
    """``multi_read`` with one shared id array or one per key gives each table's rows as NumPy
    indexes them."""
    tables_ = {
        f"t{i}": data.draw(hnp.arrays(dtype, (num_rows,) if i % 2 else (num_rows, 2)))
        for i, dtype in enumerate(dtypes)
    }
    store = FeatureStore(tables_)
    keys = list(tables_)
    ids, positions = data.draw(valid_ids(num_rows))
    for key, got in zip(keys, store.multi_read(keys, ids), strict=True):
        np.testing.assert_array_equal(got.numpy(), tables_[key][positions])
    each = [data.draw(valid_ids(num_rows)) for _ in keys]
    for key, got, (_, mine) in zip(
        keys, store.multi_read(keys, [ids for ids, _ in each]), each, strict=True
    ):
        np.testing.assert_array_equal(got.numpy(), tables_[key][mine])


@SETTINGS
@given(tables(), st.data())
def test_bad_ids_are_refused_by_every_read(table, data):
    """Out-of-range ids raise ``IndexError`` naming the id and the range (as documented); float,
    int16 or 2-D ids, masks of the wrong length or rank and lists raise
    ``ValueError``/``TypeError`` naming ``'ids'``, in every read."""
    store = FeatureStore({"x": table})
    ids, errors, message = data.draw(bad_ids(table.shape[0]))
    with pytest.raises(errors, match=message):
        store.read("x", ids)
    with pytest.raises(errors, match=message):
        store.gather("x", ids)
    # A list is ids per key to multi_read: one entry per key, each a tensor or array.
    shared_errors = (ValueError, TypeError) if isinstance(ids, list) else errors
    with pytest.raises(shared_errors, match=message):
        store.multi_read(["x"], ids)
    with pytest.raises(errors, match=message):
        store.multi_read(["x"], [ids])


@SETTINGS
@given(tables(), st.booleans(), st.data())
def test_update_writes_the_rows_numpy_assignment_writes(table, tensor, data):
    """``update`` with distinct valid ids or a mask writes what NumPy's ``table[ids] = value``
    writes."""
    store = FeatureStore({"x": as_given(table.copy(), tensor)})
    ids, positions = data.draw(valid_ids(table.shape[0]))
    if np.unique(positions).shape[0] != positions.shape[0]:
        # Which of two writes to one row wins is not specified: keep the first of each.
        first = np.sort(np.unique(positions, return_index=True)[1])
        positions = positions[first]
        ids = ids[torch.from_numpy(first)] if isinstance(ids, torch.Tensor) else ids[first]
    value = data.draw(hnp.arrays(table.dtype, (positions.shape[0], *table.shape[1:])))
    expected = table.copy()
    expected[positions] = value
    store.update("x", torch.from_numpy(value) if data.draw(st.booleans()) else value, ids)
    np.testing.assert_array_equal(store.read("x").numpy(), expected)


@SETTINGS
@given(tables(min_rows=1), st.data())
def test_bad_updates_are_refused_and_change_nothing(table, data):
    """Bad ids, a value of another dtype or shape, or a value that is not an array are refused by
    name, and the table is left as it was."""
    store = FeatureStore({"x": table.copy()})
    damage = data.draw(st.sampled_from(["ids", "dtype", "shape", "value-type"]))
    if damage == "ids":
        ids, errors, message = data.draw(bad_ids(table.shape[0]))
        count = len(ids) if not isinstance(ids, np.ndarray) or ids.dtype != bool else ids.sum()
        value = np.zeros((int(count), *table.shape[1:]), dtype=table.dtype)
    else:
        ids, positions = data.draw(valid_ids(table.shape[0]))
        value = np.zeros((positions.shape[0], *table.shape[1:]), dtype=table.dtype)
        if damage == "dtype":
            other = np.float16 if table.dtype != np.float16 else np.int64
            value, errors, message = value.astype(other), TypeError, "'value'"
        elif damage == "shape":
            value = np.zeros((positions.shape[0] + 1, 5), table.dtype)
            errors, message = ValueError, "'value'"
        else:
            value, errors, message = value.tolist(), TypeError, "'value'"
    with pytest.raises(errors, match=message):
        store.update("x", value, ids)
    np.testing.assert_array_equal(store.read("x").numpy(), table)


@st.composite
def books(draw, max_nodes=40):
    """``(book, part)``: a partition book renumbering a generated assignment of
    ``[1, max_nodes]`` nodes to ``[1, 5]`` parts (parts may be empty)."""
    num_nodes = draw(st.integers(1, max_nodes))
    num_parts = draw(st.integers(1, 5))
    part = draw(hnp.arrays(np.int64, num_nodes, elements=st.integers(0, num_parts - 1)))
    new_to_orig, orig_to_new, bounds = renumber(part, num_parts)
    return PartitionBook(bounds, new_to_orig, orig_to_new), part


@SETTINGS
@given(books(), st.data())
def test_book_maps_are_inverse_and_agree_with_the_bounds(book_part, data):
    """The book of a generated assignment holds inverse permutations whose ranges are the parts;
    ``to_new``, ``to_orig`` and ``owner`` of ids of any shape and integer dtype give what
    indexing the maps and the parts' ranges gives."""
    book, part = book_part
    n = book.num_nodes
    # The maps are inverse permutations; each part owns one range, nodes in original order.
    np.testing.assert_array_equal(np.sort(book.new_to_orig), np.arange(n))
    np.testing.assert_array_equal(book.orig_to_new[book.new_to_orig], np.arange(n))
    owner_of_new = np.repeat(np.arange(book.num_parts), np.diff(book.bounds))
    np.testing.assert_array_equal(owner_of_new, part[book.new_to_orig])
    for p in range(book.num_parts):
        start, stop = book.part_range(p)
        assert (np.diff(book.new_to_orig[start:stop]) > 0).all()
    shape = data.draw(st.sampled_from([(0,), (7,), (2, 3), ()]))
    dtype = data.draw(st.sampled_from([np.int32, np.int64, np.uint16]))
    ids = data.draw(hnp.arrays(dtype, shape, elements=st.integers(0, n - 1)))
    ids = torch.from_numpy(ids) if dtype != np.uint16 and data.draw(st.booleans()) else ids
    reference = np.asarray(ids).astype(np.int64)
    for got, expected in [
        (book.to_new(ids), book.orig_to_new[reference]),
        (book.to_orig(ids), book.new_to_orig[reference]),
        (book.owner(ids), owner_of_new[reference]),
        (book.owner(book.to_new(ids)), part[reference]),
        (book.to_orig(book.to_new(ids)), reference),
    ]:
        assert got.dtype == np.int64 and got.shape == reference.shape
        np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(books(), st.sampled_from(["to_new", "to_orig", "owner"]), st.data())
def test_book_refuses_bad_ids_by_name(book_part, method, data):
    """Ids outside ``[0, num_nodes)`` raise ``ValueError``, non-integer ids ``TypeError``, naming
    the argument."""
    book, _ = book_part
    n = book.num_nodes
    kind = data.draw(st.sampled_from(["negative", "too-high", "float", "bool", "string"]))
    if kind in ("negative", "too-high"):
        ids = data.draw(hnp.arrays(np.int64, st.integers(1, 6), elements=st.integers(0, n - 1)))
        ids[data.draw(st.integers(0, ids.shape[0] - 1))] = -1 if kind == "negative" else n
        errors = ValueError
    else:
        ids = {"float": np.array([0.0]), "bool": np.array([True]), "string": np.array(["0"])}[kind]
        errors = TypeError
    name = "new_ids" if method != "to_new" else "orig_ids"
    with pytest.raises(errors, match=f"'{name}'"):
        getattr(book, method)(ids)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 30), st.data())
def test_assign_parts_with_train_idx(num_nodes, data):
    """``assign_parts`` with a valid ``train_idx`` gives every node a part in ``[0, num_parts)``
    (random parts balanced to one node); a bad ``train_idx`` is refused by name."""
    num_edges = data.draw(st.integers(0, 80))
    edges = data.draw(hnp.arrays(np.int64, (2, num_edges), elements=st.integers(0, num_nodes - 1)))
    graph = Graph.from_edge_index(edges, num_nodes)
    num_parts = data.draw(st.integers(1, num_nodes))
    method = data.draw(st.sampled_from(["metis", "random"]))
    good = data.draw(st.booleans())
    if good:
        train_idx = data.draw(
            hnp.arrays(
                st.sampled_from([np.int32, np.int64]),
                st.integers(0, num_nodes),
                elements=st.integers(0, num_nodes - 1),
            )
        )
        part = assign_parts(graph, num_parts, method, train_idx, seed=data.draw(st.integers(0, 9)))
        assert part.dtype == np.int32 and part.shape == (num_nodes,)
        assert ((part >= 0) & (part < num_parts)).all()
        if method == "random":
            sizes = np.bincount(part, minlength=num_parts)
            assert sizes.max() - sizes.min() <= 1
        return
    kind = data.draw(st.sampled_from(["negative", "too-high", "float", "mask"]))
    train_idx = {
        "negative": np.array([0, -1]),
        "too-high": np.array([num_nodes]),
        "float": np.array([0.0]),
        "mask": np.ones(num_nodes, dtype=bool),
    }[kind]
    with pytest.raises((ValueError, TypeError), match="'train_idx'"):
        assign_parts(graph, num_parts, method, train_idx)
