"""Reads EasyBuild easyconfigs without EasyBuild. An easyconfig is Python assignments; EasyBuild
runs it with its own constants (SOURCE_TAR_GZ, PYPI_SOURCE, SHLIB_EXT...) defined, so here any
unknown name reads as a placeholder string, enough to get at names, versions and lists."""

from __future__ import annotations

from pathlib import Path

from tests.packaging.requirements import PACKAGING

EASYCONFIG = PACKAGING / "easybuild" / "pinlab-0.2.0-gfbf-2025a.eb"

# The generation the easyconfig is written for: its toolchain and the GCCcore under it, the two
# suffixes of the modules it depends on.
GENERATION_SUFFIXES = ("gfbf-2025a", "GCCcore-14.2.0")

# pyproject.toml's requirement -> the EasyBuild module of that generation that ships it, as a module
# of its own or as an extension of a bundle. A requirement none provides must be an extension of
# the pinlab easyconfig itself.
EASYBUILD_MODULES = {
    "click": "Python-bundle-PyPI",
    "rich": "Python-bundle-PyPI",
    "jinja2": "Python-bundle-PyPI",
    "psutil": "Python-bundle-PyPI",
    "numpy": "SciPy-bundle",
    "scipy": "SciPy-bundle",
    "pandas": "SciPy-bundle",
    "matplotlib": "matplotlib",
}


class _Placeholders(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def read(path: Path) -> dict:
    names = _Placeholders()
    exec(compile(path.read_text(), str(path), "exec"), {}, names)
    return dict(names)


def extensions(config: dict) -> dict[str, str]:
    """exts_list as normalised name -> version."""
    found = {}
    for entry in config.get("exts_list", []):
        name, version = (entry, "") if isinstance(entry, str) else entry[:2]
        found[name.lower().replace("_", "-")] = version
    return found


def dependency_versions(config: dict, key: str = "dependencies") -> dict[str, str]:
    return {dep[0]: dep[1] for dep in config.get(key, [])}
