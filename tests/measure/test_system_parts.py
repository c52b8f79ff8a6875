"""System programs pinlab uses but does not ship: found on PATH at run time, each missing one a
single line naming what to install (Debian, RHEL, Spack) and what still works without it."""

import json
import os
import shutil
import stat

import pytest

from pinlab.measure import system_parts

LSTOPO = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")


def _path_with(tmp_path, **programs):
    """A directory holding only ``programs`` (name -> target path or script text), as PATH."""
    where = tmp_path / "bin"
    where.mkdir(parents=True, exist_ok=True)
    for name, target in programs.items():
        if target.startswith("#!"):
            (where / name).write_text(target)
            (where / name).chmod(stat.S_IRWXU)
        else:
            (where / name).symlink_to(target)
    return {**os.environ, "PATH": str(where)}


def _one_line(result):
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_without_hwloc_topology_names_the_packages_and_presets_still_work(pinlab, tmp_path):
    env = _path_with(tmp_path)
    line = _one_line(pinlab("topology", env=env))
    assert line.startswith("pinlab: error: lstopo-no-graphics or lstopo not found on PATH, needed for this machine's topology"), line
    for install in ("apt-get install hwloc-nox", "dnf install hwloc", "spack install hwloc", "hwloc 2.0 or newer"):
        assert install in line, line
    assert "bundled presets" in line and "hwloc XML files" in line, line
    preset = pinlab("topology", "-t", "clovertown", "-f", "json", env=env)
    assert preset.returncode == 0 and json.loads(preset.stdout)["summary"]["cores"] == 8, preset.stderr
    synthetic = _one_line(pinlab("place", "-t", "synthetic:pack:2 core:2 pu:1", "-s", "compact", "-n", "2", env=env))
    assert "needed for synthetic topology 'pack:2 core:2 pu:1'" in synthetic, synthetic


@pytest.mark.skipif(LSTOPO is None, reason="hwloc's lstopo is not installed here")
def test_plain_lstopo_serves_when_lstopo_no_graphics_is_absent(pinlab, tmp_path):
    result = pinlab("place", "-t", "synthetic:pack:2 core:2 pu:1", "-s", "scatter", "-n", "2", "-f", "list", env=_path_with(tmp_path, lstopo=LSTOPO))
    assert result.returncode == 0 and result.stdout.split() == ["0,2"], (result.stdout, result.stderr)


def test_an_hwloc_older_than_2_0_is_refused_with_its_version(pinlab, tmp_path):
    old = "#!/bin/sh\necho 'lstopo-no-graphics 1.11.13'\n"
    line = _one_line(pinlab("topology", env=_path_with(tmp_path, **{"lstopo-no-graphics": old})))
    assert "is hwloc 1.11.13, pinlab needs hwloc 2.0 or newer for this machine's topology" in line, line
    assert "spack install hwloc" in line, line


def test_pinlab_check_lists_each_part_found_or_what_to_install(pinlab, tmp_path):
    programs = {"lstopo-no-graphics": LSTOPO} if LSTOPO else {}
    result = pinlab("check", "--json", env=_path_with(tmp_path, **programs))
    assert result.returncode == 0, result.stderr
    parts = {f["name"]: f for f in json.loads(result.stdout) if f["name"] in {p.name for p in system_parts.PARTS}}
    assert list(parts) == [p.name for p in system_parts.PARTS]
    for name in ("numactl", "likwid", "a C compiler"):
        assert parts[name]["status"] == "info" and parts[name]["found"] == "not found", parts[name]
        assert "Debian/Ubuntu: apt-get install" in parts[name]["fix"] and "spack install" in parts[name]["fix"], parts[name]
        assert "without it" in parts[name]["meaning"], parts[name]
    hwloc = parts["hwloc 2.0 or newer"]
    if LSTOPO:
        assert hwloc["status"] == "ok" and hwloc["found"].startswith(os.path.realpath(LSTOPO)), hwloc
        assert f"({'.'.join(map(str, system_parts.version_of(LSTOPO)))})" in hwloc["found"], hwloc
    missing = json.loads(pinlab("check", "--json", env=_path_with(tmp_path / "none")).stdout)
    assert next(f for f in missing if f["name"] == hwloc["name"])["status"] == "warning"


def test_pinlab_cc_without_the_compiler_says_how_to_install_one(pinlab, tmp_path):
    result = pinlab("cc", "--", "no-such-cc-here", "-c", "x.c", env={**os.environ})
    assert result.returncode == 127, (result.returncode, result.stderr)
    assert "compiler 'no-such-cc-here' not found" in result.stderr and "dnf install gcc" in result.stderr, result.stderr
