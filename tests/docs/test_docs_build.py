"""The manual builds with `mkdocs build --strict`, and its command pages are the commands' own help."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.markdown_examples import DOCS, ROOT

BIN = Path(sys.executable).parent
sys.path.insert(0, str(DOCS / "hooks"))
import pinlab_help  # noqa: E402  (the build's own hook: the same code renders the pages)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (
        f"mkdocs build --strict failed (is mkdocs installed? make install installs the docs extra):\n{done.stdout}\n{done.stderr}"
    )
    return out


def test_the_manual_builds_strictly(site: Path):
    for page in ("index.html", "guides/pin/index.html", "reference/bibliography/index.html", "commands/run/index.html"):
        assert (site / page).is_file(), page


def test_every_command_has_a_page_that_shows_its_help():
    top = [path for path in pinlab_help.commands() if " " not in path]
    assert {"run", "place", "study", "autopin", "trace", "workload", "graph"} <= set(top)
    missing = [
        name
        for name in top
        if f"<!-- pinlab-help: {name} -->" not in (DOCS / "commands" / f"{name}.md").read_text()
        if (DOCS / "commands" / f"{name}.md").exists()
    ] + [name for name in top if not (DOCS / "commands" / f"{name}.md").exists()]
    assert not missing, f"commands without a page in docs/commands/ (with <!-- pinlab-help: NAME -->): {missing}"
    nav = (ROOT / "mkdocs.yml").read_text()
    assert not [name for name in top if f"commands/{name}.md" not in nav], "a command page missing from mkdocs.yml's nav"


def pre_blocks(page: Path) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in re.findall(r"<pre[^>]*>(.*?)</pre>", page.read_text(), re.S)]


@pytest.mark.parametrize("command", ["run", "study", "graph show", "workload run", "corun"])
def test_the_built_pages_show_exactly_what_help_prints(site: Path, command: str):
    printed = subprocess.run(
        [str(BIN / "pinlab"), *command.split(), "--help"], capture_output=True, text=True, env=dict(os.environ, COLUMNS="200"), timeout=600
    )
    assert printed.returncode == 0
    page = site / "commands" / command.split()[0] / "index.html"
    assert printed.stdout.strip() in [block.strip() for block in pre_blocks(page)], f"the page of pinlab {command} does not show its --help"


def test_the_hook_finds_the_group_behind_the_entry_point():
    group = pinlab_help.root_group()
    assert group.get_command(None, "run") is not None
    with pytest.raises(KeyError):
        pinlab_help.help_text("no-such-command")


def test_the_python_api_page_documents_the_public_names(site: Path):
    text = (site / "reference" / "python-api" / "index.html").read_text()
    for name in ("run", "load_study"):
        assert f'id="pinlab.{name}"' in text, f"pinlab.{name} is not documented"
