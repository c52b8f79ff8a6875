"""Every refusal of the command line is the library's: the same one-line message, both ways.

Each case gives a command line and the equivalent call of the Python API. The command must exit
with status 2 and say ``pinlab: error: MESSAGE`` as its only line; the call must raise
:class:`UsageError` with that MESSAGE. Both must refuse before any work: nothing is written
where the case's paths point. Paths in a case are written ``{tmp}/...`` and are made inside a
fresh directory, which holds ``empty.db`` (an empty file where a study database is expected) and
``afile`` (a file where a directory is expected).

Add a case here for each refusal a command makes; the list is shared by every command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import pinlab
import pinlab.cli
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.session import autopin
from pinlab.errors import UsageError
from pinlab.live import WatchRequest
from pinlab.memory.memmap import watch
from pinlab.outputs import check_picture, check_writable
from pinlab.placement.request import PlaceRequest
from pinlab.report.requests import AutopinReportRequest, ReportRequest
from pinlab.study.request import campaign_action, check_local, check_slurm, study_plan
from pinlab.topology.calibrate import CalibrationOutputs
from pinlab.workloads import workload_spec
from pinlab.workloads.corun import CoRunners
from tests.conftest import run_pinlab


@dataclass(frozen=True)
class Refusal:
    """A command line and the Python call that must refuse it in the same words."""

    name: str
    cli: tuple[str, ...]
    api: Callable[[Path], object]


def refusal(name: str, cli: str, api: Callable[[Path], object]) -> Refusal:
    return Refusal(name, tuple(cli.split()), api)


REFUSALS: list[Refusal] = [
    # -- place ----------------------------------------------------------------------------------
    refusal(
        "place --ranks with --rank",
        "place -t clovertown --ranks 2 --rank 0/2",
        lambda tmp: PlaceRequest(topology="clovertown", ranks=2, rank="0/2"),
    ),
    refusal("place --gpus without --ranks", "place -t clovertown --gpus", lambda tmp: PlaceRequest(topology="clovertown", gpus="all")),
    refusal(
        "place --ranks -f omp",
        "place -t clovertown --ranks 2 -f omp",
        lambda tmp: PlaceRequest(topology="clovertown", ranks=2, format="omp"),
    ),
    refusal(
        "place unknown format",
        "place -t clovertown -s compact -n 2 -f yaml",
        lambda tmp: PlaceRequest(topology="clovertown", strategy="compact", threads=2, format="yaml"),
    ),
    refusal(
        "place picture suffix",
        "place -t clovertown -s compact -n 2 --picture {tmp}/p.gif",
        lambda tmp: PlaceRequest(topology="clovertown", strategy="compact", threads=2, picture=f"{tmp}/p.gif"),
    ),
    refusal(
        "place picture directory",
        "place -t clovertown -s compact -n 2 --picture {tmp}/no/such/p.svg",
        lambda tmp: PlaceRequest(topology="clovertown", strategy="compact", threads=2, picture=f"{tmp}/no/such/p.svg"),
    ),
    refusal(
        "place --ranks picture suffix",
        "place -t clovertown --ranks 2 --picture {tmp}/p.jpg",
        lambda tmp: PlaceRequest(topology="clovertown", ranks=2, picture=f"{tmp}/p.jpg"),
    ),
    refusal(
        "place --strict without --graph",
        "place -t clovertown -s compact -n 2 --strict",
        lambda tmp: PlaceRequest(topology="clovertown", strategy="compact", threads=2, strict=True),
    ),
    refusal(
        "place strategy none has no cost",
        "place -t clovertown -s none -n 2 --graph {tmp}/g.json",
        lambda tmp: PlaceRequest(topology="clovertown", strategy="none", threads=2, graph=f"{tmp}/g.json"),
    ),
    refusal(
        "place strategy os has no cost",
        "place -t clovertown -s os --graph {tmp}/g.json",
        lambda tmp: PlaceRequest(topology="clovertown", strategy="os", graph=f"{tmp}/g.json"),
    ),
    # -- report, autopin-report -----------------------------------------------------------------
    refusal("report without a database", "report --db {tmp}/none.db", lambda tmp: ReportRequest(db=f"{tmp}/none.db")),
    refusal(
        "report --csv under a file",
        "report --db {tmp}/empty.db --csv {tmp}/afile/csv",
        lambda tmp: ReportRequest(db=f"{tmp}/empty.db", csv_dir=f"{tmp}/afile/csv"),
    ),
    refusal(
        "report --html under a file",
        "report --db {tmp}/empty.db --html {tmp}/afile/html",
        lambda tmp: ReportRequest(db=f"{tmp}/empty.db", html_dir=f"{tmp}/afile/html"),
    ),
    refusal(
        "autopin-report picture suffix",
        "autopin-report {tmp}/autopin.jsonl --picture {tmp}/t.gif",
        lambda tmp: AutopinReportRequest(f"{tmp}/autopin.jsonl", picture=f"{tmp}/t.gif"),
    ),
    refusal(
        "autopin-report --html under a file",
        "autopin-report {tmp}/autopin.jsonl --html {tmp}/afile/html",
        lambda tmp: AutopinReportRequest(f"{tmp}/autopin.jsonl", html_dir=f"{tmp}/afile/html"),
    ),
    # -- calibrate ------------------------------------------------------------------------------
    refusal("calibrate -o not .xml", "calibrate -o {tmp}/machine.txt", lambda tmp: CalibrationOutputs(output=f"{tmp}/machine.txt")),
    refusal(
        "calibrate -o cannot be written",
        "calibrate -o {tmp}/no/such/machine.xml",
        lambda tmp: CalibrationOutputs(output=f"{tmp}/no/such/machine.xml"),
    ),
    refusal("calibrate picture suffix", "calibrate --picture {tmp}/m.gif", lambda tmp: CalibrationOutputs(picture=f"{tmp}/m.gif")),
    # -- doctor ---------------------------------------------------------------------------------
    refusal("doctor --seconds too short", "doctor 1 --seconds 0.1", lambda tmp: pinlab.doctor(1, seconds=0.1)),
    refusal("doctor --seconds over an hour", "doctor 1 --seconds 3601", lambda tmp: pinlab.doctor(1, seconds=3601.0)),
    refusal("doctor --seconds nan", "doctor 1 --seconds nan", lambda tmp: pinlab.doctor(1, seconds=float("nan"))),
    refusal("doctor nothing to look at", "doctor", lambda tmp: pinlab.doctor()),
    refusal("doctor PIDs and a program", "doctor 1 -- true", lambda tmp: pinlab.doctor(1, argv=["true"])),
    refusal("doctor -s with PIDs", "doctor 1 -s compact", lambda tmp: pinlab.doctor(1, strategy="compact")),
    refusal("doctor a PID that is gone", "doctor 999999999", lambda tmp: pinlab.doctor(999999999)),
    refusal("doctor a kernel thread", "doctor 2", lambda tmp: pinlab.doctor(2)),
    refusal("doctor a bad strategy for the program", "doctor -s nosuch -- true", lambda tmp: pinlab.doctor(argv=["true"], strategy="nosuch")),
    # -- ps, memmap -----------------------------------------------------------------------------
    refusal("ps --watch 0", "ps --watch 0", lambda tmp: WatchRequest(every=0.0)),
    refusal("ps --watch over a day", "ps --watch 100000", lambda tmp: WatchRequest(every=100000.0)),
    refusal("ps --watch nan", "ps --watch nan", lambda tmp: WatchRequest(every=float("nan"))),
    refusal("ps --picture with two PIDs", "ps 1 2 --picture {tmp}/p.svg", lambda tmp: WatchRequest((1, 2), picture=f"{tmp}/p.svg")),
    refusal("ps --picture suffix", "ps 1 --picture {tmp}/p.gif", lambda tmp: WatchRequest((1,), picture=f"{tmp}/p.gif")),
    refusal("memmap --watch 0", "memmap 1 --watch 0", lambda tmp: watch(1, 0.0)),
    refusal("memmap --watch over a day", "memmap 1 --watch 86401", lambda tmp: watch(1, 86401.0)),
    # -- workload run, corun --------------------------------------------------------------------
    refusal(
        "workload run with a strategy and no thread count",
        "workload run stream -s compact",
        lambda tmp: workload_spec("stream", strategy="compact"),
    ),
    refusal("corun --duration 0", "corun cpu --duration 0", lambda tmp: CoRunners("cpu", 1, duration=0.0)),
    refusal("corun --duration nan", "corun cpu --duration nan", lambda tmp: CoRunners("cpu", 1, duration=float("nan"))),
    refusal("corun --count too many", "corun cpu --count 4097", lambda tmp: CoRunners("cpu", 4097)),
    # -- graph show -----------------------------------------------------------------------------
    refusal("graph show picture suffix", "graph show {tmp}/g.json --picture {tmp}/g.gif", lambda tmp: check_picture(f"{tmp}/g.gif")),
    # -- run ------------------------------------------------------------------------------------
    refusal("run --sample-ms 0", "run --sample-ms 0 -- true", lambda tmp: pinlab.run(["true"], sample_ms=0)),
    refusal(
        "run --balance-interval without --balance",
        "run --balance-interval 1 -c 0 -- true",
        lambda tmp: pinlab.run(["true"], "0", balance_interval=1),
    ),
    refusal("run --gpus outside a rank", "run --rank off --gpus all -- true", lambda tmp: pinlab.run(["true"], gpus="all")),
    refusal(
        "run --plan in a rank",
        "run --rank 0/2 --plan {tmp}/p.json -- true",
        lambda tmp: pinlab.run(["true"], rank="0/2", plan_file=f"{tmp}/p.json"),
    ),
    refusal("run --cpu-kind alone in a rank", "run --rank 0/2 --cpu-kind P -- true", lambda tmp: pinlab.run(["true"], rank="0/2", cpu_kind="P")),
    refusal("run two placements", "run -s compact -c 0 -- true", lambda tmp: pinlab.run(["true"], "compact", cpus="0")),
    refusal("run -n 0", "run -n 0 -s compact -- true", lambda tmp: pinlab.run(["true"], "compact", threads=0)),
    refusal("run --mem domain outside a rank", "run --mem domain --rank off -- true", lambda tmp: pinlab.run(["true"], mem="domain")),
    refusal(
        "run --record in no directory",
        "run --record {tmp}/no/such/r.json -- true",
        lambda tmp: check_writable(f"{tmp}/no/such/r.json", "the record"),
    ),
    # -- autopin --------------------------------------------------------------------------------
    refusal("autopin a program and --pid", "autopin --pid 1 -- true", lambda tmp: autopin(["true"], pid=1)),
    refusal("autopin nothing to probe", "autopin", lambda tmp: autopin()),
    refusal("autopin --restore without --pid", "autopin --restore -- true", lambda tmp: autopin(["true"], options=AutopinOptions(restore=True))),
    refusal("autopin -T 0", "autopin -T 0 -- true", lambda tmp: autopin(["true"], options=AutopinOptions(interval=0))),
    refusal("autopin --windows 1", "autopin --windows 1 -- true", lambda tmp: autopin(["true"], options=AutopinOptions(windows=1))),
    refusal(
        "autopin --threshold without --monitor",
        "autopin --threshold 20 -- true",
        lambda tmp: autopin(["true"], options=AutopinOptions(threshold=20)),
    ),
    refusal(
        "autopin --log in no directory",
        "autopin --log {tmp}/no/such/a.jsonl -- true",
        lambda tmp: autopin(["true"], options=AutopinOptions(log=f"{tmp}/no/such/a.jsonl")),
    ),
    # -- study ----------------------------------------------------------------------------------
    refusal("study --runs x", "study --db {tmp}/s.db --runs x -- true", lambda tmp: study_plan(program=["true"], runs="x")),
    refusal(
        "study --sample-ms often", "study --db {tmp}/s.db --sample-ms often -- true", lambda tmp: study_plan(program=["true"], sample_ms="often")
    ),
    refusal(
        "study on Slurm without -n",
        "study --db {tmp}/s.db --backend slurm -- true",
        lambda tmp: study_plan(program=["true"], on_nodes=True),
    ),
    refusal(
        "study on Slurm --resume of no campaign",
        "study --db {tmp}/s.db --backend slurm --resume old -n 1 -- true",
        lambda tmp: check_slurm(resume="old", db=f"{tmp}/s.db"),
    ),
    refusal("study local with --partition", "study --db {tmp}/s.db --partition p -- true", lambda tmp: check_local(slurm_options=["p"])),
    refusal("study --resume with a program", "study --db {tmp}/s.db --resume old -- true", lambda tmp: check_local(resume="old", program=["true"])),
    refusal(
        "study --resume with --metric-better",
        "study --db {tmp}/s.db --resume old --metric-better higher",
        lambda tmp: check_local(resume="old", metric_better="higher"),
    ),
    refusal("study --collect and --status", "study --db {tmp}/s.db --collect a --status b", lambda tmp: campaign_action("a", "b", None)),
    refusal(
        "study --status with a program",
        "study --db {tmp}/s.db --status a -- true",
        lambda tmp: campaign_action(None, "a", None, extra=["true"]),
    ),
]


def _contents(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


@pytest.mark.parametrize("case", REFUSALS, ids=[case.name for case in REFUSALS])
def test_cli_and_api_refuse_alike(case: Refusal, tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    (tmp_path / "afile").touch()
    before = _contents(tmp_path)
    result = run_pinlab(*(arg.format(tmp=tmp_path) for arg in case.cli))
    assert _contents(tmp_path) == before
    with pytest.raises(UsageError) as refused:
        case.api(tmp_path)
    assert _contents(tmp_path) == before
    message = str(refused.value)
    assert "\n" not in message
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"pinlab: error: {message}\n")


def test_every_case_is_named_once() -> None:
    names = [case.name for case in REFUSALS]
    assert len(names) == len(set(names))


def test_run_autopin_and_study_leave_their_refusals_to_the_library() -> None:
    """Their command modules parse, call and print: every refusal is made (and tested above) below them."""
    folder = Path(pinlab.cli.__file__).parent
    for name in ("run.py", "autopin.py", "study.py", "place.py", "report.py", "calibrate.py", "memory.py", "workload.py", "doctor.py"):
        assert "raise UsageError" not in (folder / name).read_text(), name
