"""--monitor's rule, driven step by step with made-up rates: when a drop is a new phase.

The rule (pinlab.autopin.controller, step 4): a rate more than --threshold percent below the
reference for --patience intervals in a row re-probes; the reference is the chosen candidate's
probed rate, raised to the lowest of the last --patience intervals whenever all are higher.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinlab.autopin.controller import Autopin
from pinlab.autopin.metrics import Reading
from pinlab.autopin.options import AutopinOptions


@dataclass
class Candidate:
    name: str = "CPUs 0"
    cpus: tuple[int, ...] = (0,)


class Metric:
    unit = "beats"
    name = "heartbeat"


def keep(rates: list[float], probed: float, threshold: float = 25, patience: int = 2) -> tuple[int | None, list[float]]:
    """Feed ``rates`` (one per interval of 1 s, one worker) to the keeping step after a choice
    whose probed rate was ``probed``: the interval after which it re-probes (or None), and the
    reference after each interval."""
    clock, total = [0.0], [0.0]
    options = AutopinOptions(candidates="0", interval=1.0, monitor=True, threshold=threshold, patience=patience)
    autopin = Autopin(options, [Candidate()], mode="launch", metric_factory=lambda pid: Metric(), say=lambda text: None, clock=lambda: clock[0])
    autopin.metric, autopin.current, autopin.reference = Metric(), 0, probed
    autopin._reading = lambda: (Reading(clock[0], None, total[0]), 1)
    steps = autopin._keep()
    wake = next(steps)  # the first interval's start is read; it waits for its end
    references = []
    for interval, rate in enumerate(rates, start=1):
        clock[0], total[0] = wake, total[0] + rate * (wake - clock[0])
        try:
            wake = next(steps)  # reads the end, judges, and waits for the next interval
        except StopIteration:  # returned: a re-probe
            references.append(autopin.reference)
            return interval, references
        references.append(autopin.reference)
    return None, references


def test_a_lasting_drop_below_the_probed_rate_re_probes_after_patience_intervals():
    assert keep([100, 98, 70, 60, 60], probed=100) == (4, [100, 100, 100, 100])


def test_a_short_dip_does_not_re_probe():
    assert keep([100, 60, 100, 60, 100], probed=100)[0] is None


def test_a_lasting_rise_after_the_choice_raises_the_reference_so_a_drop_back_is_seen():
    # Probing understated the rate (start-up competing for the CPU): 100 probed, 200 kept. Halving
    # to 110 is a new phase though it is not 25% below the probed rate.
    reprobed, references = keep([190, 210, 110, 110, 110], probed=100)
    assert references[:2] == [100, 190]
    assert reprobed == 4
    # Against the probed rate alone it would never have re-probed.
    assert keep([110, 110, 110, 110], probed=100)[0] is None


def test_one_high_interval_does_not_raise_the_reference():
    assert keep([100, 300, 100, 100, 100], probed=100, patience=3) == (None, [100] * 5)
    # A rise that lasts raises it only to the level every one of those intervals kept (140 here).
    assert keep([150, 160, 140, 150, 100, 100], probed=100, patience=3) == (None, [100, 100, 140, 140, 140, 140])
    assert keep([150, 160, 140, 150, 100, 100, 100], probed=100, patience=3)[0] == 7


class Probed(Metric):
    def nothing_seen(self) -> None:
        return None  # work was measured

    def distrust(self) -> None:
        return None


def test_each_choice_logs_its_own_search_s_probing_time():
    """The second search's choice says how long that search probed, not every search so far."""
    clock = [0.0]
    options = AutopinOptions(candidates="0;1", interval=1.0, windows=5)
    autopin = Autopin(
        options, [Candidate("CPUs 0", (0,)), Candidate("CPUs 1", (1,))], mode="launch", metric_factory=lambda pid: Probed(),
        say=lambda text: None, clock=lambda: clock[0],
    )  # fmt: skip
    autopin.metric, autopin.current = Probed(), 0
    events: list = []
    autopin._event = events.append
    autopin._repin = lambda candidate: setattr(autopin, "current", candidate)

    def measure(candidate: int, round_number: int):
        autopin.samples[candidate].extend([100.0 + 10 * candidate + i for i in range(5)])
        clock[0] += 4.0 + candidate  # 4 s probing CPUs 0, 5 s CPUs 1
        yield clock[0]

    autopin._measure = measure
    for search, pause in ((1, 0.0), (2, 100.0)):
        clock[0] += pause  # the choice was kept 100 s before the second search
        steps = autopin._search()
        try:
            while True:
                next(steps)
        except StopIteration as done:
            autopin._choose(done.value)
        choice = [e for e in events if type(e).__name__ == "Choice"][-1]
        assert choice.probing_seconds == 9.0, (search, choice)
    assert autopin.probing_seconds == 18.0


def kept_with_rechecks(rate_of, intervals: int = 20, recheck: int = 3) -> tuple[list, bool]:
    """Keep candidate 0 after a choice whose runner-up is candidate 1, with --monitor and
    --recheck: ``rate_of(candidate, t)`` is the made-up rate of the workers on a candidate at
    time t. The events logged, and whether it returned to search again within ``intervals`` waits."""
    clock, total = [0.0], [0.0]
    options = AutopinOptions(candidates="0;1", interval=1.0, warmup=0.5, monitor=True, threshold=25, patience=2, recheck=recheck)
    autopin = Autopin(
        options, [Candidate("CPUs 0", (0,)), Candidate("CPUs 1", (1,))], mode="launch", metric_factory=lambda pid: Metric(),
        say=lambda text: None, clock=lambda: clock[0],
    )  # fmt: skip
    autopin.metric, autopin.current, autopin.reference, autopin.runner_up = Metric(), 0, 100.0, 1
    events: list = []
    autopin._event = events.append
    autopin._repin = lambda candidate: setattr(autopin, "current", candidate)
    autopin._reading = lambda: (Reading(clock[0], None, total[0]), 1)
    steps = autopin._keep()
    wake = next(steps)
    for _ in range(intervals):
        steps_of = 10  # integrate the rate over the wait in small steps: it may change within it
        span = (wake - clock[0]) / steps_of
        for _ in range(steps_of):
            total[0] += rate_of(autopin.current, clock[0]) * span
            clock[0] += span
        clock[0] = wake
        try:
            wake = next(steps)
        except StopIteration:
            return events, True
    return events, False


def kinds(events: list) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_runner_up_that_became_better_starts_a_new_search_though_the_choice_did_not_drop():
    """The choice keeps its 100 while, after t = 6 s, the runner-up does 300: no drop to see, but
    its periodic re-check (every 3 intervals) shows it, and the interval back on the choice confirms."""
    events, searched = kept_with_rechecks(lambda c, t: 100.0 if c == 0 else (50.0 if t < 6 else 300.0))
    assert searched, kinds(events)
    rechecks = [e for e in events if type(e).__name__ == "Recheck"]
    assert [round(e.rate) for e in rechecks][0] == 50 and round(rechecks[-1].rate) == 300
    assert rechecks[-1].against == 100 and rechecks[-1].cpus == (1,)
    reprobe = events[-1]
    assert type(reprobe).__name__ == "Reprobe" and reprobe.why.startswith("the runner-up CPUs 1 measured 300 beats/s per thread, more than 25%")


def test_a_runner_up_no_better_or_a_rise_of_everything_keeps_the_choice():
    # 10% better: within the threshold
    events, searched = kept_with_rechecks(lambda c, t: 100.0 if c == 0 else 110.0)
    assert not searched and kinds(events).count("Recheck") >= 3
    # the runner-up measured at 300 while everything rose: the interval back on the choice does 400
    events, searched = kept_with_rechecks(lambda c, t: (100.0 if t < 3 else 400.0) if c == 0 else 300.0, intervals=8)
    assert not searched and "Recheck" in kinds(events), kinds(events)
    # --recheck 0: never
    events, searched = kept_with_rechecks(lambda c, t: 100.0 if c == 0 else 1000.0, recheck=0)
    assert not searched and "Recheck" not in kinds(events)
