"""The EasyBuild easyconfig in packaging/easybuild: every requirement of pyproject.toml must come
from a module it loads or an extension it installs, in a version pinlab accepts; and, where an
EasyBuild is at hand, EasyBuild's own contribution checks and dependency resolution must accept it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from tests.packaging.easyconfig import EASYBUILD_MODULES, EASYCONFIG, GENERATION_SUFFIXES, dependency_versions, extensions, read
from tests.packaging.requirements import RELEASE, runtime_bounds
from tests.packaging.spack_recipe import recipe_text, versions


def uncovered(config: dict, bounds: dict[str, str]) -> list[str]:
    """The requirements `config` leaves out: neither a dependency module (by EASYBUILD_MODULES) nor
    an extension, or an extension older than the bound."""
    problems = []
    exts, deps = extensions(config), dependency_versions(config)
    for name, bound in sorted(bounds.items()):
        if name in exts:
            if Version(exts[name]) < Version(bound):
                problems.append(f"{name}: extension {exts[name]}, pyproject says >={bound}")
        elif EASYBUILD_MODULES.get(name) not in deps:
            problems.append(f"{name}: no dependency module ({EASYBUILD_MODULES.get(name)}) nor extension")
    return problems


def test_the_easyconfig_describes_the_release():
    config = read(EASYCONFIG)
    assert (config["name"], config["version"]) == ("pinlab", RELEASE)
    assert EASYCONFIG.name == f"pinlab-{RELEASE}-{config['toolchain']['name']}-{config['toolchain']['version']}.eb"
    assert extensions(config)["pinlab"] == RELEASE


def test_every_requirement_is_loaded_or_installed():
    assert uncovered(read(EASYCONFIG), runtime_bounds()) == []


@pytest.mark.parametrize(
    "drop, complaint",
    [
        (lambda c: c["dependencies"].remove(("SciPy-bundle", "2025.06")), "numpy: no dependency module"),
        (lambda c: c["exts_list"].pop(0), "pymetis: no dependency module"),
        (lambda c: c.__setitem__("exts_list", [("pymetis", "2022.1", {})]), "pymetis: extension 2022.1"),
    ],
)
def test_a_planted_gap_is_reported(drop, complaint):
    config = read(EASYCONFIG)
    drop(config)
    assert any(problem.startswith(complaint) for problem in uncovered(config, runtime_bounds()))


def test_hwloc_is_a_run_dependency():
    """lstopo is what pinlab reads the machine with: it must be loaded with pinlab's module."""
    assert "hwloc" in dependency_versions(read(EASYCONFIG))


def test_the_sdists_checksums_agree_with_the_spack_recipes():
    """Both recipes name the same files: one refreshed checksum and one forgotten would be wrong."""
    config = read(EASYCONFIG)
    sums = {entry[0]: entry[2]["checksums"][0] for entry in config["exts_list"]}
    assert sums["pinlab"] == versions(recipe_text("py-pinlab"))[RELEASE]
    assert sums["pymetis"] == versions(recipe_text("py-pymetis"))[extensions(config)["pymetis"]]


# --- EasyBuild itself ----------------------------------------------------------------------------


def _eb() -> tuple[list[str], dict[str, str]]:
    """The eb command and an environment it runs in: EasyBuild needs `python` and a modules tool
    (Lmod) on PATH even for its checks, and refuses root unless told."""
    eb = os.environ.get("EB", "/work/eb-venv/bin/eb")
    if not Path(eb).is_file():
        pytest.skip(f"no EasyBuild: no eb at {eb} (from $EB, else /work/eb-venv/bin/eb)")
    lmod = shutil.which("lmod") or next(iter(sorted(Path("/usr/share/lmod").glob("*/libexec/lmod"))), None)
    if lmod is None:
        pytest.skip("no Lmod (EasyBuild's modules tool): apt-get install lmod")
    path = os.pathsep.join([str(Path(eb).parent), str(Path(lmod).parent), os.environ.get("PATH", "")])
    command = [eb] + (["--allow-use-as-root-and-accept-consequences"] if os.geteuid() == 0 else [])
    return command, {**os.environ, "PATH": path}


def _robot_path() -> Path:
    """The easyconfigs that come with the easybuild-easyconfigs package, beside eb's virtualenv."""
    found = Path(_eb()[0][0]).resolve().parent.parent / "easybuild" / "easyconfigs"
    if not found.is_dir():
        pytest.skip(f"no easybuild-easyconfigs at {found}")
    return found


def _run_eb(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    command, env = _eb()
    # Installs, sources and logs would go under ~/.local/easybuild: keep them in the test's folder.
    env["EASYBUILD_PREFIX"] = str(tmp_path / "eb")
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def test_easybuild_accepts_it_for_contribution(tmp_path):
    done = _run_eb(tmp_path, "--check-contrib", str(EASYCONFIG))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All contribution checks PASSed" in done.stdout


def test_easybuild_refuses_a_copy_without_checksums(tmp_path):
    """The check above can fail: EasyBuild refuses an extension with no checksum."""
    text = EASYCONFIG.read_text()
    sha = versions(recipe_text("py-pinlab"))[RELEASE]
    assert f"'checksums': ['{sha}']," in text
    broken = tmp_path / EASYCONFIG.name
    broken.write_text(text.replace(f"'checksums': ['{sha}'],", ""))
    done = _run_eb(tmp_path, "--check-contrib", str(broken))
    assert done.returncode != 0
    assert "All contribution checks PASSed" not in done.stdout


def test_easybuild_resolves_every_dependency(tmp_path):
    done = _run_eb(tmp_path, "--dry-run", "--robot", str(EASYCONFIG))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"(module: pinlab/{RELEASE}-gfbf-2025a)" in done.stdout


def module_shortfalls(config: dict, bounds: dict[str, str], robot: Path) -> list[str]:
    """The requirements whose module, as `config` names it, ships an older version than the bound:
    the modules named for click, numpy... hold them as extensions, and their easyconfigs under
    `robot` say which version."""
    deps = dependency_versions(config)
    problems = []
    for name, bound in sorted(bounds.items()):
        module = EASYBUILD_MODULES.get(name)
        if module is None:
            continue
        candidates = [robot / module[0].lower() / module / f"{module}-{deps[module]}-{suffix}.eb" for suffix in GENERATION_SUFFIXES]
        found = [path for path in candidates if path.is_file()]
        if not found:
            problems.append(f"{name}: no easyconfig for {module} {deps[module]}")
            continue
        provider = read(found[0])
        version = provider["version"] if module.lower() == name else extensions(provider).get(name)
        if version is None or Version(version) < Version(bound):
            problems.append(f"{name}: {module} {deps[module]} ships {version}, pyproject says >={bound}")
    return problems


def test_the_modules_ship_versions_pinlab_accepts():
    assert module_shortfalls(read(EASYCONFIG), runtime_bounds(), _robot_path()) == []


def test_a_module_too_old_is_reported():
    bounds = {**runtime_bounds(), "numpy": "99.0"}
    problems = module_shortfalls(read(EASYCONFIG), bounds, _robot_path())
    assert [problem.split(",")[0] for problem in problems] == ["numpy: SciPy-bundle 2025.06 ships 2.3.1"]
