"""Bad input: one line saying what is wrong and what to do, exit status 2, never a traceback."""

import importlib.metadata

import pytest

from tests.conftest import run_pinlab

CASES = [
    (["place", "-s", "bogus", "-n", "2"], "unknown strategy 'bogus'"),
    (["place", "-s", "compact"], "needs a thread count: add -n THREADS"),
    (["place", "-n", "2"], "no placement given"),
    (["place", "-s", "compact", "-n", "0"], "THREADS must be at least 1"),
    (["place", "-s", "compact", "-n", "-3"], "THREADS must be at least 1"),
    (["place", "-s", "compact", "-n", "two"], "'two' is not a valid integer"),
    (["place", "-t", "clovertown", "-s", "scatter", "-n", "9"], "9 threads but only 8 cores are available"),
    (["place", "-t", "clovertown", "-c", "0,2,x"], "malformed CPU list"),
    (["place", "-t", "clovertown", "-c", "0,8"], "CPU 8 does not exist"),
    (["place", "-t", "clovertown", "-c", "S0:0-4"], "index 4 is out of range"),
    (["place", "-t", "opteron-4x4", "-c", "M4:0"], "there is no NUMA node 4"),
    (["place", "-t", "clovertown", "-c", "Q1:0"], "unknown domain 'Q1'"),
    (["place", "-t", "clovertown", "-s", "compact", "-c", "0"], "not both"),
    (["place", "-t", "clovertown", "-s", "compact", "-n", "2", "-f", "yaml"], "unknown format 'yaml'"),
    (["place", "-t", "clovertown", "-s", "compact", "-n", "2", "--picture", "x.gif"], "must end in .svg or .png"),
    (["place", "--no-such-option"], "No such option"),
    (["topology", "-f", "dot"], "'dot' is not one of"),
    (["no-such-command"], "No such command"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = run_pinlab(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("pinlab: error: ")
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_help_and_version_exit_0():
    assert run_pinlab("--help").returncode == 0
    assert "place" in run_pinlab("--help").stdout
    version = run_pinlab("--version")
    assert version.returncode == 0 and version.stdout == f"pinlab, version {importlib.metadata.version('pinlab')}\n"


def test_list_presets():
    out = run_pinlab("topology", "--list-presets")
    assert out.returncode == 0
    assert out.stdout.splitlines()[1].startswith("clovertown") and "0,2,4,6" in out.stdout


def test_picture_into_a_missing_directory_fails_before_printing_anything(tmp_path):
    result = run_pinlab("place", "-t", "clovertown", "-s", "compact", "-n", "2", "--picture", str(tmp_path / "no" / "x.svg"))
    assert result.returncode == 2 and result.stdout == ""
    assert "its directory does not exist" in result.stderr


def test_counts_of_one_are_in_the_singular():
    """'1 threads' reads as a bug: every count that can be 1 takes the singular."""
    one = run_pinlab("place", "-t", "clovertown", "-s", "none", "-n", "1")
    assert "places 1 thread on CPUs" in one.stderr and "1 threads" not in one.stderr
    two = run_pinlab("place", "-t", "clovertown", "-s", "none", "-n", "2")
    assert "places 2 threads on CPUs" in two.stderr
