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
