"""Shared test helpers: the installed `pinlab` command and topologies with chosen allowed sets."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.model import Topology

PINLAB = Path(sys.executable).parent / "pinlab"

# Property tests judge the code, not the machine's speed: on a machine busy with co-runners,
# drawing one input or running one example can take seconds (a draw of 2.3 s failed the cpuset
# round trip's "too slow" health check). Tests that set their own settings keep them.
settings.register_profile("pinlab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pinlab")

# A suite started in the background by a non-interactive shell (`make test &`, some CI runners)
# inherits SIGINT ignored, and so would every program the tests start: the tests that stop a
# program or pinlab with Ctrl-C's signal would then see it ignored. Put the default back, as an
# interactive run has it; pinlab itself keeps whatever disposition it is given.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_pinlab(*args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run the installed pinlab command as a user would; output as text. The timeout only catches a
    hang: starting pinlab alone took up to a minute on a machine busy with co-runners and the
    emulated NUMA machine, and autopin runs probe for tens of seconds more."""
    return subprocess.run([*(prefix or []), str(PINLAB), *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture
def pinlab():
    return run_pinlab


def with_allowed(topo: Topology, cpus) -> Topology:
    """The same machine, loaded again with only ``cpus`` allowed (as a cgroup or taskset would)."""
    return parse_xml(topo.xml, source=topo.source, narrow_cpus=frozenset(cpus))


def this_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A one-host Slurm cluster (tests/study/slurm_cluster.py), started once for the session;
    the tests that need it skip, saying why, where it cannot start."""
    from tests.study import slurm_cluster

    try:
        cluster = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as why:
        pytest.skip(f"no Slurm cluster here: {why}")
    yield cluster
    slurm_cluster.stop(cluster)


# --- what the tests leave in /dev/shm -------------------------------------------------------------
# libomp registers every process in /dev/shm and removes the file only at a normal exit; pinlab
# removes those of programs it ran. A test that kills a libomp program itself, or a path of pinlab
# that misses one, leaves a file: each test's new files of ended processes are listed at the end of
# the run (with the tests running at the time; parallel parts of `make test-busy` share /dev/shm).
_OPENMP_LEFT: list[tuple[str, list[str]]] = []


def _openmp_registrations() -> set[str]:
    try:
        return {name for name in os.listdir("/dev/shm") if name.startswith("__KMP_REGISTERED_LIB_")}
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def _no_openmp_registration_left(request):
    before = _openmp_registrations()
    yield
    new = _openmp_registrations() - before
    left = []
    for name in sorted(new):
        pid = int(name.split("_")[-2]) if name.split("_")[-2].isdigit() else 0
        if pid and not os.path.exists(f"/proc/{pid}"):
            left.append(name)
    if left:
        _OPENMP_LEFT.append((request.node.nodeid, left))


def pytest_terminal_summary(terminalreporter):
    if _OPENMP_LEFT:
        terminalreporter.section("libomp registrations left in /dev/shm by ended processes")
        for test, names in _OPENMP_LEFT:
            terminalreporter.write_line(f"{test}: {' '.join(names)}")


def compile_c(where: Path, name: str, source: str, *flags: str) -> str:
    """``source`` written to WHERE/NAME.c and built with the system's C compiler into WHERE/NAME
    (extra ``flags`` after the source: libraries, rpaths); skips the test where there is none."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    (where / f"{name}.c").write_text(source)
    done = subprocess.run([cc, "-O1", "-pthread", str(where / f"{name}.c"), "-o", str(where / name), *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return str(where / name)
