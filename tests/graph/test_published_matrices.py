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
    assert {n.split("/")[1] for n in names} == {"bt", "cg", "dt", "ep", "is", "lu", "mg", "sp"}
    for name in names:
        g = published.load(name)
        assert g.threads == 32
        assert all(g.weights[i][i] == 0 for i in range(32))
        assert all(g.weights[i][j] == g.weights[j][i] for i in range(32) for j in range(32))
        assert g.measured["method"] == "published"
        assert published.published_mapping(name) is None


def test_rows_are_put_back_in_process_order(published):
    # CG's reductions exchange with the partners at distance 1, 2 and 4 (recursive doubling on
    # 8 columns); IS here is a chain: with the published (reversed) row order neither would hold.
    cg = published.load("nas-mpi-32t/cg")
    for t in range(32):
        assert {t ^ 1, t ^ 2, t ^ 4} <= set(partners(cg, t))
    is_ = published.load("nas-mpi-32t/is")
    assert all(partners(is_, t) == [x for x in (t - 1, t + 1) if 0 <= x < 32] for t in range(32))
    # BT ran on 25 of the 32 processes: the last 7 communicate with nobody.
    bt = published.load("nas-mpi-32t/bt")
    assert [t for t in range(32) if not partners(bt, t)] == list(range(25, 32))
    assert published.load("nas-mpi-32t/ep").empty


def test_an_unknown_name_is_refused_with_the_list(published):
    with pytest.raises(KeyError, match="nas-mpi-32t/cg"):
        published.load("nas-mpi-32t/xx")
