"""One meaning per short flag across every command, and the old spellings of renamed options.

A user who learned ``-c`` from ``pinlab run`` must find the same thing behind ``-c`` everywhere:
the walk below reads every command's click definition (groups included), so a new option that
reuses a letter for something else fails here. Options renamed to keep that rule still answer to
their old spelling for one release, with one notice line, and never touch the program's own
arguments.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

import click
import pytest

from pinlab.cli import COMMANDS, REGISTRY, cli
from tests.conftest import PINLAB, run_pinlab

#: The one meaning of each short flag: the long names that carry it (a list where a command takes several values).
MEANINGS = {
    "-c": {"--cpus"},
    "-t": {"--topology"},
    "-n": {"--threads"},
    "-s": {"--strategy", "--strategies"},
    "-w": {"--workload"},
    "-m": {"--metric"},
    "-o": {"--output"},
    "-f": {"--format"},
    "-q": {"--quiet"},
    "-v": {"--verbose"},
    "-h": {"--help"},
    "-i": {"--init"},
    "-C": {"--candidates"},
    "-T": {"--interval"},
    "-W": {"--warmup"},
}
CPU = sorted(os.sched_getaffinity(0))[0]


def _commands():
    ctx = click.Context(cli)

    def walk(command, path):
        yield path, command
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), (*path, name))

    for name in COMMANDS:
        yield from walk(cli.get_command(ctx, name), (name,))


def _short_flags():
    found = defaultdict(set)
    for path, command in _commands():
        for param in [*command.params, command.get_help_option(click.Context(command))]:
            if isinstance(param, click.Option):
                names = [*param.opts, *param.secondary_opts]
                longs = {n for n in names if n.startswith("--")}
                for short in (n for n in names if not n.startswith("--")):
                    found[short].add((" ".join(path), frozenset(longs)))
    return found


def test_the_walk_sees_every_command_and_their_short_flags():
    paths = {" ".join(path) for path, _ in _commands()}
    assert {"run", "place", "autopin", "pin", "trace", "study", "workload run", "corun"} <= paths
    found = _short_flags()
    assert {"-c", "-t", "-n", "-s", "-w"} <= set(found)
    assert ("run", frozenset({"--cpus"})) in found["-c"]


def test_each_short_flag_has_one_meaning_everywhere():
    wrong = []
    for short, uses in sorted(_short_flags().items()):
        if short not in MEANINGS:
            wrong.append(f"{short} is new: give it a meaning in MEANINGS (used by {sorted(c for c, _ in uses)})")
            continue
        wrong += [
            f"{command}: {short} is {sorted(longs)}, elsewhere {sorted(MEANINGS[short])}" for command, longs in uses if not longs & MEANINGS[short]
        ]
    assert not wrong, "\n".join(wrong)


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "the old spelling goes in the next release" in line]


def test_autopin_s_old_spellings_still_work_with_one_notice_each_and_spare_the_program_s_arguments(tmp_path):
    log = tmp_path / "a.jsonl"
    result = run_pinlab(
        "autopin", "-q", "-c", f"{CPU}", "-i", "0.1", "-w0.1", "-t", "0.3", "--log", str(log), "--", "sh", "-c", "sleep 1; echo -c -t -w"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "-c -t -w"  # the program's own -c and its output untouched
    notices = _notices(result.stderr)
    assert len(notices) == 3, result.stderr
    assert any("autopin -c is now -C/--candidates" in line for line in notices)
    assert any("autopin -t is now -T/--interval" in line for line in notices)
    assert any("autopin -w is now -W/--warmup" in line for line in notices)
    start = next(event for event in map(json.loads, log.read_text().splitlines()) if event["event"] == "start")
    assert [c["cpus"] for c in start["candidates"]] == [[CPU]]  # the candidate given with the old -c
    assert start["params"]["interval"] == 0.3 and start["params"]["warmup"] == 0.1


def test_autopin_s_new_spellings_say_nothing_about_renames(tmp_path):
    result = run_pinlab("autopin", "-q", "-C", f"{CPU}", "-i", "0.1", "-W", "0.1", "-T", "0.3", "--", "sh", "-c", "sleep 1")
    assert result.returncode == 0, result.stderr
    assert not _notices(result.stderr)


def test_an_option_value_that_looks_like_an_old_spelling_is_left_alone():
    """-i takes a value: "-c" after it is that value (refused as a number), not a renamed -c."""
    result = run_pinlab("autopin", "-i", "-c", "--", "true")
    assert result.returncode == 2
    assert not _notices(result.stderr)
    assert "'-c' is not a valid float" in result.stderr


def test_trace_m_and_corun_n_still_work_with_a_notice(tmp_path):
    old = run_pinlab("trace", "-n", "1", "-m", "pages", "--no-baseline", "-o", str(tmp_path / "old.json"), "--", "true")
    new = run_pinlab("trace", "-n", "1", "--method", "pages", "--no-baseline", "-o", str(tmp_path / "new.json"), "--", "true")
    assert [line for line in _notices(old.stderr) if "trace -m is now --method" in line], old.stderr
    assert not _notices(new.stderr)

    def same(stderr: str) -> list[str]:  # the run's own lines, its file name and timings aside
        return [re.sub(r"[\d.]+ s\b", "T s", line.replace("old.json", "new.json")) for line in stderr.splitlines() if line not in _notices(stderr)]

    assert (old.returncode, same(old.stderr)) == (new.returncode, same(new.stderr))
    result = run_pinlab("corun", "cpu", "-n", "2", "-c", str(CPU), "--duration", "0.5")
    assert result.returncode == 0, result.stderr
    assert [line for line in _notices(result.stderr) if "corun -n is now --count" in line], result.stderr
    assert "2 cpu co-runners" in result.stderr


@pytest.fixture
def program():
    child = subprocess.Popen(
        [sys.executable, "-c", "import threading, time; threading.Thread(target=time.sleep, args=(600,)).start(); time.sleep(600)"]
    )
    deadline = time.monotonic() + 60
    while len(os.listdir(f"/proc/{child.pid}/task")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    yield child
    child.kill()
    child.wait()


def _cpus_of(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}


def test_pin_n_is_the_thread_count_and_select_chooses_the_threads(program):
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", str(CPU), "--select", "all", "-n", "1", "--oversubscribe")
    assert result.returncode == 0, result.stderr
    assert not _notices(result.stderr)
    assert _cpus_of(program.pid) == {frozenset({CPU})}


def test_pin_s_old_count_and_threads_spellings_still_work(program):
    result = run_pinlab("pin", "--pid", str(program.pid), "-c", str(CPU), "--threads", "all", "--count", "1", "--oversubscribe")
    assert result.returncode == 0, result.stderr
    notices = _notices(result.stderr)
    assert any("pin --threads all is now --select all" in line for line in notices), result.stderr
    assert any("pin --count is now -n/--threads" in line for line in notices), result.stderr
    assert _cpus_of(program.pid) == {frozenset({CPU})}
    both = run_pinlab("pin", "--pid", str(program.pid), "-c", str(CPU), "--threads", "all", "--select", "all")
    assert both.returncode == 2 and "keep --select" in both.stderr


def test_the_help_shows_only_the_new_spellings():
    shown = subprocess.run([str(PINLAB), "autopin", "--help"], capture_output=True, text=True, check=True).stdout
    assert "-C, --candidates" in shown and "-T, --interval" in shown and "-W, --warmup" in shown
    assert "-c," not in shown and "-t," not in shown and "-w," not in shown


def test_pinlab_help_lists_every_command_without_importing_any():
    code = (
        "import sys; from pinlab.cli import main; main(['--help']); "
        "print(sorted(m for m in sys.modules if m.startswith('pinlab.cli.') or m.split('.')[0] in ('scipy', 'pandas', 'matplotlib', 'numpy', 'rich')))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert shown[-1] == "[]"
    commands = shown[shown.index("Commands:") + 1 : -1]
    listed = [line.split()[0] for line in commands]
    assert listed == [name for name, (_, summary) in REGISTRY.items() if summary is not None]


def test_the_registry_s_lines_are_the_commands_own():
    ctx = click.Context(cli)
    for name, (_, summary) in REGISTRY.items():
        command = cli.get_command(ctx, name)
        assert summary == (None if command.hidden else command.get_short_help_str(limit=1000)), name


def test_every_one_line_help_is_the_same_under_old_and_new_click():
    """click 8.1 ends a command's one-line help at the first word ending in a period, later ones
    only where the next word is not lowercase: "0, 1, 2, ... in order" or "e.g. pinlab" would be
    cut short under 8.1 (as an Ubuntu 24.04 Python has it) and not here."""

    def commands(group: click.Group, ctx: click.Context, prefix: str = ""):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is not None and not command.hidden:
                yield prefix + name, command
                if isinstance(command, click.Group):
                    yield from commands(command, ctx, f"{prefix}{name} ")

    ctx = click.Context(cli)
    for name, command in commands(cli, ctx):
        words = (command.help or "").partition("\n\n")[0].split()
        early = [w for i, w in enumerate(words[:-1]) if w.endswith(".") and words[i + 1][0].islower()]  # where they differ
        assert not early, (name, early)
