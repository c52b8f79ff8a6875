"""Helpers of the autopin tests: a C program built against the installed heartbeat header."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from pinlab.native import include_dir

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def beating(tmp_path_factory) -> str:
    """tests/autopin/beating.c compiled with the header pinlab installed (as a user would)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the heartbeat test program")
    exe = tmp_path_factory.mktemp("beating") / "beating"
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{include_dir()}", str(HERE / "beating.c"), "-o", str(exe)], check=True)
    return str(exe)


class Beating:
    """A running beating program: its pid, and the tid of each of its threads by index."""

    def __init__(self, exe: str, mode: str, amounts: list[int], heartbeat: str | None) -> None:
        env = dict(os.environ)
        env.pop("PINLAB_HEARTBEAT", None)
        if heartbeat is not None:
            env["PINLAB_HEARTBEAT"] = heartbeat
        self.process = subprocess.Popen([exe, mode, *map(str, amounts)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.pid = self.process.pid
        self.tids: dict[int, int] = {}
        for _ in amounts:
            index, tid = map(int, self.process.stdout.readline().split())
            self.tids[index] = tid

    def live_tids(self) -> set[int]:
        return {int(t) for t in os.listdir(f"/proc/{self.pid}/task")}

    def end_thread(self, index: int) -> None:
        self.process.stdin.write(f"exit {index}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().split() == ["gone", str(index)]
        deadline = time.monotonic() + 5
        while self.tids[index] in self.live_tids() and time.monotonic() < deadline:
            time.sleep(0.01)

    def finish(self) -> int:
        self.process.stdin.close()
        status = self.process.wait(timeout=30)
        self.process.stdout.close()
        return status


@pytest.fixture
def start(beating):
    """start(mode, amounts, heartbeat) -> a running Beating; ended after the test."""
    started: list[Beating] = []

    def _start(mode: str, amounts: list[int], heartbeat: str | None) -> Beating:
        program = Beating(beating, mode, amounts, heartbeat)
        started.append(program)
        return program

    yield _start
    for program in started:
        if program.process.poll() is None:
            program.process.kill()
            program.process.wait()
