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

from pinlab.errors import UsageError
from pinlab.live import WatchRequest
from pinlab.memory.memmap import watch
from pinlab.outputs import check_picture
from pinlab.placement.request import PlaceRequest
from pinlab.report.requests import AutopinReportRequest, ReportRequest
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
    refusal("corun --count too many", "corun cpu -n 4097", lambda tmp: CoRunners("cpu", 4097)),
    # -- graph show -----------------------------------------------------------------------------
    refusal("graph show picture suffix", "graph show {tmp}/g.json --picture {tmp}/g.gif", lambda tmp: check_picture(f"{tmp}/g.gif")),
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
