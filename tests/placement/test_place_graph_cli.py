"""pinlab place --graph: graph strategies from the command line, the cost table, bad input (exit 2)."""

from __future__ import annotations

import json
import re

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


@pytest.mark.parametrize(
    "args, message",
    [
        (["-s", "lpgp", "-n", "8"], "needs --graph FILE"),
        (["-s", "lpgp", "--graph", "MISSING"], "does not exist"),
        (["-s", "lpgp", "--graph", "G", "-n", "6"], "8 threads but 6"),
        (["-s", "lpgp", "--graph", "EMPTY"], "compact or scatter"),
        (["-s", "lpgp", "--graph", "ASYM", "--strict"], "not symmetric"),
        (["-s", "gp", "--graph", "G", "--level", "l9"], "--level l9"),
        (["-s", "lpgp", "--graph", "G", "--domains", "5"], "--domains 5"),
        (["-s", "compact", "-n", "8", "--domains", "1"], "--domains"),
        (["-s", "nope", "--graph", "G"], "unknown strategy"),
    ],
)
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


def test_a_weight_too_large_for_a_float_is_refused_by_every_command(pinlab, tmp_path):
    path = tmp_path / "digits.json"
    path.write_text('{"weights": [[0, 1%s], [1%s, 0]]}' % ("0" * 399, "0" * 399))
    marker = tmp_path / "ran"
    for args in (
        ["place", "-t", "clovertown", "-s", "lpgp", "--graph", str(path)],
        ["run", "-s", "lpgp", "--graph", str(path), "--", "touch", str(marker)],
        ["autopin", "--graph", str(path), "--strategies", "compact,lpgp", "--", "touch", str(marker)],
    ):
        result = pinlab(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr == (
            "pinlab: error: graph %s: the weight between threads 0 and 1 is a number of 400 digits; "
            "weights must be finite and >= 0 (at most 1e+290)\n" % path
        ), args
        assert not marker.exists()


@pytest.mark.parametrize("command", ["place", "run"])
def test_help_lists_the_graph_strategies(pinlab, command):
    from pinlab.placement.strategies import GRAPH_STRATEGIES

    result = pinlab(command, "--help")
    assert result.returncode == 0
    text = " ".join(re.sub(r"-\n\s*", "-", result.stdout).split())  # click wraps the help text, also at hyphens
    assert "with --graph FILE: " + ", ".join(GRAPH_STRATEGIES) in text


@pytest.mark.parametrize("topology, smt_exists", [("nehalem-ep", False), ("clovertown", False), ("x7560-4x8", True)])
@pytest.mark.parametrize("strategy", ["compact", "treematch", "lp-compact"])
def test_too_many_threads_suggests_smt_only_where_there_is_smt(pinlab, tmp_path, topology, smt_exists, strategy):
    topo = load_preset(topology)
    n = len(topo.cores) + 1
    assert (len(topo.pus) > len(topo.cores)) == smt_exists
    graph = tmp_path / "g.json"
    graph_from_matrix((np.ones((n, n)) - np.eye(n)).tolist()).save(graph)
    args = ["-n", str(n)] if strategy == "compact" else ["--graph", str(graph)]
    result = pinlab("place", "-t", topology, "-s", strategy, *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{n} threads but only {n - 1} cores are available" in result.stderr
    assert ("--smt" in result.stderr) == smt_exists
