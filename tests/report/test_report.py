"""pinlab report from a real stored study: statistics match scipy on the stored runs, CSV and JSON."""

from __future__ import annotations

import csv
import json
import os

import pytest
from scipy import stats as sps

import pinlab
from pinlab.report.data import study_report
from tests.conftest import run_pinlab

CORES = len(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "s.db"
    result = run_pinlab(
        "study",
        "--db",
        str(path),
        "--name",
        "r",
        "-s",
        "none,compact,scatter",
        "-n",
        str(CORES),
        "--runs",
        "6",
        "-q",
        "--workload",
        "primes:--limit 20000",
        "--workload",
        "mb:--n 4 --m 1000 --reps 20",
    )
    assert result.returncode == 0, result.stderr
    return path


def test_statistics_are_those_of_the_stored_runs(db):
    report = study_report(str(db), "r")
    runs, stats = report.runs, report.stats
    assert len(runs) == 2 * 3 * 6 and set(stats["placement"]) == {"none", "compact", "scatter"}
    for row in stats.to_dict(orient="records"):
        times = runs[(runs["program"] == row["program"]) & (runs["placement"] == row["placement"])]["wall_seconds"].tolist()
        assert row["n"] == 6 and row["mean"] == pytest.approx(sum(times) / 6)
        assert row["variance"] == pytest.approx(sps.tvar(times))
        if row["placement"] != "none":
            base = runs[(runs["program"] == row["program"]) & (runs["placement"] == "none")]["wall_seconds"].tolist()
            assert row["mean_speedup"] == pytest.approx((sum(base) / 6) / (sum(times) / 6))
            assert row["median_p"] == pytest.approx(sps.mannwhitneyu(base, times, alternative="greater").pvalue)
            assert row["verdict"] in ("faster", "slower", "no significant difference")
    assert [o["placement"] for o in report.overall] == ["compact", "scatter"]
    assert all(o["n_programs"] == 2 for o in report.overall)


def test_csv_json_and_the_terminal_table(db, tmp_path):
    out = tmp_path / "csv"
    result = run_pinlab("report", "r", "--db", str(db), "--csv", str(out))
    assert result.returncode == 0, result.stderr
    assert "Per configuration" in result.stdout and "primes x" in result.stdout and "Overall" in result.stdout
    with open(out / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 36 and {"study", "program", "threads", "placement", "status", "wall_seconds"} <= set(rows[0])
    with open(out / "stats.csv") as f:
        assert len(list(csv.DictReader(f))) == 6
    data = json.loads(run_pinlab("report", "--db", str(db), "--json").stdout)
    assert data["study"] == "r" and len(data["runs"]) == 36 and len(data["stats"]) == 6 and data["baseline"] == "none"


def test_python_api_load_study(db):
    runs, stats = pinlab.load_study(str(db), "r")
    assert len(runs) == 36 and len(stats) == 6 and "wall_seconds" in runs.columns


def test_report_bad_input(db, tmp_path):
    for args, message in (
        (["--db", str(tmp_path / "none.db")], "no study database"),
        (["nope", "--db", str(db)], "no study named 'nope'"),
        (["--db", str(db), "--baseline", "random"], "baseline 'random' is not a placement"),
        (["--db", str(db), "--alpha", "0.7"], "--alpha must be"),
    ):
        result = run_pinlab("report", *args)
        assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("option", ["--html", "--csv"])
@pytest.mark.parametrize("where", ["/proc/x", "FILE/sub", "FILE"])
def test_unwritable_output_paths_fail_before_the_report_in_one_line(db, tmp_path, option, where):
    """Checked before anything is computed or printed: no report on stdout, one line, exit 2."""
    regular = tmp_path / "afile"
    regular.write_text("keep me\n")
    target = where.replace("FILE", str(regular))
    result = run_pinlab("report", "r", "--db", str(db), option, target)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1 and result.stderr.startswith("pinlab: error: ")
    assert "Traceback" not in result.stderr and target in result.stderr
    assert regular.read_text() == "keep me\n"


def test_a_report_that_fails_leaves_no_output_directory(db, tmp_path):
    out = tmp_path / "a" / "b"
    result = run_pinlab("report", "nosuch", "--db", str(db), "--csv", str(out))
    assert result.returncode == 2 and "no study named 'nosuch'" in result.stderr
    assert not (tmp_path / "a").exists()
    made = run_pinlab("report", "r", "--db", str(db), "--csv", str(out))
    assert made.returncode == 0 and sorted(os.listdir(out)) == ["runs.csv", "stats.csv"]  # no check file left behind


def test_without_a_name_the_latest_study_is_reported(db, tmp_path):
    copy = tmp_path / "two.db"
    import shutil

    shutil.copy(db, copy)
    assert run_pinlab("study", "--db", str(copy), "--name", "later", "-s", "none", "-n", "1", "--runs", "3", "-q", "--", "true").returncode == 0
    assert json.loads(run_pinlab("report", "--db", str(copy), "--json").stdout)["study"] == "later"
