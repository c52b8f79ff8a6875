"""Real running programs for the tests of pinlab ps and pin: started directly or under pinlab run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PINLAB

PROGRAM = Path(__file__).parent / "threads_program.py"
ALLOWED = sorted(os.sched_getaffinity(0))


@dataclass
class Program:
    """A started program: ``process`` is what the test started (pinlab run, or the program itself),
    ``pid`` the program's own process, ``tids`` main first then its threads in creation order."""

    process: subprocess.Popen
    dir: Path
    pid: int
    tids: list[int]

    def stop(self) -> None:
        (self.dir / "stop").touch()

    def end_workers(self) -> None:
        """Make the threads (not the main thread) end, and wait until they have."""
        (self.dir / "stop-workers").touch()
        wait_for(lambda: os.listdir(f"/proc/{self.pid}/task") == [str(self.pid)], "the threads to end")

    def wait(self, timeout: float = 60) -> int:
        self.stop()
        return self.process.wait(timeout)


def wait_for(condition, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _ready(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@pytest.fixture
def start_program():
    """start_program(threads=2, pinlab=None | [run options], prefix=[], seconds=None, status=0, spin=False) -> Program.

    With ``pinlab``, the program runs under ``pinlab run OPTIONS --``; ``prefix`` goes before
    everything (setpriv, taskset). Every program still running at the end is stopped and waited for.
    """
    started: list[Program] = []

    def start(
        threads: int = 2, pinlab: list[str] | None = None, prefix: list[str] = (), seconds: float | None = None, status: int = 0, spin: bool = False
    ) -> Program:
        # Not under tmp_path, which only its owner may enter: a program run as another user writes here too.
        directory = Path(tempfile.mkdtemp(prefix="pinlab-live-"))
        directory.chmod(0o777)
        argv = [sys.executable, str(PROGRAM), str(directory), "--threads", str(threads), "--status", str(status)]
        if seconds is not None:
            argv += ["--seconds", str(seconds)]
        if spin:
            argv.append("--spin")
        if pinlab is not None:
            argv = [str(PINLAB), "run", "-q", *pinlab, "--", *argv]
        process = subprocess.Popen([*prefix, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready = wait_for(lambda: _ready(directory / "ready.json") or process.poll() is not None, "the program to start")
            if not isinstance(ready, dict):
                raise AssertionError(f"the program failed to start: {process.communicate()}")
        except AssertionError:
            process.kill()
            process.communicate()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        program = Program(process, directory, ready["pid"], ready["tids"])
        started.append(program)
        return program

    yield start
    for program in started:
        if program.process.poll() is None:
            program.stop()
            try:
                program.process.wait(30)
            except subprocess.TimeoutExpired:
                program.process.kill()
                program.process.wait()
        program.process.stdout.close()
        program.process.stderr.close()
        shutil.rmtree(program.dir, ignore_errors=True)
