"""Man pages and shell completion, as a user gets them from an installed pinlab.

The pages are written at build time from the click commands (pinlab.cli.manpages); these tests
check that every visible command has one listing every option, that roff renders them without a
warning, that the wheel put them where man finds them, and that completion through click's
protocol lists commands, options and the placement strategies.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from pinlab.cli import REGISTRY, cli
from pinlab.cli.manpages import escape, write
from pinlab.placement.strategies import ALIASES, GRAPH_STRATEGIES, STRATEGIES
from tests.conftest import PINLAB

PREFIX = Path(sys.prefix)
#: Everything pinlab needs at run time but the build does not have (its only requirement is click).
NOT_AT_BUILD_TIME = ("numpy", "scipy", "pandas", "matplotlib", "rich", "jinja2", "psutil", "pymetis")


def visible_commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        if group is cli and REGISTRY[name][1] is None:
            continue
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        found.append(((*path, name), command))
        if isinstance(command, click.Group):
            found.extend(visible_commands(command, (*path, name)))
    return found


@pytest.fixture(scope="module")
def man1(tmp_path_factory) -> Path:
    """The pages as the build writes them: in a fresh interpreter, because click keeps a command's
    help option from its first use, and other tests use the commands without pinlab's group."""
    out = tmp_path_factory.mktemp("man") / "man1"
    subprocess.run([sys.executable, "-m", "pinlab.cli.manpages", str(out)], check=True, capture_output=True, timeout=300)
    return out


def section(text: str, name: str) -> str:
    match = re.search(rf"^\.SH {name}\n(.*?)(?=^\.SH |\Z)", text, re.S | re.M)
    assert match, f"no {name} section"
    return match.group(1)


def test_every_visible_command_has_a_page_listing_every_option(man1: Path):
    commands = visible_commands()
    assert {("run",), ("place",), ("graph", "show"), ("workload", "run")} <= {path for path, _ in commands}
    expected = {"pinlab.1"} | {"-".join(("pinlab", *path)) + ".1" for path, _ in commands}
    assert {p.name for p in man1.iterdir()} == expected
    for path, command in commands:
        text = (man1 / ("-".join(("pinlab", *path)) + ".1")).read_text()
        assert text.startswith(f'.TH "{escape("-".join(("PINLAB", *path)).upper())}" 1 ')
        options = section(text, "OPTIONS")
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for name in (*param.opts, *param.secondary_opts):
                    assert escape(name) in options, f"pinlab {' '.join(path)}: {name} missing from its page"
        summary = (command.help or "").strip().splitlines()[0]
        assert escape(summary) in section(text, "NAME")


def test_hidden_commands_have_no_page(man1: Path):
    hidden = [name for name, (_, summary) in REGISTRY.items() if summary is None]
    assert hidden
    for name in hidden:
        assert not (man1 / f"pinlab-{name}.1").exists()
        assert f"pinlab\\-{name}(" not in (man1 / "pinlab.1").read_text()


def test_the_pages_show_the_defaults_and_choices_of_the_help(man1: Path):
    study = section((man1 / "pinlab-study.1").read_text(), "OPTIONS")
    assert "[default: none,compact,scatter]" in study
    assert "[interleaved|blocked|shuffled]" in study
    top = (man1 / "pinlab.1").read_text()
    assert all(f"\\fB{escape('pinlab-' + name)}\\fR(1)" in section(top, "COMMANDS") for name, (_, s) in REGISTRY.items() if s is not None)


def test_roff_specials_are_escaped():
    assert escape("a-b") == "a\\-b"
    assert escape("C:\\path") == "C:\\epath"
    assert escape(".start\n'quote\nmid.dle") == "\\&.start\n\\&'quote\nmid.dle"
    assert escape("é") == "\\[u00E9]"


def test_a_docstring_that_would_be_a_roff_request_stays_text(tmp_path: Path):
    @click.group()
    def group() -> None:
        """Top."""

    @group.command()
    @click.option("--x", help=".so /etc/passwd and a \\ backslash")
    def sub(x) -> None:
        """Sub.

        .TH not a title,
        rewrapped.

        \b
        .SH kept as written
        'also not a request
        """

    written = write(tmp_path, group)
    text = (tmp_path / "pinlab-sub.1").read_text()
    assert [p.name for p in written] == ["pinlab.1", "pinlab-sub.1"]
    assert "\n\\&.TH not a title, rewrapped.\n" in text
    assert "\n.nf\n\\&.SH kept as written\n\\&'also not a request\n.fi\n" in text
    assert "\n\\&.so /etc/passwd and a \\e backslash\n" in text


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_every_page_renders_without_a_warning(man1: Path):
    for page in sorted(man1.iterdir()):
        done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stderr == "", f"{page.name}: {done.stderr}"


def _man() -> str | None:
    """The man command, unless missing or the stub of a minimized Ubuntu (a script that only says
    to run unminimize)."""
    found = shutil.which("man")
    try:
        if found and "unminimize" in Path(found).read_text(errors="replace")[:4096]:
            return None
    except OSError:
        pass
    return found


@pytest.mark.skipif(_man() is None, reason="man is not installed (or is a minimized system's stub)")
def test_man_renders_a_page(man1: Path):
    done = subprocess.run(
        ["man", "-l", str(man1 / "pinlab-place.1")], capture_output=True, text=True, env=dict(os.environ, MANWIDTH="100", MANPAGER="cat")
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    shown = done.stdout.replace("\u2212", "-").replace("\u2010", "-")  # groff may draw \- as a minus sign
    assert "pinlab-place - Compute a placement" in shown
    assert "-s, --strategy TEXT" in shown


def test_the_command_modules_import_with_click_alone(tmp_path: Path):
    """The build runs the generator where only click is installed: a command module that imports
    numpy (or rich...) at its top would break every build from a source archive."""
    code = f"""
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NOT_AT_BUILD_TIME!r}:
            raise ModuleNotFoundError(f"{{name}} is not there at build time")
sys.meta_path.insert(0, Absent())
from pinlab.cli.manpages import main
main([sys.argv[1], "--completions", sys.argv[2]])
"""
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "man1"), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "man1" / "pinlab-run.1").is_file()
    assert (tmp_path / "zsh" / "site-functions" / "_pinlab").is_file()


def test_the_installed_pages_are_where_man_finds_them(man1: Path):
    installed = PREFIX / "share" / "man" / "man1" / "pinlab-run.1"
    assert installed.is_file(), "make install did not put the man pages in the environment's share/man/man1"
    assert _body(installed.read_text()) == _body((man1 / "pinlab-run.1").read_text()), "the installed page is not the one this pinlab writes"
    assert "\\-h, \\-\\-help" in installed.read_text()
    if _man() is None:
        pytest.skip("man is not installed (or is a minimized system's stub)")
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    env["PATH"] = f"{PREFIX / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    found = subprocess.run(["man", "-w", "pinlab-run"], capture_output=True, text=True, env=env, timeout=60)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).resolve() == installed.resolve()


def _body(page: str) -> str:
    """A page without its title line (which holds the date it was written)."""
    return page.split("\n", 1)[1]


def test_the_installed_completion_scripts():
    for relative, marker in (
        ("bash-completion/completions/pinlab", "_PINLAB_COMPLETE=bash_complete"),
        ("zsh/site-functions/_pinlab", "#compdef pinlab"),
        ("fish/vendor_completions.d/pinlab.fish", "_PINLAB_COMPLETE=fish_complete"),
    ):
        assert marker in (PREFIX / "share" / relative).read_text(), relative


def complete(words: str) -> list[str]:
    """What ``pinlab``'s completion answers for the command line ``words`` (the last word the one being typed)."""
    parts = words.split(" ")
    env = dict(os.environ, _PINLAB_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(len(parts) - 1))
    done = subprocess.run([str(PINLAB)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]  # bash's lines: TYPE,VALUE


def test_completing_s_lists_the_library_s_strategies():
    offered = complete("pinlab place -s ")
    assert "compact" in offered and "scatter" in offered
    assert offered == [*STRATEGIES, *GRAPH_STRATEGIES, *ALIASES]
    assert complete("pinlab run -s sc") == ["scatter"]
    assert complete("pinlab study -s none,comp") == ["none,compact"]


def test_completing_a_command_name_and_options():
    assert complete("pinlab pl") == ["place"]
    assert complete("pinlab aut") == ["autopin", "autopin-report"]
    assert "study-task" not in complete("pinlab ")
    assert "--oversubscribe" in complete("pinlab place --ov")
    assert complete("pinlab study --order b") == ["blocked"]
    assert complete("pinlab graph s") == ["show"]


@pytest.mark.parametrize(
    "shell, marker", [("bash", "complete -o nosort -F"), ("zsh", "#compdef pinlab"), ("fish", "complete --no-files --command pinlab")]
)
def test_the_shell_scripts_generate(shell: str, marker: str):
    done = subprocess.run([str(PINLAB)], capture_output=True, text=True, env=dict(os.environ, _PINLAB_COMPLETE=f"{shell}_source"), timeout=600)
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout and "_PINLAB_COMPLETE" in done.stdout
