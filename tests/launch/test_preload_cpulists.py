"""The CPU lists the preload library reads (PINLAB_HELPER_CPUS, PINLAB_DOMAINS) go through the one
reader of native/common/cpulist.c: what it accepts pins the program, anything else gives the
one-line warning and an unpinned run. The odd lists are the edges of the format: blanks, a newline,
a sign, ranges that run backwards or past the last CPU a mask can hold, empty items."""

import os
import subprocess

import pytest

from pinlab.native import native_path
from tests.launch.test_pinning import ALLOWED, probe_rows

ACCEPTED = ["0", "1,0", "0-1,0", "1-1", "00", "1023", "0-1023", "1023,0-1023"]
REFUSED = ["1024", "0-1024", "0-", "-1", "+1", " 0", "0 ", "0\n", "3-1", "1-0,0", "0,,1", "0,", ",0", "0--1", "0-1-2", "0x1", "9" * 20]


def _probe(**variables: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LD_PRELOAD=str(native_path("libpinlab-preload.so")), PINLAB_CPUS=str(ALLOWED[-1]), **variables)
    return subprocess.run([str(native_path("pinlab-threads-probe")), "--threads", "2"], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("cpus", ACCEPTED)
def test_a_cpu_list_the_reader_accepts_pins_the_program(cpus):
    result = _probe(PINLAB_HELPER_CPUS=cpus)
    assert result.returncode == 0 and result.stderr == ""
    assert all(row["mask"] == {ALLOWED[-1]} for row in probe_rows(result.stdout))


@pytest.mark.parametrize("cpus", REFUSED)
def test_a_malformed_cpu_list_is_named_and_the_program_runs_unpinned(cpus):
    result = _probe(PINLAB_HELPER_CPUS=cpus)
    assert result.returncode == 0
    assert result.stderr.startswith(f"pinlab: warning: PINLAB_HELPER_CPUS={cpus} is not a CPU list such as 0-3,8")
    assert all(row["mask"] == set(ALLOWED) for row in probe_rows(result.stdout))


@pytest.mark.parametrize(
    ("domains", "accepted"), [("0;1", True), ("1,0;0-1", True), ("0-1;", False), (";0", False), ("0;;1", False), ("0;1-0", False)]
)
def test_each_domain_list_ends_at_its_semicolon(domains, accepted):
    """PINLAB_DOMAINS holds several lists: the reader must stop at each ';', and an empty list between two is refused."""
    result = _probe(PINLAB_DOMAINS=domains)
    assert result.returncode == 0
    assert (result.stderr == "") == accepted, result.stderr
