"""``pinlab tune``: from a program to the placement to use on this machine, with the gain and how sure.

A tune races placements (:mod:`pinlab.tune.candidates`: the operating system's and autopin's
structurally different ones) as a racing study (:mod:`pinlab.study.race`): every run is stored
as a study's run, so ``pinlab report`` reads it and an interrupted tune resumes. The answer
(:mod:`pinlab.tune.answer`) names the winner with its speedup over the operating system's
placement and an interval, the runner-up and how sure the choice is, and the winner is written
as settings to paste (:mod:`pinlab.tune.settings`) and, with ``output``, as a plan file for
``pinlab run --plan``.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import types
from collections.abc import Callable

from pinlab.errors import UsageError
from pinlab.graph.model import load_graph
from pinlab.launch.runner import resolve_program
from pinlab.outputs import check_writable
from pinlab.study.direction import study_direction
from pinlab.study.engine import StudyInterrupted, run_study
from pinlab.study.machine import this_topology
from pinlab.study.plan import RACE, Program, StudyPlan, parse_command, parse_workload, plan_from_parameters, study_placement
from pinlab.study.store import Store
from pinlab.trace import trace_program
from pinlab.trace.common import TraceRequest
from pinlab.tune.answer import Answer, answer
from pinlab.tune.candidates import FIRST_TOUCH, OS_DEFAULT, memory_candidates, tune_candidates, with_graph
from pinlab.tune.request import TuneRequest, parse_budget
from pinlab.tune.settings import openmp_runtime, settings

__all__ = ["Answer", "TuneRequest", "tune", "tune_plan"]


def tune_plan(req: TuneRequest, topo=None, graph=None) -> StudyPlan:
    """The racing study a (validated) request runs: its candidates for this machine (with the
    graph strategies of ``graph``, the program's affinity graph, when given), checked."""
    topo = topo if topo is not None else this_topology()
    program = tune_program(req)
    threads = req.threads or len(topo.allowed_cpus)
    candidates = tune_candidates(topo, threads, req.max_candidates)
    if graph is not None:
        if graph.threads != threads:
            raise UsageError(f"graph {graph.source} was measured with {graph.threads} threads, the tune is for {threads}: give -n {graph.threads}")
        candidates = with_graph(topo, threads, graph, candidates)
    if req.mem:
        candidates += memory_candidates(topo, candidates)
    budget_runs, budget_seconds = parse_budget(req.budget)
    first_look = len(candidates) * req.min_runs
    if budget_runs is not None and budget_runs < first_look:
        raise UsageError(
            f"--budget {req.budget} cannot reach the race's first look ({len(candidates)} placements x {req.min_runs} runs = {first_look} runs): "
            f"give at least {first_look} runs, or fewer --max-candidates"
        )
    plan = StudyPlan(
        name=req.name or datetime.datetime.now().strftime("tune-%Y%m%d-%H%M%S"),
        programs=[program],
        strategies=list(dict.fromkeys(c.placement for c in candidates)),
        mem=list(dict.fromkeys(c.mem for c in candidates)),
        pairs=[[c.placement, c.mem] for c in candidates] if req.mem else None,
        threads=[threads],
        runs=RACE,
        warmup=req.warmup,
        coruns=[req.corun],
        metric=req.metric,
        metric_better=req.metric_better,
        timeout=req.timeout,
        min_runs=req.min_runs,
        max_runs=req.max_runs,
        alpha=req.alpha,
        tolerance=req.tolerance,
        budget_runs=budget_runs,
        budget_seconds=budget_seconds,
        labels={c.placement: c.label for c in candidates},
    )
    plan.validate(topo)
    return plan


class TraceInterrupted(StudyInterrupted):
    """The trace of ``--graph auto`` was stopped by a signal: nothing was raced or stored."""

    def __init__(self, signum: int) -> None:
        Exception.__init__(self, f"the trace for --graph auto was stopped by signal {signum}: nothing was raced or stored")
        self.signum = signum


def tune_program(req: TuneRequest) -> Program:
    """The program a request tunes: its command, or the built-in workload it names."""
    return parse_workload(req.workload) if req.workload else parse_command(list(req.program))


def affinity_graph(req: TuneRequest, threads: int, say: Callable[[str], None] | None = None):
    """The program's affinity graph for ``--graph``: the file's, or (``auto``) traced from one run
    of the program (pinlab trace's automatic method: exact for a pinlab cc build, sampled where
    the hardware samples memory accesses, else pages). None when the trace counted no sharing."""
    if req.graph is None:
        return None
    if req.graph != "auto":
        return load_graph(req.graph)
    tell = say or (lambda text: None)
    tell(f"pinlab: --graph auto: tracing one run of the program with {threads} threads for its affinity graph")
    # the traced run's output goes to stderr: stdout is the answer's (--json)
    outcome = trace_program(TraceRequest(argv=list(tune_program(req).argv), threads=threads, stdout=_stderr_fd()), "auto", baseline=False)
    for note in outcome.result.warnings:
        tell(f"pinlab: trace: {note}")
    if outcome.result.exit_status != 0:
        tell(f"pinlab: trace: the traced run ended with status {outcome.result.exit_status}")
    if outcome.interrupted is not None:
        raise TraceInterrupted(outcome.interrupted)
    if not any(weight > 0 for row in outcome.result.graph.weights for weight in row):
        tell(f"pinlab: --graph auto: the trace ({outcome.method}) counted no sharing between the threads: the graph strategies are left out")
        return None
    return outcome.result.graph


def _stderr_fd() -> int:
    """The file descriptor of this process's stderr (2 where sys.stderr is not a file, as in a notebook)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


def _check_resumable(db: str, name: str) -> None:
    """The stored study ``name`` exists and is a tune, checked before any run."""
    if not os.path.exists(db):
        raise UsageError(f"--resume {name}: no database {db}")
    with Store.open(db, create=False, readonly=True) as store:
        study = store.study(name)
    if study is None:
        raise UsageError(f"--resume {name}: no tune of that name in {db}")
    if study.parameters.get("runs") != RACE:
        raise UsageError(f"study {name} in {db} is not a tune (a race): continue it with pinlab study --resume {name}")


def tune(req: TuneRequest, *, progress: bool = False, say: Callable[[str], None] | None = None) -> Answer:
    """Race the placements of ``req``'s program (or continue the stored race ``req.resume``) and
    answer which to use. Refuses a request that cannot run (UsageError) before anything runs."""
    req.validate()
    if req.program:
        resolve_program(req.program[0], os.environ.get("PATH", os.defpath))  # 127 or 126 as pinlab run, before anything runs
    if req.output is not None:
        check_writable(req.output, "plan file")
    if req.resume is None:
        plan = tune_plan(req, graph=affinity_graph(req, req.threads or len(os.sched_getaffinity(0)), say))
        if req.mem and len(plan.mem) == 1 and say is not None:
            say("pinlab: --mem: the CPUs of this process are on one NUMA node: there is no memory policy to race")
        run_study(plan, req.db, progress=progress, say=say)
        name = plan.name
    else:
        _check_resumable(req.db, req.resume)
        run_study(None, req.db, resume=req.resume, progress=progress, say=say)
        name = req.resume
    with Store.open(req.db, create=False) as store:
        study = store.study(name, must_exist=True)
        assert study is not None  # must_exist raises otherwise
        plan = plan_from_parameters(study.name, study.parameters, study.seed or 0, 10)
        configs = store.configs(study.id)
        runs = store.run_rows(name, record=True)
    found = answer(plan, study_direction(study.parameters), configs, runs, req.db)
    winner = next(c for c in configs if c["position"] == found.winner.position)
    placement = study_placement(this_topology(), winner["placement"] if found.chosen else OS_DEFAULT, winner["threads"])
    mem = winner["mem"] if found.chosen and winner["mem"] != FIRST_TOUCH else None
    placement.mem = None if mem is None else mem.partition(":")[0]
    starts = [t.get("start_library") for r in runs if r["config_id"] == winner["id"] and r.get("record") for t in r["record"].get("threads", [])]
    if req.output is not None:
        with open(req.output, "w", encoding="utf-8") as out:
            json.dump(placement.to_json(), out, indent=2)
            out.write("\n")
        found.plan_file = req.output
    found.settings = settings(placement, found.program, openmp_runtime(starts), found.plan_file, mem)
    return found


class _CallableModule(types.ModuleType):
    """This package, callable as ``pinlab.tune(argv, **options)`` (options: :class:`TuneRequest`'s)."""

    def __call__(self, program=(), **options) -> Answer:
        return tune(TuneRequest(program=tuple(program), **options))


sys.modules[__name__].__class__ = _CallableModule
