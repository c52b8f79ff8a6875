"""Running a real program, letting ``pinlab doctor`` look at it, and applying the fix it prints."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from pinlab.measure import shared_files
from pinlab.native import native_path
from tests.conftest import run_pinlab

HERE = Path(__file__).parent
PYTHON = sys.executable

#: How long the programs watched by PID run (the probe's milliseconds per thread, the Python
#: program's seconds): longer than any start of pinlab beside co-runners (up to a minute was
#: seen), so that the doctor finds them at work; :func:`doctor` ends them when it is done.
LONG_MS = "600000"
LONG_S = "600"

#: Variables of the test's own environment that would change what the programs do.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def clean_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and not k.startswith("PINLAB_") and not k.startswith("SLURM_")}
    env.update(settings)
    return env


def probe() -> str:
    """pinlab-probe: an OpenMP program (libgomp) whose threads each spin SPIN_MS before reporting."""
    return str(native_path("pinlab-probe"))


def doctor(argv: list[str], env: dict[str, str], seconds: float = 2.0, ready: str | None = None, settle: float = 0.5) -> tuple[int, dict]:
    """Start ``argv``, wait until it prints ``ready`` (or ``settle`` seconds), run ``pinlab doctor
    PID --json`` on it; (doctor's exit status, its report). The program is ended afterwards."""
    program = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if ready is not None:
            assert program.stdout is not None
            assert program.stdout.readline().strip() == ready
        time.sleep(settle)
        result = run_pinlab("doctor", str(program.pid), "--seconds", str(seconds), "--json")
        assert result.stderr == "", result.stderr
        return result.returncode, json.loads(result.stdout)
    finally:
        program.kill()
        program.wait()
        shared_files.remove_openmp_registrations([program.pid])  # a libomp program killed leaves its file


def codes(report: dict, at_least: str = "warning") -> set[str]:
    """The codes of the findings at ``at_least`` or above."""
    order = ("info", "warning", "problem")
    return {f["code"] for f in report["findings"] if order.index(f["severity"]) >= order.index(at_least)}


def finding(report: dict, code: str) -> dict:
    return next(f for f in report["findings"] if f["code"] == code)


def apply(line: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """A fix line (``[env -uNAME...] [NAME=VALUE...] PROGRAM ARGS``) as the program and environment it gives."""
    words = shlex.split(line)
    env = dict(env)
    if words and words[0] == "env":
        words.pop(0)
        while words and words[0].startswith("-u"):
            env.pop(words.pop(0)[2:], None)
    while words and "=" in words[0] and not words[0].startswith("/"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return words, env
