"""A study's metric states which way is better, stores it, and every report labels it.

Before, every metric but ``time`` was taken as larger-is-better, so a program's own timer
(``--metric 'Time in seconds =\\s+([0-9.]+)'``, NPB's) reported slower placements as faster.
"""

from __future__ import annotations

import csv
import json
import os
import re

import pytest

from pinlab.errors import UsageError
from pinlab.study.plan import Program, StudyPlan, plan_from_parameters
from pinlab.study.store import Store
from pinlab.workloads import workload_path
from tests.conftest import run_pinlab

CORES = len(os.sched_getaffinity(0))
NPB = r"Time in seconds =\s+([0-9.]+)"
# Prints an NPB-like timer line: 2.x seconds when it may run on several CPUs (placement none),
# 1.x seconds when pinned to one CPU (compact, one thread): the pinned runs are the faster ones.
TIMER = ["/bin/sh", "-c", 'case $(grep Cpus_allowed_list /proc/self/status) in *-*|*,*) t=2;; *) t=1;; esac; echo " Time in seconds =    $t.$$"']
MACHINE = {"hostname": "old-host", "cpu_model": "Old CPU", "kernel": "5.10"}


def _one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.mark.parametrize("metric", [NPB, "json:results.count"])
def test_a_custom_metric_without_a_direction_is_refused_before_anything_is_stored(tmp_path, metric):
    db = tmp_path / "s.db"
    result = run_pinlab(
        "study", "--db", str(db), "--name", "x", "-s", "none", "-n", "1", "--runs", "1", "-q", "--metric", metric, "-w", "primes:--limit 1000"
    )
    _one_line_error(result, "does not say which way is better", "--metric-better lower", "higher")
    assert not db.exists()
    plan = StudyPlan("x", [Program("primes", [workload_path("primes"), "--json"])], ["none"], [1], 1, metric=metric)
    with pytest.raises(UsageError, match="does not say which way is better"):
        plan.validate()  # the Python API refuses the same thing


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--metric-better", "higher", "--", "true"], ["contradicts --metric time", "leave --metric-better out"]),
        (
            ["--metric", "json:results.triad.best_mbs", "--metric-better", "lower", "-w", "stream:--size 1M"],
            ["contradicts", "MB/s", "--metric-better higher"],
        ),
        (["--metric", NPB, "--metric-better", "faster", "--", "true"], ["--metric-better must be lower or higher"]),
    ],
)
def test_a_direction_that_cannot_be_right_is_refused(tmp_path, args, needles):
    db = tmp_path / "s.db"
    _one_line_error(run_pinlab("study", "--db", str(db), "--name", "x", "-s", "none", "-n", "1", "--runs", "1", "-q", *args), *needles)
    assert not db.exists()


@pytest.fixture(scope="module")
def timer_study(tmp_path_factory):
    if CORES < 2:
        pytest.skip("needs two CPUs: the program tells a pinned run from an unpinned one by its allowed CPUs")
    db = tmp_path_factory.mktemp("npb") / "s.db"
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "npb",
        "-s",
        "none,compact",
        "-n",
        "1",
        "--runs",
        "5",
        "-q",
        "--metric",
        NPB,
        "--metric-better",
        "lower",
        "--",
        *TIMER,
    )
    assert result.returncode == 0, result.stderr
    return db


def test_a_program_timer_stated_lower_is_better_reports_the_faster_placement_as_faster(timer_study):
    with Store.open(timer_study, create=False, readonly=True) as store:
        assert store.study("npb").parameters["metric_better"] == "lower"
    data = json.loads(run_pinlab("report", "npb", "--db", str(timer_study), "--json").stdout)
    rows = {r["placement"]: r for r in data["stats"]}
    assert 2 < rows["none"]["mean"] < 3 and 1 < rows["compact"]["mean"] < 2  # the timer's seconds, as printed
    assert rows["compact"]["verdict"] == "faster" and rows["compact"]["median_verdict"] == "faster"
    assert rows["compact"]["mean_speedup"] == pytest.approx(rows["none"]["mean"] / rows["compact"]["mean"], rel=1e-12)
    assert data["metric_better"] == "lower" and data["metric_direction"]["source"] == "stated"
    assert all(r["metric_better"] == "lower" for r in data["stats"])
    assert data["overall"][0]["better"] == "lower" and data["overall"][0]["mean_speedup"] > 1.5


def test_resume_keeps_the_stored_direction(timer_study, tmp_path):
    refused = run_pinlab("study", "--db", str(timer_study), "--resume", "npb", "--metric-better", "higher", "-q")
    _one_line_error(refused, "--resume", "leave --metric-better out")
    with Store.open(timer_study, create=False, readonly=True) as store:
        study = store.study("npb")
    plan = plan_from_parameters(study.name, study.parameters, study.seed, 10)
    assert plan.metric_better == "lower" and plan.parameters() == study.parameters
    resumed = run_pinlab("study", "--db", str(timer_study), "--resume", "npb", "-q")
    assert resumed.returncode == 0, resumed.stderr
    with Store.open(timer_study, create=False, readonly=True) as store:
        assert store.study("npb").parameters == study.parameters


def test_every_speedup_is_labelled_with_the_direction(timer_study, tmp_path):
    out = tmp_path / "out"
    result = run_pinlab("report", "npb", "--db", str(timer_study), "--csv", str(out), "--html", str(out))
    assert result.returncode == 0, result.stderr
    assert "(lower is better)" in result.stdout.splitlines()[0]
    # each speedup column's header reads "... speedup (lower is better: none / placement)" over its lines
    headers = "\n".join(line for line in result.stdout.splitlines() if "┃" in line)
    assert headers.count("speedup") == headers.count("(lower is better:") == 5  # 2 per configuration, 3 overall
    with open(out / "stats.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["metric_better"] for r in rows} == {"lower"}
    page = (out / "index.html").read_text()
    speedup_headers = re.findall(r"<th>[^<]*[Ss]peedup.*?</th>", page)
    assert len(speedup_headers) == 5 and all("lower is better" in h for h in speedup_headers), speedup_headers
    assert re.search(r'<span class="sub">SW \S+ / \S+</span>', page)  # both samples' Shapiro-Wilk p-values


def _old_study(path, metric: str, samples: dict[str, list[float]], programs=None) -> None:
    """A study as pinlab stored it before metric directions existed: no ``metric_better``."""
    programs = programs or [["prog", ["/opt/prog"]]]
    parameters = {
        "programs": programs,
        "strategies": list(samples),
        "threads": [1],
        "runs": 5,
        "order": "interleaved",
        "warmup": 0,
        "mem": ["first-touch"],
        "coruns": ["none"],
        "metric": metric,
        "timeout": None,
        "sample_ms": 100.0,
    }
    configs = [
        {"program": programs[0][0], "argv": programs[0][1], "threads": 1, "placement": p, "mem": "first-touch", "corun": "none"} for p in samples
    ]
    with Store.open(path) as store:
        study = store.create_study("old", parameters, configs, 0, MACHINE, "0.9.0")
        for config, values in zip(store.configs(study.id), samples.values()):
            for i, value in enumerate(values):
                store.add_run(config["id"], i, status="ok", wall_seconds=0.5, metric=value)


SLOW = [2.31, 2.35, 2.29, 2.40, 2.33]
FAST = [1.21, 1.18, 1.25, 1.20, 1.22]


def test_an_old_study_with_a_custom_metric_says_its_direction_is_assumed(tmp_path):
    db = tmp_path / "old.db"
    _old_study(db, NPB, {"none": SLOW, "compact": FAST})
    result = run_pinlab("report", "--db", str(db))
    assert result.returncode == 0, result.stderr
    text = re.sub(r"\s+", " ", result.stdout)
    assert "higher is better (assumed: not stored with this study)" in text
    assert "report it with --metric-better lower" in text
    data = json.loads(run_pinlab("report", "--db", str(db), "--json").stdout)
    assert data["metric_direction"]["source"] == "assumed" and data["metric_better"] == "higher"
    compact = next(r for r in data["stats"] if r["placement"] == "compact")
    assert compact["verdict"] == "slower"  # as pinlab read it then; the page says it is an assumption
    page_dir = tmp_path / "html"
    assert run_pinlab("report", "--db", str(db), "--html", str(page_dir)).returncode == 0
    assert 'id="direction-assumed"' in (page_dir / "index.html").read_text()
    # stating the direction when reporting gives the right verdict, and no assumption is shown
    stated = json.loads(run_pinlab("report", "--db", str(db), "--json", "--metric-better", "lower").stdout)
    compact = next(r for r in stated["stats"] if r["placement"] == "compact")
    assert compact["verdict"] == "faster" and compact["mean_speedup"] == pytest.approx(sum(SLOW) / sum(FAST), rel=1e-12)
    assert stated["metric_direction"]["source"] == "report"


def test_old_studies_of_known_metrics_keep_their_direction(tmp_path):
    times = tmp_path / "time.db"
    _old_study(times, "time", {"none": SLOW, "compact": FAST})
    data = json.loads(run_pinlab("report", "--db", str(times), "--json").stdout)
    assert data["metric_direction"] == {"metric": "time", "better": "lower", "source": "known", "unit": "s", "label": "lower is better"}
    assert next(r for r in data["stats"] if r["placement"] == "compact")["verdict"] == "faster"
    _one_line_error(run_pinlab("report", "--db", str(times), "--metric-better", "higher"), "contradicts --metric time")
    rates = tmp_path / "mbs.db"
    stream = [["stream", [workload_path("stream"), "--json", "--size", "1M"]]]
    _old_study(
        rates,
        "json:results.triad.best_mbs",
        {"none": [9000, 9100, 8950, 9050, 9020], "compact": [11000, 11100, 10950, 11050, 11020]},
        programs=stream,
    )
    data = json.loads(run_pinlab("report", "--db", str(rates), "--json").stdout)
    assert (data["metric_better"], data["metric_direction"]["source"], data["metric_direction"]["unit"]) == ("higher", "known", "MB/s")
    assert next(r for r in data["stats"] if r["placement"] == "compact")["verdict"] == "faster"


def test_a_stored_direction_cannot_be_overridden_by_the_report(timer_study):
    _one_line_error(
        run_pinlab("report", "npb", "--db", str(timer_study), "--metric-better", "higher"), "stores that lower is better", "leave --metric-better out"
    )
