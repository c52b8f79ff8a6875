"""What an autopin report shows, computed once from the log for the terminal, the picture and HTML.

A log is cut into *searches*: the first from the start, and one more after each re-probe. Each
search has its probes, the choice that ended it (none when the program ended while probing),
and the rates measured after that choice. For each candidate of a search the report gives its
mean rate over every sub-window it was measured in (the samples the verdict is computed from),
their standard deviation, and how it compares with the chosen candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pinlab.autopin.decide import rate
from pinlab.autopin.log import AutopinLog, Choice, MetricChange, Migration, Probe, Rate, Recheck, Reprobe, finite
from pinlab.cpuset import format_cpulist

__all__ = [
    "CandidateRow",
    "Search",
    "searches",
    "probing_seconds",
    "rate_unit",
    "si",
    "seconds",
    "p_text",
    "parameters",
    "what_ran",
    "effect_sentence",
    "run_summary",
    "reprobe_sentence",
    "metric_change_sentence",
    "opening_sentence",
    "migration_sentence",
    "recheck_sentence",
    "choice_lines",
]


@dataclass(frozen=True)
class CandidateRow:
    """One candidate in one search, as the table shows it."""

    index: int
    name: str
    cpus: tuple[int, ...]
    rounds: int
    samples: int
    mean: float | None
    spread: float | None  # standard deviation of the sub-window rates (None with fewer than two)
    relative: float | None  # mean / reference mean - 1
    chosen: bool
    runner_up: bool
    equivalent: bool

    @property
    def cpulist(self) -> str:
        return format_cpulist(self.cpus) if self.cpus else "–"

    @property
    def relative_spread(self) -> float | None:
        """The spread as a share of the mean (unit-free, comparable between candidates)."""
        return self.spread / self.mean if self.spread is not None and self.mean else None

    @property
    def role(self) -> str:
        if self.chosen:
            return "chosen"
        if self.runner_up:
            return "runner-up"
        return "equivalent" if self.equivalent else ""


@dataclass
class Search:
    """One search for the best candidate: from the start, or after a re-probe."""

    number: int
    reprobe: Reprobe | None = None
    metric_change: MetricChange | None = None  # began because the metric changed (the one before was cut short)
    probes: list[Probe] = field(default_factory=list)
    choice: Choice | None = None
    rates: list[Rate] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)
    rechecks: list[Recheck] = field(default_factory=list)  # the runner-up measured while the choice was kept
    rows: list[CandidateRow] = field(default_factory=list)
    reference: int | None = None  # the candidate the % column is relative to
    cut_by_metric: bool = False  # ended, without a choice, by a change of the metric

    @property
    def began(self) -> float | None:
        if self.reprobe is not None:
            return self.reprobe.t
        if self.metric_change is not None:
            return self.metric_change.t
        first = self.probes[0] if self.probes else None
        return None if first is None else (first.repinned_at if first.repinned_at is not None else first.start)

    @property
    def probing_seconds(self) -> float:
        return probing_seconds(self.probes)

    @property
    def reference_is_choice(self) -> bool:
        return self.choice is not None and self.reference == self.choice.candidate


def probing_seconds(probes: list[Probe]) -> float:
    """Seconds spent probing: each window with its warm-up (from the re-pin to its end)."""
    return sum(p.end - (p.repinned_at if p.repinned_at is not None else p.start) for p in probes)


def searches(log: AutopinLog) -> list[Search]:
    """The log's searches in order, each with its candidate rows."""
    found = [Search(number=1)]
    for event in log.events:
        current = found[-1]
        if isinstance(event, Reprobe):
            found.append(Search(number=len(found) + 1, reprobe=event))
        elif isinstance(event, MetricChange):
            current.cut_by_metric = current.choice is None and bool(current.probes)
            found.append(Search(number=len(found) + 1, metric_change=event))
        elif isinstance(event, Probe):
            if current.choice is not None:  # probing again without a logged re-probe: a new search all the same
                current = Search(number=len(found) + 1)
                found.append(current)
            current.probes.append(event)
        elif isinstance(event, Choice):
            current.choice = event
        elif isinstance(event, Rate):
            current.rates.append(event)
        elif isinstance(event, Migration):
            current.migrations.append(event)
        elif isinstance(event, Recheck):
            current.rechecks.append(event)
    for search in found:
        _fill_rows(log, search)
    return [s for s in found if s.probes or s.choice or s.reprobe or s.metric_change or s.number == 1]


def _fill_rows(log: AutopinLog, search: Search) -> None:
    """The candidate rows of ``search``: every candidate of the log, measured or not."""
    stats = {}
    for c in log.start.candidates:
        probes = [p for p in search.probes if p.candidate == c.index]
        weighted = [(x, w) for p in probes for x, w in zip(p.samples, p.weights) if finite(x)]
        samples = [x for x, _ in weighted]
        mean = rate(samples, [w for _, w in weighted]) if samples else None  # as the verdict ranks
        spread = None
        if len(samples) >= 2:
            spread = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1))
        cpus = probes[-1].cpus if probes else c.cpus
        stats[c.index] = (c, len(probes), len(samples), mean, spread, cpus)
    choice = search.choice
    if choice is not None and stats.get(choice.candidate, (None, 0, 0, None))[3] is not None:
        reference = choice.candidate
    else:  # no choice (the program ended while probing): against the best measured so far
        measured = [(v[3], k) for k, v in stats.items() if v[3] is not None]
        reference = max(measured)[1] if measured else None
    search.reference = reference
    ref_mean = stats[reference][3] if reference is not None else None
    equivalent = set(choice.equivalent) if choice else set()
    for index, (c, rounds, n, mean, spread, cpus) in stats.items():
        relative = mean / ref_mean - 1 if mean is not None and ref_mean else None
        search.rows.append(
            CandidateRow(
                index=index,
                name=c.name,
                cpus=cpus,
                rounds=rounds,
                samples=n,
                mean=mean,
                spread=spread,
                relative=relative,
                chosen=choice is not None and index == choice.candidate,
                runner_up=choice is not None and choice.runner_up is not None and index == choice.runner_up.candidate,
                equivalent=index in equivalent and not (choice is not None and index == choice.candidate),
            )
        )


# -- words and numbers ----------------------------------------------------------------------------
def rate_unit(log: AutopinLog, search: Search | None = None, at: float = 0.0) -> str:
    """The unit of the rates: the metric's unit per second per worker thread, as it was at ``at``
    or when ``search`` began (a log whose metric changed has two)."""
    if search is not None and search.began is not None:
        at = search.began
    return f"{log.unit_at(at)}/s per thread"


def opening_sentence(search: Search) -> str | None:
    """Why ``search`` began, when something other than the start began it."""
    if search.reprobe is not None:
        return reprobe_sentence(search.reprobe)
    if search.metric_change is not None:
        return metric_change_sentence(search.metric_change)
    return None


def metric_change_sentence(change: MetricChange) -> str:
    """Why the metric changed, and what that means for the rates before and after."""
    previous = change.previous or "the first metric"
    return (
        f"At {seconds(change.t)} the program's threads had begun beating through PINLAB_HEARTBEAT: the metric changed from "
        f"{previous} to {change.metric}, and the search started again (rates by the two do not compare)."
    )


def metric_why(log: AutopinLog) -> str | None:
    """Why the metric was chosen, as autopin said it, without the metric's name the report already
    gives (autopin's line reads ``metric: heartbeat (this machine has no ... counters; ...)``)."""
    notice, name = log.start.metric_notice, log.start.metric
    if not notice:
        return None
    for prefix in (f"metric: {name}", "metric:") if name else ("metric:",):
        if notice.startswith(prefix):
            notice = notice[len(prefix) :].strip()
            break
    if notice.startswith("(") and notice.endswith(")"):
        notice = notice[1:-1]
    return notice or None


_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float | None, digits: int = 4) -> str:
    """A rate with ``digits`` significant digits and an SI prefix from 10 000 up: 1.235 G, 12.5 k, 0.3127."""
    if not finite(value):
        return "–"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale and abs(value) >= 1e4:
            return f"{value / scale:.{digits}g} {prefix}"
    return f"{value:.{digits}g}"


def seconds(value: float | None) -> str:
    """A duration as a reader wants it: 12.3 s, 4 min 05 s, 1 h 02 min."""
    if not finite(value):
        return "–"
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        minutes, rest = divmod(round(value), 60)
        return f"{minutes} min {rest:02d} s"
    hours, rest = divmod(round(value / 60), 60)
    return f"{hours} h {rest:02d} min"


def p_text(p: float | None) -> str:
    """A p-value in a sentence: 'p = 0.003', 'p < 0.001', or 'p not computable'."""
    if not finite(p):
        return "p not computable"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


_PARAMS = [
    ("init", "initialisation", seconds),
    ("warmup", "warm-up", seconds),
    ("interval", "interval", seconds),
    ("windows", "sub-windows", str),
    ("rounds", "rounds", str),
    ("alpha", "alpha", lambda v: f"{v:g}"),
    ("migrate_pages", "migrate pages", str),
    ("monitor", "monitor", lambda v: "on" if v else "off"),
    ("threshold", "threshold", lambda v: f"{v:g} %"),
]


def parameters(log: AutopinLog) -> list[tuple[str, str]]:
    """The run's parameters as (label, value), known ones first, then any others the log has."""
    params = dict(log.start.params)
    out = []
    for key, label, fmt in _PARAMS:
        if key in params and params[key] is not None:
            value = params.pop(key)
            try:
                out.append((label, fmt(value)))
            except (TypeError, ValueError):
                out.append((label, str(value)))
        else:
            params.pop(key, None)
    out.extend((str(k), _plain(v)) for k, v in params.items())
    return out


def _plain(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items())
    return str(value)


def what_ran(log: AutopinLog) -> str:
    """One line: the program (or PID) and its worker threads."""
    start = log.start
    if start.mode == "attach" or (start.argv is None and start.pid is not None):
        what = f"attached to PID {start.pid if start.pid is not None else '?'}"
    else:
        what = "ran " + (" ".join(start.argv) if start.argv else "an unnamed program")
        if start.mode == "restart":
            what += " (--probe restart: each probe a run of its own, pinned on its candidate from its start; then once more on the choice)"
    threads = f", {start.threads} worker thread{'s' if start.threads != 1 else ''}" if start.threads is not None else ""
    return f"{what}{threads}, {len(start.candidates)} candidate{'s' if len(start.candidates) != 1 else ''}"


def effect_sentence(choice: Choice) -> str | None:
    """'B beats A by 12.0 %, p = 0.003' from the choice's numbers ('leads' when the test did not
    decide: a lead that is not significant is not a win); None with no runner-up."""
    runner = choice.runner_up
    if runner is None:
        return None
    effect = f"by {100 * choice.effect:.1f} %" if finite(choice.effect) else "by an unknown margin"
    verb = "leads" if choice.decided is False else "beats"
    return f"{choice.name} {verb} {runner.name} {effect}, {p_text(choice.p_value)}"


def run_summary(log: AutopinLog) -> list[str]:
    """How the run ended and what probing cost, as sentences (from the summary when there is one)."""
    s = log.summary
    wall = s.wall_seconds if s is not None and finite(s.wall_seconds) else None
    probing = s.probing_seconds if s is not None and finite(s.probing_seconds) else probing_seconds(log.probes)
    out = []
    if s is None:
        out.append(
            f"The log has no summary: autopin stopped before the program ended (killed, or still running); "
            f"it shows the run up to t = {seconds(log.end_time)}."
        )
    else:
        if s.signal is not None:
            ended = f"The program was ended by signal {s.signal}"
        elif s.exit_status is not None:
            ended = f"The program exited with status {s.exit_status}"
        else:
            ended = "The run ended"
        ended += f" after {seconds(wall)}" if wall is not None else ""
        if s.ended_during_init:
            init = log.start.params.get("init")
            given = f" (-i {init:g} s)" if isinstance(init, (int, float)) and not isinstance(init, bool) else ""
            ended += f", during the initialisation{given}: nothing was measured"
        if s.ended_during_probing:
            ended += ", during probing: the search was not finished"
        if s.interrupted:
            ended += "; autopin was interrupted" + (" and restored the threads' masks" if s.restored else "")
        out.append(ended + ".")
    share = f" ({probing / wall:.1%} of the run)" if wall else ""
    out.append(f"Probing (warm-ups included) took {seconds(probing)}{share}.")
    if s is not None and s.statistics:
        out.append(statistics_sentence(s.statistics, log.start.mode))
    if s is not None and s.final:
        final = s.final
        cpus = final.get("cpus")
        cpus_text = f" on CPUs {format_cpulist(cpus)}" if isinstance(cpus, list) and cpus else ""
        out.append(f"Final pinning: {final.get('name', final.get('candidate', '?'))}{cpus_text}.")
    return out


def statistics_sentence(statistics: dict, mode: str | None = None) -> str:
    """Where the verdict's statistics were loaded and what that cost (the summary's ``statistics``)."""
    cost = statistics.get("seconds"), statistics.get("cpu_seconds")
    took = (
        f" in {seconds(cost[0])} ({seconds(cost[1])} of CPU)"
        if all(isinstance(c, (int, float)) for c in cost)
        else " (not finished when the run ended)"
    )
    cpus = statistics.get("cpus")
    if statistics.get("loaded") == "beside" and isinstance(cpus, list) and cpus:
        return (
            f"The verdict's statistics (numpy, scipy.stats) loaded beside the program on CPUs {format_cpulist(cpus)}, which no candidate uses,{took}."
        )
    if statistics.get("loaded") == "already":
        return "The verdict's statistics (numpy, scipy.stats) were loaded in pinlab's process already."
    when = "before probing began" if mode == "attach" else "before the program started"
    return f"The verdict's statistics (numpy, scipy.stats) loaded {when} (every CPU is some candidate's){took}."


def reprobe_sentence(reprobe: Reprobe) -> str:
    """Why and when a re-probe started, with the rates that triggered it when the log has them."""
    text = f"Re-probe at {seconds(reprobe.t)}"
    if reprobe.why:
        text += f": {reprobe.why.rstrip('.')}"
    if finite(reprobe.rate) and finite(reprobe.reference) and reprobe.reference:
        over = f" over {reprobe.intervals} intervals" if reprobe.intervals is not None else ""
        text += (
            f" (rate {si(reprobe.rate)}{over}, against {si(reprobe.reference)} at the choice: {100 * (reprobe.rate / reprobe.reference - 1):+.1f} %)"
        )
    return text + "."


def recheck_sentence(rechecks: list[Recheck]) -> str | None:
    """The re-checks of the runner-up in one search, in words (None when there was none)."""
    if not rechecks:
        return None
    names = sorted({r.name for r in rechecks})
    pairs = ", ".join(f"{si(r.rate)} against {si(r.against)}" for r in rechecks[:6])
    more = f" and {len(rechecks) - 6} more" if len(rechecks) > 6 else ""
    times = "once" if len(rechecks) == 1 else f"{len(rechecks)} times"
    return f"Runner-up {' and '.join(names)} re-checked {times} while the choice was kept: {pairs}{more} (its rate against the choice's just before)."


def migration_sentence(m: Migration) -> str:
    """Pages moved after a re-pin, in words."""

    def pages(counts: dict) -> str:
        return ", ".join(f"node {k}: {v}" for k, v in counts.items()) or "?"

    text = f"Pages moved at {seconds(m.t)} from nodes {_plain(m.from_nodes)} to {_plain(m.to_nodes)}"
    if m.seconds is not None:
        text += f" in {seconds(m.seconds)}"
    if m.pages_before or m.pages_after:
        text += f" (pages before {pages(m.pages_before)}; after {pages(m.pages_after)})"
    return text + "."


def choice_lines(log: AutopinLog, search: Search) -> list[str]:
    """The choice that ended ``search`` in sentences: what, the verdict, the effect and p-value, equivalents."""
    choice = search.choice
    if choice is None:
        measured = len({p.candidate for p in search.probes})
        if search.cut_by_metric:
            return [f"No choice: the metric changed before this search ended ({measured} of {len(log.start.candidates)} candidates measured)."]
        return [f"No choice: the log ends before this search did ({measured} of {len(log.start.candidates)} candidates measured)."]
    alpha = log.start.params.get("alpha")
    cpus = format_cpulist(choice.cpus) if choice.cpus else "–"
    rate = f", rate {si(choice.rate)} {rate_unit(log, search)}" if choice.rate is not None else ""
    lines = [f"Choice at {seconds(choice.t)}: {choice.name} (#{choice.candidate}, CPUs {cpus}){rate}."]
    if choice.verdict:
        lines.append(f"Verdict: {choice.verdict.rstrip()}" + ("" if choice.verdict.rstrip().endswith(".") else "."))
    effect = effect_sentence(choice)
    if effect:
        at = f" at alpha = {alpha:g}" if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) else ""
        decided = "" if choice.decided is None else f" ({'decided' if choice.decided else 'not decided'}{at})"
        lines.append(f"{effect}{decided}.")
    else:
        lines.append("Only one candidate was measured: there is nothing to compare it with.")
    equivalent = [r for r in search.rows if r.equivalent]
    if equivalent:
        names = ", ".join(f"{r.name} (#{r.index})" for r in equivalent)
        lines.append(f"Statistically equivalent to the choice: {names}.")
    if choice.rounds is not None or choice.probing_seconds is not None:
        lines.append(
            f"Rounds: {choice.rounds if choice.rounds is not None else '?'}; this search probed for "
            f"{seconds(choice.probing_seconds if choice.probing_seconds is not None else search.probing_seconds)}."
        )
    if search.rates:
        values = [r.rate for r in search.rates if r.rate is not None]
        if values:
            lines.append(
                f"After the choice: {len(search.rates)} intervals, mean rate {si(sum(values) / len(values))} "
                f"(from {si(min(values))} to {si(max(values))})."
            )
    return lines
