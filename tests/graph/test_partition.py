"""k-way partitioning into parts of exactly the hardware's sizes (pinlab.graph.partition)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.graph.partition import inside_weight, partition


def _planted(groups: list[int], seed: int, noise: float = 0.05) -> tuple[np.ndarray, list[int]]:
    """A graph whose heavy pairs are inside groups of the given sizes, thread numbers shuffled."""
    rng = np.random.default_rng(seed)
    n = sum(groups)
    labels = np.repeat(np.arange(len(groups)), groups)
    rng.shuffle(labels)
    w = rng.random((n, n)) * noise
    w[labels[:, None] == labels[None, :]] += 1.0
    w = (w + w.T) / 2
    np.fill_diagonal(w, 0)
    return w, labels.tolist()


@st.composite
def graphs_and_sizes(draw):
    k = draw(st.integers(1, 8))
    sizes = draw(st.lists(st.integers(0, 9), min_size=k, max_size=k))
    n = sum(sizes)
    density = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) * (rng.random((n, n)) < density)
    w = w + w.T
    np.fill_diagonal(w, 0)
    return w, sizes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_sizes())
def test_parts_have_exactly_the_given_sizes(case):
    w, sizes = case
    parts = partition(w, sizes)
    assert len(parts) == w.shape[0]
    assert np.bincount(parts, minlength=len(sizes)).tolist() == sizes


@pytest.mark.parametrize("groups", [[4, 4], [6, 6, 6, 6], [8, 8, 8, 8, 8, 8, 8, 8], [2] * 12, [3, 5, 7]])
def test_planted_groups_are_found(groups):
    w, labels = _planted(groups, seed=len(groups))
    parts = partition(w, groups)
    # every planted group lands whole in one part
    for g in set(labels):
        members = [t for t, label in enumerate(labels) if label == g]
        assert len({parts[t] for t in members}) == 1, (g, members, parts)


def test_no_edges_k1_zero_parts_and_k_ge_n():
    assert np.bincount(partition(np.zeros((5, 5)), [2, 0, 3]), minlength=3).tolist() == [2, 0, 3]
    w, _ = _planted([3, 3], seed=1)
    assert partition(w, [6]) == [0] * 6
    assert partition(w, [0, 6, 0]) == [1] * 6
    sizes = [1, 1, 1, 1, 1, 1, 0, 0]
    assert sorted(partition(w, sizes)) == [0, 1, 2, 3, 4, 5]


def test_disconnected_graph_keeps_components_whole():
    w = np.zeros((12, 12))
    for block in (range(0, 4), range(4, 8), range(8, 12)):
        for i in block:
            for j in block:
                if i != j:
                    w[i, j] = 1.0
    parts = partition(w, [4, 4, 4])
    assert inside_weight(w, parts) == inside_weight(w, [0] * 4 + [1] * 4 + [2] * 4)


def test_repair_beats_or_matches_metis_balance_on_unequal_sizes():
    w, labels = _planted([5, 3], seed=3)
    parts = partition(w, [5, 3])
    assert np.bincount(parts).tolist() == [5, 3]
    assert inside_weight(w, parts) == pytest.approx(inside_weight(w, labels))


def test_sizes_that_do_not_add_up_are_refused():
    with pytest.raises(ValueError):
        partition(np.zeros((4, 4)), [2, 1])


# -- the C loops (pinlab.graph.kernels) against plain numpy ----------------------------------------------
def _random_graph(n, density, seed):
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) * (rng.random((n, n)) < density)
    w = w + w.T
    np.fill_diagonal(w, 0)
    return w


def _numpy_refine(w, parts, vs, passes):
    """The swap pass as it was written in numpy (the reference for the C one)."""
    parts = parts.copy()
    n = w.shape[0]
    k = int(parts.max()) + 1
    conn = np.stack([w[:, parts == p].sum(axis=1) for p in range(k)], axis=1)
    for _ in range(passes):
        improved = False
        for u in range(n):
            p = parts[u]
            pull = conn[u] - conn[u, p]
            pull[p] = -np.inf
            q = int(np.argmax(pull))
            if pull[q] <= 0:
                continue
            cand = np.flatnonzero((parts == q) & (vs == vs[u]))
            if cand.size == 0:
                continue
            gains = pull[q] + conn[cand, p] - conn[cand, q] - 2 * w[u, cand]
            best = int(np.argmax(gains))
            if gains[best] <= 1e-12 * max(1.0, abs(pull[q])):
                continue
            v = int(cand[best])
            conn[:, p] += w[:, v] - w[:, u]
            conn[:, q] += w[:, u] - w[:, v]
            parts[u], parts[v] = q, p
            improved = True
        if not improved:
            break
    return parts


@pytest.mark.parametrize("density", [0.05, 0.3, 1.0])
def test_the_c_loops_do_what_the_numpy_ones_did_on_dense_and_sparse_weights(density):
    from pinlab.graph import kernels

    for seed in range(4):
        n, k = 60, 4
        w = _random_graph(n, density, seed)
        rng = np.random.default_rng(seed)
        parts = rng.permutation(np.repeat(np.arange(k), n // k))
        vs = rng.integers(1, 3, n)
        g = kernels.Weights(w)
        assert (g.dense is not None) == (density > kernels.DENSE_FRACTION)
        conn = np.stack([w[:, parts == p].sum(axis=1) for p in range(k)], axis=1)
        assert np.allclose(kernels.group_sums(g, parts, k), conn)
        contracted = np.stack([conn[parts == p].sum(axis=0) for p in range(k)])
        assert np.allclose(kernels.group_sums(g, parts, k, row_label=parts, kr=k), contracted)
        assert kernels.inside_weight(g, parts) == pytest.approx(np.trace(contracted) / 2)
        refined = kernels.refine(g, parts, vs, passes=3)
        assert refined.tolist() == _numpy_refine(w, parts, vs, 3).tolist()
        assert np.bincount(refined, weights=vs).tolist() == np.bincount(parts, weights=vs).tolist()  # sizes kept
        assert kernels.inside_weight(g, refined) >= kernels.inside_weight(g, parts) - 1e-9


def test_greedy_growth_fills_every_part_to_its_room_from_the_heaviest_vertex():
    from pinlab.graph import kernels

    w = _random_graph(40, 1.0, 3)
    rooms = [16, 8, 8, 8]
    parts = kernels.grow(w, rooms, [0, 1, 2, 3])
    assert np.bincount(parts, minlength=4).tolist() == rooms
    assert parts[int(np.argmax(w.sum(axis=1)))] == 0  # the first part starts from the vertex with the most weight
    assert kernels.grow(w, rooms, [0, 1, 2, 3], first=5)[5] == 0
    # Vertex sizes: a vertex of 2 never goes where 1 is left; what fits nowhere is -1.
    parts = kernels.grow(w[:3, :3], [1, 2], [1, 0], vs=[2, 2, 1])
    assert sorted(parts.tolist()) == [-1, 0, 1]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda k, w: k.group_sums(w, [0, 1, 2, 5], 3), r"labels must lie in \[0, 3\), got \[0, 5\]"),
        (lambda k, w: k.group_sums(w, [0, 1, -1, 2], 3), r"labels must lie in \[0, 3\), got \[-1, 2\]"),
        (lambda k, w: k.group_sums(w, [0, 1], 3), r"\(2,\) labels for 4 vertices"),
        (lambda k, w: k.group_sums(w, [0, 0, 1, 1], 2, row_label=[0, 0, 1, 4], kr=2), r"labels must lie in \[0, 2\)"),
        (lambda k, w: k.refine(w, [0, 1, -1, 1]), r"labels must lie in \[0, 2\), got \[-1, 1\]"),
        (lambda k, w: k.refine(w, [0, 0, 1, 1], vs=[1, 1]), r"\(2,\) vertex sizes for 4 vertices"),
        (lambda k, w: k.grow(w, [2, 2], [0, 2]), r"the order must name parts among the 2 rooms"),
        (lambda k, w: k.grow(w, [2, 2], [0, 1], first=4), r"first vertex 4 is not among the 4"),
        (lambda k, w: k.Weights(np.ones((4, 3))), r"a square weight matrix is needed"),
        (lambda k, w: k.heaviest(np.ones((4, 3)), 2), r"a square matrix is needed"),
    ],
    ids=[
        "label-too-big",
        "label-negative",
        "too-few-labels",
        "row-label",
        "refine-negative",
        "sizes",
        "grow-order",
        "grow-first",
        "not-square",
        "heaviest-not-square",
    ],
)
def test_the_c_loops_refuse_labels_and_shapes_they_would_index_out_of_bounds(call, message):
    """The C loops index with the labels unchecked: a wrong caller gets an error before them."""
    from pinlab.graph import kernels

    with pytest.raises(ValueError, match=message):
        call(kernels, _random_graph(4, 1.0, 1))


def test_metis_gets_each_vertex_s_heaviest_pairs_of_a_dense_graph(monkeypatch):
    """Counted, not timed: on a large dense graph METIS sees at most 2 x METIS_NEIGHBOURS pairs
    per vertex (its own heaviest, and those of which it is among the heaviest), not all n - 1."""
    import pymetis

    from pinlab.graph import partition as module

    real, seen = pymetis.part_graph, []

    def counting(k, adjacency, **options):
        seen.append((len(adjacency.adj_starts) - 1, len(adjacency.adjacent)))
        return real(k, adjacency, **options)

    monkeypatch.setattr(pymetis, "part_graph", counting)
    w, labels = _planted([128] * 4, 0, noise=0.5)
    parts = partition(w, [128] * 4)
    n, entries = seen[-1]
    assert n == 512 > module.METIS_ALL_PAIRS and entries <= n * 2 * module.METIS_NEIGHBOURS
    assert inside_weight(w, parts) == pytest.approx(inside_weight(w, labels))  # the planted groups, still found
