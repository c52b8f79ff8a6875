"""What ``pinlab run``, ``pinlab autopin`` and ``pinlab study`` refuse, their Python API refuses
with the same one-line message, before anything runs.

Each case gives the command line and the library call a Python user would make; both must end
in the same UsageError text (the command prints it as ``pinlab: error: TEXT`` with status 2).
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest

import pinlab
import pinlab.cli
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.session import autopin
from pinlab.errors import UsageError
from pinlab.launch import plan_spec
from pinlab.outputs import check_writable
from pinlab.study.request import campaign_action, check_local, check_slurm, study_plan
from tests.conftest import PINLAB

CASES = [
    # pinlab run
    (["run", "--sample-ms", "0", "--", "true"], lambda: pinlab.run(["true"], sample_ms=0)),
    (["run", "--balance-interval", "1", "-c", "0", "--", "true"], lambda: pinlab.run(["true"], "0", balance_interval=1)),
    (["run", "--rank", "off", "--gpus", "all", "--", "true"], lambda: pinlab.run(["true"], gpus="all")),
    (["run", "--rank", "0/2", "--plan", "p.json", "--", "true"], lambda: pinlab.run(["true"], rank="0/2", plan_file="p.json")),
    (["run", "--rank", "0/2", "--cpu-kind", "P", "--", "true"], lambda: pinlab.run(["true"], rank="0/2", cpu_kind="P")),
    (["run", "-s", "compact", "-c", "0", "--", "true"], lambda: pinlab.run(["true"], "compact", cpus="0")),
    (["run", "-n", "0", "-s", "compact", "--", "true"], lambda: pinlab.run(["true"], "compact", threads=0)),
    (["run", "--mem", "domain", "--rank", "off", "--", "true"], lambda: plan_spec(["true"], mem="domain")),
    (["run", "--record", "no/such/dir/r.json", "--", "true"], lambda: check_writable("no/such/dir/r.json", "the record")),
    # pinlab autopin
    (["autopin", "--pid", "1", "--", "true"], lambda: autopin(["true"], pid=1)),
    (["autopin"], lambda: autopin()),
    (["autopin", "--restore", "--", "true"], lambda: autopin(["true"], options=AutopinOptions(restore=True))),
    (["autopin", "-T", "0", "--", "true"], lambda: autopin(["true"], options=AutopinOptions(interval=0))),
    (["autopin", "--windows", "1", "--", "true"], lambda: autopin(["true"], options=AutopinOptions(windows=1))),
    (["autopin", "--threshold", "20", "--", "true"], lambda: autopin(["true"], options=AutopinOptions(threshold=20))),
    (["autopin", "--log", "no/such/dir/a.jsonl", "--", "true"], lambda: autopin(["true"], options=AutopinOptions(log="no/such/dir/a.jsonl"))),
    # pinlab study
    (["study", "--runs", "x", "--", "true"], lambda: study_plan(program=["true"], runs="x")),
    (["study", "--sample-ms", "often", "--", "true"], lambda: study_plan(program=["true"], sample_ms="often")),
    (["study", "--backend", "slurm", "--", "true"], lambda: study_plan(program=["true"], on_nodes=True)),
    (["study", "--backend", "slurm", "--resume", "old", "-n", "1", "--", "true"], lambda: check_slurm(resume="old", db="pinlab.db")),
    (["study", "--partition", "p", "--", "true"], lambda: check_local(slurm_options=["p"])),
    (["study", "--resume", "old", "--", "true"], lambda: check_local(resume="old", program=["true"])),
    (["study", "--resume", "old", "--metric-better", "higher"], lambda: check_local(resume="old", metric_better="higher")),
    (["study", "--collect", "a", "--status", "b"], lambda: campaign_action("a", "b", None)),
    (["study", "--collect", " "], lambda: campaign_action(" ", None, None)),
    (["study", "--status", "a", "--", "true"], lambda: campaign_action(None, "a", None, extra=["true"])),
]


@pytest.mark.parametrize("argv, api", CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_the_command_and_the_api_refuse_alike(argv, api, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --db and the relative paths land here
    with pytest.raises(UsageError) as refused:
        api()
    result = subprocess.run([str(PINLAB), *argv], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines == [f"pinlab: error: {refused.value}"], result.stderr
    assert not (tmp_path / "pinlab.db").exists()  # refused before anything was stored


def test_the_cases_cover_every_refusal_left_in_these_commands():
    """No refusal hides in the command modules any more: they parse, call and print."""
    folder = pathlib.Path(pinlab.cli.__file__).parent
    for name in ("run.py", "autopin.py", "study.py"):
        assert "raise UsageError" not in (folder / name).read_text(), name
