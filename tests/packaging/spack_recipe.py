"""Reads a Spack package.py without Spack: its version() and depends_on() directives, taken from the
syntax tree, so the recipe can be checked on any machine, Spack or not."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from tests.packaging.requirements import PACKAGING

SPACK_REPO = PACKAGING / "spack"

# pyproject.toml's requirement -> the Spack package that provides it. Spack names Python packages
# "py-" + the PyPI name, but the mapping is spelt out so that a new requirement has to be placed
# here by someone who checked the Spack name exists (or wrote the recipe, as for pymetis).
SPACK_NAMES = {
    "click": "py-click",
    "rich": "py-rich",
    "matplotlib": "py-matplotlib",
    "numpy": "py-numpy",
    "scipy": "py-scipy",
    "pandas": "py-pandas",
    "jinja2": "py-jinja2",
    "psutil": "py-psutil",
    "pymetis": "py-pymetis",
}


@dataclass(frozen=True)
class Dependency:
    name: str
    versions: str  # what follows "@" in the spec ("" when none), e.g. "8.1:"
    types: tuple[str, ...]
    when: str


def recipe_text(package: str) -> str:
    return (SPACK_REPO / "packages" / package / "package.py").read_text()


def _package_class(tree: ast.Module) -> ast.ClassDef:
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    if len(classes) != 1:
        raise ValueError(f"expected one package class, found {len(classes)}")
    return classes[0]


def _directives(text: str, name: str) -> list[ast.Call]:
    """Calls of the directive `name` in the class body, those under an `if` included (the recipes
    put the compiler dependencies under one)."""
    cls = _package_class(ast.parse(text))
    return [node for node in ast.walk(cls) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name and node.args]


def _keyword(call: ast.Call, key: str, default):
    for kw in call.keywords:
        if kw.arg == key:
            return ast.literal_eval(kw.value)
    return default


def versions(text: str) -> dict[str, str]:
    """version("X", sha256="...") -> {X: sha256}."""
    return {ast.literal_eval(call.args[0]): _keyword(call, "sha256", "") for call in _directives(text, "version")}


def dependencies(text: str) -> list[Dependency]:
    deps = []
    for call in _directives(text, "depends_on"):
        spec = ast.literal_eval(call.args[0])
        match = re.fullmatch(r"([a-z0-9-]+)(?:@([^+~\s^]*))?(.*)", spec)
        if not match:
            raise ValueError(f"cannot read the spec {spec!r}")
        types = _keyword(call, "type", ("build", "link"))
        types = (types,) if isinstance(types, str) else tuple(types)
        deps.append(Dependency(match[1], match[2] or "", types, _keyword(call, "when", "")))
    return deps


def mismatches(text: str, bounds: dict[str, str], python: str, build: dict[str, str], release: str) -> list[str]:
    """How the py-pinlab recipe `text` departs from pyproject's requirements: each requirement must
    be an unconditional run dependency on its Spack package from the same lower bound, no other
    Python package may be a run dependency, and each of `build` (Spack name -> lower bound) must be
    a build dependency from that bound."""
    problems = []
    if list(versions(text)) != [release]:
        problems.append(f"versions {list(versions(text))}, expected only {release}")
    run = {}
    for dep in dependencies(text):
        if "run" in dep.types and not dep.when:
            run[dep.name] = dep
    wanted = {SPACK_NAMES[name]: bound for name, bound in bounds.items()}
    wanted["python"] = python
    for name, bound in sorted(wanted.items()):
        dep = run.get(name)
        if dep is None:
            problems.append(f"{name}: no unconditional run dependency")
        elif dep.versions != f"{bound}:":
            problems.append(f"{name}: @{dep.versions}, pyproject says >={bound} (@{bound}:)")
    for name in sorted(set(run) - set(wanted)):
        if name.startswith("py-"):
            problems.append(f"{name}: a run dependency pyproject.toml does not have")
    built = {dep.name: dep for dep in dependencies(text) if "build" in dep.types and not dep.when}
    for name, bound in sorted(build.items()):
        if name not in built:
            problems.append(f"{name}: no build dependency")
        elif built[name].versions != f"{bound}:":
            problems.append(f"{name}: @{built[name].versions}, pyproject says >={bound} (@{bound}:)")
    return problems
