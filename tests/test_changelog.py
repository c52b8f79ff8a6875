"""CHANGELOG.md keeps the "Keep a Changelog" form, and announces the removal of every old option spelling.

The form (https://keepachangelog.com/en/1.1.0/): the title ``# Changelog``, an ``## [Unreleased]``
section first, then releases as ``## [X.Y.Z] - YYYY-MM-DD``, newest first, and inside each only
the sections Added, Changed, Deprecated, Removed, Fixed and Security.

The old spellings come from the code, not from a list kept here: the ``renamed`` mapping of every
:class:`pinlab.cli.common.RenamingCommand`, and the options that answer to an old spelling by
themselves (a callback or a hidden option that prints the "goes in the next release" notice).
Each must be named, with its new spelling, in the Unreleased section's Removed (or Deprecated)
announcement. Every check is also run on a copy of the changelog with a planted mistake, which
it must find.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import click
import pytest

from pinlab.cli import cli
from pinlab.cli.common import RenamingCommand

CHANGELOG = Path(__file__).resolve().parent.parent / "CHANGELOG.md"

SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
UNRELEASED = "## [Unreleased]"
NOTICE = re.compile(r"notice: (?:pinlab )?(?P<command>[\w-]+) (?P<old>-{1,2}[\w-]+)(?: \S+)? is now (?P<new>-{1,2}[\w/-]+)")
GOES = "the old spelling goes in the next release"


# ---------------------------------------------------------------- the old spellings in the code


def _commands(command: click.Command, path: tuple[str, ...], ctx: click.Context):
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from _commands(sub, (*path, name), ctx)
    else:
        yield path, command


def _long(command: click.Command, spelling: str) -> str:
    """The long form of ``spelling`` ("-C/--candidates" or "-C" -> "--candidates")."""
    for part in spelling.split("/"):
        for param in command.params:
            if part in getattr(param, "opts", ()):
                longs = [o for o in param.opts if o.startswith("--")]
                if longs:
                    return longs[0]
    return max(spelling.split("/"), key=len)


def _callback_notices(command: click.Command, ctx: click.Context, capsys) -> list[tuple[str, str, str]]:
    """Old spellings an option takes by itself: its callback, given a value, says "X is now Y"."""
    found = []
    for param in command.params:
        if not isinstance(param, click.Option) or param.callback is None:
            continue
        sample = 1 if isinstance(param.type, click.types.IntParamType) else "all"
        capsys.readouterr()
        try:
            param.callback(click.Context(command, parent=ctx, info_name=command.name), param, sample)
        except (click.ClickException, ValueError, TypeError):
            pass
        captured = capsys.readouterr()
        for line in (captured.err + captured.out).splitlines():
            match = NOTICE.search(line)
            if match and GOES in line:
                found.append((match["command"], match["old"], _long(command, match["new"])))
    return found


def old_spellings(capsys) -> list[tuple[str, str, str]]:
    """(command, old spelling, new long spelling) of every renamed option, as the code declares them."""
    ctx = click.Context(cli, info_name="pinlab")
    found: set[tuple[str, str, str]] = set()
    for path, command in _commands(cli, (), ctx):
        name = " ".join(path)
        if isinstance(command, RenamingCommand):
            found |= {(name, old, _long(command, new)) for old, new in command.renamed.items()}
        found |= set(_callback_notices(command, ctx, capsys))
        for param in command.params:  # a hidden option is an old spelling kept for one release
            if isinstance(param, click.Option) and param.hidden:
                assert any(old in param.opts for cmd, old, _new in found if cmd == name), (
                    f"pinlab {name}: hidden option {param.opts} prints no 'is now' notice this test can read"
                )
    return sorted(found)


# ---------------------------------------------------------------- the checks, on any text


def _level2(text: str) -> list[tuple[int, str]]:
    return [(i, line) for i, line in enumerate(text.splitlines()) if line.startswith("## ")]


def _section(text: str, heading: str) -> list[str]:
    """The lines under the ``##`` heading ``heading``, up to the next ``##``."""
    lines = text.splitlines()
    starts = [i for i, line in _level2(text)]
    for i in starts:
        if lines[i] == heading:
            ends = [j for j in starts if j > i]
            return lines[i + 1 : ends[0] if ends else len(lines)]
    return []


def form_problems(text: str) -> list[str]:
    problems = []
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != "# Changelog":
        problems.append(f"the first line is {lines[0] if lines else ''!r}, not '# Changelog'")
    if sum(line.startswith("# ") for line in lines) != 1:
        problems.append("more than one '# ' heading")
    headings = [line for _, line in _level2(text)]
    if not headings or headings[0] != UNRELEASED:
        problems.append(f"the first '##' section is {headings[0] if headings else None!r}, not {UNRELEASED!r}")
    if headings.count(UNRELEASED) > 1:
        problems.append("more than one Unreleased section")
    releases = []
    for heading in headings:
        if heading == UNRELEASED:
            continue
        match = RELEASE.match(heading)
        if not match:
            problems.append(f"{heading!r} is not '## [X.Y.Z] - YYYY-MM-DD'")
            continue
        try:
            date = datetime.date.fromisoformat(match[4])
        except ValueError:
            problems.append(f"{heading!r}: {match[4]} is not a date")
            continue
        releases.append((tuple(int(match[k]) for k in (1, 2, 3)), date, heading))
    if not releases:
        problems.append("no release section")
    for (version, date, heading), (older, older_date, older_heading) in zip(releases, releases[1:]):
        if not version > older:
            problems.append(f"{heading!r} is listed above {older_heading!r}: versions must go down")
        if date < older_date:
            problems.append(f"{heading!r} is dated before {older_heading!r}, below it")
    for line in text.splitlines():
        if line.startswith("### ") and line[4:].strip() not in SECTIONS:
            problems.append(f"{line!r}: sections are {', '.join(SECTIONS)}")
    for heading in headings:
        names = [line[4:].strip() for line in _section(text, heading) if line.startswith("### ")]
        if len(names) != len(set(names)):
            problems.append(f"{heading!r} has a section twice: {names}")
    return problems


def _items(lines: list[str]) -> list[str]:
    """The list items of some Markdown lines, each with its continuation lines joined."""
    items: list[str] = []
    for line in lines:
        if re.match(r"^\s*[-*] ", line):
            items.append(line.strip())
        elif line.strip() and items and line.startswith(" "):
            items[-1] += " " + line.strip()
    return items


def announcement_problems(text: str, spellings: list[tuple[str, str, str]]) -> list[str]:
    """Each old spelling must be named in Unreleased's Removed/Deprecated list, with its new spelling."""
    unreleased = _section(text, UNRELEASED)
    kept: list[str] = []
    keep = False
    for line in unreleased:
        if line.startswith("### "):
            keep = line[4:].strip() in ("Removed", "Deprecated")
            continue
        if keep:
            kept.append(line)
    items = _items(kept)
    if not items:
        return ["the Unreleased section has no Removed or Deprecated list announcing the old spellings' removal"]
    if not re.search(r"\b0\.3\.0\b|next release", " ".join(kept)):
        problems = ["the Unreleased announcement does not say when the old spellings go (0.3.0, the next release)"]
    else:
        problems = []
    for command, old, new in spellings:
        named = re.compile(rf"pinlab {re.escape(command)} {re.escape(old)}(?![\w-])")
        if not any(named.search(item) and re.search(rf"{re.escape(new)}(?![\w-])", item) for item in items):
            problems.append(f"Unreleased does not announce the removal of `pinlab {command} {old}` (now {new})")
    return problems


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def text() -> str:
    return CHANGELOG.read_text(encoding="utf-8")


@pytest.fixture
def spellings(capsys) -> list[tuple[str, str, str]]:
    return old_spellings(capsys)


def test_the_changelog_has_keep_a_changelog_s_form(text):
    assert form_problems(text) == []


def test_the_code_declares_old_spellings_this_test_can_find(spellings):
    """The extraction itself works: it finds the RenamingCommand mappings and pin's own old spellings.

    When a release removes the old spellings, this test goes with them."""
    commands = {command for command, _, _ in spellings}
    assert {"autopin", "pin"} <= commands, spellings
    assert ("autopin", "-c", "--candidates") in spellings
    assert all(old.startswith("-") and new.startswith("--") for _, old, new in spellings), spellings


def test_unreleased_announces_the_removal_of_every_old_spelling(text, spellings):
    assert announcement_problems(text, spellings) == []


def test_every_old_spelling_is_deprecated_in_the_latest_release_too(text, spellings):
    latest = next(line for _, line in _level2(text) if RELEASE.match(line))
    lines = _section(text, latest)
    start = lines.index("### Deprecated")
    rest = lines[start + 1 :]
    end = next((i for i, line in enumerate(rest) if line.startswith("### ")), len(rest))
    items = _items(rest[:end])
    for command, old, new in spellings:
        named = re.compile(rf"pinlab {re.escape(command)} {re.escape(old)}(?![\w-])")
        assert any(named.search(item) and new in item for item in items), f"{latest} does not deprecate pinlab {command} {old}"


# ---------------------------------------------------------------- planted mistakes are found


def _without_line(text: str, needle: str) -> str:
    lines = text.splitlines(keepends=True)
    unreleased = text.splitlines().index(UNRELEASED)
    for i, line in enumerate(lines):
        if i > unreleased and needle in line:
            return "".join(lines[:i] + lines[i + 1 :])
    raise AssertionError(f"{needle!r} is not in the changelog")


def test_a_missing_old_spelling_is_found(text, spellings):
    for command, old, _ in spellings:
        planted = _without_line(text, f"`pinlab {command} {old}")
        problems = announcement_problems(planted, spellings)
        assert any(f"`pinlab {command} {old}`" in p for p in problems), (command, old, problems)


def test_an_old_spelling_named_without_its_new_spelling_is_found(text, spellings):
    command, old, new = spellings[0]
    planted = re.sub(re.escape(new) + r"(?![\w-])", "--something-else", text)
    assert any(f"`pinlab {command} {old}`" in p for p in announcement_problems(planted, spellings))


def test_an_announcement_outside_removed_or_deprecated_is_found(text, spellings):
    # The announcements' section renamed, wherever it stands in Unreleased (other sections may come first).
    at = text.index("### Removed", text.index(UNRELEASED))
    planted = text[:at] + "### Fixed" + text[at + len("### Removed") :]
    assert planted != text
    assert announcement_problems(planted, spellings)


@pytest.mark.parametrize(
    "plant",
    [
        pytest.param(lambda t: t.replace("# Changelog", "# Changes", 1), id="title"),
        pytest.param(lambda t: t.replace(UNRELEASED, "## Unreleased", 1), id="no-unreleased"),
        pytest.param(lambda t: t.replace("## [0.1.0]", "## [0.3.0]", 1), id="versions-not-descending"),
        pytest.param(lambda t: re.sub(r"(## \[0\.1\.0\] - )\S+", r"\g<1>2099-01-01", t, count=1), id="dates-not-descending"),
        pytest.param(lambda t: re.sub(r"(## \[0\.2\.0\] - )\S+", r"\g<1>2026-13-40", t, count=1), id="not-a-date"),
        pytest.param(lambda t: re.sub(r"(## \[0\.2\.0\]) - \S+", r"\1", t, count=1), id="no-date"),
        pytest.param(lambda t: t.replace("### Fixed", "### Bug fixes", 1), id="section-name"),
        pytest.param(lambda t: t.replace("### Changed", "### Added", 1), id="section-twice"),
    ],
)
def test_a_planted_form_mistake_is_found(text, plant):
    planted = plant(text)
    assert planted != text
    assert form_problems(planted)
