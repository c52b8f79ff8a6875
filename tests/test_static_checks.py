"""The static checks make test runs (docs/development/architecture.md) pass on the tree and fail on
a violation planted in a copy of it: an upward import, a circle between modules, an unused
import, a badly formatted line."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in this environment (make install installs it)")
    return str(path)


@pytest.fixture
def package_copy(tmp_path):
    """src/pinlab's Python files, copied: what import-linter analyses when PYTHONPATH points there."""
    shutil.copytree(REPO / "src" / "pinlab", tmp_path / "src" / "pinlab", ignore=shutil.ignore_patterns("*.so", "*.xml", "__pycache__"))
    return tmp_path / "src"


def _lint_imports(src: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run(
        [_tool("lint-imports"), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=src.parent,
        timeout=600,
    )


def _plant(module: Path, line: str) -> None:
    text = module.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    module.write_text(head + sep + line + "\n" + rest if sep else line + "\n" + text)


def test_the_layers_hold(package_copy):
    result = _lint_imports(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers(package_copy):
    _plant(package_copy / "pinlab" / "topology" / "model.py", "import pinlab.study.store  # planted")
    result = _lint_imports(package_copy)
    assert result.returncode != 0
    assert "pinlab.topology is not allowed to import pinlab.study" in result.stdout, result.stdout


def test_an_import_between_siblings_of_one_layer_breaks_the_layers(package_copy):
    _plant(package_copy / "pinlab" / "live" / "pin.py", "import pinlab.launch.runner  # planted")
    result = _lint_imports(package_copy)
    assert result.returncode != 0
    assert "pinlab.live is not allowed to import pinlab.launch" in result.stdout, result.stdout


def test_a_circle_inside_a_package_breaks_the_acyclic_contract(package_copy):
    _plant(package_copy / "pinlab" / "placement" / "units.py", "import pinlab.placement.registry  # planted")
    result = _lint_imports(package_copy)
    assert result.returncode != 0
    assert "No cycles are allowed in pinlab.placement" in result.stdout, result.stdout


def test_ruff_passes_on_the_tree_and_refuses_an_unused_import_and_a_bad_format(tmp_path):
    ruff = _tool("ruff")
    clean = subprocess.run([ruff, "check", "src", "tests", "bench", "tools"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    formatted = subprocess.run([ruff, "format", "--check", "src", "tests", "bench", "tools"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef f(a,b):\n    return a+b\n")
    check = subprocess.run([ruff, "check", str(planted)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert check.returncode != 0 and "F401" in check.stdout, check.stdout
    fmt = subprocess.run([ruff, "format", "--check", str(planted)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert fmt.returncode == 1 and "planted.py" in fmt.stdout + fmt.stderr, fmt.stdout + fmt.stderr  # 1: it would reformat the file


#: Third-party modules heavy enough that a command's path should not pay for them until it needs them.
LAZY_ALLOWED = {"numpy", "pandas", "scipy", "matplotlib", "rich", "jinja2", "pymetis", "psutil"}
#: Modules whose imports of pinlab's own layers may wait inside a function, and why: the root's
#: public names load their layers when called, so that `import pinlab` stays cheap; the doctor
#: imports its checks and launcher once it has watched, as a watched program shares its CPUs with
#: the doctor's start-up; completion imports the strategies' names when a shell asks for them.
LAZY_INTERNAL = {Path("src/pinlab/__init__.py"), Path("src/pinlab/doctor/__init__.py"), Path("src/pinlab/cli/completion.py")}


def lazy_imports(root: Path) -> list[str]:
    """Every import statement inside a function of the package at ``root`` that is not of a heavy third-party module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in (n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if isinstance(node, ast.ImportFrom) and node.level or any(name.split(".")[0] not in LAZY_ALLOWED for name in names):
                    where = path.relative_to(root.parent.parent)
                    if where not in LAZY_INTERNAL:
                        found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def test_imports_inside_functions_are_only_of_heavy_third_party_modules(tmp_path):
    assert lazy_imports(REPO / "src" / "pinlab") == []
    planted = tmp_path / "src" / "pinlab"
    planted.mkdir(parents=True)
    (planted / "m.py").write_text("def f():\n    import json\n    from pinlab import errors\n    import numpy\n")
    assert lazy_imports(planted) == ["src/pinlab/m.py:2 import json", "src/pinlab/m.py:3 from pinlab import errors"]
