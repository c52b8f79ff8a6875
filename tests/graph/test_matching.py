"""The compiled maximum-weight matching against exhaustive enumeration and against networkx."""

from __future__ import annotations

import random
import subprocess
import sys

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.errors import UsageError
from pinlab.graph.matching import (
    matching_weight,
    max_weight_matching,
    max_weight_matching_edges,
    perfect_pairs,
)


def random_matrix(n: int, seed: int, density: float | None = None, top: int | None = None, floats: bool = False):
    """A symmetric non-negative matrix with a zero diagonal; many zeros and repeated values."""
    rng = random.Random(seed)
    density = rng.choice([0.2, 0.5, 0.8, 1.0]) if density is None else density
    top = rng.choice([1, 3, 10, 1000]) if top is None else top
    w = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < density:
                w[i][j] = w[j][i] = rng.uniform(0, top) if floats else rng.randint(0, top)
    return w


def all_matchings(n: int, w):
    """Every matching over the positive pairs (including the empty one), by plain enumeration."""

    def extend(free: tuple[int, ...]):
        if not free:
            yield []
            return
        first, rest = free[0], free[1:]
        yield from extend(rest)  # first stays unmatched
        for k, other in enumerate(rest):
            if w[first][other] > 0:
                for tail in extend(rest[:k] + rest[k + 1 :]):
                    yield [(first, other)] + tail

    yield from extend(tuple(range(n)))


def brute_force_weight(w) -> float:
    return max(matching_weight(w, m) for m in all_matchings(len(w), w))


def networkx_weight(w) -> float:
    g = nx.Graph()
    n = len(w)
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from((i, j, w[i][j]) for i in range(n) for j in range(i + 1, n) if w[i][j] > 0)
    return matching_weight(w, nx.max_weight_matching(g))


def assert_valid(n: int, w, pairs) -> None:
    """A matching: sorted pairs i < j, no thread twice, only pairs that share something."""
    assert pairs == sorted(pairs)
    threads = [t for pair in pairs for t in pair]
    assert len(threads) == len(set(threads))
    for i, j in pairs:
        assert 0 <= i < j < n
        assert w[i][j] > 0


@pytest.mark.parametrize("n", range(0, 11))
def test_weight_equals_brute_force_up_to_10_threads(n):
    for seed in range(30 if n <= 8 else 12):
        w = random_matrix(n, seed * 100 + n)
        pairs = max_weight_matching(w)
        assert_valid(n, w, pairs)
        assert matching_weight(w, pairs) == brute_force_weight(w), f"n={n} seed={seed}"


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 9).flatmap(lambda n: st.lists(st.integers(0, 4), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2).map(lambda v: (n, v))))
def test_weight_equals_brute_force_hypothesis(case):
    n, values = case
    w = [[0] * n for _ in range(n)]
    it = iter(values)
    for i in range(n):
        for j in range(i + 1, n):
            w[i][j] = w[j][i] = next(it)
    pairs = max_weight_matching(w)
    assert_valid(n, w, pairs)
    assert matching_weight(w, pairs) == brute_force_weight(w)


@pytest.mark.parametrize("n", [16, 33, 64, 101, 128])
@pytest.mark.parametrize("density", [1.0, 0.05])
def test_weight_equals_networkx_up_to_128_threads(n, density):
    for seed in range(3):
        w = random_matrix(n, seed + 7 * n, density=density)
        pairs = max_weight_matching(w)
        assert_valid(n, w, pairs)
        assert matching_weight(w, pairs) == networkx_weight(w), f"n={n} density={density} seed={seed}"


def test_float_weights_equal_networkx_within_the_documented_precision():
    for seed, n in enumerate([7, 10, 40, 128]):
        w = random_matrix(n, seed, density=0.6, top=5, floats=True)
        pairs = max_weight_matching(w)
        assert_valid(n, w, pairs)
        found, reference = matching_weight(w, pairs), networkx_weight(w)
        top = max(max(row) for row in w)
        assert abs(found - reference) <= n * top * 2.0**-40, (found, reference)
        if n <= 10:
            assert abs(found - brute_force_weight(w)) <= n * top * 2.0**-40


def test_large_integer_weights_are_exact():
    # Values that differ only in the last units of 2**52: a float-scaled matching would not tell them apart.
    big = 2**52
    w = [[0, big, big + 1, 0], [big, 0, 0, big + 1], [big + 1, 0, 0, big], [0, big + 1, big, 0]]
    assert max_weight_matching(w) == [(0, 2), (1, 3)]


def test_edge_list_matches_the_matrix_and_accepts_both_directions():
    for seed, n in enumerate([9, 50, 128]):
        w = random_matrix(n, 500 + seed, density=0.1)
        one_way = [(i, j, w[i][j]) for i in range(n) for j in range(i + 1, n) if w[i][j] > 0]
        both_ways = one_way + [(j, i, x) for i, j, x in one_way]
        a = max_weight_matching_edges(n, one_way)
        assert_valid(n, w, a)
        assert matching_weight(w, a) == matching_weight(w, max_weight_matching(w))
        assert matching_weight(w, max_weight_matching_edges(n, both_ways)) == matching_weight(w, a)


def test_sparse_4096_threads_from_an_edge_list():
    # A ring of 4096 threads with heavy even links and light odd ones: the optimum takes every even link.
    n = 4096
    edges = [(i, (i + 1) % n, 5 if i % 2 == 0 else 3) for i in range(n)]
    pairs = max_weight_matching_edges(n, edges)
    assert pairs == [(i, i + 1) for i in range(0, n, 2)]


def test_small_and_degenerate_graphs():
    assert max_weight_matching([]) == []
    assert max_weight_matching([[0]]) == []
    assert max_weight_matching([[0, 3], [3, 0]]) == [(0, 1)]
    assert max_weight_matching([[0, 0], [0, 0]]) == []
    assert max_weight_matching([[0.0] * 6 for _ in range(6)]) == []
    assert max_weight_matching_edges(0, []) == []
    assert max_weight_matching_edges(5, [(1, 3, 0)]) == []


def test_ties_give_a_maximum_matching_of_the_common_weight():
    for n in (2, 5, 8, 31):
        w = [[0 if i == j else 2 for j in range(n)] for i in range(n)]
        pairs = max_weight_matching(w)
        assert_valid(n, w, pairs)
        assert len(pairs) == n // 2
    # A path a-b-c-d of equal weights: the two end pairs, not the middle one.
    w = [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]]
    assert max_weight_matching(w) == [(0, 1), (2, 3)]
    # The path 2-0-1-3: the equal-weight pair listed first, (0, 1), is the middle one; matched
    # first, it must be undone by the augmenting path 2-0-1-3.
    w = [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]]
    assert max_weight_matching(w) == [(0, 2), (1, 3)]


def test_weight_beats_cardinality():
    # A heavy middle pair is worth more than the two light end pairs.
    w = [[0, 1, 0, 0], [1, 0, 5, 0], [0, 5, 0, 1], [0, 0, 1, 0]]
    assert max_weight_matching(w) == [(1, 2)]


@pytest.mark.parametrize("n", range(0, 10))
def test_perfect_pairs_cover_every_thread_with_the_maximum_weight(n):
    for seed in range(10):
        w = random_matrix(n, 900 + 10 * n + seed, density=0.4)
        pairs, alone = perfect_pairs(w)
        threads = [t for pair in pairs for t in pair] + ([alone] if alone is not None else [])
        assert sorted(threads) == list(range(n))
        assert (alone is None) == (n % 2 == 0)
        assert all(i < j for i, j in pairs) and pairs == sorted(pairs)
        assert matching_weight(w, pairs) == brute_force_weight(w)


@pytest.mark.parametrize(
    "weights, message",
    [
        ([[0, -1], [-1, 0]], "negative"),
        ([[0, float("nan")], [float("nan"), 0]], "finite"),
        ([[0, float("inf")], [float("inf"), 0]], "finite"),
        ([[0, 1, 2], [1, 0, 3]], "square"),
        ([[0, 1], [2, 0]], "symmetric"),
        ([[0, 1, 2], [1, 0]], "square"),
        ([[0, "x"], ["x", 0]], "numbers"),
    ],
)
def test_bad_matrices_are_refused(weights, message):
    with pytest.raises(UsageError, match=message):
        max_weight_matching(weights)


@pytest.mark.parametrize(
    "n, edges, message",
    [
        (3, [(0, 3, 1)], "from 0 to 2"),
        (3, [(0, -1, 1)], "from 0 to 2"),
        (3, [(0.5, 1, 1)], "from 0 to 2"),
        (3, [(1, 1, 1)], "itself"),
        (3, [(0, 1, 1), (1, 0, 2)], "twice"),
        (3, [(0, 1, -2)], "negative"),
        (3, [(0, 1)], "three numbers"),
        (-1, [], "non-negative integer"),
    ],
)
def test_bad_edge_lists_are_refused(n, edges, message):
    with pytest.raises(UsageError, match=message):
        max_weight_matching_edges(n, edges)


def test_the_compiled_matching_runs_without_networkx():
    code = (
        "import sys\n"
        "from pinlab.graph.matching import max_weight_matching\n"
        "print(max_weight_matching([[0, 2, 1], [2, 0, 9], [1, 9, 0]]))\n"
        "print('networkx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[(1, 2)]"
    assert out[1] == "False"
