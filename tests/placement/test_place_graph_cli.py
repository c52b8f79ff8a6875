"""pinlab place --graph: graph strategies from the command line, the cost table, bad input (exit 2)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pinlab.graph.model import graph_from_matrix
from pinlab.topology.sources import load_preset


def _pairs_graph(path, n=8, pairs=((0, 5), (1, 6), (2, 7), (3, 4))):
    w = np.zeros((n, n))
    for a, b in pairs:
        w[a, b] = w[b, a] = 100
    w[0, 1] = w[1, 0] = 1
    graph_from_matrix(w.tolist()).save(path)
    return path


def test_cost_table_marks_the_lowest(pinlab, tmp_path):
    graph = _pairs_graph(tmp_path / "g.json")
    result = pinlab("place", "-t", "clovertown", "-s", "lp-compact", "--graph", str(graph))
    assert result.returncode == 0, result.stderr
    cpus = [int(c) for c in result.stdout.strip().split(",")]
    assert len(set(cpus)) == 8
    # every planted pair shares an L2 on the clovertown preset
    l2 = [frozenset(o.cpus) for o in load_preset("clovertown").objects("L2")]
    for a, b in ((0, 5), (1, 6), (2, 7), (3, 4)):
        assert any(cpus[a] in s and cpus[b] in s for s in l2)
    lines = result.stderr.strip().splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"lp-compact", "compact", "scatter", "random"}
    assert rows["lp-compact"].rstrip().endswith("*")
    assert not rows["compact"].rstrip().endswith("*")


def test_json_has_a_cost_object(pinlab, tmp_path):
    graph = _pairs_graph(tmp_path / "g.csv")
    result = pinlab("place", "-t", "nehalem-ep", "-s", "treematch", "--graph", str(graph), "-f", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    costs = data["cost"]["costs"]
    assert set(costs) == {"treematch", "compact", "scatter", "random"}
    assert data["cost"]["best"] == min(costs, key=costs.get)
    assert costs["treematch"] <= min(costs["compact"], costs["scatter"])
    assert data["threads"] == 8 and len(data["cpus"]) == 8


def test_domains_and_level(pinlab, tmp_path):
    rng = np.random.default_rng(1)
    w = rng.random((16, 16))
    w = w + w.T
    np.fill_diagonal(w, 0)
    path = tmp_path / "g.json"
    graph_from_matrix(w.tolist()).save(path)
    topo = load_preset("dunnington-96")
    packages = [frozenset(p.cpus) for p in topo.packages]
    for k in (4, 8, 16):
        result = pinlab("place", "-t", "dunnington-96", "-s", "lpgp", "--graph", str(path), "--domains", str(k))
        assert result.returncode == 0, result.stderr
        cpus = [int(c) for c in result.stdout.strip().split(",")]
        assert len({i for c in cpus for i, p in enumerate(packages) if c in p}) == k
    result = pinlab("place", "-t", "dunnington-96", "-s", "gp", "--graph", str(path), "--level", "l2")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("args, message", [
    (["-s", "lpgp", "-n", "8"], "needs --graph FILE"),
    (["-s", "lpgp", "--graph", "MISSING"], "does not exist"),
    (["-s", "lpgp", "--graph", "G", "-n", "6"], "8 threads but 6"),
    (["-s", "lpgp", "--graph", "EMPTY"], "compact or scatter"),
    (["-s", "lpgp", "--graph", "ASYM", "--strict"], "not symmetric"),
    (["-s", "gp", "--graph", "G", "--level", "l9"], "--level l9"),
    (["-s", "lpgp", "--graph", "G", "--domains", "5"], "--domains 5"),
    (["-s", "compact", "-n", "8", "--domains", "1"], "--domains"),
    (["-s", "nope", "--graph", "G"], "unknown strategy"),
])
def test_bad_input_exits_2_with_one_line(pinlab, tmp_path, args, message):
    g = _pairs_graph(tmp_path / "g.json")
    empty = tmp_path / "empty.json"
    graph_from_matrix([[0, 0], [0, 0]]).save(empty)
    asym = tmp_path / "asym.csv"
    asym.write_text("0,1\n2,0\n")
    names = {"G": str(g), "EMPTY": str(empty), "ASYM": str(asym), "MISSING": str(tmp_path / "missing.json")}
    result = pinlab("place", "-t", "clovertown", *[names.get(a, a) for a in args])
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_asymmetric_graph_is_symmetrised_with_a_notice(pinlab, tmp_path):
    path = tmp_path / "asym.csv"
    path.write_text("0,4,0,0\n2,0,0,0\n0,0,0,5\n0,0,5,0\n")
    result = pinlab("place", "-t", "clovertown", "-s", "gplp", "--graph", str(path))
    assert result.returncode == 0, result.stderr
    assert "not symmetric" in result.stderr
