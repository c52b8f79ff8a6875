"""pinlab trace --method exact and pinlab cc: real programs built instrumented, traced and checked.

The pairs workload (threads share one array per group of G, nothing across groups) is the ground
truth: its graph must show exactly the planted groups. Every traced program must print and end as
it does untraced. Thread counts go beyond the CPUs when needed (the tracer leaves extra threads
unpinned), so the tests hold on any machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from pinlab.errors import UsageError
from pinlab.graph.model import load_graph
from pinlab.native import native_path
from pinlab.trace import check_output, check_request, choose_method
from pinlab.trace.common import TraceRequest
from pinlab.trace.elf import needed_libraries
from pinlab.trace.exact import instrumented, read_counts
from tests.conftest import PINLAB, run_pinlab

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "native" / "workloads"
INCLUDE = REPO / "native" / "include"
COMMON = REPO / "native" / "common"  # the CPU-list reader the workloads share with the native libraries
CPUS = len(os.sched_getaffinity(0))


def build(tmp: Path, sources: list[Path], name: str, *extra: str) -> Path:
    out = tmp / name
    done = run_pinlab(
        "cc", "--", "gcc", "-O2", "-fopenmp", f"-I{WORKLOADS}", f"-I{INCLUDE}", f"-I{COMMON}", *map(str, sources), "-o", str(out), *extra, "-lm"
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("pairs"), [WORKLOADS / "pairs.c", WORKLOADS / "common.c", COMMON / "cpulist.c"], "pairs")


def plain_run(argv: list[str], threads: int) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)}, timeout=300)


def timing_free(text: str) -> str:
    """pairs prints its elapsed seconds; everything else must be identical."""
    return "\n".join(line.rsplit(":", 1)[0] if line.startswith("pinlab-pairs:") else line for line in text.splitlines())


def test_pinlab_cc_links_the_tracer_runtime_and_not_libtsan(pairs):
    needed = needed_libraries(str(pairs))
    assert "libpinlab-trace.so" in needed
    assert not any("tsan" in name for name in needed)
    assert instrumented(str(pairs))
    assert not instrumented("/bin/sh")


# Thread counts: groups of G, at least two groups, more than the CPUs only when the machine is small.
@pytest.mark.parametrize("group", [2, 4])
def test_pairs_graph_shows_exactly_the_planted_groups(pairs, tmp_path, group):
    threads = group * max(2, min(4, CPUS // group))
    argv = [str(pairs), "--groups", str(group), "--size", "8k", "--reps", "200"]
    out = tmp_path / "g.json"
    done = run_pinlab("trace", "-n", str(threads), "-o", str(out), "--original", str(native_path("pinlab-pairs")), "--", *argv)
    assert done.returncode == 0, done.stderr
    untraced = plain_run(argv, threads)
    assert timing_free(done.stdout) == timing_free(untraced.stdout)
    assert "Validation: every element" in done.stdout
    graph = load_graph(out, strict=True)
    assert graph.threads == threads and graph.granularity == "line" and graph.unit_bytes == 64
    inside = [graph.weight(i, j) for i in range(threads) for j in range(i + 1, threads) if i // group == j // group]
    across = [graph.weight(i, j) for i in range(threads) for j in range(i + 1, threads) if i // group != j // group]
    # 8k int64 = 1000 lines per group; a member touches each line 200 passes x 8/G elements x
    # (read + write) = 3200/G times. The only access across groups is the main thread's final check
    # of every element (8 reads a line): at most G/400 of an in-group weight.
    assert min(inside) > 0
    assert max(across) < min(inside) * group / 400 * 1.1, (inside, across)
    assert max(across) < min(inside) / 50
    # between workers of different groups: nothing but the odd shared variable of the program
    assert all(graph.weight(i, j) < 100 for i in range(1, threads) for j in range(i + 1, threads) if i // group != j // group)
    assert all(v > 0 for v in graph.volume)
    measured = graph.measured
    assert measured["method"] == "exact" and measured["threads"] == threads and measured["argv"] == argv
    assert measured["baseline_seconds"] > 0 and measured["slowdown"] > 0 and measured["units_seen"] >= 1000 * threads // group
    assert "slowdown" in done.stderr


# Logs which executable ran (the instrumented build or the original) to the file argv[1], then works a little.
WHO = (
    "#include <stdio.h>\n#include <unistd.h>\n"
    "int data[4096];\n"
    "int main(int argc, char **argv) {\n"
    '  char exe[4096]; ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); exe[n > 0 ? n : 0] = 0;\n'
    '  FILE *log = fopen(argv[1], "a"); fprintf(log, "%s\\n", exe); fclose(log);\n'
    "  long s = 0; for (int r = 0; r < 200; r++) for (int i = 0; i < 4096; i++) s += data[i] += i;\n"
    "  return (int)(s & 0);\n}\n"
)


@pytest.fixture(scope="module")
def who(tmp_path_factory) -> tuple[Path, Path]:
    """(the instrumented build, the original build) of WHO."""
    tmp = tmp_path_factory.mktemp("who")
    (tmp / "who.c").write_text(WHO)
    instrumented_build = build(tmp, [tmp / "who.c"], "who")
    original = tmp / "who-original"
    subprocess.run(["gcc", "-O2", str(tmp / "who.c"), "-o", str(original)], check=True)
    return instrumented_build, original


def test_the_slowdown_is_against_the_original_build(who, tmp_path):
    program, original = who
    log, out = tmp_path / "ran.log", tmp_path / "g.json"
    done = run_pinlab("trace", "-n", "1", "-o", str(out), "--original", str(original), "--", str(program), str(log))
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [str(program), str(original)]  # traced, then the untraced run: the original
    measured = load_graph(out).measured
    assert measured["baseline_argv"] == [str(original), str(log)] and measured["baseline_seconds"] > 0
    assert measured["slowdown"] == round(measured["traced_seconds"] / measured["baseline_seconds"], 3)
    assert f"slowdown x{measured['slowdown']:.1f}" in done.stderr


def test_without_the_original_no_slowdown_is_measured_against_the_instrumented_build(who, tmp_path):
    program, _ = who
    log, out = tmp_path / "ran.log", tmp_path / "g.json"
    done = run_pinlab("trace", "-n", "1", "-o", str(out), "--", str(program), str(log))
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [str(program)]  # no second run of the instrumented build
    assert (
        "pinlab: warning: no slowdown measured: the exact method traces a build made with pinlab cc, slower than the "
        "original however it runs; give --original PROGRAM (the same program built without pinlab cc) to measure it\n"
    ) in done.stderr
    assert "slowdown x" not in done.stderr
    measured = load_graph(out).measured
    assert measured["slowdown"] is None and measured["baseline_seconds"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--original", "{program}", "--", "{program}"], "was built with pinlab cc too: give the same program built without it"),
        (["--original", "no-such-original", "--", "{program}"], "--original no-such-original: command not found"),
        (["--original", "{original}", "--no-baseline", "--", "{program}"], "which --no-baseline turns off"),
        (["--original", "/bin/true", "--method", "pages", "--", "/bin/true"], "--original is for --method exact"),
    ],
)
def test_a_wrong_original_is_refused_before_anything_runs(who, tmp_path, args, message):
    program, original = who
    args = [a.format(program=program, original=original) for a in args]
    done = subprocess.run(
        [str(PINLAB), "trace", "-n", "1", "-o", "g.json", *args, str(tmp_path / "ran.log")], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "ran.log").exists() and not (tmp_path / "g.json").exists()


def test_exit_status_and_output_pass_through(tmp_path):
    source = tmp_path / "three.c"
    source.write_text(
        "#include <stdio.h>\nint shared[16];\nint main(int c, char **v) {\n"
        "  for (int i = 0; i < 16; i++) shared[i] = i * c;\n"
        '  printf("sum %d\\n", shared[15]); fprintf(stderr, "to stderr %s\\n", v[0] ? "ok" : "");\n'
        "  fflush(stdout); return 3;\n}\n"
    )
    program = build(tmp_path, [source], "three")
    untraced = subprocess.run([str(program)], capture_output=True, text=True)
    assert untraced.returncode == 3
    out = tmp_path / "g.json"
    done = run_pinlab("trace", "-n", "1", "-o", str(out), "--", str(program))
    assert done.returncode == 3
    assert done.stdout == untraced.stdout == "sum 15\n"
    assert done.stderr.startswith(untraced.stderr)
    graph = load_graph(out)
    assert graph.volume[0] >= 16  # the loop's 16 stores at least


def test_a_program_killed_by_a_signal_ends_pinlab_trace_with_128_plus_it(tmp_path):
    source = tmp_path / "killed.c"
    source.write_text(
        "#include <signal.h>\n#include <stdio.h>\nvolatile int x;\n"
        'int main(void) { x = 1; printf("before\\n"); fflush(stdout); raise(SIGTERM); return x; }\n'
    )
    program = build(tmp_path, [source], "killed")
    done = run_pinlab("trace", "-n", "1", "--no-baseline", "-o", str(tmp_path / "g.json"), "--", str(program))
    assert done.returncode == 128 + signal.SIGTERM
    assert done.stdout == "before\n"
    assert "no graph was written" in done.stderr  # the only thread never ended normally: nothing to count


def test_atomics_stay_atomic_under_the_tracer(tmp_path):
    source = tmp_path / "atomics.c"
    source.write_text(
        "#include <omp.h>\n#include <stdio.h>\n#include <stdint.h>\n"
        "int main(void) {\n"
        "  long counter = 0, reduced = 0; uint8_t small = 0; unsigned __int128 wide = 0; int cas = 0;\n"
        "  #pragma omp parallel reduction(+:reduced)\n"
        "  { for (int i = 0; i < 20000; i++) {\n"
        "      #pragma omp atomic\n      counter++;\n"
        "      __atomic_fetch_add(&small, 1, __ATOMIC_RELAXED);\n"
        "      __atomic_fetch_add(&wide, 1, __ATOMIC_SEQ_CST);\n"
        "      int seen = __atomic_load_n(&cas, __ATOMIC_ACQUIRE);\n"
        "      while (!__atomic_compare_exchange_n(&cas, &seen, seen + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {}\n"
        "      reduced += 1; } }\n"
        "  int t = omp_get_max_threads();\n"
        '  printf("%d %ld %ld %u %llu %d\\n", t, counter, reduced, (unsigned)small, (unsigned long long)wide, cas);\n'
        "  return !(counter == 20000L * t && reduced == counter && small == (uint8_t)(20000 * t) && wide == (unsigned __int128)counter && cas == counter);\n"
        "}\n"
    )
    program = build(tmp_path, [source], "atomics")  # 128-bit atomics too: the runtime brings libatomic
    threads = min(max(4, CPUS), 16)
    done = run_pinlab("trace", "-n", str(threads), "--no-baseline", "-o", str(tmp_path / "g.json"), "--", str(program))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split()[0] == str(threads)
    # every thread hits the same few lines: all pairs share
    graph = load_graph(tmp_path / "g.json")
    assert all(graph.weight(i, j) >= 20000 for i in range(threads) for j in range(threads) if i != j)


def test_trace_files_are_written_only_when_asked_and_read_back(pairs, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    argv = [str(pairs), "--size", "1k", "--reps", "3"]
    subprocess.run(argv, check=True, capture_output=True, env=env, cwd=tmp_path)
    assert not list(tmp_path.iterdir())
    subprocess.run(argv, check=True, capture_output=True, env={**env, "PINLAB_TRACE_DIR": str(tmp_path)})
    files = sorted(tmp_path.glob("*.lines"))
    assert len(files) == 2  # the main thread and the OpenMP worker
    for path in files:
        header, counts = read_counts(path)
        assert header["line_bytes"] == 64 and header["tid"] == int(path.stem)
        assert header["accesses"] == sum(counts.values()) > 0 and header["table_bytes"] > 0


def test_auto_picks_exact_for_a_program_built_with_pinlab_cc(pairs):
    assert choose_method(TraceRequest(argv=[str(pairs)], threads=2)) == "exact"
    with pytest.raises(UsageError, match="exact tracing method is not available: .*not built with pinlab cc.*--method pages"):
        choose_method(TraceRequest(argv=["/bin/true"], threads=2), "exact")


@pytest.mark.parametrize(
    "args, message",
    [
        (["-n", "0", "-o", "g.json", "--", "true"], "-n must be at least 1"),
        (["-n", "2", "-o", "missing-dir/g.json", "--", "true"], "does not exist; create it first"),
        (["-n", "2", "-o", "g.json"], "no program given"),
        (["-n", "2", "-o", "g.png", "--", "true"], "must end in .json"),
        (["-n", "2", "--method", "exact", "-o", "g.json", "--", "/bin/true"], "exact tracing method is not available"),
    ],
)
def test_trace_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    done = subprocess.run([str(PINLAB), "trace", *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("pinlab: error: ") and message in done.stderr, done.stderr
    assert not (tmp_path / "g.json").exists()


def test_library_checks_match_the_command_line(tmp_path):
    with pytest.raises(UsageError, match="no program"):
        check_request(TraceRequest(argv=[], threads=1))
    with pytest.raises(UsageError, match="at least 1"):
        check_request(TraceRequest(argv=["true"], threads=-3))
    with pytest.raises(UsageError, match="is a directory"):
        check_output(tmp_path)


def test_pinlab_cc_errors(tmp_path):
    missing = run_pinlab("cc", "--", "no-such-compiler-pinlab", "x.c")
    assert missing.returncode == 127 and "not found" in missing.stderr and missing.stderr.count("\n") == 1
    directory = run_pinlab("cc", "--", str(tmp_path), "x.c")  # as env(1): found but not executable
    assert directory.returncode == 126 and "cannot be executed" in directory.stderr and directory.stderr.count("\n") == 1
    not_a_compiler = run_pinlab("cc", "--", "true", "x.c")  # exits 0 without compiling anything
    assert not_a_compiler.returncode == 2 and not_a_compiler.stderr == (
        "pinlab: error: 'true' exited 0 but wrote no object file for a one-line C test: it is not a compiler; "
        "give a C/C++ compiler, for example gcc or clang\n"
    )
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\necho 'unrecognized option -fsanitize=thread' >&2\nexit 1\n")
    fake.chmod(0o755)
    refused = run_pinlab("cc", "--", str(fake), "x.c")
    assert refused.returncode == 2 and "does not support -fsanitize=thread" in refused.stderr and refused.stderr.count("\n") == 1
    nothing = run_pinlab("cc")
    assert nothing.returncode == 2 and "no compiler command given" in nothing.stderr
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return undeclared; }\n")
    failed = run_pinlab("cc", "--", "gcc", str(broken), "-o", str(tmp_path / "broken"))
    assert failed.returncode == 1 and "undeclared" in failed.stderr  # the compiler's own status and message


def test_cflags_and_ldflags_build_the_same_way_in_two_steps(tmp_path):
    cflags = run_pinlab("cflags").stdout.split()
    ldflags = run_pinlab("ldflags").stdout.split()
    assert cflags == ["-fsanitize=thread"] and "-lpinlab-trace" in ldflags
    source = tmp_path / "x.c"
    source.write_text("int g; int main(void) { g = 1; return g - 1; }\n")
    subprocess.run(["gcc", *cflags, "-c", str(source), "-o", str(tmp_path / "x.o")], check=True)
    subprocess.run(["gcc", str(tmp_path / "x.o"), "-o", str(tmp_path / "x"), *ldflags], check=True)
    assert instrumented(str(tmp_path / "x"))
    assert subprocess.run([str(tmp_path / "x")]).returncode == 0


def test_a_missing_program_is_127_as_with_pinlab_run(tmp_path):
    done = run_pinlab("trace", "-n", "1", "-o", str(tmp_path / "g.json"), "--", "no-such-program-pinlab")
    assert done.returncode == 127 and "command not found" in done.stderr and done.stderr.count("\n") == 1


def test_pinlab_cc_splits_compile_and_link():
    from pinlab.trace.cc import link_flags, plan_commands

    both = plan_commands(["gcc", "-O2", "-fopenmp", "-Iinc", "a.c", "b.cpp", "-o", "prog", "-lm", "-Wl,--as-needed", "-fsanitize=thread"], "/w")
    assert both[:2] == [
        ["gcc", "-O2", "-fopenmp", "-Iinc", "-fsanitize=thread", "-c", "a.c", "-o", "/w/0-a.o"],
        ["gcc", "-O2", "-fopenmp", "-Iinc", "-fsanitize=thread", "-c", "b.cpp", "-o", "/w/1-b.o"],
    ]
    assert both[2] == ["gcc", "-O2", "-fopenmp", "-Iinc", "/w/0-a.o", "/w/1-b.o", "-o", "prog", "-lm", "-Wl,--as-needed", *link_flags()]
    assert plan_commands(["cc", "-c", "a.c", "-o", "a.o"], "/w") == [["cc", "-c", "a.c", "-o", "a.o", "-fsanitize=thread"]]
    assert plan_commands(["cc", "a.o", "b.o", "-fsanitize=thread", "-o", "p"], "/w") == [["cc", "a.o", "b.o", "-o", "p", *link_flags()]]
    with pytest.raises(UsageError, match="-x LANGUAGE"):
        plan_commands(["cc", "-x", "c", "a.txt"], "/w")


# A main thread that initialises its data alone (10 x 64k read-and-write accesses), then, with
# argv[1] = "sleep", waits 1.5 s, marks its parallel phase and starts two threads that share one
# array (100 x 512 read-and-write accesses each).
PHASES = r"""
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void pinlab_trace_start(void) __attribute__((weak));

static long init_data[1 << 16];
static long shared[512];

static void *worker(void *arg)
{
    long t = (long)arg;
    for (int r = 0; r < 100; r++)
        for (int i = 0; i < 512; i++)
            __atomic_fetch_add(&shared[i], t, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < (1 << 16); i++)
            init_data[i] += i;
    if (argc > 1 && !strcmp(argv[1], "sleep")) {
        struct timespec left = {1, 500000000L};
        while (nanosleep(&left, &left) == -1 && errno == EINTR) {}
    }
    if (pinlab_trace_start)
        pinlab_trace_start();
    pthread_t threads[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&threads[t], NULL, worker, (void *)(t + 1));
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    printf("%ld\n", shared[7]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def phases(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("phases")
    (tmp / "phases.c").write_text(PHASES)
    return build(tmp, [tmp / "phases.c"], "phases", "-pthread")


def traced_graph(tmp: Path, program: Path, *args: str, after: str | None = None):
    out = tmp / f"g-{after}.json"
    window = ["--after", after] if after else []
    done = run_pinlab("trace", "-n", "3", "--no-baseline", *window, "-o", str(out), "--", str(program), *args)
    assert done.returncode == 0 and done.stdout == "300\n", done.stderr
    return load_graph(out), done.stderr


@pytest.mark.parametrize("after, args", [("parallel", []), ("mark", []), ("0.75", ["sleep"])])
def test_a_window_leaves_the_serial_initialisation_out(phases, tmp_path, after, args):
    whole, _ = traced_graph(tmp_path, phases, *args)
    assert whole.volume[0] >= 10 * 2 * (1 << 16)  # every read and write of the initialisation
    windowed, _ = traced_graph(tmp_path, phases, *args, after=after)
    assert windowed.measured["after"] == after
    assert windowed.volume[0] < 1 << 16  # none of it now: what is left is the thread start and the join
    # the parallel phase is counted in full: the same accesses, the same weight
    assert windowed.weight(1, 2) == whole.weight(1, 2) >= 100 * 512
    assert windowed.volume[1] == whole.volume[1] and windowed.volume[2] == whole.volume[2]


def test_a_window_that_never_opens_says_why(phases, tmp_path):
    out = tmp_path / "g.json"
    done = run_pinlab("trace", "-n", "3", "--no-baseline", "--after", "60", "-o", str(out), "--", str(phases))
    assert done.returncode == 0 and done.stdout == "300\n"
    assert "pinlab: warning: counting never started (--after 60): the program ended before 60 s\n" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("after", ["-1", "soon", "nan", "1e7", ""])
def test_a_bad_window_is_refused_in_one_line(tmp_path, after):
    done = subprocess.run(
        [str(PINLAB), "trace", "-n", "1", "--after", after, "-o", "g.json", "--", "true"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"pinlab: error: --after {after!r}: give SECONDS after the program starts"), done.stderr
    with pytest.raises(UsageError, match="give SECONDS after the program starts"):
        check_request(TraceRequest(argv=["true"], threads=1, after=after))
