"""Every module, object and source path the manual and the README name exists: moving code
without updating the pages that point at it fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]
DOTTED = re.compile(r"(?<![\w./-])pinlab(?:\.[A-Za-z_]\w*)+")
SOURCE_PATH = re.compile(r"(?<![\w/])((?:src/pinlab|native|tests|bench|tools)/[\w./-]*\w/?)")
PACKAGE_PATH = re.compile(r"(?<![\w/])pinlab/([\w/]+\.py)")  # a module named by its path in the package
#: Dotted names that are files, not modules (pinlab.db, a study's default file).
FILE_SUFFIXES = {"db", "json", "jsonl", "xml", "csv", "svg", "png", "html", "txt"}
PLACEHOLDER = re.compile(r"[A-Z]{3,}")  # tests/DIR/test_FILE.py: a pattern, not a path


def resolves(name: str) -> bool:
    """``pinlab.a.b.c``: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{attribute}")
                    continue
                except (ImportError, AttributeError):
                    return False
            obj = getattr(obj, attribute)
        return True
    return False


def names(pattern: re.Pattern, text: str) -> set[str]:
    return {m.rstrip(".") for m in pattern.findall(text)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_and_path_a_page_names_exists(page):
    text = page.read_text()
    missing = sorted(n for n in names(DOTTED, text) if n.rsplit(".", 1)[1] not in FILE_SUFFIXES and not resolves(n))
    missing += sorted(p for p in names(SOURCE_PATH, text) if "*" not in p and not PLACEHOLDER.search(p) and not (REPO / p).exists())
    missing += sorted(f"pinlab/{p}" for p in names(PACKAGE_PATH, text) if not (REPO / "src" / "pinlab" / p).exists())
    assert not missing, f"{page.relative_to(REPO)} names what does not exist: {missing}"


def test_the_code_layout_table_names_only_files_that_exist():
    rows = [line for line in (REPO / "docs" / "development" / "code-layout.md").read_text().splitlines() if line.startswith("| `")]
    assert len(rows) > 10
    for row in rows:
        where, what = row.split("|")[1:3]
        first = re.findall(r"`([^`]+)`", where)[0]
        if first.endswith("/") and first.startswith("src/"):
            for module in re.findall(r"`([\w]+\.py)`", what):
                assert (REPO / first / module).exists(), f"{first}{module} (docs/development/code-layout.md)"


def test_the_check_sees_a_module_that_moved():
    assert resolves("pinlab.placement.mapping.map_threads")
    assert not resolves("pinlab.graph.mapping.map_threads")
    assert names(SOURCE_PATH, "see `src/pinlab/graph/trace/` and native/preload/x.c.") == {"src/pinlab/graph/trace/", "native/preload/x.c"}
    assert names(PACKAGE_PATH, "(see `pinlab/graph/trace/pages.py`)") == {"graph/trace/pages.py"}
    assert not (REPO / "src" / "pinlab" / "graph" / "trace" / "pages.py").exists()


CITATION = re.compile(r"\[([a-z]+\d{4}[a-z]*)\]")


def test_every_citation_in_the_code_is_in_the_bibliography():
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', (REPO / "docs" / "reference" / "bibliography.md").read_text()))
    cited = {}
    for path in [*(REPO / "src").rglob("*.py"), *(REPO / "native").rglob("*.[ch]")]:
        for key in CITATION.findall(path.read_text()):
            cited.setdefault(key, str(path.relative_to(REPO)))
    assert len(cited) >= 5, cited  # the five source papers at least
    assert not {k: v for k, v in cited.items() if k not in anchors}, "cited in the code but not in docs/reference/bibliography.md"
    assert CITATION.findall("ForestGOMP [broquedis2010forestgomp], sections 4.1.2") == ["broquedis2010forestgomp"]
