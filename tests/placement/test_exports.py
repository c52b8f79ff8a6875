"""Each export is read back, and where the tool is installed, run for real: the CPU each OpenMP
thread really ran on must be the one the placement gave it."""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.cpuset import parse_cpulist
from pinlab.native import native_path
from pinlab.placement import make_placement
from pinlab.placement.exports import export, parse_kmp_affinity, parse_map_cpu, parse_omp_places
from pinlab.topology import load_topology, preset_names
from tests.conftest import run_pinlab

THIS = load_topology("this")
CORES = len(THIS.cores) and len([c for c in THIS.cores if c.allowed])
COUNTS = sorted({1, min(2, CORES), min(4, CORES), CORES})


def shell_env(text: str) -> dict[str, str]:
    """The variables set by lines of `export NAME=value`."""
    env = {}
    for line in text.splitlines():
        words = shlex.split(line)
        assert words[0] == "export", line
        name, _, value = words[1].partition("=")
        env[name] = value
    return env


def probe(env_update: dict[str, str], prefix: list[str] | None = None, extra_env: dict[str, str] | None = None) -> list[dict]:
    """Run pinlab-probe (an OpenMP program) and return, per thread, its CPU and affinity mask."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_", "GOMP_"))}
    env.update(env_update)
    env.update(extra_env or {})
    out = subprocess.run([*(prefix or []), str(native_path("pinlab-probe")), "30"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = []
    for line in out.stdout.splitlines():
        if line.startswith("thread="):
            fields = dict(f.split("=", 1) for f in line.split())
            rows.append({"thread": int(fields["thread"]), "cpu": int(fields["cpu"]), "mask": set(parse_cpulist(fields["mask"]))})
    return rows


def assert_each_thread_on_its_cpu(rows, cpus):
    assert [r["thread"] for r in rows] == list(range(len(cpus)))
    for row, cpu in zip(rows, cpus):
        assert row["mask"] == {cpu}, row
        assert row["cpu"] == cpu, row


PLACEMENTS = [(s, n) for s in ("compact", "scatter", "random") for n in COUNTS]


@pytest.mark.parametrize("strategy, n", PLACEMENTS)
def test_omp_places_with_libgomp(strategy, n):
    placement = make_placement(THIS, strategy=strategy, threads=n, seed=3)
    assert_each_thread_on_its_cpu(probe(shell_env(export(placement, "omp"))), placement.cpus)


def test_omp_oversubscribed_places_with_libgomp():
    placement = make_placement(THIS, strategy="compact", threads=CORES + 1, oversubscribe=True)
    assert_each_thread_on_its_cpu(probe(shell_env(export(placement, "omp"))), placement.cpus)


def test_omp_none_leaves_threads_unpinned():
    placement = make_placement(THIS, strategy="none", threads=CORES)
    rows = probe(shell_env(export(placement, "omp")))
    assert len(rows) == CORES
    assert all(r["mask"] == set(THIS.allowed_cpus) for r in rows)


def libomp_dir(tmp_path):
    """A directory where libgomp.so.1 is LLVM's libomp (which implements the GNU OpenMP ABI),
    so the gcc-built probe runs under the LLVM/Intel runtime and honours KMP_AFFINITY."""
    found = sorted(glob.glob("/usr/lib/llvm-*/lib/libomp.so.5"))
    if not found:
        pytest.skip("LLVM OpenMP runtime (libomp5) not installed")
    (tmp_path / "libgomp.so.1").symlink_to(found[-1])
    return str(tmp_path)


@pytest.mark.parametrize("strategy, n", PLACEMENTS)
def test_kmp_affinity_with_llvm_openmp(tmp_path, strategy, n):
    placement = make_placement(THIS, strategy=strategy, threads=n, seed=5)
    env = shell_env(export(placement, "kmp"))
    assert_each_thread_on_its_cpu(probe(env, extra_env={"LD_LIBRARY_PATH": libomp_dir(tmp_path)}), placement.cpus)


@pytest.mark.parametrize("strategy, n", PLACEMENTS)
def test_likwid_pin(strategy, n):
    if not shutil.which("likwid-pin"):
        pytest.skip("likwid not installed")
    placement = make_placement(THIS, strategy=strategy, threads=n, seed=9)
    command = shlex.split(export(placement, "likwid"))
    rows = probe({"OMP_NUM_THREADS": str(n)}, prefix=[*command[:1], "-q", *command[1:]])
    assert_each_thread_on_its_cpu(rows, placement.cpus)


def allowed_list_under(prefix: list[str]) -> set[int]:
    out = subprocess.run([*prefix, "cat", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("Cpus_allowed_list:"))
    return set(parse_cpulist(line.split(":", 1)[1]))


@pytest.mark.parametrize("fmt, tool", [("taskset", "taskset"), ("numactl", "numactl")])
@pytest.mark.parametrize("strategy, n", PLACEMENTS)
def test_taskset_and_numactl_restrict_the_process_to_the_placements_cpus(fmt, tool, strategy, n):
    if not shutil.which(tool):
        pytest.skip(f"{tool} not installed")
    placement = make_placement(THIS, strategy=strategy, threads=n, seed=11)
    assert allowed_list_under(shlex.split(export(placement, fmt))) == set(placement.cpus)


@pytest.mark.parametrize("fmt, tool", [("taskset", "taskset"), ("numactl", "numactl")])
def test_none_with_taskset_and_numactl_is_the_allowed_set(fmt, tool):
    if not shutil.which(tool):
        pytest.skip(f"{tool} not installed")
    placement = make_placement(THIS, strategy="none", threads=1)
    assert allowed_list_under(shlex.split(export(placement, fmt))) == set(THIS.allowed_cpus)


@settings(max_examples=40, deadline=None)
@given(preset=st.sampled_from(preset_names()), strategy=st.sampled_from(["compact", "scatter", "random", "inter-socket"]), data=st.data())
def test_every_export_reads_back_as_the_same_placement(preset, strategy, data):
    topo = load_topology(preset)
    n = data.draw(st.integers(1, len(topo.cores)))
    placement = make_placement(topo, strategy=strategy, threads=n, seed=data.draw(st.integers(0, 1000)))
    cpus = placement.cpus
    omp = shell_env(export(placement, "omp"))
    assert omp["OMP_NUM_THREADS"] == str(n) and omp["OMP_PROC_BIND"] == "close"
    assert parse_omp_places(omp["OMP_PLACES"]) == [frozenset({c}) for c in cpus]
    kmp = shell_env(export(placement, "kmp"))
    assert parse_kmp_affinity(kmp["KMP_AFFINITY"]) == cpus
    assert parse_map_cpu(export(placement, "slurm")) == cpus
    assert parse_cpulist(shlex.split(export(placement, "likwid"))[-1]) == cpus
    assert export(placement, "list") == ",".join(map(str, cpus))
    for fmt in ("numactl", "taskset"):
        assert set(parse_cpulist(shlex.split(export(placement, fmt))[-1].split("=")[-1])) == set(cpus)


def test_omp_places_reader_understands_intervals():
    assert parse_omp_places("{0:4}") == [frozenset({0, 1, 2, 3})]
    assert parse_omp_places("{0,1}:3:4") == [frozenset({0, 1}), frozenset({4, 5}), frozenset({8, 9})]
    assert parse_omp_places("{0:2:8},{1}") == [frozenset({0, 8}), frozenset({1})]


def test_cli_json_format_is_the_placement():
    import json

    out = run_pinlab("place", "-t", "clovertown", "-s", "scatter", "-n", "4", "-f", "json")
    data = json.loads(out.stdout)
    assert data["pinlab_placement"] == 1 and data["cpus"] == [0, 4, 1, 5]
    assert [d["package"] for d in data["threads_detail"]] == [0, 0, 1, 1]
    assert len({d["l2"] for d in data["threads_detail"]}) == 4
    assert data["topology"] == {"source": "preset:clovertown", "name": "clovertown"}


def test_none_strategy_says_so():
    out = run_pinlab("place", "-s", "none", "-n", "2")
    assert out.returncode == 0
    assert out.stdout == "" and "none: no pinning" in out.stderr
    assert run_pinlab("place", "-s", "none", "-n", "2", "-f", "slurm").stdout.strip() == "--cpu-bind=none"
    assert run_pinlab("place", "-s", "none", "-n", "2", "-f", "likwid").returncode == 2
