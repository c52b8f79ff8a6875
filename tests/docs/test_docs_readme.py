"""The README: short, the two commands for a fresh machine first, and links into the manual that resolve."""

from __future__ import annotations

import re

from tests.docs.markdown_examples import DOCS, README, ROOT

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def test_the_readme_has_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_the_readme_starts_with_the_two_commands_for_a_fresh_machine():
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[0] == "# pinlab"
    commands = [line.split("#")[0].strip() for line in lines[1:4] if line.startswith("    ")]
    assert commands == ["make demo", "make test"], lines[:4]


def links_into_docs() -> list[str]:
    return [m["target"] for m in LINK.finditer(README.read_text()) if m["target"].startswith("docs/")]


def test_every_link_from_the_readme_into_the_manual_resolves():
    links = links_into_docs()
    assert len(links) >= 20
    broken = []
    for target in links:
        path, _, anchor = target.partition("#")
        file = ROOT / path
        if file.is_dir():
            file = file / "index.md"
        if not file.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in headings(file):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, "\n".join(broken)


def headings(page) -> set[str]:
    """The anchors MkDocs gives a page's headings (lower case, punctuation dropped, spaces as -)."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            text = line.lstrip("#").strip().replace("`", "")
            found.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower()))
    return found


def test_the_readme_picture_is_in_the_manual():
    pictures = re.findall(r"!\[[^\]]*\]\((?P<target>[^)]+)\)", README.read_text())
    assert pictures and all((ROOT / p).is_file() for p in pictures)
    assert all(p.startswith("docs/") for p in pictures)
    assert (DOCS / "assets" / "clovertown-scatter.svg").read_text().lstrip().startswith("<?xml")
