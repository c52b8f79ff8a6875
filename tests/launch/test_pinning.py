"""Every thread on its planned CPU from its first instruction: pthreads, libgomp, LLVM libomp,
helper threads, nested teams, overflow, programs the loader cannot preload, and the record.

Plans are built from the CPUs this process may use, so the tests hold on 2 CPUs and use more
where there are more (reversed orders make sure the plan, not the default, decides)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import pinlab
from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.native import native_path
from pinlab.words import plural
from tests.conftest import run_pinlab

ALLOWED = sorted(os.sched_getaffinity(0))
ALLOWED_LIST = format_cpulist(ALLOWED)
PLANS = {
    "in-order": ALLOWED,
    "reversed": ALLOWED[::-1],
    "first-only": ALLOWED[:1],
}


def probe_rows(stdout: str) -> list[dict]:
    rows = []
    for line in stdout.splitlines():
        if line.startswith("thread="):
            fields = dict(f.split("=", 1) for f in line.split())
            rows.append({k: (set(parse_cpulist(v)) if k == "mask" else v) for k, v in fields.items()})
    return rows


def threads_probe(*args: str, plan: list[int], extra: list[str] = (), expect: int = 0) -> list[dict]:
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, plan)), *extra, "--", str(native_path("pinlab-threads-probe")), *args)
    assert result.returncode == expect, result.stderr
    return probe_rows(result.stdout)


@pytest.mark.parametrize("plan", PLANS.values(), ids=PLANS.keys())
def test_pthreads_each_thread_on_its_plan_cpu_from_its_first_instruction(plan):
    n = max(3, len(plan) + 1)  # past the end of the plan too: wrap by default
    rows = threads_probe("--threads", str(n), plan=plan)
    assert len(rows) == n + 1
    for row in rows:
        slot = int(row["thread"])
        if slot == 0:
            # The main thread starts on all the plan's CPUs (runtimes size their pools from the
            # mask), and is narrowed to its own before its first thread exists.
            assert row["mask"] == set(plan) and int(row["cpu"]) in plan, row
            continue
        assert row["mask"] == {plan[slot % len(plan)]}, row
        assert int(row["cpu"]) == plan[slot % len(plan)], row


@pytest.mark.parametrize("probe", ["pinlab-probe", "pinlab-probe-llvm"], ids=["libgomp", "libomp"])
@pytest.mark.parametrize("plan", PLANS.values(), ids=PLANS.keys())
def test_openmp_threads_on_their_plan_cpus(probe, plan):
    try:
        exe = native_path(probe)
    except Exception:
        pytest.skip(f"{probe} was not built (LLVM OpenMP runtime missing)")
    threads = max(2, len(plan))
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, plan)), "-n", str(threads), "--oversubscribe", "--", str(exe), "40")
    assert result.returncode == 0, result.stderr
    rows = probe_rows(result.stdout)
    assert [int(r["thread"]) for r in rows] == list(range(threads))  # OMP_NUM_THREADS set from the plan
    for row in rows:
        cpu = plan[int(row["thread"]) % len(plan)]
        assert row["mask"] == {cpu} and int(row["cpu"]) == cpu, row
    assert "OMP: Warning" not in result.stderr


def test_strategy_plans_through_the_cli_agree_with_pinlab_place():
    for strategy in ("compact", "scatter", "random"):
        planned = [int(c) for c in run_pinlab("place", "-s", strategy, "-n", str(len(ALLOWED)), "--seed", "4").stdout.strip().split(",")]
        rows = threads_probe("--threads", str(len(ALLOWED) - 1), plan=planned)
        # the main thread starts on all the plan's CPUs (narrowed to the first as it creates a thread);
        # each worker on its own, in plan order (the smallest CPU of the main thread's mask was only
        # the plan's first where that is the smallest: not for random on 16 CPUs)
        assert rows[0]["mask"] == set(planned) and [r["mask"] for r in rows[1:]] == [{c} for c in planned[1:]], (strategy, planned, rows)


def test_skip_leaves_helpers_unpinned_without_shifting_workers():
    plan = ALLOWED[::-1]
    rows = threads_probe("--threads", "3", plan=plan, extra=["--skip", "1"])
    by_thread = {int(r["thread"]): r for r in rows}
    assert by_thread[1]["mask"] == set(ALLOWED)  # the helper gets the whole allowed set
    assert by_thread[2]["mask"] == {plan[1 % len(plan)]}  # the first worker still gets slot 1
    assert by_thread[3]["mask"] == {plan[2 % len(plan)]}


@pytest.fixture(scope="module")
def fake_mpi(tmp_path_factory):
    """A program that, like an MPI library, starts a progress thread from inside a libmpi*.so
    before creating its own workers; recognised by where the start routine lives."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("fakempi")
    (d / "mpi.c").write_text(
        textwrap.dedent("""
        #define _GNU_SOURCE
        #include <pthread.h>
        #include <sched.h>
        #include <stdio.h>
        #include <unistd.h>
        static void *progress(void *arg) { (void)arg; cpu_set_t s; sched_getaffinity(0, sizeof s, &s);
            printf("progress mask_count=%d\\n", CPU_COUNT(&s)); fflush(stdout); return NULL; }
        void start_progress(void) { pthread_t t; pthread_create(&t, NULL, progress, NULL); pthread_join(t, NULL); }
    """)
    )
    (d / "main.c").write_text(
        textwrap.dedent("""
        #define _GNU_SOURCE
        #include <pthread.h>
        #include <sched.h>
        #include <stdio.h>
        void start_progress(void);
        static void *work(void *arg) { cpu_set_t s; sched_getaffinity(0, sizeof s, &s);
            for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &s)) printf("worker %ld cpu %d count %d\\n", (long)arg, c, CPU_COUNT(&s));
            fflush(stdout); return NULL; }
        int main(void) { start_progress(); pthread_t t[2];
            for (long i = 0; i < 2; i++) { pthread_create(&t[i], NULL, work, (void *)(i + 1)); pthread_join(t[i], NULL); }
            return 0; }
    """)
    )
    subprocess.run([cc, "-shared", "-fPIC", "-O2", str(d / "mpi.c"), "-o", str(d / "libmpi-pinlabtest.so"), "-pthread"], check=True)
    subprocess.run([cc, "-O2", str(d / "main.c"), "-o", str(d / "app"), f"-L{d}", "-lmpi-pinlabtest", f"-Wl,-rpath,{d}", "-pthread"], check=True)
    return d / "app"


def test_helper_threads_of_mpi_like_libraries_do_not_shift_workers(fake_mpi, tmp_path):
    plan = ALLOWED[::-1]
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-c", ",".join(map(str, plan)), "--record", str(record), "--", str(fake_mpi))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"progress mask_count={len(ALLOWED)}"
    assert lines[1] == f"worker 1 cpu {plan[1 % len(plan)]} count 1"
    assert lines[2] == f"worker 2 cpu {plan[2 % len(plan)]} count 1"
    threads = json.loads(record.read_text())["threads"]
    roles = [(t["index"], t["role"], t["slot"]) for t in threads]
    assert roles == [(0, "main", 0), (1, "helper", None), (2, "worker", 1), (3, "worker", 2)]
    assert threads[1]["start_library"].endswith("libmpi-pinlabtest.so")


def test_nested_threads_stay_in_their_creators_domain(tmp_path):
    record = tmp_path / "r.json"
    plan = ALLOWED[::-1]
    result = run_pinlab(
        "run",
        "-q",
        "-c",
        ",".join(map(str, plan)),
        "--nested",
        "inherit",
        "--record",
        str(record),
        "--",
        str(native_path("pinlab-threads-probe")),
        "--threads",
        "2",
        "--nested",
        "2",
    )
    assert result.returncode == 0, result.stderr
    from pinlab.measure.linux import numa_nodes

    node_of = {cpu: node for node, cpus in numa_nodes().items() for cpu in cpus}
    data = json.loads(record.read_text())
    by_tid = {t["tid"]: t for t in data["threads"]}
    nested = [t for t in data["threads"] if t["role"] == "nested"]
    assert len(nested) == 4
    for thread in nested:
        creator = by_tid[thread["creator_tid"]]
        assert creator["role"] == "worker"
        assert node_of[thread["cpu_at_start"]] == node_of[creator["planned_cpu"]]
        assert thread["mask_at_start"] == str(thread["planned_cpu"])
    assert data["options"]["nested"] is True


def test_the_main_threads_inner_teams_are_nested_once_the_outer_team_has_the_plan(tmp_path):
    """Nested OpenMP (twisted-STREAM, two teams of two): libgomp creates each inner team anew at
    every parallel region, the main thread's as well as outer thread 1's. The plan's two slots are
    the outer team; every later thread, whoever creates it, stays in its creator's domain and takes
    no slot, so the main thread's inner threads do not wrap round onto outer thread 1's CPU."""
    record = tmp_path / "r.json"
    plan = ALLOWED[:2] if len(ALLOWED) > 1 else ALLOWED * 2
    result = run_pinlab(
        "run",
        "-q",
        "-c",
        ",".join(map(str, plan)),
        "--oversubscribe",
        "--nested",
        "inherit",
        "--record",
        str(record),
        "--",
        str(native_path("pinlab-twisted-stream")),
        "--teams",
        "2",
        "--threads-per-team",
        "2",
        "--size",
        "256K",
        "--ntimes",
        "2",
        "--policy",
        "first-touch",
    )
    assert result.returncode == 0, result.stderr
    from pinlab.measure.linux import numa_nodes

    node_of = {cpu: node for node, cpus in numa_nodes().items() for cpu in cpus}
    threads = json.loads(record.read_text())["threads"]
    main = next(t for t in threads if t["role"] == "main")
    assert [t["slot"] for t in threads if t["slot"] is not None] == [0, 1], threads
    from_main = [t for t in threads if t["creator_tid"] == main["tid"] and t["slot"] is None]
    assert from_main, "the main thread created its inner team's threads"
    for thread in (t for t in threads if t["role"] not in ("main", "worker")):
        assert thread["role"] == "nested", thread
        creator = next(t for t in threads if t["tid"] == thread["creator_tid"])
        assert node_of[thread["planned_cpu"]] == node_of[creator["planned_cpu"]], (thread, creator)


def test_overflow_modes():
    plan = ALLOWED[:1]
    rows = threads_probe("--threads", "2", plan=plan, extra=["--overflow", "unpinned"])
    assert rows[0]["mask"] == {plan[0]}
    assert all(r["mask"] == set(ALLOWED) for r in rows[1:])
    result = run_pinlab("run", "-q", "-c", str(plan[0]), "--overflow", "error", "--", str(native_path("pinlab-threads-probe")), "--threads", "2")
    assert result.returncode != 0
    assert "is past the end of the plan (1 CPUs) and --overflow error is set" in result.stderr


def test_the_record_says_what_happened(tmp_path):
    record = tmp_path / "run.json"
    plan = ALLOWED[::-1]
    result = run_pinlab(
        "run",
        "-c",
        ",".join(map(str, plan)),
        "--record",
        str(record),
        "--sample-ms",
        "20",
        "--",
        str(native_path("pinlab-threads-probe")),
        "--threads",
        str(len(plan)),
        "--spin-ms",
        "150",
    )
    assert result.returncode == 0
    data = json.loads(record.read_text())
    assert data["pinlab_run"] == 1 and data["exit_status"] == 0 and data["signal"] is None
    assert data["argv"][0].endswith("pinlab-threads-probe")
    assert data["plan"]["cpus"] == plan and data["plan"]["strategy"] == "explicit"
    for key in ("wall_seconds", "user_seconds", "system_seconds"):
        assert isinstance(data[key], float) and data[key] >= 0
    assert data["wall_seconds"] >= 0.15 and data["max_rss_kib"] > 0
    assert data["voluntary_context_switches"] >= 0 and data["involuntary_context_switches"] >= 0
    threads = data["threads"]
    assert [t["index"] for t in threads] == list(range(len(plan) + 1))
    assert threads[0]["role"] == "main" and all(t["role"] == "worker" for t in threads[1:])
    main = threads[0]
    # The main thread starts on the plan's CPUs and is narrowed to its own as it creates its first thread.
    assert main["planned_start_mask"] == (ALLOWED_LIST if len(plan) > 1 else None)
    assert main["mask_at_start"] == ALLOWED_LIST and main["narrowed_to"] == (plan[0] if len(plan) > 1 else None)
    for t in threads:
        assert t["pinned_as_planned"] is True and t["off_plan"] is None and t["mask_changes"] == []
        if t is not main:
            assert t["mask_at_start"] == str(t["planned_cpu"]) and t["planned_start_mask"] is None
        assert len(t["sample_times"]) == len(t["sample_cpus"]) >= 2  # sampled over 150 ms every 20 ms
        # A sample taken while glibc is still creating a thread (before it runs any of the program's
        # code, before its affinity is applied) shows the creator's CPU: only a worker's first sample
        # may, and only one taken before the thread's first instruction, which is not a migration.
        # The main thread may be on any plan CPU until it is narrowed.
        creator = main["planned_cpu"]
        settled = t["narrowed_at"] if t is main and t["narrowed_at"] is not None else t["start_time"]
        after = [cpu for when, cpu in zip(t["sample_times"], t["sample_cpus"]) if when >= settled]
        before = [cpu for when, cpu in zip(t["sample_times"], t["sample_cpus"]) if when < settled]
        assert set(after) <= {t["planned_cpu"]} and set(before) <= (set(plan) if t is main else {t["planned_cpu"], creator})
        assert 0 < t["start_time"] < data["wall_seconds"]
        assert t["migrations"] == 0
        if t["kernel_migrations"] is not None and t is not main:  # created pinned: the one move from the creator's CPU, if they differ
            assert t["kernel_migrations"] == (0 if t["planned_cpu"] == creator else 1), t
    assert data["migrations"] == 0
    pages = data["pages_per_node"]
    assert pages and all(int(node) >= 0 and count > 0 for node, count in pages.items())
    # Without --record, one summary line; with --quiet, nothing.
    cpus = f"CPU {ALLOWED_LIST}" if len(set(plan) | {threads[0]["planned_cpu"]}) == 1 else f"CPUs {ALLOWED_LIST}"
    assert f"{plural(len(plan) + 1, 'thread')} pinned on {cpus}; {plural(data['migrations'], 'migration')} seen" in result.stderr


def test_the_summary_counts_threads_and_processes_apart_in_words():
    """A shell that starts other programs: each process's main thread is pinned; the summary says how many processes."""
    one = run_pinlab("run", "-c", str(ALLOWED[0]), "--", "true")
    assert f"; 1 thread pinned on CPU {ALLOWED[0]};" in one.stderr
    shell = run_pinlab("run", "-c", str(ALLOWED[0]), "--", "sh", "-c", "/bin/true; /bin/true; exit 0")
    assert f"; 3 threads (in 3 processes) pinned on CPU {ALLOWED[0]};" in shell.stderr


def test_unpinned_threads_are_sampled_too(tmp_path):
    record = tmp_path / "r.json"
    run_pinlab(
        "run",
        "-q",
        "--record",
        str(record),
        "--sample-ms",
        "10",
        "--",
        str(native_path("pinlab-threads-probe")),
        "--threads",
        "2",
        "--spin-ms",
        "100",
    )
    data = json.loads(record.read_text())
    assert data["plan"] is None
    assert len(data["threads"]) >= 1 and all(t["role"] == "unknown" for t in data["threads"])
    assert all(set(t["sample_cpus"]) <= set(ALLOWED) for t in data["threads"])


@pytest.fixture(scope="module")
def static_program(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    d = tmp_path_factory.mktemp("static")
    (d / "s.c").write_text(
        textwrap.dedent("""
        #define _GNU_SOURCE
        #include <pthread.h>
        #include <sched.h>
        #include <stdio.h>
        static void *work(void *a) { (void)a; cpu_set_t s; sched_getaffinity(0, sizeof s, &s); printf("thread count=%d\\n", CPU_COUNT(&s)); return NULL; }
        int main(void) { pthread_t t; pthread_create(&t, NULL, work, NULL); pthread_join(t, NULL); work(NULL); return 0; }
    """)
    )
    built = subprocess.run([cc, "-static", "-O2", str(d / "s.c"), "-o", str(d / "static"), "-pthread"], capture_output=True)
    if built.returncode != 0:
        pytest.skip("no static C library to build a static test program")
    return d / "static"


def test_statically_linked_program_is_detected_and_restricted_to_the_plan(static_program):
    result = run_pinlab("run", "-c", ALLOWED_LIST, "--", str(static_program))
    assert result.returncode == 0
    assert "statically linked" in result.stderr and "cannot be pinned one by one" in result.stderr
    assert result.stdout.splitlines() == [f"thread count={len(ALLOWED)}"] * 2


def test_setuid_program_is_detected(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to make a setuid program owned by another user")
    exe = tmp_path / "probe-setuid"
    shutil.copy(native_path("pinlab-threads-probe"), exe)
    os.chown(exe, 65534, 65534)
    os.chmod(tmp_path, 0o755)
    exe.chmod(0o4755)
    result = run_pinlab("run", "-c", str(ALLOWED[-1]), "--", str(exe), "--threads", "1")
    assert "setuid/setgid (the loader ignores LD_PRELOAD)" in result.stderr
    assert result.returncode == 0
    assert all(r["mask"] == {ALLOWED[-1]} for r in probe_rows(result.stdout))


def test_preload_library_with_a_malformed_environment_warns_once_and_runs_unpinned():
    env = dict(os.environ, LD_PRELOAD=str(native_path("libpinlab-preload.so")), PINLAB_CPUS="zero,one")
    result = subprocess.run([str(native_path("pinlab-threads-probe")), "--threads", "2"], capture_output=True, text=True, env=env)
    assert result.returncode == 0
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("pinlab: warning:") and "running unpinned" in result.stderr
    assert all(r["mask"] == set(ALLOWED) for r in probe_rows(result.stdout))


def test_python_api_returns_the_record(tmp_path):
    out = tmp_path / "out.txt"
    record = pinlab.run(["sh", "-c", f"{native_path('pinlab-threads-probe')} --threads 1 > {out}"], ALLOWED[::-1], sample_ms=10)
    assert record.exit_status == 0 and record.plan["cpus"] == ALLOWED[::-1]
    probe = probe_rows(out.read_text())
    plan = ALLOWED[::-1]
    # sh and the probe it starts are both preloaded: sh, the first process, holds slot 0 on the
    # plan's CPUs (it creates no thread, so it is never narrowed); the probe, a process the program
    # started, takes the next slot, and its worker the one after (a wrapper shifts the plan by one).
    assert probe[0]["mask"] == {plan[1 % len(plan)]} and probe[1]["mask"] == {plan[2 % len(plan)]}
    seen = [(t.pid == record.pid, t.index, t.role, t.slot, t.planned_cpu) for t in record.threads]
    assert seen == [(True, 0, "main", 0, plan[0]), (False, 0, "main", 1, plan[1 % len(plan)]), (False, 1, "worker", 2, plan[2 % len(plan)])]
    compact = pinlab.run(["true"], "compact", threads=1)
    assert compact.plan["strategy"] == "compact" and compact.exit_status == 0
    with pytest.raises(pinlab.launch.ProgramNotFound):
        pinlab.run(["no-such-program-xyz"])
    with pytest.raises(UsageError, match=r"pinlab.run: unknown option quiet; the options are those of plan_spec: .*sample_ms"):
        pinlab.run(["true"], "0", quiet=True)  # a command-line option the Python API has no use for: refused before anything runs


def test_launch_path_does_not_import_heavy_modules():
    code = "import sys; from pinlab.cli import main; main(['run', '-q', '-c', '0', '--', 'true']); print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'pandas', 'matplotlib', 'numpy', 'rich')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_event_ring_reader_skips_what_a_killed_process_left_unfilled(tmp_path):
    from pinlab.launch.runner import RING_HEADER, RING_MAGIC, _event_lines

    lines = b"thread pid=1 index=0\n" + b"\0" * 17 + b"thread pid=1 index=1\n"
    ring = tmp_path / "ring.bin"
    ring.write_bytes(
        RING_MAGIC
        + (1 << 20).to_bytes(8, "little")
        + len(lines).to_bytes(8, "little")
        + (2).to_bytes(8, "little")
        + bytes(RING_HEADER - 32)
        + lines
        + b"garbage past used"
    )
    warnings: list[str] = []
    assert _event_lines(str(ring), warnings) == ["thread pid=1 index=0", "thread pid=1 index=1"]
    assert warnings == ["2 thread events did not fit in the event file and are missing from the record"]
    plain = tmp_path / "plain.txt"
    plain.write_text("thread pid=1 index=0\nexit pid=1 threads=0\n")
    assert _event_lines(str(plain), []) == ["thread pid=1 index=0", "exit pid=1 threads=0"]


def test_clean_env_keeps_the_pinning():
    rows = threads_probe("--threads", str(len(ALLOWED)), plan=ALLOWED[::-1], extra=["--clean-env"])
    assert rows[0]["mask"] == set(ALLOWED)  # the main thread, before its first create: the plan's CPUs
    assert [r["mask"] for r in rows[1:]] == [{ALLOWED[::-1][i % len(ALLOWED)]} for i in range(1, len(rows))]


def test_threads_with_the_smallest_stacks_are_pinned_without_crashing():
    for args in (["--stack-kb", "16"], ["--stack-kb", "64", "--user-stack"], ["--detached"]):
        rows = threads_probe("--threads", "2", *args, plan=ALLOWED[::-1])
        assert all(r["mask"] == {ALLOWED[::-1][int(r["thread"]) % len(ALLOWED)]} for r in rows if r["thread"] != "0"), args


def test_nested_threads_never_leave_the_allowed_cpus(tmp_path):
    if len(ALLOWED) < 2:
        pytest.skip("needs two CPUs")
    record = tmp_path / "r.json"
    first = str(ALLOWED[0])
    result = run_pinlab(
        "run",
        "-q",
        "-c",
        first,
        "--nested",
        "inherit",
        "--record",
        str(record),
        "--",
        str(native_path("pinlab-threads-probe")),
        "--threads",
        "1",
        "--nested",
        "2",
        prefix=["taskset", "-c", first],
    )
    assert result.returncode == 0, result.stderr
    nested = [t for t in json.loads(record.read_text())["threads"] if t["role"] == "nested"]
    assert len(nested) == 2 and all(t["mask_at_start"] == first for t in nested)


def test_argv0_reaches_the_program_as_given():
    assert run_pinlab("run", "-q", "-c", str(ALLOWED[0]), "--", "cat", "/proc/self/cmdline").stdout == "cat\0/proc/self/cmdline\0"


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no writable /dev/shm here")
def test_the_event_ring_lives_in_shared_memory_by_default():
    env = {k: v for k, v in os.environ.items() if k != "PINLAB_EVENTS_DIR"}
    listing = run_pinlab("run", "-q", "-c", str(ALLOWED[0]), "--", "sh", "-c", "ls /dev/shm", env=env).stdout.split()
    assert any(name.startswith("pinlab-events-") for name in listing), listing


def test_no_event_file_is_left_behind_by_a_program_that_outlives_pinlab(tmp_path):
    env = dict(os.environ, PINLAB_EVENTS_DIR=str(tmp_path))
    run_pinlab("run", "-q", "-c", str(ALLOWED[0]), "--", "sh", "-c", "(sleep 0.5; /bin/true) &", env=env)
    import time

    time.sleep(1.5)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, env_extra, message",
    [
        (["run", "-c", "0", "--", "true"], {"PINLAB_EVENTS_DIR": "/no/such/dir"}, "not a writable directory"),
        (["run", "-c", "0,0", "--", "true"], {}, "CPU 0 is listed twice"),
        (["run", "--sample-ms", "nan", "--", "true"], {}, "--sample-ms must be"),
        (["run", "--record", "/proc/x.json", "--", "true"], {}, "cannot write the record"),
        (["place", "-c", "\u00b2"], {}, "unknown domain"),
        (["place", "-c", "S0:\u00b2"], {}, "malformed"),
        (["place", "-c", "0-99999999999"], {}, "larger than any machine"),
        (["corun", "cpu", "--duration", "-1"], {}, "--duration must be"),
    ],
)
def test_more_bad_input_is_one_line(args, env_extra, message):
    result = run_pinlab(*args, env=dict(os.environ, **env_extra))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
