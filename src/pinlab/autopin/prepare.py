"""What every autopin session settles before anything runs: the candidates, whether the probing can
ever reach a verdict, the log's file; and how a session ended (:class:`Outcome`).

Shared by the sessions that re-pin a running program (:mod:`pinlab.autopin.session`) and the one
that restarts it for each probe (:mod:`pinlab.autopin.restart`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pinlab.autopin import candidates as made
from pinlab.autopin.decide import correction, smallest_p
from pinlab.autopin.options import AutopinOptions
from pinlab.errors import UsageError
from pinlab.graph import load_graph
from pinlab.heartbeat import Heartbeat
from pinlab.outputs import check_writable
from pinlab.topology import load_topology


@dataclass
class Outcome:
    """How an autopin session ended: the program's status (launch mode) and the log's summary."""

    exit_status: int | None
    summary: dict[str, Any]
    record: Any = None  # the RunRecord in launch mode


def default_threads(topo: Any) -> int:
    """OMP_NUM_THREADS when set, else one thread per allowed core (OpenMP's usual default)."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    allowed = topo.allowed_cpus
    return max(1, sum(1 for core in topo.cores if core.cpus & allowed))


def make_candidates(options: AutopinOptions, threads: int | None, topo: Any) -> list[Any]:
    """The candidates as the options ask: auto, explicit (the paper's "0,1;0,2") or strategies."""
    if options.strategies:
        names = [n.strip() for n in options.strategies.split(",") if n.strip()]
        graph = options.graph
        if isinstance(graph, (str, os.PathLike)):
            graph = load_graph(os.fspath(graph))
        default = graph.threads if graph is not None else default_threads(topo)
        return made.strategy_candidates(topo, names, threads or default, cpu_kind=options.cpu_kind, graph=graph)
    if options.candidates in (None, "auto"):
        return made.auto_candidates(topo, threads or default_threads(topo), max_candidates=options.max_candidates, cpu_kind=options.cpu_kind)
    return made.parse_candidates(options.candidates, topo, threads)


def check_power(options: AutopinOptions, candidates: Sequence[Any]) -> None:
    """Refuse probing that can never reach a verdict: with n sub-window rates per candidate the
    smallest p-value is 1 / C(2n, n), which must beat ``alpha`` after the Bonferroni correction."""
    if len(candidates) < 2:
        return
    looks = options.round_limit if options.adaptive else 1
    factor = correction(len(candidates), looks, looks)  # the last round's: all the sub-windows, the least alpha
    samples = options.windows * options.round_limit
    if smallest_p(samples) * factor < options.alpha:
        return
    need = next(w for w in range(options.windows + 1, 1001) if smallest_p(w * options.round_limit) * factor < options.alpha)
    raise UsageError(
        f"{options.windows} sub-windows x {options.round_limit} rounds can never give a significant verdict among "
        f"{len(candidates)} candidates at alpha {options.alpha:g}: use --windows {need} or more (or fewer candidates, more rounds)"
    )


def preview(options: AutopinOptions, source: str | None = None, pid: int | None = None) -> tuple[Any, list[Any]]:
    """The candidates autopin would probe (``pinlab autopin --dry-run``) on the machine ``source``
    names (this one by default, or another's to plan for it: a preset, synthetic, an XML file),
    checked as a real session checks them; nothing runs."""
    if pid is not None:
        raise UsageError("--dry-run previews the candidates for -n threads: give -n rather than --pid")
    topology = load_topology(source or "this")
    candidates = make_candidates(options, options.threads, topology)
    check_power(options, candidates)
    return topology, candidates


def check_log(path: str | None) -> None:
    """Find out before the program starts, not after, that the log cannot be written."""
    if path:
        check_writable(path, "the log")


def heartbeat_seen(path: str | None) -> bool:
    """Whether any thread of the program has beaten (claimed a slot of the heartbeat file ``path``)."""
    if not path or not os.path.exists(path):
        return False
    try:
        with Heartbeat(path, create=False) as reader:
            return reader.claimed() > 0
    except (OSError, ValueError):
        return False
