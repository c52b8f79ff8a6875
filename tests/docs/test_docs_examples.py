"""Every shell example of the manual and of the README runs as written, and prints what it shows.

The examples of one page run in order in one fresh directory (a page may write a file that a
later example reads), each command in its own bash, with the installed `pinlab` first on PATH,
as after `pip install`. The convention is in markdown_examples.py and docs/development/testing.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.markdown_examples import ROOT, console_blocks, output_matches

BIN = Path(sys.executable).parent
TIMEOUT = 600  # per command: far beyond any example's time on a loaded machine

RUNNABLE: dict[Path, list] = {}
for _block in console_blocks():
    if _block.not_run is None:
        RUNNABLE.setdefault(_block.path, []).append(_block)


def example_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
        COLUMNS="100",  # rich tables: the width the pages show
        PYTHONUNBUFFERED="1",  # stdout and stderr interleave as on a terminal
        NO_COLOR="1",
        PYTHONIOENCODING="utf-8",
    )
    env.pop("VIRTUAL_ENV", None)
    return env


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


@pytest.mark.parametrize("page", sorted(RUNNABLE), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_the_page_run_as_written(page: Path, tmp_path: Path):
    assert (BIN / "pinlab").exists(), f"no installed pinlab beside {sys.executable}"
    env = example_env(tmp_path)
    background: list[subprocess.Popen] = []
    try:
        for block in RUNNABLE[page]:
            commands = block.commands()
            assert commands, f"{block.where}: a console block without a command"
            for n, command in enumerate(commands):
                where = f"{page.relative_to(ROOT)}:{command.line}"
                script = "set -o pipefail\n" + command.text
                if command.background:
                    background.append(
                        subprocess.Popen(
                            ["bash", "-c", script],
                            cwd=tmp_path,
                            env=env,
                            start_new_session=True,
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                    continue
                done = subprocess.run(
                    ["bash", "-c", script],
                    cwd=tmp_path,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=TIMEOUT,
                    start_new_session=True,
                )
                output = done.stdout.decode("utf-8", "replace")
                wanted = block.exit_status if n == len(commands) - 1 else 0
                assert done.returncode == wanted, f"{where}: `{command.text}` exited with {done.returncode}, not {wanted}:\n{output}"
                if command.expected:
                    assert output_matches(command.expected, output.splitlines()), (
                        f"{where}: `{command.text}` printed\n{output}\n--- but the page shows ---\n" + "\n".join(command.expected)
                    )
    finally:
        for process in background:
            stop(process)
