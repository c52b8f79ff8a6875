"""The rate a probe line prints is the rate the verdict ranks by, driven with made-up readings.

The controller's own windowing runs (pinlab.autopin.controller): only the clock, the metric's
readings and the re-pin are made up, so a wake-up can come late as it does on a busy machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from pinlab.autopin.controller import Autopin
from pinlab.autopin.log import parse_log
from pinlab.autopin.log.events import event_line
from pinlab.autopin.metrics import Reading
from pinlab.autopin.options import AutopinOptions
from pinlab.report.autopin_data import choice_lines, rate_unit, searches


@dataclass
class Candidate:
    name: str
    cpus: tuple[int, ...]


class Metric:
    unit = "beats"
    name = "heartbeat"
    notice = "made up"

    def nothing_seen(self) -> None:
        return None

    def distrust(self) -> None:
        return None


def drive(sub_window, metric=None, metric_factory=None, beats_from: float | None = None) -> tuple[list[str], list, Autopin]:
    """Probe two candidates and choose, with the controller's own windowing: ``sub_window(autopin,
    window)`` gives the (seconds, rate) of the sub-window whose end is due (the controller asks
    for 0.2 s each; a longer one is a late wake-up, which leaves the next one shorter). ``metric``
    is the one chosen at the end of -i (default: a heartbeat); with ``beats_from``, the program
    begins beating at that time. What it said, its events, the controller."""
    clock, total = [0.0], [0.0]
    said: list[str] = []
    options = AutopinOptions(candidates="0;1", interval=1.0, windows=5, warmup=0.0, init=0.0)
    candidates = [Candidate("CPUs 0", (0,)), Candidate("CPUs 1", (1,))]
    factory = metric_factory or (lambda pid: Metric())
    autopin = Autopin(options, candidates, mode="launch", metric_factory=factory, say=said.append, clock=lambda: clock[0])
    autopin.metric, autopin.current = metric or Metric(), 0
    autopin.topology_name = "made up"
    if beats_from is not None:
        autopin.heartbeat_later = lambda: clock[0] >= beats_from
    events: list = []
    autopin._event = events.append
    autopin._repin = lambda candidate: setattr(autopin, "current", candidate)
    autopin._reading = lambda: (Reading(clock[0], None, total[0]), 1)
    autopin._start_event(0.0)
    steps = autopin._search()
    next(steps)
    try:
        while True:
            window = autopin.window
            if window is not None and window.readings:  # the end of sub-window k is due
                seconds, rate = sub_window(autopin, window)
                clock[0] += seconds
                total[0] += rate * seconds
            next(steps)
    except StopIteration as done:
        autopin._choose(done.value)
    return said, events, autopin


def probe(plan: dict[int, list[tuple[float, float]]]) -> tuple[list[str], list, Autopin]:
    """Probe two candidates whose sub-windows last and run at ``plan[candidate]`` = [(seconds, rate), ...]."""
    return drive(lambda autopin, window: plan[window.candidate][len(window.readings) - 1])


PLAN = {
    # A heartbeat of long iterations: a beat lands in the short sub-window after a late wake-up.
    0: [(0.2, 50.0), (0.2, 50.0), (0.2, 50.0), (0.39, 50.0), (0.01, 1000.0)],
    1: [(0.2, 100.0)] * 5,
}


def test_the_chosen_candidate_is_the_one_whose_printed_rate_is_higher():
    said, events, _ = probe(PLAN)
    printed = {m[1]: float(m[2]) for line in said if (m := re.match(r"\[\d/2\] (CPUs \d): ([\d.]+) beats/s", line))}
    assert printed == {"CPUs 0": pytest.approx(59.5), "CPUs 1": pytest.approx(100)}, said
    chose = [line for line in said if line.startswith("chose")]
    assert chose == [chose[0]] and chose[0].startswith("chose CPUs 1: CPUs 1 leads CPUs 0 by 68.1%"), said
    choice = events[-1]
    assert choice.candidate == 1 and choice.rate == pytest.approx(100) and choice.runner_up.rate == pytest.approx(59.5)


def test_the_log_keeps_the_sub_window_lengths_and_the_report_ranks_as_the_verdict(tmp_path):
    _, events, _ = probe(PLAN)
    probes = [e for e in events if type(e).__name__ == "Probe"]
    assert [p.window_seconds for p in probes] == [pytest.approx([0.2, 0.2, 0.2, 0.39, 0.01]), pytest.approx([0.2] * 5)]
    assert probes[0].mean == pytest.approx(59.5)
    log = parse_log([event_line(e) for e in events])
    rows = {row.name: row for row in searches(log)[0].rows}
    assert rows["CPUs 0"].mean == pytest.approx(59.5) and rows["CPUs 1"].mean == pytest.approx(100)
    assert rows["CPUs 1"].chosen and rows["CPUs 0"].relative == pytest.approx(59.5 / 100 - 1)


def test_a_log_whose_lengths_do_not_match_its_sub_windows_is_refused():
    _, events, _ = probe(PLAN)
    lines = [event_line(e) for e in events]
    probe_line = next(i for i, line in enumerate(lines) if '"event": "probe"' in line)
    lines[probe_line] = lines[probe_line].replace('"window_seconds": [0.2, 0.2, 0.2, 0.39, 0.01]', '"window_seconds": [0.2]')
    with pytest.raises(Exception, match="window_seconds.*a list of 5 lengths in seconds, one for each of windows"):
        parse_log(lines)


def test_rounds_run_the_one_before_backwards_so_a_steady_drift_weighs_alike_on_every_candidate():
    """Three identical candidates, 4 rounds, while the machine's load eases steadily (the rate
    rises by 10% of its start every second): run in the order A B C, C B A, ... every candidate's
    mean sits at the same point of the drift, and none is called better. In the order A B C, C A
    B, ... of old, C's windows sat earlier than B's, on average: B came out ahead."""
    clock, total = [0.0], [0.0]
    options = AutopinOptions(candidates="0;1;2", interval=1.0, windows=5, warmup=0.0, init=0.0, rounds="4")
    candidates = [Candidate(f"CPUs {i}", (i,)) for i in range(3)]
    autopin = Autopin(options, candidates, mode="launch", metric_factory=lambda pid: Metric(), say=lambda text: None, clock=lambda: clock[0])
    autopin.metric, autopin.current = Metric(), 0
    autopin._event = lambda event: None
    autopin._repin = lambda candidate: setattr(autopin, "current", candidate)
    autopin._reading = lambda: (Reading(clock[0], None, total[0]), 1)
    order: list[int] = []
    steps = autopin._search()
    next(steps)
    try:
        while True:
            window = autopin.window
            if window is not None and window.readings:
                if len(window.readings) == 1:
                    order.append(window.candidate)
                start = clock[0]
                clock[0] += 0.2
                total[0] += 0.2 * 100 * (1 + 0.1 * (start + clock[0]) / 2)  # the rate at the sub-window's middle
            next(steps)
    except StopIteration as done:
        judgement = done.value
    assert order == [0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0]
    rates = {c: autopin._rate(c) for c in range(3)}
    assert max(rates.values()) - min(rates.values()) < 1e-6 * rates[0], rates
    assert not judgement.decided, judgement.verdict


class TaskClock(Metric):
    unit = "CPU seconds"
    name = "task-clock"

    def close(self) -> None:
        pass


class Beats(Metric):
    def close(self) -> None:
        pass


def test_a_program_that_begins_beating_after_the_initialisation_is_searched_again_by_its_heartbeat():
    """task-clock was chosen because no thread had beaten by the end of -i (an initialisation
    longer than -i, as stream's first touch of 3.8 GB in bench_autopin). Under task-clock, CPUs 0
    looked better (each thread's CPU share); the program begins beating during that window: the
    metric becomes the heartbeat, logged, and the search starts again, where CPUs 1 does more work.
    Before, the first round's task-clock rates decided."""
    made: list[str] = []

    def factory(pid):
        made.append("heartbeat")
        return Beats()

    def sub_window(autopin, window):  # CPU share under task-clock, work under the heartbeat
        if autopin.metric.name == "heartbeat":
            return 0.2, 50.0 if window.candidate == 0 else 100.0
        return 0.2, 0.9 if window.candidate == 0 else 0.5

    said, events, autopin = drive(sub_window, metric=TaskClock(), metric_factory=factory, beats_from=0.5)  # inside the first window
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Start", "Probe", "MetricChange", "Probe", "Probe", "Choice"], kinds
    assert made == ["heartbeat"] and autopin.heartbeat_later is None
    change = events[2]
    assert change.metric == "heartbeat" and change.previous == "task-clock" and change.metric_unit == "beats"
    assert events[-1].candidate == 1 and events[-1].rate == pytest.approx(100), events[-1]
    assert any(line.startswith("the program began beating through PINLAB_HEARTBEAT after the initialisation") for line in said), said
    log = parse_log([event_line(e) for e in events])
    cut, again = searches(log)
    assert cut.cut_by_metric and len(cut.probes) == 1 and cut.choice is None
    assert again.metric_change is not None and len(again.probes) == 2 and again.choice is not None
    assert rate_unit(log, cut) == "CPU seconds/s per thread" and rate_unit(log, again) == "beats/s per thread"
    assert choice_lines(log, cut)[0].startswith("No choice: the metric changed before this search ended")


def test_without_a_heartbeat_to_watch_the_metric_chosen_at_the_end_of_the_initialisation_stays():
    _, events, autopin = drive(
        lambda autopin, window: (0.2, 0.9 if window.candidate == 0 else 0.5), metric=TaskClock(), metric_factory=lambda pid: Beats()
    )
    assert [type(e).__name__ for e in events] == ["Start", "Probe", "Probe", "Choice"] and autopin.metric.name == "task-clock"


def test_an_undecided_verdict_on_a_coarse_heartbeat_says_how_to_measure_finer():
    """Two or three beats per thread in a sub-window: a whole beat more or less is a third of its
    rate, and the two candidates cannot be told apart; the verdict says so and what to give."""
    coarse = {0: [10.0, 15.0, 10.0, 15.0, 10.0], 1: [15.0, 10.0, 15.0, 10.0, 15.0]}
    said, events, _ = drive(lambda autopin, window: (0.2, coarse[window.candidate][len(window.readings) - 1]))
    choice = events[-1]
    assert not choice.decided and choice.verdict.endswith(
        "the heartbeat gives about 3 beats per thread in a sub-window of 0.2 s (one beat is 33% of its rate): to tell closer "
        "candidates apart, give a longer -T (about 6.7 s for 20 beats a sub-window) or more rounds (--rounds auto)"
    ), choice.verdict
    assert any(line.startswith("chose") and "give a longer -T" in line for line in said), said
    fine = {c: [r * 10 for r in rates] for c, rates in coarse.items()}  # 20-30 beats: one is at most 5%
    _, events, _ = drive(lambda autopin, window: (0.2, fine[window.candidate][len(window.readings) - 1]))
    assert not events[-1].decided and "longer -T" not in events[-1].verdict
    apart = {0: [10.0] * 5, 1: [15.0] * 5}  # coarse, but told apart: nothing to add
    _, events, _ = drive(lambda autopin, window: (0.2, apart[window.candidate][len(window.readings) - 1]))
    assert events[-1].decided and "longer -T" not in events[-1].verdict
