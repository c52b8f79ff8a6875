"""pinlab run as a transparent wrapper: exit statuses, signals, standard streams, the controlled
environment and memory policies, checked on real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pinlab.cpuset import format_cpulist
from pinlab.measure.linux import numa_nodes
from tests.conftest import PINLAB, run_pinlab

PY = sys.executable


def test_exit_status_is_the_programs():
    assert run_pinlab("run", "-q", "--", "sh", "-c", "exit 7").returncode == 7
    assert run_pinlab("run", "-q", "--", "true").returncode == 0


def test_death_by_signal_is_128_plus_n_and_recorded(tmp_path):
    record = tmp_path / "r.json"
    result = run_pinlab("run", "--record", str(record), "--", "sh", "-c", "kill -KILL $$")
    assert result.returncode == 128 + signal.SIGKILL
    data = json.loads(record.read_text())
    assert data["signal"] == signal.SIGKILL and data["exit_status"] == 137


@pytest.mark.parametrize(
    "argv, status, message",
    [
        (["no-such-program-xyz"], 127, "no-such-program-xyz: command not found"),
        (["./no/such/path"], 127, "no such file"),
        (["/etc/passwd"], 126, "permission denied"),
        (["/tmp"], 126, "permission denied"),
    ],
)
def test_program_not_found_127_not_executable_126(argv, status, message):
    result = run_pinlab("run", "--", *argv)
    assert result.returncode == status
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_a_file_with_a_bad_format_is_126(tmp_path):
    script = tmp_path / "garbage"
    script.write_bytes(b"\x00\x01\x02 not a program")
    script.chmod(0o755)
    result = run_pinlab("run", "--", str(script))
    assert result.returncode == 126 and "cannot execute" in result.stderr


def test_standard_streams_pass_through_untouched():
    data = bytes(range(256)) * 64
    proc = subprocess.run([str(PINLAB), "run", "-q", "--", "cat"], input=data, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == data and proc.stderr == b""
    err = run_pinlab("run", "-q", "--", "sh", "-c", "echo to-stderr >&2")
    assert err.stderr == "to-stderr\n"


def test_no_shell_between_pinlab_and_the_program():
    # Arguments arrive exactly as given: no word splitting, no globbing, no variable expansion.
    argv = ["a b", "*", "$HOME", "'quoted'", ""]
    result = run_pinlab("run", "-q", "--", PY, "-c", "import json,sys; print(json.dumps(sys.argv[1:]))", *argv)
    assert json.loads(result.stdout) == argv


HANDLER = """
import signal, sys, time
def handler(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
    sys.exit(0)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, handler)
print("ready", flush=True)
for _ in range(600):
    time.sleep(0.1)
"""
# Short sleeps, not one long one: Python runs a handler between bytecodes, so a signal that lands
# after the last check and before the sleep's system call would wait for the whole sleep.


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2])
def test_signals_sent_to_pinlab_reach_the_program(sig):
    proc = subprocess.Popen([str(PINLAB), "run", "-q", "--", PY, "-c", HANDLER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert out == f"got {sig.name}\n"
    assert proc.returncode == 0


def test_sigterm_to_pinlab_ends_the_program_and_pinlab_with_143():
    proc = subprocess.Popen([str(PINLAB), "run", "-q", "--", "sleep", "30"])
    # pinlab blocks the signals it waits for before it starts anything: once the program's process
    # exists, SIGTERM is pinlab's to handle (a fixed wait could end, on a busy machine, while
    # Python is still importing, and the signal's default action would end it instead)
    assert _wait_until(lambda: len(_descendants(proc.pid)) >= 1, timeout=600)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM


def test_no_aslr_sets_the_personality():
    out = run_pinlab("run", "-q", "--no-aslr", "--", "cat", "/proc/self/personality").stdout
    assert int(out, 16) & 0x0040000
    out = run_pinlab("run", "-q", "--", "cat", "/proc/self/personality").stdout
    assert not int(out, 16) & 0x0040000


def test_no_aslr_gives_the_same_stack_address_every_run():
    def stack_start():
        maps = run_pinlab("run", "-q", "--no-aslr", "--clean-env", "--", "cat", "/proc/self/maps").stdout
        return next(line.split()[0] for line in maps.splitlines() if line.endswith("[stack]"))

    assert stack_start() == stack_start()


def test_clean_env_keeps_only_what_is_needed_at_a_constant_size():
    env = dict(os.environ, SOME_NOISE="x" * 100, LANG="C.UTF-8")
    script = "import os,json; print(json.dumps(dict(os.environ)))"
    first = json.loads(run_pinlab("run", "-q", "--clean-env", "--", PY, "-c", script, env=env).stdout)
    env["SOME_NOISE"] = "y" * 900
    env["MORE_NOISE"] = "z"
    second = json.loads(run_pinlab("run", "-q", "--clean-env", "--", PY, "-c", script, env=env).stdout)
    assert "SOME_NOISE" not in first and "MORE_NOISE" not in second
    assert first["PATH"] == os.environ["PATH"] and first["LANG"] == "C.UTF-8"

    def size(e):
        return sum(len(k.encode()) + len(v.encode()) + 2 for k, v in e.items())

    assert size(first) == size(second) == 4096


def test_thp_never_disables_huge_pages_for_the_program():
    status = run_pinlab("run", "-q", "--thp", "never", "--", "cat", "/proc/self/status").stdout
    line = next((x for x in status.splitlines() if x.startswith("THP_enabled:")), None)
    if line is None:
        pytest.skip("this kernel does not show THP_enabled in /proc/PID/status")
    assert line.split()[1] == "0"


def policy_of_heap(mem: str) -> str:
    """The policy the kernel reports for the program's heap in numa_maps."""
    script = "b = bytearray(64 << 20); print(open('/proc/self/numa_maps').read())"
    out = run_pinlab("run", "-q", "--mem", mem, "--", PY, "-c", script)
    assert out.returncode == 0, out.stderr
    heap = [x for x in out.stdout.splitlines() if "heap" in x or "anon=" in x]
    return heap[0].split()[1]


def test_memory_policies_are_applied_before_the_program_starts():
    nodes = sorted(n for n, cpus in numa_nodes().items())
    first = nodes[0]
    assert policy_of_heap(f"bind:{first}") == f"bind:{first}"
    assert policy_of_heap("interleave:all") == f"interleave:{format_cpulist(nodes)}"  # numa_maps writes node ranges
    assert policy_of_heap(f"preferred:{first}") == f"prefer:{first}"
    assert policy_of_heap("local") == "local"
    assert policy_of_heap("first-touch") == "default"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mem", "bind:99"], "NUMA node 99 does not exist"),
        (["--mem", "spread"], "unknown memory policy 'spread'"),
        (["--mem", "bind"], "memory policy bind needs nodes"),
        (["--mem", "preferred:0,0"], "exactly one node"),
        (["--mem", "local:0"], "takes no nodes"),
        (["--mem", "follow"], "needs a placement"),
        (["--mem", "bind:0;interleave:all"], "--mem takes one memory policy for the whole program, not a list (got 'bind:0;interleave:all')"),
        (["--mem", "bind:0-1x:2"], "malformed node list of --mem bind '0-1x:2': expected numbers and ranges such as 0,2,4-7"),
        (["-c", "0-99999"], "does not exist on this machine"),
        (["-c", "0,x"], "malformed CPU list"),
        (["-s", "compact"], "needs a thread count"),
        (["-s", "compact", "-c", "0"], "give one placement"),
        (["--plan", "/no/such/plan.json"], "cannot read plan file"),
        (["--skip", "0"], "--skip counts created threads from 1"),
        (["--nested", "sideways", "-c", "0"], "unknown --nested"),
        (["--sample-ms", "0"], "--sample-ms must be a positive number"),
        (["--record", "/no/such/dir/r.json"], "its directory does not exist"),
        ([], "no program given"),
    ],
)
def test_bad_run_options_are_one_line_and_exit_2(args, message):
    result = run_pinlab("run", *args, *(["--", "true"] if args else []))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "is not valid JSON"),
        ('{"hello": 1}', "is not a pinlab placement"),
        ('{"pinlab_placement": 1, "threads": 2, "cpus": []}', "must be a non-empty list"),
        ('{"pinlab_placement": 1, "threads": 0, "cpus": [0]}', "'threads' must be a positive integer"),
    ],
)
def test_invalid_plan_files(tmp_path, content, message):
    plan = tmp_path / "plan.json"
    plan.write_text(content)
    result = run_pinlab("run", "--plan", str(plan), "--", "true")
    assert result.returncode == 2 and message in result.stderr


def own_peak_kib() -> int:
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))


def test_max_rss_is_the_programs_own_not_pinlabs():
    """ru_maxrss keeps the largest address space a process ever had, the one before exec included:
    spawned straight from pinlab, a program would report pinlab's size. It goes through pinlab-exec."""
    import pinlab

    small = pinlab.run(["true"], sample_ms=None)
    assert 0 < small.max_rss_kib < min(16 << 10, own_peak_kib() // 4), (small.max_rss_kib, own_peak_kib())
    big = pinlab.run([PY, "-c", "b = bytearray(96 << 20)"], sample_ms=None)
    assert (96 << 10) <= big.max_rss_kib <= (96 << 10) + (64 << 10), big.max_rss_kib


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _wait_until(predicate, timeout: float = 120.0) -> bool:
    """Whether ``predicate`` came true within ``timeout`` seconds (long: pinlab's start takes
    seconds of CPU, many times that on a busy machine; a true predicate returns at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# A program that starts others: a background child that its shell leaves behind, and a foreground one.
TREE = ["sh", "-c", "sleep 300 & sleep 301; exit 0"]


@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
def test_a_kill_9_of_pinlab_run_leaves_no_process_of_the_program(pinned):
    """pinlab-exec's PR_SET_PDEATHSIG and subreaper end the program and all it started, even a child it orphaned."""
    placement = ["-c", str(sorted(os.sched_getaffinity(0))[0])] if pinned else []
    proc = subprocess.Popen([str(PINLAB), "run", "-q", *placement, "--", *TREE])
    # pinlab-exec, sh and the two sleeps
    assert _wait_until(lambda: len(_descendants(proc.pid)) >= 4), _descendants(proc.pid)
    below = _descendants(proc.pid)
    proc.kill()
    proc.wait(timeout=10)
    assert _wait_until(lambda: not any(_alive(p) for p in below), timeout=60), [p for p in below if _alive(p)]


def test_a_kill_9_of_a_study_leaves_no_process_of_the_program(tmp_path):
    proc = subprocess.Popen(
        [
            str(PINLAB),
            "study",
            "--db",
            str(tmp_path / "s.db"),
            "--name",
            "k",
            "-s",
            "none",
            "-n",
            "1",
            "--runs",
            "1",
            "--warmup",
            "0",
            "-q",
            "--",
            *TREE,
        ]
    )
    assert _wait_until(lambda: len(_descendants(proc.pid)) >= 4), _descendants(proc.pid)
    below = _descendants(proc.pid)
    proc.kill()
    proc.wait(timeout=10)
    assert _wait_until(lambda: not any(_alive(p) for p in below), timeout=60), [p for p in below if _alive(p)]


def test_the_program_ends_with_pinlab_exec_if_that_is_killed_alone():
    """Should pinlab-exec itself die, the program's own PR_SET_PDEATHSIG ends it (and pinlab reports the kill)."""
    proc = subprocess.Popen([str(PINLAB), "run", "-q", "--", "sleep", "300"])
    assert _wait_until(lambda: len(_descendants(proc.pid)) >= 2)
    helper, program = _descendants(proc.pid)[:2]
    os.kill(helper, signal.SIGKILL)
    assert proc.wait(timeout=20) == 128 + signal.SIGKILL
    assert _wait_until(lambda: not _alive(program), timeout=10)
