"""The graph strategies wherever a strategy is accepted: pinlab run, pinlab study (stored with the
study, used again on --resume), autopin's --strategies candidates; and the same refusals everywhere."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pinlab.autopin.candidates import strategy_candidates
from pinlab.autopin.options import AutopinOptions
from pinlab.errors import UsageError
from pinlab.graph.model import graph_from_matrix
from pinlab.native import native_path
from pinlab.study.plan import Program, StudyPlan
from pinlab.study.store import Store
from pinlab.topology.sources import load_preset, load_topology
from tests.conftest import run_pinlab

ALLOWED = sorted(os.sched_getaffinity(0))
THIS = load_topology("this")
CORES = len([c for c in THIS.cores if c.cpus & THIS.allowed_cpus])


def planted(n: int, partner: dict[int, int]) -> list[list[float]]:
    """A graph of n threads where each thread shares (weight 100) with its partner, and a little with its neighbours."""
    w = np.zeros((n, n))
    for a, b in partner.items():
        w[a, b] = w[b, a] = 100
    for a in range(n - 1):
        w[a, a + 1] = w[a + 1, a] = max(w[a, a + 1], 1)
    return w.tolist()


def threads_here() -> int:
    """An even thread count that fits this machine's cores (2 on the development VM)."""
    return max(2, CORES - CORES % 2)


needs_two_cores = pytest.mark.skipif(CORES < 2, reason="the graph strategies need two cores to pin two threads apart")


@needs_two_cores
def test_run_pins_as_the_graph_strategy_planned(tmp_path):
    n = threads_here()
    graph = tmp_path / "g.json"
    graph_from_matrix(planted(n, {i: n - 1 - i for i in range(n)})).save(graph)
    planned = run_pinlab("place", "-s", "treematch", "--graph", str(graph))
    assert planned.returncode == 0, planned.stderr
    cpus = [int(c) for c in planned.stdout.strip().split(",")]
    record = tmp_path / "r.json"
    probe = run_pinlab("run", "-s", "treematch", "--graph", str(graph), "--record", str(record), "--", str(native_path("pinlab-probe")))
    assert probe.returncode == 0, probe.stderr
    data = json.loads(record.read_text())
    assert data["plan"]["strategy"] == "treematch" and data["plan"]["cpus"] == cpus
    # every thread of the program really started on the CPU the graph strategy gave it
    # (the main thread starts on the plan's CPUs and is narrowed to its own at its first thread creation)
    started = {t["index"]: t["narrowed_to"] if t["index"] == 0 else t["cpu_at_start"] for t in data["threads"] if 0 <= t.get("index", -1) < n}
    assert started == {i: cpus[i] for i in range(n)}


def test_run_and_study_refuse_the_same_graph_mistakes(tmp_path):
    graph = tmp_path / "g.json"
    graph_from_matrix(planted(4, {0: 1, 2: 3})).save(graph)
    cases = [
        (["run", "-s", "lpgp", "--", "true"], "needs --graph FILE"),
        (["run", "-s", "compact", "--graph", str(graph), "--", "true"], "go with a graph strategy"),
        (["run", "-s", "lpgp", "-n", "3", "--graph", str(graph), "--", "true"], "has 4 threads but 3 were asked for"),
        (["run", "-s", "lpgp", "--graph", str(tmp_path / "missing.json"), "--", "true"], "does not exist"),
        (["study", "--db", str(tmp_path / "s.db"), "-s", "none,lpgp", "-n", "4", "--runs", "1", "--", "true"], "needs --graph FILE"),
        (
            ["study", "--db", str(tmp_path / "s.db"), "-s", "none,compact", "-n", "4", "--runs", "1", "--graph", str(graph), "--", "true"],
            "--graph is for the graph strategies",
        ),
        (
            ["study", "--db", str(tmp_path / "s.db"), "-s", "none,lpgp", "-n", "2,4", "--runs", "1", "--graph", str(graph), "--", "true"],
            "measured with 4 threads but the study asks for 2",
        ),
        (["autopin", "--graph", str(graph), "--", "true"], "add --strategies"),
    ]
    for args, message in cases:
        result = run_pinlab(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr, (args, result.stderr)
    assert not (tmp_path / "s.db").exists()  # nothing stored by a refused study


@needs_two_cores
def test_a_study_stores_its_graph_and_maps_it_again_on_resume(tmp_path):
    n = 2
    graph_file = tmp_path / "g.json"
    graph_from_matrix(planted(n, {0: 1})).save(graph_file)
    db = tmp_path / "s.db"
    plan = StudyPlan("g", [Program("true", ["true"])], ["none", "lpgp"], [n], 2, warmup=0, graph=str(graph_file))
    from pinlab.study.engine import run_study

    run_study(plan, str(db), progress=False, say=lambda line: None)
    graph_file.unlink()  # the study does not need the file any more
    with Store.open(db, readonly=True) as store:
        study = store.study("g")
        stored = study.parameters["graph"]
        runs = store.run_rows("g")
    assert stored["threads"] == n and stored["weights"][0][1] == 100
    mapped = [r for r in runs if r["placement"] == "lpgp"]
    assert len(mapped) == 2 and all(r["status"] == "ok" and len(r["placement_cpus"]) == n for r in mapped)
    from pinlab.study.plan import plan_from_parameters

    again = plan_from_parameters("g", study.parameters, 0, 10)
    again.validate()
    assert again.graph.weights == graph_from_matrix(planted(n, {0: 1})).weights


def test_autopin_candidates_from_graph_strategies_follow_the_graph():
    topo = load_preset("clovertown")  # 2 packages x 2 L2 pairs
    weights = planted(4, {0: 3, 1: 2})
    candidates = strategy_candidates(topo, ["lp-compact", "compact"], 4, graph=graph_from_matrix(weights))
    by_name = {c.name: c.cpus for c in candidates}
    l2 = [frozenset(o.cpus) for o in topo.objects("L2")]
    lp = by_name.get("lp-compact") or next(cpus for name, cpus in by_name.items() if "lp-compact" in name)
    for a, b in ((0, 3), (1, 2)):
        assert any(lp[a] in s and lp[b] in s for s in l2), lp
    with pytest.raises(UsageError, match="needs --graph"):
        strategy_candidates(topo, ["lpgp"], 4)
    with pytest.raises(UsageError, match="add --strategies"):
        AutopinOptions(graph=graph_from_matrix(weights)).validate()
