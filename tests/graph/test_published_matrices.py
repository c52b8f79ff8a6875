"""The published NAS matrices (bench/data/eagermap) load as the applications' known patterns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "published_matrices.py"


@pytest.fixture(scope="module")
def published():
    spec = importlib.util.spec_from_file_location("published_matrices", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def partners(graph, t):
    return [j for j in range(graph.threads) if graph.weights[t][j] > 0]


def test_every_matrix_loads_square_symmetric_with_a_zero_diagonal(published):
    names = published.names()
    assert {n for n in names if n.startswith("nas-mpi-32t/")} == {f"nas-mpi-32t/{a}" for a in ("bt", "cg", "dt", "ep", "is", "lu", "mg", "sp")}
    assert {n for n in names if n.startswith("nas-mpi-64t/")} == {f"nas-mpi-64t/{a}" for a in ("bt", "cg", "dt", "ft", "is", "lu", "mg", "sp")}
    for name in names:
        g = published.load(name)
        assert g.threads == int(name.split("/")[0].split("-")[2][:-1])
        assert all(g.weights[i][i] == 0 for i in range(32))
        assert all(g.weights[i][j] == g.weights[j][i] for i in range(32) for j in range(32))
        assert g.measured["method"] == "published"
        assert published.published_mapping(name) is None


@pytest.mark.parametrize("n", [32, 64])
def test_processes_are_put_back_in_order(published, n):
    # CG's reductions exchange with the partners at distance 1, 2 and 4 (recursive doubling on
    # 8 columns); IS here is a chain; DT ran on 11 processes, which talk only among themselves.
    # With the published (reversed) index none of these would hold.
    cg = published.load(f"nas-mpi-{n}t/cg")
    for t in range(n):
        assert {t ^ 1, t ^ 2, t ^ 4} <= set(partners(cg, t))
    is_ = published.load(f"nas-mpi-{n}t/is")
    assert all(partners(is_, t) == [x for x in (t - 1, t + 1) if 0 <= x < n] for t in range(n))
    dt = published.load(f"nas-mpi-{n}t/dt")
    assert {t for t in range(n) if partners(dt, t)} == set(range(11))
    assert partners(dt, 8) == [0, 1, 2, 3, 10] and partners(dt, 9) == [4, 5, 6, 7, 10]


def test_known_shapes_of_single_sets(published):
    # BT ran on 25 of the 32 processes: the last 7 communicate with nobody.
    bt = published.load("nas-mpi-32t/bt")
    assert [t for t in range(32) if not partners(bt, t)] == list(range(25, 32))
    # LU on 64 processes: an 8 x 8 grid of neighbours.
    lu = published.load("nas-mpi-64t/lu")
    for t in range(64):
        grid = [x for x in (t - 8, t - 1 if t % 8 else -1, t + 1 if t % 8 != 7 else -1, t + 8) if 0 <= x < 64]
        assert partners(lu, t) == sorted(grid)
    assert published.load("nas-mpi-32t/ep").empty and published.load("nas-mpi-64t/ft").empty


def test_an_unknown_name_is_refused_with_the_list(published):
    with pytest.raises(KeyError, match="nas-mpi-32t/cg"):
        published.load("nas-mpi-32t/xx")
