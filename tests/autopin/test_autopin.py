"""autopin on real programs: it finds the CPU a co-runner does not load, keeps it, follows threads that
come and go, re-probes on a new phase, attaches to a running program and leaves it running.

The programs are ``spinner`` (tests/autopin/spinner.c, compiled here): threads that do fixed
chunks of arithmetic and report each through the heartbeat. The tests take the CPUs from this
process's mask (two are needed to have a better and a worse one).

They must hold on a busy machine, where autopin takes longer to decide and other work takes any
share of any CPU. So the programs do not run a fixed time: they run until the test, having seen
the log's ``choice`` event (or whatever it checks), creates the file named by ``--until-file``.
And the better CPU is built into the program (``--slow-on``: 16 times the arithmetic per beat on
one CPU) rather than left to a co-runner: on a busy machine the kernel moves the other work off
the CPU a co-runner loads, and a thread pinned there then gets as much as anywhere else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean

import pytest

from pinlab.autopin.log import Failure, read_log
from pinlab.workloads.corun import CoRunners
from tests.conftest import PINLAB, compile_c, run_pinlab, this_cpus
from tests.memory import mem_expect

CPUS = this_cpus()
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs: one loaded by a co-runner, one free")
FAST = ["-i", "0.3", "-W", "0.2", "-T", "1.0"]
# For the tests that check a verdict: on a busy machine a thread may get no CPU at all for a
# sub-window, so longer windows, and more rounds (--rounds auto) rather than an undecided verdict.
SURE = ["-i", "0.3", "-W", "0.2", "-T", "2", "--rounds", "auto", "--max-rounds", "6"]


@pytest.fixture(scope="module")
def spinner(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("spinner") / "spinner"
    source = Path(__file__).with_name("spinner.c")
    mem_expect.build(str(PINLAB), out, source)  # with libpinlab-mem, for --attached
    return str(out)


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def of(log: list[dict], kind: str) -> list[dict]:
    return [e for e in log if e["event"] == kind]


class LogWatch:
    """Creates files when events appear in an autopin log, from a thread, while the test runs
    autopin: ``steps`` are (condition on the events so far, file to create), in order."""

    def __init__(self, log: Path, steps: list[tuple[Callable[[list[dict]], bool], Path]]) -> None:
        self.log, self.steps = log, steps
        self.done = threading.Event()
        self.seen: list[int] = []  # how many events there were when each step's file was created
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _read(self) -> list[dict]:
        if not self.log.exists():
            return []
        lines = self.log.read_text().split("\n")[:-1]  # the last one may be half written
        return [json.loads(line) for line in lines]

    def _watch(self) -> None:
        step = 0
        while step < len(self.steps) and not self.done.wait(0.05):
            log_events = self._read()
            condition, path = self.steps[step]
            if condition(log_events):
                path.touch()
                self.seen.append(len(log_events))
                step += 1

    def __enter__(self) -> LogWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        for _, path in self.steps:
            path.touch()  # whatever happened, nothing the test started keeps spinning


def chose(count: int = 1) -> Callable[[list[dict]], bool]:
    return lambda log_events: len(of(log_events, "choice")) >= count


def until_choice(tmp_path: Path, log: Path) -> tuple[LogWatch, list[str]]:
    """A watch that ends the spinner once autopin has chosen, and the spinner's arguments for it
    (--seconds is only a cap then)."""
    stop = tmp_path / "stop"
    return LogWatch(log, [(chose(), stop)]), ["--until-file", str(stop), "--seconds", "100"]


def started_with(program: str, argument: str) -> int | None:
    """The PID of ``program`` run with ``argument`` (a path of the test's own: no other process has
    it), None while there is none; autopin, which has both on its command line, is not it."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if argv[0] == program.encode() and argument.encode() in argv:
                    return int(entry)
            except OSError:
                continue
    return None


def last_cpu(stdout: str) -> int:
    line = next(x for x in stdout.splitlines() if x.startswith("spinner "))
    return int(dict(w.split("=") for w in line.split()[1:])["last_cpu"])


@needs_two
@pytest.mark.parametrize("metric, slowdown", [("heartbeat", "--slow-on"), ("task-clock", "--idle-on")])
def test_one_thread_chooses_the_cpu_where_it_runs_faster(spinner, tmp_path, metric, slowdown):
    """The worse CPU is built into the program, so that it is worse at any load. For the heartbeat,
    16 times the arithmetic per beat there: 1/16 of the beats for the same CPU share. task-clock measures
    the share itself, which only the program's own idling can lower whatever else runs: there it
    sleeps 99 times as long as each chunk took (at most 1% of the CPU, where even a CPU shared
    with 50 other runnable tasks gives 2%)."""
    slow, fast = CPUS[-1], CPUS[0]
    log = tmp_path / "autopin.jsonl"
    watch, until = until_choice(tmp_path, log)
    with watch:
        result = run_pinlab(
            "autopin",
            "-C",
            f"{slow};{fast}",
            *SURE,
            "--metric",
            metric,
            "--log",
            str(log),
            "--",
            spinner,
            "--threads",
            "1",
            slowdown,
            str(slow),
            *until,
        )
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    assert of(log_events, "start")[0]["metric"] == metric
    choice = of(log_events, "choice")[0]
    means = {cpu: mean([p["mean"] for p in of(log_events, "probe") if p["cpus"] == [cpu]]) for cpu in (slow, fast)}
    # autopin follows what it measured, and the thread really ran on its choice to the end
    assert choice["cpus"] == [max(means, key=means.get)], (means, result.stderr)
    assert last_cpu(result.stdout) == choice["cpus"][0]
    # What it measured shows the built-in difference (16x for the heartbeat, 2x and more for
    # task-clock), unless the machine starved the thread where it should have run fastest: seen
    # once at a load average of 37 on 2 CPUs, a whole 2 s probe of the fast CPU without one beat.
    # A machine that busy may also leave the rounds too noisy for a significant verdict.
    starved = means[fast] <= 1.25 * means[slow] and os.getloadavg()[0] > 4 * len(CPUS)
    if not starved:
        assert choice["cpus"] == [fast] and means[fast] > 1.25 * means[slow], (means, result.stderr)
        # an unbounded effect (nothing measured on the slow CPU: a busy machine can leave its 1% at
        # 0 in every probe) is written as null, as the log writes infinities
        assert (choice["effect"] is None and means[slow] == 0) or choice["effect"] > 0.25, (choice, means)
    if os.getloadavg()[0] < 2 * len(CPUS):
        assert choice["p_value"] < 0.05, result.stderr
    # a starved thread may show no work on either CPU (a rate of 0 everywhere): no p-value then,
    # and the verdict says so (seen at a load average of 22 on 2 CPUs)
    assert "chose" in result.stderr and ("p = " in result.stderr or (starved and "no work was measured on any candidate" in result.stderr)), (
        result.stderr
    )
    assert of(log_events, "summary")[0]["exit_status"] == 0
    assert "sched_yield" not in result.stderr  # computing and napping is not waiting by yield


YIELDS = r"""
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
static volatile int done;
static void *waiter(void *arg) /* waits for work as OpenBLAS's pool does between calls */
{
    (void)arg;
    while (!done)
        sched_yield();
    return NULL;
}
int main(int argc, char **argv)
{
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    volatile unsigned long x = 0;
    while (argc < 2 || access(argv[1], F_OK) != 0) /* computes until the test's file exists */
        for (int i = 0; i < 1000000; i++)
            x += (unsigned long)i;
    done = 1;
    pthread_join(t, NULL);
    return 0;
}
"""


@needs_two
def test_task_clock_with_a_thread_waiting_by_sched_yield_calls_no_winner(tmp_path):
    """task-clock counts a sched_yield loop as work. Both candidates are measured with the waiting
    thread: beside the computing one on one CPU (every yield switches, a few microseconds of CPU
    each) and alone on its own (its time is nearly all in the kernel); either rule shows it, and
    the verdict says why it cannot rank them instead of calling a winner."""
    prog = compile_c(tmp_path, "yields", YIELDS)
    log = tmp_path / "autopin.jsonl"
    one, two = CPUS[-1], CPUS[0]
    watch, _ = until_choice(tmp_path, log)
    with watch:
        result = run_pinlab(
            "autopin", "-C", f"{one},{one};{two},{one}", "-i", "0.3", "-W", "0.2", "-T", "2", "--metric", "task-clock",
            "--log", str(log), "--", prog, str(tmp_path / "stop"),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    choice = of(events(log), "choice")[0]
    assert choice["decided"] is False, choice
    assert "1 worker thread waits by sched_yield, as OpenBLAS's pool and MPI progress threads do (thread " in choice["verdict"], choice
    assert choice["verdict"].endswith("or use --metric stdout:REGEX: keeping " + choice["name"] + ", no verdict on speed"), choice
    assert "waits by sched_yield" in result.stderr


@needs_two
def test_one_thread_follows_what_a_corunner_does_to_the_cpu_it_loads(spinner, tmp_path):
    """The real case: a ``cpu`` co-runner pinned to one CPU. On a quiet machine it takes half of
    that CPU and autopin must choose the other one; on a busy one the kernel moves other work off
    the loaded CPU, and the two may measure alike. So the choice is checked against what the
    probes measured: the candidate with the higher mean, and the free CPU whenever the probes show
    the co-runner's effect; the thread must end where autopin chose."""
    busy, free = CPUS[-1], CPUS[0]
    log = tmp_path / "autopin.jsonl"
    watch, until = until_choice(tmp_path, log)
    with CoRunners("cpu", 1, [busy]), watch:
        result = run_pinlab("autopin", "-C", f"{busy};{free}", *SURE, "--log", str(log), "--", spinner, "--threads", "1", *until)
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    choice = of(log_events, "choice")[0]
    means = {cpu: mean([p["mean"] for p in of(log_events, "probe") if p["cpus"] == [cpu]]) for cpu in (busy, free)}
    assert choice["cpus"] in ([busy], [free]) and choice["runner_up"]["cpus"] != choice["cpus"], choice
    assert choice["rate"] >= choice["runner_up"]["rate"], choice  # the higher mean of all its sub-windows
    if means[free] > 1.25 * means[busy]:  # the co-runner's effect, as on a quiet machine (2x)
        assert choice["cpus"] == [free], (choice, means)
    assert last_cpu(result.stdout) == choice["cpus"][0]  # the thread really ran there to the end


@needs_two
def test_two_threads_prefer_one_thread_per_cpu_to_sharing_one(spinner, tmp_path):
    """``--slow-shared``: a thread does 16 times the arithmetic per beat on a CPU the other thread
    uses too. Sharing costs 15/16 of the rate at any load, where the kernel would otherwise, on a busy machine,
    move other work off the CPU the two threads share until they lose little by sharing it."""
    a, b = CPUS[0], CPUS[1]
    log = tmp_path / "autopin.jsonl"
    watch, until = until_choice(tmp_path, log)
    with watch:
        result = run_pinlab(
            "autopin",
            "-C",
            f"{a},{a};{a},{b}",
            *SURE,
            "--metric",
            "heartbeat",
            "--log",
            str(log),
            "--",
            spinner,
            "--threads",
            "2",
            "--slow-shared",
            "1",
            *until,
        )
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    assert of(log_events, "start")[0]["metric"] == "heartbeat"  # named: on a busy machine the program may not beat before -i is over
    choice = of(log_events, "choice")[0]
    assert choice["cpus"] == [a, b]
    means = {cpus: mean([p["mean"] for p in of(log_events, "probe") if tuple(p["cpus"]) == cpus]) for cpus in ((a, a), (a, b))}
    assert means[(a, b)] > 1.25 * means[(a, a)]  # about 16x (32x on a quiet machine, where sharing halves the CPU too)
    assert all(p["threads"] == 2 for p in of(log_events, "probe"))


@needs_two
def test_threads_created_during_probing_start_on_the_candidate_being_probed(spinner, tmp_path):
    from pinlab.autopin.options import AutopinOptions
    from pinlab.autopin.session import autopin_program

    a, b = CPUS[0], CPUS[1]
    log = tmp_path / "autopin.jsonl"
    options = AutopinOptions(candidates=f"{a},{b};{b},{a}", init=0.3, warmup=0.2, interval=0.8, log=str(log))
    watch, until = until_choice(tmp_path, log)
    with watch:
        outcome = autopin_program([spinner, "--threads", "2", "--churn", "120", *until], options, say=lambda line: None)
    assert outcome.exit_status == 0
    log_events = events(log)
    # The candidates in the order they were current: from the start (candidate 0), each re-pin,
    # the choice.
    order = [0] + [p["candidate"] for p in of(log_events, "probe") if p["repinned_at"] is not None] + [of(log_events, "choice")[0]["candidate"]]
    candidates = {c["index"]: c["cpus"] for c in of(log_events, "start")[0]["candidates"]}
    churned = sorted((t for t in outcome.record.threads if t.role == "worker" and t.slot is not None and t.slot >= 3), key=lambda t: t.start_time)
    assert len(churned) >= 10  # a thread every 120 ms (plus its 60 ms of work) for the 1.8 s of probing at least
    # Each thread started on one CPU (its mask at its first instruction), that of its slot in one of
    # the candidates: the CPUs a and b swap places between the two.
    started_on = []
    for thread in churned:
        assert thread.mask_at_start == str(thread.cpu_at_start), (thread.slot, thread.mask_at_start, thread.cpu_at_start)
        matching = [c for c, cpus in candidates.items() if cpus[thread.slot % len(cpus)] == thread.cpu_at_start]
        assert len(matching) == 1, (thread.slot, thread.cpu_at_start, candidates)
        started_on.append(matching[0])
    # The threads, in the order they were created (one after the other), followed the candidates in
    # the order autopin made them current: compared by order, not by time, because the threads'
    # start times and the log's are taken on clocks started at different moments (the program's
    # spawn, autopin's start), which a loaded machine can set tens of ms apart.
    phases = [c for i, c in enumerate(started_on) if i == 0 or started_on[i - 1] != c]
    remaining = iter(order)
    assert all(any(c == o for o in remaining) for c in phases), (phases, order)
    assert set(phases) == {0, 1}, (phases, order)  # new threads started on both candidates as they were probed
    # Threads that ended during probing were dropped from the measurement without error.
    assert all(p["threads"] >= 1 for p in of(log_events, "probe"))


@needs_two
def test_a_new_phase_triggers_a_new_search(spinner, tmp_path):
    """The slow phase (16 times the arithmetic per beat: 1/16 of the rate at any load) begins when the
    test creates its file, once autopin has chosen; the program ends once a re-probe has led to a
    new choice."""
    fast_cpu, other = CPUS[0], CPUS[-1]
    log = tmp_path / "autopin.jsonl"
    slow, stop = tmp_path / "slow", tmp_path / "stop"

    def searched_again(log_events: list[dict]) -> bool:
        later = log_events[watch.seen[0] :]
        return any(e["event"] == "reprobe" for e in later) and of(later, "choice") != []

    watch = LogWatch(log, [(chose(), slow), (searched_again, stop)])
    with watch:
        result = run_pinlab(
            "autopin",
            "-C",
            f"{other};{fast_cpu}",
            "-i",
            "0.2",
            "-W",
            "0.1",
            "-T",
            "0.5",
            "--metric",
            "heartbeat",
            "--monitor",
            "--threshold",
            "25",
            "--patience",
            "2",
            "--log",
            str(log),
            "--",
            spinner,
            "--threads",
            "1",
            "--slow-on",
            str(other),
            "--slow-file",
            str(slow),
            "--until-file",
            str(stop),
            "--seconds",
            "100",
        )
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    assert watch.seen, result.stderr
    # A noisy machine may cause a re-probe before the phase changes; the phase change must cause one.
    reprobes = of(log_events[watch.seen[0] :], "reprobe")
    assert any(r["rate"] < 0.75 * r["reference"] for r in reprobes), (reprobes, result.stderr)
    assert len(of(log_events, "choice")) >= 2
    assert "re-probing" in result.stderr


@needs_two
def test_monitor_re_checks_the_runner_up_and_goes_back_to_the_choice(spinner, tmp_path):
    """With --recheck 1 the runner-up is measured after every interval on the choice: the log has
    its recheck events, each on the last choice's runner-up with a rate, and the thread ends where
    autopin says it left it (the program may end during a re-check)."""
    log = tmp_path / "autopin.jsonl"
    stop = tmp_path / "stop"
    watch = LogWatch(log, [(lambda log_events: len(of(log_events, "recheck")) >= 2, stop)])
    with watch:
        result = run_pinlab(
            "autopin", "-C", f"{CPUS[-1]};{CPUS[0]}", "-i", "0.2", "-W", "0.1", "-T", "0.5", "--metric", "heartbeat",
            "--monitor", "--recheck", "1", "--log", str(log), "--",
            spinner, "--threads", "1", "--until-file", str(stop), "--seconds", "100",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    rechecks = of(log_events, "recheck")
    assert len(rechecks) >= 2 and "re-check of the runner-up" in result.stderr, result.stderr
    for recheck in rechecks:
        choice = [e for e in log_events if e["event"] == "choice" and e["t"] <= recheck["t"]][-1]
        assert recheck["cpus"] == choice["runner_up"]["cpus"] and recheck["rate"] > 0, (recheck, choice)
        assert recheck["repinned_at"] < recheck["start"] < recheck["end"]
    assert last_cpu(result.stdout) == of(log_events, "summary")[0]["final"]["cpus"][0]
    assert read_log(log).events  # the report's reader takes the recheck events


def test_a_program_ending_during_probing_ends_autopin_with_its_status(tmp_path, spinner):
    """The program ends 3 s after autopin pinned it to the first candidate (as the test sees its
    mask), well into that candidate's 8 s window of 1 s sub-windows, at any load."""
    log = tmp_path / "autopin.jsonl"
    stop = tmp_path / "stop"
    cpu = CPUS[0]
    autopin = subprocess.Popen(
        [
            str(PINLAB),
            "autopin",
            "-C",
            f"{cpu};{CPUS[-1]}",
            "-i",
            "0.1",
            "-W",
            "0.2",
            "-T",
            "8",
            "--windows",
            "8",
            "--log",
            str(log),
            "--",
            spinner,
            "--threads",
            "1",
            "--until-file",
            str(stop),
            "--seconds",
            "100",
            "--exit",
            "3",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        pinned = False
        while not pinned and time.monotonic() < deadline and autopin.poll() is None:
            time.sleep(0.05)
            try:
                pid = started_with(spinner, str(stop))
                pinned = pid is not None and all(os.sched_getaffinity(int(tid)) == {cpu} for tid in os.listdir(f"/proc/{pid}/task"))
            except (FileNotFoundError, ProcessLookupError):
                pinned = False
        assert pinned, "autopin never pinned the program to the first candidate"
        time.sleep(3)
        stop.touch()
        _, err = autopin.communicate(timeout=60)
    finally:
        stop.touch()
        if autopin.poll() is None:
            autopin.kill()
            autopin.wait()
    assert autopin.returncode == 3, err
    summary = of(events(log), "summary")[0]
    assert summary["exit_status"] == 3 and summary["ended_during_probing"]
    partial = of(events(log), "probe")
    assert partial and partial[0].get("partial") is True and partial[0]["windows"]


def test_a_program_shorter_than_the_initialisation_is_said_so_by_autopin_and_its_report(tmp_path, spinner):
    log = tmp_path / "autopin.jsonl"
    result = run_pinlab(
        "autopin", "-C", f"{CPUS[0]};{CPUS[-1]}", "--log", str(log), "--", spinner, "--threads", "1", "--seconds", "0.3", "--exit", "4"
    )
    assert result.returncode == 4, result.stderr
    assert "during the initialisation (-i 15 s): nothing was measured; give a shorter -i" in result.stderr, result.stderr
    kinds = [e["event"] for e in events(log)]
    assert kinds == ["start", "summary"]
    summary = of(events(log), "summary")[0]
    assert summary["ended_during_init"] is True and summary["ended_during_probing"] is False and summary["exit_status"] == 4
    report = run_pinlab("autopin-report", str(log))
    assert report.returncode == 0, report.stderr
    text = " ".join(report.stdout.split())
    assert "The program exited with status 4 after" in text and "during the initialisation (-i 15 s): nothing was measured" in text, text
    assert "Metric none: the run ended during the initialisation" in text


def test_output_and_stdin_pass_through_untouched(tmp_path):
    result = subprocess.run(
        [str(PINLAB), "autopin", "-C", f"{CPUS[0]}", "-T", "1", "-q", "--", "sh", "-c", "cat; echo err >&2; exit 5"],
        input="hello\nworld\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 5
    assert result.stdout == "hello\nworld\n"
    assert result.stderr.strip().endswith("err")


@needs_two
def test_stdout_metric_counts_the_programs_lines_and_passes_them_on(spinner, tmp_path):
    """spinner --ticks prints a line per chunk of work (flushed at once) and does 16 times the
    work per line on the slow CPU: 1/16 of the lines there at any load."""
    slow, fast = CPUS[-1], CPUS[0]
    log = tmp_path / "autopin.jsonl"
    out = tmp_path / "out.txt"
    watch, until = until_choice(tmp_path, log)
    # pinlab's output goes to a file, so that the program, not a slow reader of a pipe, sets the
    # pace of its lines.
    with watch, out.open("w") as sink:
        result = subprocess.run(
            [
                str(PINLAB),
                "autopin",
                "-C",
                f"{slow};{fast}",
                *SURE,
                "--metric",
                "stdout:^tick",
                "--log",
                str(log),
                "--",
                spinner,
                "--threads",
                "1",
                "--ticks",
                "1",
                "--slow-on",
                str(slow),
                *until,
            ],
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            timeout=150,
        )
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    assert of(log_events, "start")[0]["metric"] == "stdout:^tick"
    choice = of(log_events, "choice")[0]
    assert choice["cpus"] == [fast], result.stderr
    # Every line the program wrote reached pinlab's output unchanged and in order.
    lines = out.read_text().split("\n")
    assert lines[-1] == "" and lines[-2].startswith("spinner chunks=") and last_cpu(lines[-2]) == fast
    ticks = lines[:-2]
    assert len(ticks) > 100
    assert ticks == [f"tick {i}" for i in range(len(ticks))]


def test_the_python_api_refuses_what_the_command_refuses():
    from pinlab.autopin.options import AutopinOptions
    from pinlab.errors import UsageError

    for kwargs, message in (
        ({"metric": ""}, "--metric is empty"),
        ({"metric": "stdout:"}, "needs a regular expression"),
        ({"threshold": 20.0}, "--threshold applies to --monitor"),
        ({"patience": 2}, "--patience applies to --monitor"),
        ({"recheck": 5}, "--recheck applies to --monitor"),
        ({"recheck": -1, "monitor": True}, "--recheck must be a number of intervals from 0"),
    ):
        with pytest.raises(UsageError, match=message):
            AutopinOptions(candidates="0", **kwargs)
    kept = AutopinOptions(candidates="0", monitor=True)
    assert (kept.monitor_threshold, kept.monitor_patience, kept.monitor_recheck) == (10.0, 3, 10)


@needs_two
def test_stdout_metric_on_block_buffered_output_says_so_and_how_to_line_buffer(tmp_path):
    """A Python program printing a short line every 50 ms to a pipe fills its 8 KiB buffer in about
    80 s: nothing reaches autopin while it probes, and the verdict says why and what to do. The
    program runs until autopin has chosen, however long a loaded machine makes that."""
    log = tmp_path / "autopin.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    watch, _ = until_choice(tmp_path, log)
    stop = tmp_path / "stop"
    script = (
        f"import os, sys, time\nn = 0\nwhile not os.path.exists({str(stop)!r}) and n < 1500:\n    print('tick')\n    n += 1\n"
        "    time.sleep(0.05)\nprint('printed', n, file=sys.stderr)\n"
    )
    with watch:
        result = run_pinlab(
            "autopin", "-C", f"{CPUS[0]};{CPUS[1]}", *FAST, "--metric", "stdout:^tick", "--log", str(log), "--", sys.executable, "-c", script, env=env
        )
    assert result.returncode == 0, result.stderr
    verdict = of(events(log), "choice")[0]["verdict"]
    assert "no output has come from the program yet" in verdict and "stdbuf -oL" in verdict and "PYTHONUNBUFFERED=1" in verdict, verdict
    assert "child process" not in verdict
    assert "stdbuf -oL" in result.stderr
    printed = int(next(line for line in result.stderr.splitlines() if line.startswith("printed ")).split()[1])
    assert printed >= 10 and result.stdout == "tick\n" * printed  # all of it came, at the end, unchanged


@needs_two
def test_attach_chooses_and_leaves_the_program_running(spinner, tmp_path):
    """SIGTERM (as `timeout` sends it), once autopin has chosen, ends the session as Ctrl-C does:
    the program goes on where autopin put it, and ends when the test says so."""
    slow, fast = CPUS[-1], CPUS[0]
    heartbeat = tmp_path / "hb"
    env = dict(os.environ, PINLAB_HEARTBEAT=str(heartbeat))
    log = tmp_path / "autopin.jsonl"
    stop = tmp_path / "stop"
    program = subprocess.Popen(
        [spinner, "--threads", "1", "--slow-on", str(slow), "--until-file", str(stop), "--seconds", "100"], env=env, stdout=subprocess.PIPE, text=True
    )
    autopin = None
    try:
        autopin = subprocess.Popen(
            [str(PINLAB), "autopin", "--pid", str(program.pid), "-C", f"{slow};{fast}", *SURE, "--metric", "heartbeat", "--log", str(log)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and autopin.poll() is None and not (log.exists() and '"event": "choice"' in log.read_text()):
            time.sleep(0.05)
        autopin.send_signal(signal.SIGTERM)
        _, err = autopin.communicate(timeout=60)
        assert program.poll() is None  # still running: autopin never ends it
        mask = os.sched_getaffinity(program.pid)
        stop.touch()
        out, _ = program.communicate(timeout=60)
    finally:
        stop.touch()
        for process in (autopin, program):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert program.returncode == 0
    log_events = events(log)
    assert of(log_events, "choice")[0]["cpus"] == [fast], err
    assert mask == {fast}
    assert last_cpu(out) == fast
    assert of(log_events, "summary")[0]["interrupted"] is True
    assert autopin.returncode == 0, err


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` is ``ancestor`` or one of its descendants."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return False


def claimed(pid: int | None = None, timeout: float = 60, under: int | None = None) -> int:
    """Wait until an autopin holds its claim on ``pid`` (any program when None; with ``under``, a
    program started below that process, not one of another test running beside): the abstract
    socket it binds, as the kernel lists it; the PID of the program claimed."""
    import re

    pattern = re.compile(rf"@pinlab-autopin-({pid if pid is not None else r'[0-9]+'})-[0-9]+$")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in Path("/proc/net/unix").read_text().splitlines():
            found = pattern.search(line)
            if found and (under is None or _descends_from(int(found.group(1)), under)):
                return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no autopin claimed {pid if pid is not None else 'a program'} within {timeout} s")


def test_a_second_autopin_on_a_program_is_refused_and_a_killed_one_blocks_nothing(spinner, tmp_path):
    program = subprocess.Popen([spinner, "--threads", "2", "--seconds", "60"], stdout=subprocess.DEVNULL)
    first = third = None
    try:
        # -i 60: the first one holds the claim without touching any thread while the second tries.
        first = subprocess.Popen(
            [str(PINLAB), "autopin", "--pid", str(program.pid), "-C", f"{CPUS[0]},{CPUS[0]}", "-i", "60", "-q"], stderr=subprocess.PIPE, text=True
        )
        claimed(program.pid)
        before = {tid: os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{program.pid}/task")}
        second = run_pinlab("autopin", "--pid", str(program.pid), "-C", f"{CPUS[-1]},{CPUS[-1]}", "-i", "0.1", "-T", "1")
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip() == (
            f"pinlab: error: process {program.pid} is already being probed by another pinlab autopin "
            f"(pid {first.pid}): two would fight over its threads' CPUs and spoil each other's "
            "measurements; stop that one first"
        )
        assert {tid: os.sched_getaffinity(int(tid)) for tid in before} == before  # the refused one touched nothing
        first.kill()  # SIGKILL: no chance to release anything itself
        first.wait()
        third = subprocess.Popen(
            [str(PINLAB), "autopin", "--pid", str(program.pid), "-C", f"{CPUS[0]},{CPUS[0]}", "-i", "60", "-q"], stderr=subprocess.PIPE, text=True
        )
        claimed(program.pid)
        assert third.poll() is None  # accepted: it holds the claim now
        third.send_signal(signal.SIGINT)
        assert third.wait(timeout=30) == 0
    finally:
        for process in (first, third, program):
            if process is not None and process.poll() is None:
                process.kill()
            if process is not None:
                process.wait()


def test_a_program_autopin_started_cannot_be_probed_by_another(spinner):
    first = subprocess.Popen(
        # the program outlives any start of the second autopin on a busy machine: it ends at the SIGINT below
        [str(PINLAB), "autopin", "-C", f"{CPUS[0]}", "-i", "600", "-q", "--", spinner, "--threads", "1", "--seconds", "600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pid = claimed(under=first.pid)
        second = run_pinlab("autopin", "--pid", str(pid), "-C", f"{CPUS[-1]}", "-i", "0.1", "-T", "1")
        assert second.returncode == 2 and f"process {pid} is already being probed by another pinlab autopin (pid {first.pid})" in second.stderr, (
            second.stderr
        )
    finally:
        first.send_signal(signal.SIGINT)  # forwarded to the program, which ends
        first.wait(timeout=30)


@needs_two
def test_migrate_attached_moves_the_data_attached_to_each_re_pinned_worker(spinner, tmp_path):
    """On every node this machine has, the 3 MiB spinner attached to its main thread go to the node
    of each candidate it is moved to (here, one node: the move finds them there already), and the
    log says how much moved; the 5 MiB it did not attach are not looked at."""
    a, b = CPUS[0], CPUS[1]
    log = tmp_path / "autopin.jsonl"
    watch, until = until_choice(tmp_path, log)
    with watch:
        result = run_pinlab(
            "autopin",
            "-C",
            f"{a};{b}",
            *FAST,
            "--migrate-pages",
            "attached",
            "--log",
            str(log),
            "--",
            spinner,
            "--threads",
            "1",
            "--mem",
            "5",
            "--attached",
            "3",
            *until,
        )
    assert result.returncode == 0, result.stderr
    log_events = events(log)
    assert of(log_events, "start")[0]["params"]["migrate_pages"] == "attached"
    moves = of(log_events, "migrate_attached")
    assert moves, result.stderr  # at least the re-pin from the first candidate to the second
    pages = 3 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    for move in moves:
        assert move["regions"] == 1 and move["bytes"] == 3 * 2**20 and move["pages_on_node"] == pages and move["not_moved"] == 0, move
    assert "moved 1 attached regions (3.0 MiB) with their threads" in result.stderr


@needs_two
def test_migrate_accessed_moves_the_pages_each_re_pinned_worker_touched(tmp_path):
    """A program that attaches nothing: the page tracer runs alongside, and after the re-pin the
    4 MiB the worker keeps writing are found as its own and moved to its new node (here the one
    node: found there)."""
    a, b = CPUS[0], CPUS[1]
    program = str(mem_expect.build(str(PINLAB), tmp_path / "balance_check", mem_expect.SOURCE.with_name("balance_check.c")))
    log = tmp_path / "autopin.jsonl"
    result = run_pinlab(
        "autopin",
        "-C",
        f"{a};{b}",
        *FAST,
        "--metric",
        "task-clock",
        "--migrate-pages",
        "accessed",
        "--log",
        str(log),
        "--",
        program,
        "--no-attach",
        "3:4",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["ok"] is True
    moves = of(events(log), "migrate_accessed")
    assert moves, result.stderr
    pages = 4 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    first = moves[0]
    assert pages / 2 < first["pages"] <= pages + 64 and first["pages_on_node"] == first["pages"] and first["not_moved"] == 0, first
    assert f"moved the {first['pages']} pages the workers mostly accessed with them" in result.stderr


@pytest.fixture
def nearly_full(tmp_path):
    """A directory on a 64 KiB tmpfs with one page left free: a log outgrows it within its first events."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            size = 0
            try:
                while True:
                    size += os.write(fd, b"x" * 4096)
            except OSError:
                pass
            os.ftruncate(fd, max(0, size - 4096))
        finally:
            os.close(fd)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.parametrize("where", ["tmpfs", "/dev/full"])
def test_a_full_disk_stops_the_log_not_the_program(spinner, request, where):
    """The log fills the disk after its start event (tmpfs), or at once (/dev/full): autopin says so in
    one line, keeps probing without a log, and the program runs to its end and gives its status."""
    if where == "tmpfs":
        log = request.getfixturevalue("nearly_full") / "autopin.jsonl"
    else:
        log = Path("/dev/full")
    # The padding (ignored by spinner) makes the start event about 3.5 KiB of the one free page.
    result = run_pinlab(
        "autopin",
        "-C",
        f"{CPUS[0]}",
        "-i",
        "0.2",
        "-W",
        "0.1",
        "-T",
        "0.4",
        "--log",
        str(log),
        "--",
        spinner,
        "--threads",
        "1",
        "--seconds",
        "4",
        "--exit",
        "3",
        "--pad",
        "x" * 3000,
    )
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    told = [line for line in result.stderr.splitlines() if "cannot write the log" in line]
    assert len(told) == 1 and "No space left on device" in told[0] and "the program goes on" in told[0], result.stderr
    assert "chose" in result.stderr and "rate " in result.stderr  # probing went on without the log
    assert last_cpu(result.stdout) == CPUS[0]  # the program ran to its end
    if where == "tmpfs":
        first = log.read_text().split("\n")[0]
        assert json.loads(first)["event"] == "start"  # what was written before the disk filled is kept


@pytest.mark.parametrize(
    "mode, message",
    [
        ("attached", "was not: use --migrate-pages process"),
        ("accessed", "it works when autopin starts the program, not with --pid; use --migrate-pages process"),
    ],
)
def test_moving_a_running_programs_thread_data_with_pid_needs_what_only_a_start_gives(spinner, mode, message):
    program = subprocess.Popen([spinner, "--threads", "1", "--seconds", "100"], stdout=subprocess.DEVNULL)  # killed below
    try:
        result = run_pinlab("autopin", "--pid", str(program.pid), "-C", f"{CPUS[0]}", "--migrate-pages", mode, "-T", "1")
    finally:
        program.kill()
        program.wait()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@needs_two
def test_attach_with_restore_gives_the_masks_back_on_ctrl_c(spinner, tmp_path):
    """Ctrl-C while the first candidate (both threads on CPUS[0]) is probed, as the test sees the
    masks (its 5 s window leaves time to see them at any load): --restore gives the masks back."""
    heartbeat = tmp_path / "hb"
    env = dict(os.environ, PINLAB_HEARTBEAT=str(heartbeat))
    stop = tmp_path / "stop"
    program = subprocess.Popen([spinner, "--threads", "2", "--until-file", str(stop), "--seconds", "100"], env=env, stdout=subprocess.DEVNULL)
    autopin = None
    try:
        tids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(tids) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
            tids = {int(tid) for tid in os.listdir(f"/proc/{program.pid}/task")}
        before = {tid: os.sched_getaffinity(tid) for tid in tids}
        assert all(mask != {CPUS[0]} for mask in before.values())
        autopin = subprocess.Popen(
            [
                str(PINLAB),
                "autopin",
                "--pid",
                str(program.pid),
                "-C",
                f"{CPUS[0]},{CPUS[0]};{CPUS[1]},{CPUS[1]}",
                "-i",
                "0.1",
                "-T",
                "5",
                "--restore",
                "-q",
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while any(os.sched_getaffinity(tid) != {CPUS[0]} for tid in tids) and time.monotonic() < deadline and autopin.poll() is None:
            time.sleep(0.05)
        during = {tid: os.sched_getaffinity(tid) for tid in tids}
        autopin.send_signal(signal.SIGINT)
        _, err = autopin.communicate(timeout=30)
        after = {tid: os.sched_getaffinity(tid) for tid in tids}
        assert program.poll() is None
    finally:
        stop.touch()
        program.wait(timeout=30)
        if autopin is not None and autopin.poll() is None:
            autopin.kill()
            autopin.wait()
    assert autopin.returncode == 0, err
    assert all(mask == {CPUS[0]} for mask in during.values())
    assert after == before


@needs_two
def test_attach_interrupted_before_anything_was_measured_gives_the_masks_back(spinner, tmp_path):
    """Ctrl-C while the first candidate (both threads on one CPU) warms up: nothing tells it is
    better than where the threads were, so they get their own masks back, without --restore."""
    log = tmp_path / "autopin.jsonl"
    program = subprocess.Popen([spinner, "--threads", "2", "--seconds", "120"], stdout=subprocess.DEVNULL)
    autopin = None
    try:
        tids = set()
        deadline = time.monotonic() + 30
        while len(tids) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
            tids = {int(tid) for tid in os.listdir(f"/proc/{program.pid}/task")}
        before = {tid: os.sched_getaffinity(tid) for tid in tids}
        assert all(mask != {CPUS[0]} for mask in before.values())
        # -w 60: the first candidate's window cannot begin before the interrupt.
        autopin = subprocess.Popen(
            [
                str(PINLAB),
                "autopin",
                "--pid",
                str(program.pid),
                "-C",
                f"{CPUS[0]},{CPUS[0]};{CPUS[1]},{CPUS[1]}",
                "-i",
                "0",
                "-W",
                "60",
                "-T",
                "60",
                "--log",
                str(log),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while any(os.sched_getaffinity(tid) != {CPUS[0]} for tid in tids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(os.sched_getaffinity(tid) == {CPUS[0]} for tid in tids)  # on the candidate being probed
        autopin.send_signal(signal.SIGINT)
        _, err = autopin.communicate(timeout=30)
        after = {tid: os.sched_getaffinity(tid) for tid in tids}
        assert program.poll() is None
    finally:
        program.kill()
        program.wait()
        if autopin is not None and autopin.poll() is None:
            autopin.kill()
            autopin.wait()
    assert autopin.returncode == 0, err
    assert after == before
    assert "restored the masks of 2 threads (no candidate was measured yet)" in err, err
    summary = of(events(log), "summary")[0]
    assert summary["interrupted"] is True and summary["restored"] is True and summary["final"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["-C", "0,,1", "--", "true"], "candidate"),
        (["-C", "99999", "--", "true"], "99999"),
        (["-n", "3", "-C", "0;0,0", "--", "true"], "3 threads"),
        (["--metric", "no-such-metric", "--", "true"], "no-such-metric"),
        (["--pid", "999999999"], "999999999"),
        (["-T", "0", "--", "true"], "raise --interval"),
        (["--rounds", "zero", "--", "true"], "--rounds"),
        (["--threshold", "150", "--monitor", "--", "true"], "--threshold"),
        (["--pid", "1", "--", "true"], "not both"),
        (["--metric", "", "--", "true"], "--metric is empty: name a metric"),
        (["--metric", " ", "--", "true"], "--metric is empty: name a metric"),
        (["--metric", "stdout:", "--", "true"], "--metric stdout: needs a regular expression after 'stdout:'"),
        (["--threshold", "20", "--", "true"], "--threshold applies to --monitor"),
        (["--patience", "2", "--", "true"], "--patience applies to --monitor"),
        (["--recheck", "2", "--", "true"], "--recheck applies to --monitor"),
        (["--monitor", "--recheck", "-3", "--", "true"], "--recheck must be a number of intervals from 0 (never)"),
        (["--", "/nonexistent/program"], None),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    result = run_pinlab("autopin", *args)
    if message is None:
        assert result.returncode == 127 and "no such file" in result.stderr
        return
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_list_metrics_names_the_fallbacks():
    result = run_pinlab("autopin", "--list-metrics")
    assert result.returncode == 0
    names = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {"heartbeat", "task-clock", "instructions"} <= names


def test_kernel_threads_are_refused():
    result = run_pinlab("autopin", "--pid", "2", "-C", f"{CPUS[0]}")
    assert result.returncode == 2 and "kernel thread" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_probing_that_can_never_be_significant_is_refused():
    result = run_pinlab("autopin", "--windows", "2", "-C", f"{CPUS[0]};{CPUS[-1]}", "--", "true")
    assert result.returncode == 2 and "--windows" in result.stderr and "never" in result.stderr, result.stderr


def test_a_failure_inside_autopin_leaves_the_program_running_to_its_end(spinner, tmp_path):
    """Whatever goes wrong in the controller, the program runs on and ends with its own status."""
    from pinlab.autopin.candidates import Candidate
    from pinlab.autopin.controller import Autopin
    from pinlab.autopin.options import AutopinOptions
    from pinlab.launch import plan_spec
    from pinlab.launch.runner import run

    def broken_metric(pid):
        raise RuntimeError("the metric broke")

    log = tmp_path / "autopin.jsonl"
    lines: list[str] = []
    controller = Autopin(
        AutopinOptions(candidates=f"{CPUS[0]}", init=0.1, interval=0.5, log=str(log)),
        [Candidate("CPUs 0", (CPUS[0],))],
        mode="launch",
        metric_factory=broken_metric,
        say=lines.append,
    )
    spec = plan_spec([spinner, "--threads", "1", "--seconds", "1", "--exit", "4"], cpus=[CPUS[0]], sample_ms=None)
    spec.controller = controller
    record = run(spec)
    summary = controller.finish(exit_status=record.exit_status)
    assert record.exit_status == 4 and summary["exit_status"] == 4
    assert any("stopped probing: the metric broke" in line for line in lines)
    assert not any("initialisation" in line for line in lines)  # it was over: the metric broke after it
    assert record.wall_seconds >= 0.9  # it ran to its own end
    read = read_log(log)  # begins with what ran, though no metric was chosen
    failures = [e for e in read.events if isinstance(e, Failure)]
    assert read.start.argv is None and read.summary.exit_status == 4 and [f.error for f in failures] == ["RuntimeError"]


def test_progress_lines_that_cannot_be_written_do_not_stop_the_program():
    """stderr on a full disk: autopin's progress lines are lost, the probing and the program are not."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [str(PINLAB), "autopin", "-C", f"{CPUS[0]}", "-i", "0.1", "-W", "0.1", "-T", "0.3", "--", "sh", "-c", "sleep 1.5; echo done; exit 3"],
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            timeout=600,
        )
    assert result.returncode == 3 and result.stdout == "done\n"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_the_verdict_s_statistics_load_before_the_program_only_when_every_cpu_is_a_candidate_s(monkeypatch):
    """scipy's first import costs a second of CPU on a quiet machine and many on a busy one. Where
    every allowed CPU is some candidate's, it is paid before the program starts (beside it, it
    would slow the candidate being probed); with a spare CPU the program starts without waiting
    for it: here the import cannot finish until the program has started."""
    from pinlab.autopin import preloading, session
    from pinlab.autopin.options import AutopinOptions

    order: list[str] = []
    started = threading.Event()

    def preload():
        if spare:
            assert started.wait(10), "the program never started: the statistics were waited for"
        order.append("statistics")

    def launch(spec):
        order.append("program")
        started.set()
        raise RuntimeError("stopped here")

    monkeypatch.setattr(preloading, "preload", preload)
    monkeypatch.setattr(preloading, "already_loaded", lambda: False)  # as in pinlab's own process
    monkeypatch.setattr(session, "launch", launch)
    cpus = sorted(os.sched_getaffinity(0))
    every = ",".join(map(str, cpus))
    for spare, candidates in ((False, f"{every};{every}"), (True, f"{cpus[0]};{cpus[0]}")):
        if spare and len(cpus) < 2:
            continue
        order.clear()
        started.clear()
        with pytest.raises(RuntimeError, match="stopped here"):
            session.autopin_program(["true"], AutopinOptions(candidates=candidates), say=lambda text: None)
        deadline = time.monotonic() + 10
        while len(order) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert order == (["program", "statistics"] if spare else ["statistics", "program"]), (spare, order)


def test_preloading_the_statistics_loads_scipy_stats():
    """pinlab.stats alone leaves scipy unloaded (a cheap import); preload loads what the tests use."""
    script = "import sys; import pinlab.stats as s; assert 'scipy.stats' not in sys.modules; s.preload(); assert 'scipy.stats' in sys.modules"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


@needs_two
def test_the_verdicts_statistics_load_beside_the_program_on_a_cpu_no_candidate_uses(tmp_path):
    """numpy and scipy.stats take about a second of CPU to import: loaded before the program, they
    delayed its start by that much (+40% on 6 s runs of 16 CPUs). With a CPU that no candidate
    uses they load there while the program runs; where the candidates use every CPU, first."""
    k = (len(CPUS) + 1) // 2
    cases = {"beside": f"{CPUS[0]};{CPUS[0]}", "before": f"{','.join(map(str, CPUS[:k]))};{','.join(map(str, CPUS[-k:]))}"}
    for where, candidates in cases.items():
        log = tmp_path / f"{where}.jsonl"
        done = run_pinlab("autopin", "-q", "-C", candidates, "-T", "0.4", "--log", str(log), "--", "sleep", "1.5")
        assert done.returncode == 0, done.stderr
        statistics = read_log(str(log)).summary.statistics
        assert statistics["loaded"] == where, statistics
        if where == "beside":
            assert statistics["cpus"] == [c for c in CPUS if c != CPUS[0]], statistics
        else:  # loaded before the program started: finished by the time it ends
            assert statistics["cpus"] == [] and statistics["seconds"] > 0 and statistics["cpu_seconds"] > 0, statistics
        report = run_pinlab("autopin-report", str(log))
        assert f"The verdict's statistics (numpy, scipy.stats) loaded {where}" in report.stdout, report.stdout


LATE_BEATS = """
import os, sys, time
from pinlab.heartbeat import beat
end = time.monotonic() + 3.0
while time.monotonic() < end:  # an initialisation 15 times -i: busy, no beat yet, however late autopin wakes
    pass
end = time.monotonic() + 300  # a cap: the test ends it once autopin has chosen
while time.monotonic() < end and not os.path.exists(sys.argv[1]):
    for _ in range(2000):
        pass
    beat(1)
"""


def test_a_program_that_begins_beating_after_the_initialisation_is_measured_by_its_heartbeat(tmp_path):
    """No beat by the end of -i: task-clock, as autopin says; the first beat comes later (after a
    first choice on task-clock, or during that search), and from then on the heartbeat is the
    metric, the change logged and the search begun again."""
    log, stop = tmp_path / "autopin.jsonl", tmp_path / "stop"
    cpu = CPUS[0]

    def chose_on_the_heartbeat(log_events: list[dict]) -> bool:
        changed = next((i for i, e in enumerate(log_events) if e["event"] == "metric"), None)
        return changed is not None and any(e["event"] == "choice" for e in log_events[changed:])

    with LogWatch(log, [(chose_on_the_heartbeat, stop)]):
        done = run_pinlab(
            "autopin", "-C", f"{cpu};{cpu}", "-i", "0.2", "-T", "0.6", "--log", str(log), "--", sys.executable, "-c", LATE_BEATS, str(stop)
        )
    assert done.returncode == 0, done.stderr
    read = read_log(str(log))
    assert read.start.metric == "task-clock", read.start
    changes = read.metric_changes
    assert len(changes) == 1 and changes[0].metric == "heartbeat" and changes[0].previous == "task-clock", changes
    assert changes[0].t >= 0.2, changes  # the change comes once the program beats, after -i
    after = [p for p in read.probes if p.start >= changes[0].t]  # the search begun again: both candidates, by the heartbeat
    assert sorted(p.candidate for p in after) == [0, 1] and read.choices[-1].t >= max(p.end for p in after), read.events
    assert "the program began beating through PINLAB_HEARTBEAT after the initialisation" in done.stderr
    report = run_pinlab("autopin-report", str(log), "--html", str(tmp_path / "html"))
    assert "the metric changed from task-clock to heartbeat" in report.stdout and "rates in beats/s per thread" in report.stdout, report.stdout
    page = (tmp_path / "html" / "index.html").read_text()
    assert page.count('<span class="sub">CPU seconds/s per thread</span>') == 1 and page.count('<span class="sub">beats/s per thread</span>') == 1
