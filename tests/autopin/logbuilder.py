"""Realistic autopin logs, written line by line in the format of pinlab.autopin.log.

The controller that writes real logs is built separately; these logs follow the documented
format field for field, so the report is tested against what the format promises: several
candidates probed over rounds with sub-window rates, a choice with its test against the
runner-up, rates after the choice, re-probes after a phase change, and the endings a real run
can have (the program ends while probing, autopin is killed mid-line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

CPU_LISTS = [[0, 1], [0, 2], [0, 4], [1, 3], [2, 6], [4, 5]]
NAMES = ["compact", "scatter", "shared-L2", "separate-L2", "two-sockets", "one-socket"]


@dataclass
class LogBuilder:
    """Builds a log event by event, with a clock that advances as autopin's would."""

    candidates: int = 4
    init: float = 15.0
    warmup: float = 15.0
    interval: float = 30.0
    windows: int = 5
    threads: int = 2
    alpha: float = 0.05
    metric: str = "heartbeat"
    metric_unit: str | None = "work units"
    seed: int = 1
    events: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.clock = self.init
        self.cands = [
            {"index": i, "name": NAMES[i % len(NAMES)] + ("" if i < len(NAMES) else f"-{i}"), "cpus": CPU_LISTS[i % len(CPU_LISTS)]}
            for i in range(self.candidates)
        ]
        self.samples: dict[int, list[float]] = {}

    def start(self, mode: str = "launch", **extra) -> "LogBuilder":
        event = {
            "event": "start",
            "t": 0.0,
            "mode": mode,
            "threads": self.threads,
            "metric": self.metric,
            "metric_notice": f"metric: {self.metric} (the program reports its work through the heartbeat)",  # as autopin says it
            "topology": "synthetic:pack:2 l2:2 core:2 pu:1",
            "params": {
                "init": self.init,
                "warmup": self.warmup,
                "interval": self.interval,
                "windows": self.windows,
                "rounds": 2,
                "alpha": self.alpha,
                "migrate_pages": "off",
                "monitor": True,
                "threshold": 10.0,
            },
            "candidates": self.cands,
        }
        if self.metric_unit is not None:
            event["metric_unit"] = self.metric_unit
        event.update({"argv": ["./solver", "--size", "4096"]} if mode == "launch" else {"pid": 4242})
        event.update(extra)
        self.events.append(event)
        return self

    def probe(self, candidate: int, level: float, round_: int = 1, noise: float = 0.01, length: float | None = None, **extra) -> dict:
        """One window on ``candidate`` whose sub-windows average about ``level`` (relative noise ``noise``)."""
        length = self.interval if length is None else length
        repinned = self.clock
        begin = repinned + self.warmup
        end = begin + length
        windows = [float(x) for x in level * (1 + self.rng.normal(0, noise, self.windows))]
        tids = [str(1000 + k) for k in range(self.threads)]
        rates = {tid: float(np.mean(windows) * (1 + self.rng.normal(0, noise))) for tid in tids}
        event = {
            "event": "probe",
            "t": end,
            "candidate": candidate,
            "name": self.cands[candidate]["name"],
            "cpus": self.cands[candidate]["cpus"],
            "round": round_,
            "repinned_at": repinned,
            "start": begin,
            "end": end,
            "rates": rates,
            "mean": float(np.mean(list(rates.values()))),
            "windows": windows,
            "threads": self.threads,
        }
        event.update(extra)
        self.events.append(event)
        self.samples.setdefault(candidate, []).extend(windows)
        self.clock = end
        return event

    def search(self, levels: list[float], rounds: int = 2, noise: float = 0.01) -> None:
        """Every candidate probed ``rounds`` times, in order, at its level."""
        self.samples = {}
        for r in range(1, rounds + 1):
            for c, level in enumerate(levels):
                self.probe(c, level, r, noise)

    def choice(self, probing_started: float) -> dict:
        """The best candidate by mean sub-window rate, tested one-sided against the runner-up (Welch)."""
        means = {c: float(np.mean(v)) for c, v in self.samples.items()}
        order = sorted(means, key=means.get, reverse=True)
        best, runner = order[0], (order[1] if len(order) > 1 else None)
        event = {
            "event": "choice",
            "t": self.clock,
            "candidate": best,
            "name": self.cands[best]["name"],
            "cpus": self.cands[best]["cpus"],
            "rate": means[best],
            "rounds": 2,
            "probing_seconds": self.clock - probing_started,
        }
        if runner is None:
            event.update(runner_up=None, p_value=None, effect=None, decided=False, equivalent=[], verdict="only one candidate")
        else:
            p = float(stats.ttest_ind(self.samples[best], self.samples[runner], equal_var=False, alternative="greater").pvalue)
            effect = means[best] / means[runner] - 1
            equivalent = [
                c
                for c in order[1:]
                if stats.ttest_ind(self.samples[best], self.samples[c], equal_var=False, alternative="greater").pvalue >= self.alpha
            ]
            event.update(
                runner_up={"candidate": runner, "name": self.cands[runner]["name"], "cpus": self.cands[runner]["cpus"], "rate": means[runner]},
                p_value=p,
                effect=effect,
                decided=p < self.alpha,
                equivalent=equivalent,
                verdict=(
                    f"{self.cands[best]['name']} is faster than {self.cands[runner]['name']} ({100 * effect:.1f} % more work per second)"
                    if p < self.alpha
                    else f"{self.cands[best]['name']} is not significantly faster than {self.cands[runner]['name']}"
                ),
            )
        self.events.append(event)
        self.chosen = best
        return event

    def rates(self, n: int, level: float, noise: float = 0.01) -> None:
        for _ in range(n):
            begin, end = self.clock, self.clock + self.interval
            self.events.append(
                {
                    "event": "rate",
                    "t": end,
                    "start": begin,
                    "end": end,
                    "rate": float(level * (1 + self.rng.normal(0, noise))),
                    "candidate": self.chosen,
                }
            )
            self.clock = end

    def reprobe(self, rate: float, reference: float, intervals: int = 3) -> None:
        self.events.append(
            {
                "event": "reprobe",
                "t": self.clock,
                "why": f"the rate stayed {100 * (1 - rate / reference):.0f} % below the rate at the choice for {intervals} intervals",
                "rate": rate,
                "reference": reference,
                "intervals": intervals,
            }
        )

    def recheck(self, candidate: int, rate: float, against: float) -> None:
        """The runner-up ``candidate`` measured once for an interval after a warm-up of half one."""
        repinned, begin = self.clock, self.clock + self.interval / 2
        end = begin + self.interval
        name, cpus = self.cands[candidate]["name"], self.cands[candidate]["cpus"]
        self.events.append(
            {"event": "recheck", "t": end, "candidate": candidate, "name": name, "cpus": cpus, "repinned_at": repinned, "start": begin,
             "end": end, "rate": rate, "against": against}
        )  # fmt: skip
        self.clock = end + self.interval / 2

    def migrate(self) -> None:
        self.events.append(
            {
                "event": "migrate",
                "t": self.clock,
                "from_nodes": [0],
                "to_nodes": [1],
                "pages_before": {"0": 5000, "1": 12},
                "pages_after": {"0": 40, "1": 4972},
                "seconds": 0.25,
            }
        )

    def summary(self, **fields) -> None:
        probing = sum(e["end"] - e["repinned_at"] for e in self.events if e["event"] == "probe")
        event = {
            "event": "summary",
            "t": self.clock,
            "exit_status": 0,
            "signal": None,
            "wall_seconds": self.clock,
            "probing_seconds": probing,
            "choices": sum(e["event"] == "choice" for e in self.events),
            "final": (
                {"candidate": self.chosen, "name": self.cands[self.chosen]["name"], "cpus": self.cands[self.chosen]["cpus"]}
                if hasattr(self, "chosen")
                else None
            ),
            "ended_during_probing": False,
            "interrupted": False,
            "restored": False,
        }
        event.update(fields)
        self.events.append(event)

    def lines(self) -> list[str]:
        return [json.dumps(e) for e in self.events]

    def write(self, path: Path, cut_last: int | None = None) -> Path:
        """The log as a file; ``cut_last``: keep only that many characters of the last line, no newline (killed mid-write)."""
        lines = self.lines()
        text = "\n".join(lines) + "\n"
        if cut_last is not None:
            text = "\n".join(lines[:-1]) + "\n" + lines[-1][:cut_last]
        path.write_text(text, encoding="utf-8")
        return path


def phase_change_log(candidates: int = 4, seed: int = 1) -> LogBuilder:
    """A run of 1 search, 6 rate intervals, a phase change, a second search where another candidate wins, then the end."""
    b = LogBuilder(candidates=candidates, seed=seed).start()
    first = [1.0e6 * (1 + 0.1 * k) for k in range(candidates)]  # the last candidate is best
    b.search(first)
    b.choice(probing_started=b.init)
    b.rates(6, first[-1])
    b.rates(3, first[-1] * 0.7)
    b.reprobe(rate=first[-1] * 0.7, reference=first[-1])
    began = b.clock
    second = [1.0e6 * (1 + 0.1 * (candidates - 1 - k)) for k in range(candidates)]  # now the first is best
    b.search(second)
    b.migrate()
    b.choice(probing_started=began)
    b.rates(10, second[0])
    b.summary()
    return b
