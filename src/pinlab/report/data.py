"""A study's runs and statistics, assembled from the store (never kept only in memory).

For every configuration (program x threads x placement x memory policy x co-runners) the
variability statistics of its measured, successful runs; for every configuration that is not
the baseline, the comparison with the baseline configuration of the same program, threads,
memory policy and co-runners; and the overall table across programs, per placement.

Every number is in the metric's own unit (seconds, MB/s, ...): the statistics of a metric where
higher is better are computed on its values, with the comparisons turned round (see
:func:`pinlab.stats.compare`), so a speedup is the ratio of the means shown beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinlab.errors import UsageError
from pinlab.stats import compare, decided, describe, overall
from pinlab.study.direction import study_direction
from pinlab.study.plan import FIXED_RUNS
from pinlab.study.store import Store, damaged_database

GROUP = ["program", "threads", "mem", "corun"]


@dataclass
class StudyReport:
    study: Any
    runs: Any  # pandas DataFrame, one row per measured run
    stats: Any  # pandas DataFrame, one row per configuration
    overall: list[dict[str, Any]]
    baseline: str
    alpha: float
    metric: str
    direction: Any = None  # pinlab.study.direction.MetricDirection: which way the metric is better
    counters: list[str] = field(default_factory=list)  # events counted per run ("counter:NAME" columns)
    adaptive: dict[str, Any] | None = None  # for --runs auto: runs taken, against a fixed number, and what stayed undecided
    nodes: list[dict[str, Any]] = field(default_factory=list)  # the machines the runs ran on (a Slurm campaign's nodes)
    node_warning: str | None = None  # set when runs of nodes of different hardware are mixed


def direction_of(report) -> Any:
    """The report's :class:`~pinlab.study.direction.MetricDirection`; for a report-shaped object
    without one, the direction its study's parameters give (so every view labels speedups alike)."""
    found = getattr(report, "direction", None)
    if found is not None:
        return found
    parameters = dict(getattr(getattr(report, "study", None), "parameters", None) or {})
    parameters.setdefault("metric", getattr(report, "metric", None) or "time")
    return study_direction(parameters)


def _config_label(row) -> str:
    label = f"{row['program']} x{row['threads']} {row['placement']}"
    if row["mem"] not in (None, "first-touch"):
        label += f" mem={row['mem']}"
    if row["corun"] not in (None, "none"):
        label += f" corun={row['corun']}"
    return label


def load_runs(db: str, name: str | None = None, record: bool = True):
    """(study, DataFrame of its measured runs). Without a name, the study most recently created."""
    import pandas

    with Store.open(db, create=False, readonly=True) as store, damaged_database(store.path):
        studies = store.studies()
        if not studies:
            raise UsageError(f"{db} holds no study yet: run `pinlab study` first")
        if name is None:
            study = max(studies, key=lambda s: s.created_at)
        else:
            study = store.study(name)
            if study is None:
                raise UsageError(f"no study named {name!r} in {db} (studies there: {', '.join(s.name for s in studies)})")
        rows = store.run_rows(study.name, warmup=False, record=record)
    frame = pandas.DataFrame(rows)
    if frame.empty:
        raise UsageError(f"study {study.name} has no measured run yet: continue it with `pinlab study --db {db} --resume {study.name}`")
    frame["config"] = frame.apply(_config_label, axis=1)
    if "record" in frame:
        frame["node"] = [_node(r, "hostname") for r in frame["record"]]
        frame["node_hardware"] = [_node(r, "hardware") for r in frame["record"]]
    for event in study.parameters.get("counters", []):
        frame[f"counter:{event}"] = [_count(r, event) for r in frame["record"]] if "record" in frame else None
    return study, frame


def _node(record: Any, key: str) -> str | None:
    """The node a run ran on, from its record (runs stored before pinlab kept it: None)."""
    try:
        return record["node"][key]
    except (TypeError, KeyError):
        return None


def node_summary(runs) -> tuple[list[dict[str, Any]], str | None]:
    """The nodes the runs ran on (host, hardware, runs), and a warning when their hardware differs:
    a placement's speedup then mixes machines, so compare within one kind of node (--by-node)."""
    if "node" not in runs or runs["node"].isna().all():
        return [], None
    nodes = [
        {"node": node, "hardware": hardware, "runs": int(len(group))}
        for (node, hardware), group in runs.groupby(["node", "node_hardware"], sort=True, dropna=False)
    ]
    # a host is one kind of node: where its description changed between runs (its memory figure
    # as an older pinlab read it), the one most of its runs have stands for it
    described: dict[str, tuple[int, str]] = {}
    for n in nodes:
        host, runs_there = str(n["node"]), n["runs"]
        if host not in described or runs_there > described[host][0]:
            described[host] = (runs_there, str(n["hardware"]))
    kinds: dict[str, list[str]] = {}
    for host, (_, hardware) in described.items():
        kinds.setdefault(hardware, []).append(host)
    if len(kinds) < 2:
        return nodes, None
    listed = "; ".join(f"{hardware} ({', '.join(hosts)})" for hardware, hosts in kinds.items())
    return nodes, (
        f"the runs come from {len(kinds)} kinds of node: {listed}; their speedups mix machines: "
        "compare placements within one kind (pinlab report --by-node)"
    )


def by_node(report) -> list[dict[str, Any]]:
    """Per configuration and node: successful runs and their median (pinlab report --by-node)."""
    runs = report.runs
    ok = runs[(runs["status"] == "ok") & runs["metric"].notna()]
    rows = []
    for (config, node), group in runs.groupby(["config", "node"], sort=False, dropna=False):
        sample = ok[(ok["config"] == config) & (ok["node"] == node)]["metric"]
        rows.append(
            {
                "config": config,
                "node": node,
                "hardware": group["node_hardware"].iloc[0],
                "runs": int(len(group)),
                "ok": int(len(sample)),
                "median": float(sample.median()) if len(sample) else None,
            }
        )
    return rows


def _count(record: Any, event: str) -> float | None:
    """One run's count of ``event`` from its stored record (None when it was not counted)."""
    try:
        return float(record["counters"][event]["value"])
    except (TypeError, KeyError, ValueError):
        return None


def study_report(db: str, name: str | None = None, baseline: str = "none", alpha: float = 0.05, metric_better: str | None = None) -> StudyReport:
    """Everything a report shows, computed from the stored runs.

    ``metric_better`` ("lower" or "higher") is for studies stored without their metric's
    direction (older pinlab); a stored direction is always used (see
    :func:`pinlab.study.direction.study_direction`).
    """
    import pandas

    if not 0 < alpha < 0.5:
        raise UsageError(f"--alpha must be between 0 and 0.5 (got {alpha})")
    study, runs = load_runs(db, name)
    metric = study.parameters.get("metric", "time")
    direction = study_direction(study.parameters, metric_better)
    better, seconds = direction.better, direction.seconds
    ok = runs[(runs["status"] == "ok") & runs["metric"].notna()]  # every statistic in the metric's own unit
    placements = list(dict.fromkeys(runs["placement"]))
    if baseline not in placements:
        raise UsageError(f"baseline {baseline!r} is not a placement of study {study.name} (placements: {', '.join(placements)})")
    rows: list[dict[str, Any]] = []
    suite: dict[str, dict[str, list[float]]] = {}
    for key, group in runs.groupby(GROUP + ["placement"], sort=False, dropna=False):
        program, threads, mem, corun, placement = key
        sample = ok[
            (ok["program"] == program) & (ok["threads"] == threads) & (ok["mem"] == mem) & (ok["corun"] == corun) & (ok["placement"] == placement)
        ]
        row: dict[str, Any] = {
            "program": program,
            "threads": threads,
            "placement": placement,
            "mem": mem,
            "corun": corun,
            "config": group["config"].iloc[0],
            "runs": len(group),
            "failed": int((group["status"] != "ok").sum()),
            "metric_better": better,
        }
        if len(sample) == 0:
            rows.append(row)
            continue
        d = describe(list(sample["metric"]), confidence=1 - alpha, seconds=seconds)
        row.update(
            n=d.n,
            mean=d.mean,
            median=d.median,
            min=d.min,
            max=d.max,
            variance=d.variance,
            std=d.std,
            av=d.av,
            rv=d.rv,
            unstable=d.unstable,
            mean_ci_low=d.mean_ci[0] if d.mean_ci else None,
            mean_ci_high=d.mean_ci[1] if d.mean_ci else None,
            median_ci_low=d.median_ci[0] if d.median_ci else None,
            median_ci_high=d.median_ci[1] if d.median_ci else None,
        )
        if placement != baseline:
            base = ok[
                (ok["program"] == program) & (ok["threads"] == threads) & (ok["mem"] == mem) & (ok["corun"] == corun) & (ok["placement"] == baseline)
            ]
            if len(base):
                c = compare(list(base["metric"]), list(sample["metric"]), alpha=alpha, better=better, seconds=seconds)
                row.update(
                    mean_speedup=c.mean_speedup,
                    median_speedup=c.median_speedup,
                    mean_verdict=c.mean_verdict,
                    median_verdict=c.median_verdict,
                    verdict=c.verdict,
                    mean_p=c.mean_p_faster,
                    median_p=c.median_p_faster,
                    baseline_shapiro_p=c.baseline_shapiro_p,
                    placement_shapiro_p=c.candidate_shapiro_p,
                    mean_test=c.mean_test,
                    mean_test_valid=c.mean_test_valid,
                    decided=decided(c),
                )
        suite.setdefault(f"{program} x{threads} {mem} {corun}", {})[placement] = list(sample["metric"])
        rows.append(row)
    counters = list(study.parameters.get("counters", []))
    _add_counter_columns(rows, ok, counters, baseline)
    complete = {k: v for k, v in suite.items() if baseline in v}
    overall_rows = [r.to_dict() for r in overall(complete, baseline=baseline, alpha=alpha, better=better, seconds=seconds)] if complete else []
    stats = pandas.DataFrame(rows)
    nodes, node_warning = node_summary(runs)
    return StudyReport(
        study=study,
        runs=runs,
        stats=stats,
        overall=overall_rows,
        baseline=baseline,
        alpha=alpha,
        metric=metric,
        direction=direction,
        counters=counters,
        adaptive=_adaptive(study, runs, stats, baseline),
        nodes=nodes,
        node_warning=node_warning,
    )


def _add_counter_columns(rows: list[dict[str, Any]], ok, counters: list[str], baseline: str) -> None:
    """Per configuration, each counter's mean per successful run and its ratio to the baseline's mean
    (as Figures 3-5 of [ribeiro2012]: above 1 = more events than the OS placement)."""
    means: dict[tuple, dict[str, float]] = {}
    for row in rows:
        sample = ok[(ok["config"] == row["config"])]
        for event in counters:
            values = sample[f"counter:{event}"].dropna()
            if len(values):
                row[f"counter:{event}"] = float(values.mean())
        means[(row["program"], row["threads"], row["mem"], row["corun"], row["placement"])] = row
    for row in rows:
        base = means.get((row["program"], row["threads"], row["mem"], row["corun"], baseline))
        for event in counters:
            key = f"counter:{event}"
            if base is not None and key in row and base.get(key):
                row[f"{key}:ratio"] = row[key] / base[key]


def _adaptive(study, runs, stats, baseline: str) -> dict[str, Any] | None:
    """How many runs an adaptive study (--runs auto) took, against the fixed 35 per configuration of [mazouz2011hpcs]."""
    parameters = study.parameters
    if parameters.get("runs") != "auto":
        return None
    configs = len(stats)
    per_config = [int(n) for n in stats["runs"]]
    compared = stats[stats["placement"] != baseline]
    undecided = [row["config"] for row in compared.to_dict(orient="records") if row.get("decided") is not True]
    return {
        "measured": int(len(runs)),
        "configs": configs,
        "fixed_runs": FIXED_RUNS,
        "fixed_total": FIXED_RUNS * configs,
        "min_runs": parameters.get("min_runs"),
        "max_runs": parameters.get("max_runs"),
        "alpha": parameters.get("alpha"),
        "fewest": min(per_config, default=0),
        "most": max(per_config, default=0),
        "undecided": undecided,
    }


def load_study(db: str, name: str | None = None, baseline: str = "none", alpha: float = 0.05, metric_better: str | None = None):
    """For notebooks: (runs, stats) as pandas DataFrames."""
    report = study_report(db, name, baseline=baseline, alpha=alpha, metric_better=metric_better)
    return report.runs, report.stats
