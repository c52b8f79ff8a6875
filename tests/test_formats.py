"""pinlab's file formats: each goes through its owner and back unchanged, real outputs of the
commands match the JSON Schemas of docs/reference/formats/, and both the schemas and the owners
refuse what is broken (so that these checks can fail).

The formats and their owners: placement (pinlab.placement.plan), run record
(pinlab.launch.record), affinity graph (pinlab.graph.model), autopin log (pinlab.autopin.log),
study export (pinlab.report.export).
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pinlab.autopin.log import (
    LOG_FORMAT_VERSION,
    Candidate,
    Choice,
    Failure,
    Migration,
    MigrationAccessed,
    MigrationAttached,
    Probe,
    Rate,
    Reprobe,
    RunnerUp,
    Start,
    Summary,
    event_line,
    parse_log,
    read_log,
)
from pinlab.errors import UsageError
from pinlab.graph.model import JSON_FORMAT_VERSION, AffinityGraph, graph_from_json, load_graph
from pinlab.launch.record import RECORD_FORMAT_VERSION, RunRecord, ThreadRecord, read_record, write_record
from pinlab.native import native_path
from pinlab.placement import make_placement
from pinlab.placement.plan import PLACEMENT_FORMAT_VERSION, Placement, read_placement_file
from pinlab.report.export import STUDY_EXPORT_VERSION, parse_study_export
from pinlab.topology import load_topology
from tests.conftest import run_pinlab, this_cpus

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "reference" / "formats"
NAMES = ["placement", "run-record", "affinity-graph", "autopin-log-event", "study-export"]
CPUS = this_cpus()


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def errors(name: str, document: Any) -> list[str]:
    """What the schema ``name`` finds wrong in ``document`` (empty: valid)."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in schema(name).iter_errors(document)]


@pytest.mark.parametrize("name", NAMES)
def test_every_schema_is_a_valid_draft_2020_12_schema(name):
    document = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(document)


def test_the_format_reference_links_every_schema():
    page = (SCHEMAS.parent / "file-formats.md").read_text()
    assert sorted(p.name for p in SCHEMAS.glob("*.schema.json")) == sorted(f"{n}.schema.json" for n in NAMES)
    for name in NAMES:
        assert f"(formats/{name}.schema.json)" in page


# -- placement ------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["compact", "scatter", "none"])
def test_a_placement_goes_through_its_owner_and_back_unchanged(strategy):
    topo = load_topology("clovertown")
    placement = make_placement(topo, strategy=strategy, threads=4)
    again = Placement.from_json(json.loads(json.dumps(placement.to_json())), topo)
    assert again.to_json() == placement.to_json()
    assert errors("placement", placement.to_json()) == []


def test_a_placement_written_by_pinlab_place_is_run_by_pinlab_run_plan(tmp_path):
    n = len(CPUS)
    placed = run_pinlab("place", "-s", "scatter", "-n", str(n), "-f", "json")
    assert placed.returncode == 0, placed.stderr
    plan = json.loads(placed.stdout)
    assert errors("placement", plan) == []
    plan_file, record = tmp_path / "plan.json", tmp_path / "r.json"
    plan_file.write_text(placed.stdout)
    assert read_placement_file(str(plan_file)) == plan
    probe = str(native_path("pinlab-threads-probe"))
    ran = run_pinlab("run", "-q", "--plan", str(plan_file), "--record", str(record), "--", probe, "--threads", str(n - 1))
    assert ran.returncode == 0, ran.stderr
    data = read_record(str(record))
    assert errors("run-record", data) == []
    assert data["plan"] == plan
    workers = sorted((t for t in data["threads"] if t["slot"] is not None), key=lambda t: t["slot"])
    assert [t["planned_cpu"] for t in workers] == plan["cpus"]


# -- run record -----------------------------------------------------------------------------------
def test_a_real_run_record_matches_its_schema_and_reads_back_through_its_owner(tmp_path):
    record = tmp_path / "r.json"
    plan = ",".join(map(str, CPUS))
    probe = str(native_path("pinlab-threads-probe"))
    ran = run_pinlab("run", "-q", "-c", plan, "--record", str(record), "--", probe, "--threads", "2")
    assert ran.returncode == 0, ran.stderr
    data = read_record(str(record))
    assert data == json.loads(record.read_text())
    assert errors("run-record", data) == []
    assert data["plan"]["pinlab_placement"] == PLACEMENT_FORMAT_VERSION and data["plan"]["strategy"] == "explicit"
    assert len(data["threads"]) == 3 and data["exit_status"] == 0


def test_a_run_record_goes_through_its_owner_and_back_unchanged(tmp_path):
    thread = ThreadRecord(tid=101, pid=101, index=0, role="main", slot=0, planned_cpu=0, mask_at_start="0", start_time=0.001)
    thread.sample_times, thread.sample_cpus = [0.01, 0.02], [0, 0]
    record = RunRecord(argv=["prog", "-x"], plan=None, options={"sample_ms": 10}, started_at=1.5, pid=101, threads=[thread], sample_ms=10.0)
    path = tmp_path / "r.json"
    write_record(record, str(path))
    assert read_record(str(path)) == record.to_json()
    assert errors("run-record", record.to_json()) == []


# -- affinity graph -------------------------------------------------------------------------------
SHARING = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned char *shared;
enum { BYTES = 1 << 20 };

static void *worker(void *arg)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        for (size_t i = (size_t)arg * 64; i < BYTES; i += 4096)
            shared[i]++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < 0.5);
    return NULL;
}

int main(void)
{
    shared = malloc(BYTES);
    memset((void *)shared, 0, BYTES);
    pthread_t threads[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&threads[t], NULL, worker, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    return 0;
}
"""


def test_a_real_traced_graph_matches_its_schema_and_loads_through_its_owner(tmp_path):
    source, program, out = tmp_path / "sharing.c", tmp_path / "sharing", tmp_path / "g.json"
    source.write_text(SHARING)
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(program), str(source)], check=True)
    traced = run_pinlab("trace", "-q", "-n", "3", "-m", "pages", "--no-baseline", "-o", str(out), "--", str(program))
    assert traced.returncode == 0, traced.stderr
    data = json.loads(out.read_text())
    assert errors("affinity-graph", data) == []
    assert data["pinlab_graph"] == JSON_FORMAT_VERSION and data["threads"] == 3
    graph = load_graph(out)
    assert graph.weights == data["weights"] and graph.measured == data["measured"]
    assert graph.weight(1, 2) > 0  # the two workers touched the same pages


def test_a_graph_goes_through_its_owner_and_back_unchanged():
    graph = AffinityGraph(weights=[[0, 5, 1], [5, 0, 0], [1, 0, 0]], granularity="page", unit_bytes=4096, measured={"method": "import"})
    data = json.loads(graph.to_json_text())
    assert errors("affinity-graph", data) == []
    again = graph_from_json(data)
    assert again.to_json() == graph.to_json()


# -- autopin log ----------------------------------------------------------------------------------
def test_a_real_autopin_log_matches_its_schema_and_is_read_by_its_reader(tmp_path):
    log = tmp_path / "L.jsonl"
    candidates = f"{CPUS[0]};{CPUS[-1]}" if len(CPUS) > 1 else f"{CPUS[0]}"
    busy = "end=$(($(date +%s)+3)); while [ $(date +%s) -lt $end ]; do :; done"
    ran = run_pinlab("autopin", "-c", candidates, "-i", "0.2", "-w", "0.1", "-t", "0.3", "--log", str(log), "--", "sh", "-c", busy)
    assert ran.returncode == 0, ran.stderr
    lines = log.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        assert errors("autopin-log-event", json.loads(line)) == [], f"line {number}: {line}"
    kinds = [json.loads(line)["event"] for line in lines]
    assert kinds[0] == "start" and kinds[-1] == "summary" and "probe" in kinds and "choice" in kinds
    read = read_log(log)
    assert read.start.version == LOG_FORMAT_VERSION and read.start.argv == ("sh", "-c", busy)
    assert len(read.probes) == kinds.count("probe") and len(read.choices) == kinds.count("choice") and read.other == ()
    assert read.summary is not None and read.summary.exit_status == 0
    # Every event the reader made is the line it came from, written again by the same dataclass.
    assert [json.loads(event_line(e)) for e in (read.start, *read.events)] == [json.loads(line) for line in lines]


def every_event() -> list[Any]:
    """One event of every kind, as the controller builds them."""
    cands = (Candidate(0, "CPUs 0-1", (0, 1)), Candidate(1, "CPUs 0,2", (0, 2)))
    return [
        Start(
            t=0.3,
            mode="launch",
            argv=("prog",),
            pid=7,
            threads=2,
            metric="heartbeat",
            metric_unit="beats",
            topology="this",
            params={"init": 0.3},
            candidates=cands,
        ),
        Probe(
            t=1.0,
            candidate=0,
            name="CPUs 0-1",
            cpus=(0, 1),
            round=1,
            repinned_at=None,
            start=0.4,
            end=1.0,
            rates={"7": 3.0, "8": 2.5},
            mean=2.75,
            windows=(2.7, 2.8),
            threads=2,
        ),
        Probe(
            t=1.6,
            candidate=1,
            name="CPUs 0,2",
            cpus=(0, 2),
            round=1,
            repinned_at=1.0,
            start=1.1,
            end=1.6,
            rates={"7": 4.0},
            mean=4.0,
            windows=(4.0,),
            threads=2,
            partial=True,
        ),
        Migration(t=1.05, from_nodes=[0], to_nodes=[0, 1], pages_before={"0": 10}, pages_after={"0": 5, "1": 5}, not_moved=0, seconds=0.01),
        MigrationAttached(t=1.06, regions=2, bytes=8192, pages_on_node=2, not_moved=0, seconds=0.001),
        MigrationAccessed(t=1.07, pages=3, pages_on_node=3, not_moved=0, seconds=0.002),
        Choice(
            t=1.7,
            candidate=1,
            name="CPUs 0,2",
            cpus=(0, 2),
            rate=4.0,
            runner_up=RunnerUp(0, "CPUs 0-1", (0, 1), 2.75),
            p_value=0.01,
            effect=0.45,
            decided=True,
            equivalent=(),
            within_tolerance=(),
            verdict="CPUs 0,2 beats CPUs 0-1",
            rounds=1,
            probing_seconds=1.3,
        ),
        Rate(t=2.2, start=1.7, end=2.2, rate=3.9, candidate=1, reference=4.0),
        Reprobe(t=2.3, why="the rate fell", rate=1.0, reference=4.0, intervals=3),
        Failure(t=2.4, text="the metric broke", error="RuntimeError"),
        Summary(
            t=2.5,
            exit_status=0,
            signal=None,
            wall_seconds=2.5,
            probing_seconds=1.3,
            choices=1,
            final={"candidate": 1, "name": "CPUs 0,2", "cpus": [0, 2]},
            ended_during_probing=False,
            interrupted=False,
            restored=False,
        ),
    ]


def test_every_autopin_event_goes_through_its_owner_and_back_unchanged():
    events = every_event()
    lines = [event_line(e) for e in events]
    for line in lines:
        assert errors("autopin-log-event", json.loads(line)) == [], line
    read = parse_log(lines, source="built")
    assert (read.start, *read.events) == tuple(events)
    assert read.other == () and read.warnings == ()


def test_an_event_a_later_pinlab_adds_is_kept_not_refused():
    lines = [
        event_line(every_event()[0]),
        json.dumps({"event": "later", "t": 1.0, "what": 1}),
        json.dumps({"event": "rate", "t": 2.0, "start": 1.0, "end": 2.0, "rate": 1.0, "candidate": 0, "new": "x"}),
    ]
    read = parse_log(lines)
    assert read.other == ({"event": "later", "t": 1.0, "what": 1},)
    assert json.loads(event_line(read.rates[0]))["new"] == "x"  # written back as it was read
    assert errors("autopin-log-event", json.loads(lines[1])) == []


# -- study export ---------------------------------------------------------------------------------
def test_a_real_study_export_matches_its_schema_and_reads_back_through_its_owner(tmp_path):
    db = tmp_path / "s.db"
    studied = run_pinlab("study", "--db", str(db), "--name", "t", "-s", "none,compact", "-n", "1", "--runs", "4", "-q", "--", "true")
    assert studied.returncode == 0, studied.stderr
    exported = run_pinlab("report", "t", "--db", str(db), "--json")
    assert exported.returncode == 0, exported.stderr
    data = parse_study_export(exported.stdout)
    assert errors("study-export", data) == []
    assert data["pinlab_study_export"] == STUDY_EXPORT_VERSION and data["study"] == "t"
    assert len(data["runs"]) == 8 and {s["placement"] for s in data["stats"]} == {"none", "compact"}
    older = {k: v for k, v in data.items() if k != "pinlab_study_export"}
    assert parse_study_export(json.dumps(older)) == older  # written before the version: read as format 1


# -- refusals -------------------------------------------------------------------------------------
def valid_documents() -> dict[str, Any]:
    """A valid document of each format, from its owner."""
    topo = load_topology("clovertown")
    record = RunRecord(argv=["prog"], plan=None, options={}, started_at=0.0, pid=5, threads=[ThreadRecord(tid=5, pid=5, index=0, role="main")])
    return {
        "placement": make_placement(topo, strategy="compact", threads=2).to_json(),
        "run-record": record.to_json(),
        "affinity-graph": AffinityGraph(weights=[[0, 1], [1, 0]]).to_json(),
        "autopin-log-event": every_event()[1].to_json(),
        "study-export": {
            "pinlab_study_export": STUDY_EXPORT_VERSION,
            "study": "t",
            "parameters": {},
            "machine": {},
            "warnings": [],
            "nodes": [],
            "baseline": "none",
            "alpha": 0.05,
            "metric": "time",
            "metric_better": "lower",
            "metric_direction": {"metric": "time", "better": "lower", "source": "stated"},
            "counters": [],
            "adaptive": None,
            "runs": [],
            "stats": [],
            "overall": [],
        },
    }


BREAKAGES = {
    "placement": ("a negative CPU", lambda d: d["cpus"].__setitem__(0, -1)),
    "run-record": ("no threads", lambda d: d.pop("threads")),
    "affinity-graph": ("a negative weight", lambda d: d["weights"][0].__setitem__(1, -3)),
    "autopin-log-event": ("a probe without its end", lambda d: d.pop("end")),
    "study-export": ("a version 2", lambda d: d.__setitem__("pinlab_study_export", 2)),
}


@pytest.mark.parametrize("name", NAMES)
def test_each_schema_refuses_a_broken_document(name):
    document = valid_documents()[name]
    assert errors(name, document) == []
    what, breaks = BREAKAGES[name]
    broken = copy.deepcopy(document)
    breaks(broken)
    assert errors(name, broken), f"the {name} schema took {what}"


def write_newer(kind: str, path: Path) -> None:
    """A file of ``kind`` as format 2 would be: this pinlab's with the version raised."""
    docs = valid_documents()
    if kind == "autopin-log":
        path.write_text(json.dumps({**every_event()[0].to_json(), "version": 2}) + "\n")
        return
    key = {"placement": "pinlab_placement", "run-record": "pinlab_run", "affinity-graph": "pinlab_graph", "study-export": "pinlab_study_export"}[kind]
    path.write_text(json.dumps({**docs[kind], key: 2}))


READERS = {
    "placement": lambda path: read_placement_file(str(path)),
    "run-record": lambda path: read_record(str(path)),
    "affinity-graph": load_graph,
    "autopin-log": read_log,
    "study-export": lambda path: parse_study_export(path.read_text(), str(path)),
}


@pytest.mark.parametrize("kind", READERS)
def test_each_owner_refuses_another_version_in_one_clear_line(kind, tmp_path):
    path = tmp_path / "newer.json"
    write_newer(kind, path)
    with pytest.raises(UsageError) as refused:
        READERS[kind](path)
    message = str(refused.value)
    assert "\n" not in message
    assert "2" in message and "1" in message and str(path) in message, message  # the file, the version found and the one read
    assert "pinlab" in message, message  # what to do: which pinlab, or which command writes it


def test_the_versions_the_owners_write_are_the_schemas():
    versions = {
        "placement": ("pinlab_placement", PLACEMENT_FORMAT_VERSION),
        "run-record": ("pinlab_run", RECORD_FORMAT_VERSION),
        "affinity-graph": ("pinlab_graph", JSON_FORMAT_VERSION),
        "study-export": ("pinlab_study_export", STUDY_EXPORT_VERSION),
    }
    for name, (key, version) in versions.items():
        document = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        assert document["properties"][key]["const"] == version, name
    start = json.loads((SCHEMAS / "autopin-log-event.schema.json").read_text())["allOf"][0]
    assert start["if"]["properties"]["event"]["const"] == "start" and start["then"]["properties"]["version"]["const"] == LOG_FORMAT_VERSION
