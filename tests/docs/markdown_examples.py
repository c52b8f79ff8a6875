"""The shell examples of the manual (docs/**/*.md) and of README.md, as the tests read them.

The convention (docs/development/testing.md says it for writers):

* An example is a fenced block whose info string is ``console``. Its lines that start with
  ``$ `` are commands; a command whose line ends with `` \\`` goes on over the next lines, as does
  one followed by lines starting with ``> `` (the shell's continuation prompt). The
  lines after a command, up to the next command, are the output it is shown to print (standard
  output and standard error together). A command shown without output has its output unchecked.
* In shown output, a line that is exactly ``...`` stands for any number of lines (none
  included), and ``...`` inside a line for any text on that line. Trailing spaces do not count.
* A command with a here-document (``cat > x.c <<'EOF'``) takes the lines up to the
  document's terminator too.
* A command whose line ends with `` &`` runs in the background for the rest of the page; its
  output is not checked and it is stopped (its whole process group) when the page is done.
* Every command must exit with status 0, except the block's last one when the block is preceded
  by ``<!-- exit-status: N -->``: that one must exit with N.
* ``<!-- not-run: REASON; covered by tests/PATH.py -->`` right above a block keeps it from
  being run: REASON says why it cannot run on a test machine, PATH names the test that checks
  the same behaviour.

Fenced blocks of other kinds (``text`` synopses, ``c``, ``python``, file contents) are not
commands and are not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[\w+-]*)")
MARKER = re.compile(r"^<!--\s*(?P<kind>not-run|exit-status)\s*:\s*(?P<body>.*?)\s*-->\s*$")
HEREDOC = re.compile(r"<<-?\s*['\"]?(?P<word>[A-Za-z_]\w*)['\"]?")
NOT_RUN = re.compile(r"^(?P<reason>.+?);\s*covered by\s+(?P<test>tests/\S+?\.py)(?:::\S+)?\s*$")


@dataclass
class Command:
    text: str  # as written, continuation lines joined by newlines
    line: int  # line number of the "$ " line in its file
    expected: list[str] = field(default_factory=list)
    background: bool = False


@dataclass
class Block:
    path: Path
    line: int  # line number of the opening fence
    info: str
    body: list[str]
    markers: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, body, line)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def not_run(self) -> str | None:
        for kind, body, _ in self.markers:
            if kind == "not-run":
                return body
        return None

    @property
    def exit_status(self) -> int:
        for kind, body, line in self.markers:
            if kind == "exit-status":
                if not body.isdigit():
                    raise ValueError(f"{self.path.relative_to(ROOT)}:{line}: exit-status marker needs a number, got {body!r}")
                return int(body)
        return 0

    def commands(self) -> list[Command]:
        commands: list[Command] = []
        lines = iter(enumerate(self.body, self.line + 1))
        for number, text in lines:
            if text.startswith("$ "):
                command = text[2:]
                while command.endswith("\\"):
                    _, more = next(lines)
                    command += "\n" + more
                heredoc = HEREDOC.search(command)
                if heredoc:  # the document's lines up to its terminator belong to the command
                    for _, more in lines:
                        command += "\n" + more
                        if more.strip() == heredoc["word"]:
                            break
                background = command.rstrip().endswith(" &")
                if background:
                    command = command.rstrip()[:-2].rstrip()
                commands.append(Command(command, number, background=background))
            elif text.startswith("> ") and commands and not commands[-1].expected:
                commands[-1].text += "\n" + text[2:]  # the shell's continuation prompt: the command goes on
            elif commands:
                commands[-1].expected.append(text)
            elif text.strip():
                raise ValueError(f"{self.where}: a console block must start with a '$ ' command line, not {text!r}")
        return commands


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the HTML-comment markers right above it."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    pending: list[tuple[str, str, int]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        opening = FENCE.match(line)
        if opening:
            fence, indent = opening["fence"], len(opening["indent"])
            body: list[str] = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            found.append(Block(path, i + 1, opening["info"], body, pending))
            pending = []
            i = j + 1
            continue
        marker = MARKER.match(line.strip())
        if marker:
            pending.append((marker["kind"], marker["body"], i + 1))
        elif line.strip():
            pending = []  # a marker belongs to the block right below it (blank lines allowed)
        i += 1
    return found


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def console_blocks() -> list[Block]:
    return [b for path in markdown_files() for b in blocks(path) if b.info == "console"]


def pattern_of(expected: str) -> re.Pattern:
    return re.compile("^" + ".*".join(re.escape(part) for part in expected.rstrip().split("...")) + "$")


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the actual lines match the shown ones (``...`` lines: any lines; ``...`` in a line: any text)."""
    expected = [e.rstrip() for e in expected]
    while expected and not expected[-1]:
        expected.pop()
    actual = [a.rstrip() for a in actual]
    while actual and not actual[-1]:
        actual.pop()
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            result = j == len(actual)
        elif expected[i] == "...":
            result = any(match(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = j < len(actual) and bool(pattern_of(expected[i]).match(actual[j])) and match(i + 1, j + 1)
        memo[key] = result
        return result

    return match(0, 0)
