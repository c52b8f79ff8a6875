"""pinlab trace as a command, whatever the method: its bounds, Ctrl-C, its summary, a full disk, programs that cannot run."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from pinlab.errors import UsageError
from pinlab.trace import trace_program
from pinlab.trace.common import TraceRequest
from pinlab.trace.limits import BYTES_PER_PAIR, thread_limit
from tests.conftest import PINLAB, run_pinlab


def fake_proc(tmp: Path, threads_max: int, pid_max: int, available_kib: int) -> Path:
    (tmp / "sys/kernel").mkdir(parents=True)
    (tmp / "sys/kernel/threads-max").write_text(f"{threads_max}\n")
    (tmp / "sys/kernel/pid_max").write_text(f"{pid_max}\n")
    (tmp / "meminfo").write_text(f"MemTotal: {available_kib * 2} kB\nMemAvailable: {available_kib} kB\n")
    return tmp


def test_the_bound_is_the_kernels_thread_limit_or_the_graph_that_fits_in_memory(tmp_path):
    kernel = fake_proc(tmp_path / "a", threads_max=50_000, pid_max=4_096, available_kib=64 * 2**20)
    assert thread_limit(kernel) == (4_096, "the kernel has 4096 pids for all threads (kernel.pid_max)")
    small = fake_proc(tmp_path / "b", threads_max=50_000, pid_max=4_194_304, available_kib=1024)  # 1 MiB: 128 threads
    most, why = thread_limit(small)
    assert most == 128 == int((2**20 // BYTES_PER_PAIR) ** 0.5) and "would not fit in the 0.0 GiB of memory available now" in why


def test_more_threads_than_the_machine_can_trace_is_refused_at_once(tmp_path):
    # Before the bound, pinlab grew by 0.5 GB/s and never answered: the timeout (generous, for a
    # loaded machine where starting pinlab alone can take a minute) is what catches that.
    done = subprocess.run(
        [str(PINLAB), "trace", "-n", "100000000", "-o", "g.json", "--", "true"], capture_output=True, text=True, cwd=tmp_path, timeout=240
    )
    assert done.returncode == 2, done.stderr
    # the memory bound moves with what other programs use: the number is checked against the bound's own range
    assert re.fullmatch(
        r"pinlab: error: -n 100000000 is more threads than this machine can trace: at most (\d+), "
        r"since (the kernel|the graph of more threads)[^;]*; trace fewer threads\n",
        done.stderr,
    ), done.stderr
    said = int(re.search(r"at most (\d+)", done.stderr).group(1))
    assert 0.5 < said / thread_limit()[0] < 2
    assert not list(tmp_path.iterdir())
    most = thread_limit()[0]
    with pytest.raises(UsageError, match="more threads than this machine can trace"):
        trace_program(TraceRequest(argv=["true"], threads=2 * most), "pages", baseline=False)


def test_ctrl_c_stops_the_trace_at_once_without_an_untraced_run_or_a_graph(tmp_path):
    out = tmp_path / "g.json"
    # A new session stands for the terminal: Ctrl-C sends SIGINT to its whole foreground group. exec: one
    # process, so no sleep forked just after the signal outlives the shell holding the output pipes.
    process = subprocess.Popen(
        [str(PINLAB), "trace", "-n", "2", "--method", "pages", "-o", str(out), "--", "sh", "-c", "echo started; exec sleep 600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout.readline() == "started\n"
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=300)  # an untraced run would take 600 s more
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, err
    assert "pinlab: warning: interrupted by SIGINT: the program was stopped, no graph was written to" in err
    assert "no graph written" in err and "graph of" not in err and "slowdown" not in err
    assert not out.exists()


def test_a_run_that_counts_nothing_says_so_once_and_writes_nothing(tmp_path):
    out = tmp_path / "g.json"
    done = run_pinlab("trace", "-n", "1", "--method", "pages", "-o", str(out), "--", "sh", "-c", "exit 3")
    assert done.returncode == 3
    assert f"nothing was counted, so no graph was written to {out}" in done.stderr
    assert "graph of" not in done.stderr and done.stderr.rstrip().endswith("no graph written")
    assert not out.exists()


MOUNT = shutil.which("unshare") and shutil.which("mount")


# Two threads writing the same 1 MiB buffer (malloc'd with mmap: watched by the pages method) for many rounds.
SHARERS = (
    "import threading\n"
    "b = bytearray(1 << 20)\n"
    "def touch(v):\n"
    "    for _ in range(20):\n"
    "        for i in range(0, 1 << 20, 64):\n"
    "            b[i] = v\n"
    "t = threading.Thread(target=touch, args=(1,)); t.start(); touch(2); t.join()\n"
)


@pytest.mark.skipif(os.geteuid() != 0 or not MOUNT, reason="needs root (a small tmpfs of its own) and unshare")
def test_a_full_disk_leaves_no_empty_graph_file_and_keeps_an_old_one(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "sharers.py").write_text(SHARERS)
    trace = f"{PINLAB} trace -n 2 --method pages --period-ms 1 --no-baseline -o {{}} -- python3 {tmp_path}/sharers.py; echo status $?"
    # A private 16 KiB tmpfs holding an old graph, then filled up: no graph (a few hundred bytes) fits.
    script = (
        f"mount -t tmpfs -o size=16k tmpfs {disk} && printf old > {disk}/old.json && "
        f"(dd if=/dev/zero of={disk}/fill bs=1k count=64 2>/dev/null; true) && "
        f"{trace.format(f'{disk}/g.json')}; {trace.format(f'{disk}/old.json')}; ls -a {disk}; cat {disk}/old.json"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.count("status 2\n") == 2, done.stdout + done.stderr
    for name in ("g.json", "old.json"):
        assert f"pinlab: error: cannot write the graph to {disk}/{name}: No space left on device\n" in done.stderr, done.stderr
    listing = done.stdout.split("status 2\n")[-1].split()
    assert sorted(listing[:-1]) == [".", "..", "fill", "old.json"] and listing[-1] == "old"


def test_a_program_the_kernel_cannot_execute_exits_126_as_with_pinlab_run(tmp_path):
    program = tmp_path / "not-a-program"
    program.write_bytes(b"\x00\x01binary garbage, no #! line\n")
    program.chmod(0o755)
    traced = run_pinlab("trace", "-n", "1", "-o", str(tmp_path / "g.json"), "--", str(program))
    ran = run_pinlab("run", "-n", "1", "--", str(program))
    assert ran.returncode == 126 and traced.returncode == 126
    assert traced.stderr == f"pinlab: error: {program}: cannot execute: Exec format error\n"
    assert not (tmp_path / "g.json").exists()
