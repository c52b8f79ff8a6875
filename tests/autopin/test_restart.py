"""autopin --probe restart: each probe a run of its own, pinned on its candidate from its start.

A program re-pinned is not the program started there (an OpenMP runtime sizes its spin-waiting,
a BLAS library its pool, from the CPUs it sees at start). These tests run real programs that
write down, as they start, their pid and the CPUs they were allowed: that is what a runtime
sees, and what each probe must show to be "the program as it will run".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinlab.autopin.log import Failure, read_log
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.session import autopin
from pinlab.errors import UsageError
from tests.conftest import PINLAB, compile_c, run_pinlab, this_cpus

CPUS = this_cpus()

#: Writes "PID CPU,CPU... CHILD" as it starts (the mask a runtime would size itself from, and a
#: child process it leaves running), beats for argv[2] seconds, then prints "done".
STARTS = """
import os, subprocess, sys, time
from pinlab.heartbeat import beat
child = subprocess.Popen(["sleep", "600"])
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()} {','.join(map(str, sorted(os.sched_getaffinity(0))))} {child.pid}\\n")
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    for _ in range(20000):
        pass
    beat(1)
child.kill()
child.wait()
print("done", flush=True)
"""


#: A GNU OpenMP team meeting at a barrier after every small step and beating once per step. libgomp
#: sizes its spin-waiting from the CPUs it sees at start: long with a CPU per thread, short with
#: fewer CPUs than threads.
BARRIERS = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "pinlab_heartbeat.h"
int main(int argc, char **argv) {
    double end = omp_get_wtime() + atof(argv[1]);
    volatile double sink = 0;
    #pragma omp parallel
    for (;;) {
        #pragma omp single
        { if (omp_get_wtime() > end) end = -1; }
        if (end < 0) break;
        for (int i = 0; i < 20000; i++) sink += i * 0.5;
        #pragma omp barrier
        pinlab_beat(1);
        #pragma omp barrier
    }
    printf("done\n");
    return 0;
}
"""


def _starts(path: Path) -> list[tuple[int, list[int], int]]:
    rows = []
    for line in path.read_text().splitlines():
        pid, cpus, child = line.split()
        rows.append((int(pid), [int(c) for c in cpus.split(",")], int(child)))
    return rows


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its parent is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _left_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs: a candidate on each")
def test_each_probe_is_a_run_started_on_its_candidate_and_the_choice_runs_once_more_whole(tmp_path):
    """Two candidates, one CPU each: three runs (one per probe, one kept), each allowed only its
    candidate's CPUs from its first instruction; the probes' runs and the processes they started
    are gone, their output dropped; the kept run is on the choice, and its output and status are
    the program's. (Which CPU wins depends on the machine's load: the test does not ask.)"""
    first, second = CPUS[1], CPUS[0]
    starts, log, shared = tmp_path / "starts", tmp_path / "autopin.jsonl", tmp_path / "shared"
    shared.mkdir()
    env = dict(os.environ, PINLAB_EVENTS_DIR=str(shared))
    done = run_pinlab(
        "autopin", "--probe", "restart", "-C", f"{first};{second}", "-i", "0.3", "-T", "1", "--log", str(log),
        "--", sys.executable, "-c", STARTS, str(starts), "3",
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n", done.stdout  # the kept run's output only
    read = read_log(str(log))
    assert len(read.choices) == 1, read.events
    chosen = list(read.choices[0].cpus)
    runs = _starts(starts)
    assert [cpus for _, cpus, _ in runs] == [[first], [second], chosen], runs
    assert len({pid for pid, _, _ in runs}) == 3, runs
    for pid, _, child in runs:
        assert not _running(pid) and not _running(child), (pid, child)
    assert read.start.mode == "restart" and read.start.params["probe"] == "restart" and read.start.pid is None, read.start
    # each probe measured its own run: the worker it rated is that run's main thread
    assert [(p.cpus, list(p.rates)) for p in read.probes] == [((first,), [str(runs[0][0])]), ((second,), [str(runs[1][0])])], read.probes
    for probe in read.probes:  # the run began before its -i, and its window after it
        assert probe.repinned_at is not None and probe.start - probe.repinned_at >= 0.3 - 0.01, probe
    assert read.probes[0].end <= read.probes[1].repinned_at, read.probes  # one run at a time
    assert read.summary.final["cpus"] == chosen and read.summary.exit_status == 0, read.summary
    assert read.rates and all(r.candidate == read.choices[0].candidate for r in read.rates), read.rates
    assert "running the program on CPUs" in done.stderr
    assert _left_files(shared) == [], _left_files(shared)  # heartbeat files and event rings of every run removed
    picture = tmp_path / "timeline.png"
    report = run_pinlab("autopin-report", str(log), "--picture", str(picture))
    assert report.returncode == 0 and "--probe restart: each probe a run of its own" in report.stdout, report.stdout
    assert picture.read_bytes().startswith(b"\x89PNG"), report.stderr


def test_a_program_that_ends_before_its_probe_is_over_stops_the_probing_and_runs_once_more(tmp_path):
    """A probe's run that ends by itself within -i + -T: the probing stops, saying so with its
    status and the last line it wrote on stderr; the program then runs once, on the first
    candidate (none was measured), and its status is autopin's."""
    cpu = CPUS[0]
    program = "import sys; print('ran'); print('the input was read', file=sys.stderr); sys.exit(3)"
    log = tmp_path / "autopin.jsonl"
    done = run_pinlab(
        "autopin", "--probe", "restart", "-C", f"{cpu};{cpu}", "-i", "0.5", "-T", "1", "--log", str(log), "--", sys.executable, "-c", program
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "ran\n", done.stdout  # the probe's run's output was dropped
    said = [line for line in done.stderr.splitlines() if line.startswith("autopin: stopped probing:")]
    assert len(said) == 1 and "ended by itself (status 3)" in said[0] and "its last words on stderr: the input was read" in said[0], done.stderr
    assert done.stderr.count("the input was read") == 2, done.stderr  # quoted once, then the kept run's own
    read = read_log(str(log))
    assert read.choices == [] and [e.error for e in read.events if isinstance(e, Failure)] == ["ProbeEnded"], read.events
    assert read.summary.exit_status == 3 and read.summary.final["candidate"] == 0 and not read.summary.ended_during_probing, read.summary


def test_a_signal_during_a_probe_ends_the_session_with_nothing_left_running(tmp_path):
    """SIGTERM to pinlab while a probe's run goes on: that run and its child end, no other run
    starts, autopin exits 128 + 15, and the log's summary says it was interrupted."""
    cpu = CPUS[0]
    starts, log, shared = tmp_path / "starts", tmp_path / "autopin.jsonl", tmp_path / "shared"
    shared.mkdir()
    env = dict(os.environ, PINLAB_EVENTS_DIR=str(shared))
    argv = [str(PINLAB), "autopin", "--probe", "restart", "-C", f"{cpu};{cpu}", "-i", "0.2", "-T", "60", "--log", str(log)]
    proc = subprocess.Popen([*argv, "--", sys.executable, "-c", STARTS, str(starts), "600"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (starts.exists() and starts.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert starts.exists(), "the first probe's run never started"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    runs = _starts(starts)
    assert len(runs) == 1, runs  # no second probe, no kept run
    pid, _, child = runs[0]
    assert not _running(pid) and not _running(child), runs
    read = read_log(str(log))
    assert read.summary.interrupted and read.choices == [], read.summary
    assert _left_files(shared) == [], _left_files(shared)


def test_restart_probing_refuses_what_needs_a_program_that_keeps_running(tmp_path):
    """--probe restart with --pid, --monitor, --migrate-pages, --restore or a metric read from the
    output: one line, exit 2, as
    the Python API refuses it, before anything runs."""
    cpu = CPUS[0]
    marker = tmp_path / "ran"
    cases = {
        ("--pid", str(os.getpid())): "a program already running cannot be",
        ("--monitor",): "--monitor acts on the running program",
        ("--migrate-pages", "process"): "--migrate-pages process acts on the running program",
        ("--metric", "stdout:^step"): "--probe restart drops its probes' output",
    }
    for extra, words in cases.items():
        program = () if "--pid" in extra else ("--", "touch", str(marker))
        done = run_pinlab("autopin", "--probe", "restart", "-C", f"{cpu};{cpu}", *extra, *program)
        assert done.returncode == 2 and words in done.stderr, (extra, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    unknown = run_pinlab("autopin", "--probe", "restart", "-C", f"{cpu};{cpu}", "--metric", "no-such-event", "--", "touch", str(marker))
    assert unknown.returncode == 2 and "unknown metric 'no-such-event'" in unknown.stderr, unknown.stderr
    assert not marker.exists()
    missing = run_pinlab("autopin", "--probe", "restart", "-C", f"{cpu};{cpu}", "--log", str(tmp_path / "log.jsonl"), "--", str(tmp_path / "none"))
    assert missing.returncode == 127 and missing.stderr.strip().endswith("none: no such file"), missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and not (tmp_path / "log.jsonl").exists(), missing.stderr
    with pytest.raises(UsageError, match="--restore acts on the running program"):
        AutopinOptions(probe="restart", restore=True)
    with pytest.raises(UsageError, match="unknown --probe 'again'"):
        AutopinOptions(probe="again")
    with pytest.raises(UsageError, match="a program already running cannot be"):
        autopin(pid=os.getpid(), options=AutopinOptions(probe="restart", candidates=f"{cpu};{cpu}"))


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs: the OpenMP team starts on two")
def test_an_openmp_team_is_measured_on_two_threads_per_cpu_as_it_runs_when_started_there(tmp_path):
    """The case re-pinning gets wrong: a GNU OpenMP team started with a CPU per thread spins long
    at its barriers; moved onto one CPU, each thread spins away the time slice the other needs.
    Started there, libgomp sees fewer CPUs than threads and hardly spins. Re-pinning measured
    two threads on one CPU at 48 beats/s per thread on the 2-CPU development machine, restarting
    at 5,760 (and the kept run at 6,300); the candidate with a CPU per thread measured alike both
    ways (471 and 2,749, a noisy second CPU): only the restarted probe shows the placement as it
    will run."""
    include = [
        f for f in subprocess.run([str(PINLAB), "cflags", "--mem"], capture_output=True, text=True, check=True).stdout.split() if f.startswith("-I")
    ]
    program = compile_c(tmp_path, "barriers", BARRIERS, "-fopenmp", *include)
    shared = f"{CPUS[0]},{CPUS[0]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_"))}
    env["OMP_NUM_THREADS"] = "2"
    rates = {}
    for mode in ("repin", "restart"):
        log = tmp_path / f"{mode}.jsonl"
        done = run_pinlab(
            "autopin", "-q", "--probe", mode, "-C", f"{CPUS[0]},{CPUS[1]};{shared}", "-i", "0.5", "-W", "0.5", "-T", "1.5",
            "--metric", "heartbeat", "--log", str(log), "--", program, "6" if mode == "repin" else "4",
            env=env,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout == "done\n", done.stderr
        (probe,) = [p for p in read_log(str(log)).probes if p.cpus == (CPUS[0], CPUS[0])]
        assert not probe.partial, probe
        rates[mode] = probe.mean
    assert rates["restart"] > 2 * rates["repin"], rates


def test_a_probe_whose_measuring_fails_is_ended_and_the_program_still_runs_once(tmp_path, monkeypatch):
    """Whatever fails while a probe's run is measured (here the metric, the first time) ends that
    run and the probing, said in one line; the program then runs once, whole, and nothing of the
    probe's run is left."""
    from pinlab.autopin import restart

    real = restart.Restarted._metric_for
    calls = []

    def failing_once(self, pid):
        calls.append(pid)
        if len(calls) == 1:
            raise RuntimeError("the counters went away")
        return real(self, pid)

    monkeypatch.setattr(restart.Restarted, "_metric_for", failing_once)
    starts, said = tmp_path / "starts", []
    cpu = CPUS[0]
    options = AutopinOptions(probe="restart", candidates=f"{cpu};{cpu}", init=0.2, interval=0.5)
    outcome = autopin([sys.executable, "-c", STARTS, str(starts), "1"], options=options, say=said.append)
    assert outcome.exit_status == 0 and outcome.summary["choices"] == 0, outcome.summary
    assert [line for line in said if line.startswith("stopped probing:")] == [
        f"stopped probing: measuring the run on CPUs {cpu} failed: the counters went away"
    ], said
    runs = _starts(starts)
    assert len(runs) == 2 and all(cpus == [cpu] for _, cpus, _ in runs), runs  # the probe's run, then the kept one
    for pid, _, child in runs:
        assert not _running(pid) and not _running(child), runs
