"""The Spack recipes in packaging/spack: read as text they must restate pyproject.toml's requirements,
and, where a Spack checkout is at hand, Spack itself must concretise py-pinlab against this machine's
Python and hwloc."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.packaging.requirements import RELEASE, lower_bounds, pyproject, python_bound, runtime_bounds
from tests.packaging.spack_recipe import SPACK_NAMES, SPACK_REPO, dependencies, mismatches, recipe_text, versions


def _build_bounds() -> dict[str, str]:
    """What pyproject.toml says the build needs, by Spack name: every build requirement (the
    backend, the version from the git tag, click for the man pages) and CMake."""
    data = pyproject()
    build = {f"py-{name}": bound for name, bound in lower_bounds(data["build-system"]["requires"]).items()}
    cmake = lower_bounds([f"cmake{data['tool']['scikit-build']['cmake']['version']}"])
    return {**build, "cmake": cmake["cmake"]}


def _mismatches(text: str) -> list[str]:
    return mismatches(text, runtime_bounds(), python_bound(), _build_bounds(), RELEASE)


def test_the_recipe_restates_pyprojects_requirements():
    assert _mismatches(recipe_text("py-pinlab")) == []


def test_every_requirement_has_a_spack_name():
    assert sorted(runtime_bounds()) == sorted(SPACK_NAMES)


@pytest.mark.parametrize(
    "old, new, complaint",
    [
        ('"py-numpy@1.24:"', '"py-numpy@1.23:"', "py-numpy: @1.23:"),
        ('    depends_on("py-pymetis@2023.1:", type=("build", "run"))\n', "", "py-pymetis: no unconditional run dependency"),
        ('"py-psutil@5.9:", type=("build", "run")', '"py-psutil@5.9:", type="build"', "py-psutil: no unconditional run dependency"),
        ('version("0.2.0"', 'version("0.1.9"', "versions ['0.1.9']"),
        ('"python@3.10:"', '"python@3.9:"', "python: @3.9:"),
        ('"py-scikit-build-core@0.10:+pyproject"', '"py-scikit-build-core@0.7:+pyproject"', "py-scikit-build-core: @0.7:"),
        (
            'depends_on("hwloc@2:", type="run")',
            'depends_on("hwloc@2:", type="run")\n    depends_on("py-pyyaml", type="run")',
            "py-pyyaml: a run dependency",
        ),
    ],
)
def test_a_planted_mismatch_is_reported(old, new, complaint):
    text = recipe_text("py-pinlab")
    assert old in text
    problems = _mismatches(text.replace(old, new, 1))
    assert any(problem.startswith(complaint) for problem in problems), problems


def test_a_bound_that_is_not_a_lower_bound_is_refused():
    """pyproject.toml gaining `numpy>=1.24,<3` needs a recipe rule: the check must not pass it by."""
    with pytest.raises(ValueError, match="single '>=' bound"):
        lower_bounds(["numpy>=1.24,<3"])


def test_the_pymetis_recipe_offers_a_version_pinlab_accepts():
    """Spack's builtin repository has no PyMetis, so packaging/spack carries one; it must hold a
    release from pinlab's bound on, each with a checksum."""
    bound = tuple(int(part) for part in runtime_bounds()["pymetis"].split("."))
    held = versions(recipe_text("py-pymetis"))
    assert any(tuple(int(part) for part in version.split(".")) >= bound for version in held), held
    assert all(re.fullmatch(r"[0-9a-f]{64}", sha) for sha in held.values()), held


def test_the_repository_is_a_spack_repository_named_pinlab():
    assert re.search(r"^\s+namespace:\s*pinlab\s*$", (SPACK_REPO / "repo.yaml").read_text(), re.M)
    packages = sorted(path.parent.name for path in (SPACK_REPO / "packages").glob("*/package.py"))
    assert packages == ["py-pinlab", "py-pymetis"]
    # Spack runs a recipe as Python: it must at least be valid Python.
    for name in packages:
        compile(recipe_text(name), name, "exec")


def test_the_options_are_run_dependencies_only_when_chosen():
    deps = {dep.name: dep for dep in dependencies(recipe_text("py-pinlab"))}
    for variant, package in [("+numactl", "numactl"), ("+likwid", "likwid"), ("+mpi", "mpi")]:
        assert deps[package].when == variant and deps[package].types == ("run",)
    assert deps["hwloc"].when == "" and deps["hwloc"].types == ("run",)


# --- Spack itself --------------------------------------------------------------------------------


def _spack_checkout() -> Path:
    root = Path(os.environ.get("SPACK_ROOT", "/work/spack"))
    if not (root / "bin" / "spack").is_file():
        pytest.skip(f"no Spack checkout: no bin/spack under {root} (from $SPACK_ROOT, else /work/spack)")
    return root


def _spack_python() -> str:
    """An interpreter with clingo, Spack's solver: without one Spack would bootstrap clingo from
    the network, which this check must not need. $SPACK_PYTHON is Spack's own variable for it."""
    for candidate in [os.environ.get("SPACK_PYTHON"), "/work/spack-venv/bin/python", sys.executable]:
        if candidate and Path(candidate).is_file():
            if subprocess.run([candidate, "-c", "import clingo"], capture_output=True).returncode == 0:
                return candidate
    pytest.skip("no Python with the clingo module ($SPACK_PYTHON, /work/spack-venv/bin/python, this one)")


def _version_of(command: list[str]) -> str:
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return re.search(r"(\d+\.\d+(?:\.\d+)?)", out)[1]


def _externals_config(scope: Path, python: str, lstopo: str) -> None:
    """A user scope declaring this machine's Python and hwloc as the only ones Spack may use."""
    python_prefix = Path(python).resolve().parent.parent
    hwloc_prefix = Path(lstopo).resolve().parent.parent
    scope.mkdir(parents=True)
    (scope / "packages.yaml").write_text(
        "packages:\n"
        "  python:\n    buildable: false\n    externals:\n"
        f"    - spec: python@{_version_of([python, '--version'])}\n      prefix: {python_prefix}\n"
        "  hwloc:\n    buildable: false\n    externals:\n"
        f"    - spec: hwloc@{_version_of([lstopo, '--version'])}\n      prefix: {hwloc_prefix}\n"
    )


def _pins_for_an_old_checkout(root: Path) -> list[str]:
    """A checkout older than the recipe's floor (Spack 0.x before scikit-build-core 0.10 was added)
    cannot satisfy py-scikit-build-core@0.10:; naming a newer release exactly lets its concretiser
    take a version its builtin recipe does not list, so the rest of the recipe is still checked."""
    old = root / "var" / "spack" / "repos" / "builtin" / "packages" / "py-scikit-build-core" / "package.py"
    if not old.is_file():
        return []
    listed = re.findall(r'version\(\s*"(\d+)\.(\d+)', old.read_text())
    return [] if any((int(a), int(b)) >= (0, 10) for a, b in listed) else ["^py-scikit-build-core@=0.11.5"]


def _user_cache(request) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return cache.mkdir("spack-user-cache")
    path = Path(tempfile.gettempdir()) / "pinlab-spack-user-cache"
    path.mkdir(exist_ok=True)
    return path


def test_spack_concretises_py_pinlab_with_the_machines_python_and_hwloc(tmp_path, request):
    root = _spack_checkout()
    interpreter = _spack_python()
    python, lstopo = "/usr/bin/python3", shutil.which("lstopo")
    if not Path(python).is_file() or lstopo is None:
        pytest.skip("needs /usr/bin/python3 and lstopo to declare as Spack externals")
    _externals_config(tmp_path / "user", python, lstopo)
    env = {
        **os.environ,
        "SPACK_USER_CONFIG_PATH": str(tmp_path / "user"),
        "SPACK_SYSTEM_CONFIG_PATH": str(tmp_path / "system"),
        # Spack's indexes of its package repositories take minutes to build on a small machine;
        # kept between runs in pytest's cache, as Spack keeps them in ~/.spack (in the temporary
        # directory when pytest runs without its cache: -p no:cacheprovider, as make test-busy does).
        "SPACK_USER_CACHE_PATH": str(_user_cache(request)),
    }

    def spack(*args: str) -> subprocess.CompletedProcess:
        # The timeout only catches a hang: concretising with a cold index took over 10 minutes
        # beside the busy suite's co-runners (2.5 minutes on a quiet machine).
        return subprocess.run([interpreter, str(root / "bin" / "spack"), *args], capture_output=True, text=True, env=env, timeout=3600)

    for args in [("repo", "add", "--scope", "user", str(SPACK_REPO)), ("compiler", "find", "--scope", "user")]:
        done = spack(*args)
        assert done.returncode == 0, done.stderr
    spec = spack("spec", "--namespaces", "py-pinlab", *_pins_for_an_old_checkout(root))
    assert spec.returncode == 0, spec.stdout + spec.stderr
    concrete = spec.stdout.split("Concretized", 1)[1]
    assert re.search(rf"^ -   pinlab\.py-pinlab@{re.escape(RELEASE)}\b.*\+numactl", concrete, re.M), concrete
    # "[e]": taken from the externals declared above, not to be built.
    assert re.search(r"^\[e\]\s+\^builtin\.python@", concrete, re.M), concrete
    assert re.search(r"^\[e\]\s+\^builtin\.hwloc@", concrete, re.M), concrete
    # PyMetis comes from the recipe beside py-pinlab.
    assert re.search(r"\^pinlab\.py-pymetis@\d", concrete), concrete
