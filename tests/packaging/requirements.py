"""pinlab's own statement of what it needs, read from pyproject.toml, for the tests that hold the
Spack and EasyBuild recipes to it: the recipes restate these requirements in their own languages,
and nothing else notices when a bound in pyproject.toml moves and a recipe does not.

tests/packaging has no __init__.py on purpose: as a regular package named `packaging` on the
test run's sys.path (tests/ is on it, for conftest.py) it would hide the `packaging` library."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib", reason="tomllib (Python 3.11+) reads pyproject.toml")

REPO = Path(__file__).resolve().parents[2]
PACKAGING = REPO / "packaging"

# The release the recipes describe: the changelog's newest (tests/test_version.py holds it equal to
# the newest git tag, the version's only source). The installed package's version is not used: it
# changes between releases (development versions), while a recipe names a published sdist. At each
# release the recipes' version entries and sdist checksums follow.
RELEASE = re.search(r"^## \[(\d+\.\d+\.\d+)\] - ", (REPO / "CHANGELOG.md").read_text(), re.M).group(1)


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def lower_bounds(requirements: list[str]) -> dict[str, str]:
    """Each requirement's name (normalised) -> its lower bound. The recipes spell only lower bounds,
    so a requirement with any other kind of constraint is refused here: the recipes would need a
    new rule, which someone must write rather than have the check pass over it."""
    bounds = {}
    for text in requirements:
        req = Requirement(text)
        specs = list(req.specifier)
        if req.marker or req.extras or len(specs) != 1 or specs[0].operator != ">=":
            raise ValueError(f"{text!r}: only a single '>=' bound is mirrored in the recipes")
        bounds[req.name.lower().replace("_", "-")] = specs[0].version
    return bounds


def runtime_bounds() -> dict[str, str]:
    """[project].dependencies as name -> lower bound."""
    return lower_bounds(pyproject()["project"]["dependencies"])


def python_bound() -> str:
    """The lower bound of requires-python."""
    return lower_bounds([f"python{pyproject()['project']['requires-python']}"])["python"]
