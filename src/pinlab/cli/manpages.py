"""Man pages of pinlab, written in roff from the click definitions: pinlab(1), pinlab-COMMAND(1).

The build runs ``python -m pinlab.cli.manpages DIR`` (CMakeLists.txt) and installs DIR's pages in
the wheel's share/man/man1, so a page says exactly what ``--help`` says: same option lines, same
defaults and choices, taken from the same objects. A group's commands get a page each, named as
git names its own (``pinlab-graph-show``). Hidden commands get none.

Only click and the standard library are needed here and in the command modules, because the
build environment has nothing else (pyproject.toml's build requirements).
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path

import click

from pinlab.cli import REGISTRY, cli
from pinlab.cli.completion import SCRIPTS, write_scripts
from pinlab.version import __version__

SECTION = "1"
MANUAL = "pinlab manual"


def escape(text: str) -> str:
    """``text`` as roff text: backslashes and hyphens escaped, other characters than ASCII as
    ``\\[uXXXX]``, and a line that starts with a control character (``.`` or ``'``) guarded."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in text.split("\n"))


def bold(text: str) -> str:
    return f"\\fB{escape(text)}\\fR"


def _quoted(text: str) -> str:
    """An argument of a request (.TH), in double quotes."""
    return '"' + escape(text).replace('"', "\\(dq") + '"'


def _date() -> str:
    """The build's date; SOURCE_DATE_EPOCH's when set, so that rebuilt pages are identical."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else datetime.datetime.now(datetime.timezone.utc)
    return when.strftime("%Y-%m-%d")


def page_name(path: tuple[str, ...]) -> str:
    """``("graph", "show")`` -> ``pinlab-graph-show`` (``()`` -> ``pinlab``)."""
    return "-".join(("pinlab", *path))


def _reference(path: tuple[str, ...]) -> str:
    return f"{bold(page_name(path))}({SECTION})"


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """A context as the command line would make it (the command's own settings), without parsing."""
    return click.Context(command, info_name=name, parent=parent, **command.context_settings)


def _visible(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        if group is cli and REGISTRY[name][1] is None:
            continue
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            yield name, command


def _paragraphs(text: str) -> list[str]:
    """roff of a click help text: a paragraph per blank-line-separated block, rewrapped by roff as
    click rewraps it, except blocks that click keeps as written (``\\b``), kept line by line."""
    out = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(text).split("\f")[0].strip()):
        lines = block.splitlines()
        if lines and lines[0].strip() == "\b":
            out.append(".PP\n.nf\n" + escape("\n".join(lines[1:])) + "\n.fi")
        elif block.strip():
            out.append(".PP\n" + escape(" ".join(line.strip() for line in lines)))
    return out


def _summary(command: click.Command) -> str:
    """The first line of the command's help: the line ``pinlab --help`` lists."""
    lines = inspect.cleandoc(command.help or command.short_help or "").split("\f")[0].strip().splitlines()
    return lines[0] if lines else ""


def _options(command: click.Command, ctx: click.Context) -> list[str]:
    """Each option as --help lists it (its names and value, then its help with defaults and choices)."""
    out = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        out.append(".TP\n" + bold(names) + ("\n" + escape(" ".join(help_text.split())) if help_text else ""))
    return out


def render(path: tuple[str, ...], command: click.Command, ctx: click.Context, see_also: list[tuple[str, ...]]) -> str:
    """The roff page of the command at ``path`` (``()`` for pinlab itself)."""
    name = page_name(path)
    head = [
        f".TH {_quoted(name.upper())} {SECTION} {_quoted(_date())} {_quoted('pinlab ' + __version__)} {_quoted(MANUAL)}",
        ".SH NAME",
        f"{escape(name)} \\- {escape(_summary(command))}",
        ".SH SYNOPSIS",
        bold(" ".join(("pinlab", *path))) + " " + escape(" ".join(command.collect_usage_pieces(ctx))),
        ".SH DESCRIPTION",
        *_paragraphs(command.help or ""),
    ]
    if isinstance(command, click.Group):
        head.append(".SH COMMANDS")
        for sub, subcommand in _visible(command, ctx):
            summary = REGISTRY[sub][1] if command is cli else _summary(subcommand)
            head.append(f".TP\n{_reference((*path, sub))}\n{escape(summary or '')}")
    options = _options(command, ctx)
    if options:
        head += [".SH OPTIONS", *options]
    if not path:
        head += [".SH SHELL COMPLETION", *_completion_paragraphs()]
    if see_also:
        head += [".SH SEE ALSO", ".nh\n.ad l", ",\n".join(_reference(p) for p in see_also)]
    return "\n".join(head) + "\n"


def _completion_paragraphs() -> list[str]:
    lines = [f"{shell}: {relative}" for shell, relative in SCRIPTS.items()]
    return [
        *_paragraphs(
            "Completion of commands, options and their values (the placement strategies of -s among them) is click's: "
            "the completion script of a shell is printed by _PINLAB_COMPLETE=bash_source pinlab (zsh_source, fish_source). "
            "The package installs the three scripts under its prefix's share directory, where the shells' own "
            "completion packages look when the prefix is one they know:"
        ),
        ".PP\n.nf\n" + escape("\n".join(lines)) + "\n.fi",
        *_paragraphs(
            'Elsewhere (a virtual environment), load the script from the shell\'s start-up file, for bash: eval "$(_PINLAB_COMPLETE=bash_source pinlab)"'
        ),
    ]


def pages(group: click.Group = cli) -> dict[str, str]:
    """File name -> roff text of every page: pinlab's, then each visible command's, depth first."""
    root = _context(group, "pinlab", None)
    found: list[tuple[tuple[str, ...], click.Command, click.Context]] = [((), group, root)]

    def walk(path: tuple[str, ...], command: click.Group, ctx: click.Context) -> None:
        for name, sub in _visible(command, ctx):
            sub_ctx = _context(sub, name, ctx)
            found.append(((*path, name), sub, sub_ctx))
            if isinstance(sub, click.Group):
                walk((*path, name), sub, sub_ctx)

    walk((), group, root)
    out = {}
    for path, command, ctx in found:
        # pinlab(1) refers to every command; a command to its group, its own commands, and the
        # other commands of its group (not the other top-level commands: pinlab(1) lists them).
        see_also: list[tuple[str, ...]]
        if not path:
            see_also = [p for p, _, _ in found if len(p) == 1]
        else:
            parent = path[:-1]
            children = [p for p, _, _ in found if p[:-1] == path]
            siblings = [p for p, _, _ in found if parent and p[:-1] == parent and p != path]
            see_also = [parent, *children, *siblings]
        out[f"{page_name(path)}.{SECTION}"] = render(path, command, ctx, see_also)
    return out


def write(directory: Path, group: click.Group = cli) -> list[Path]:
    """Write every page into ``directory``; pages left there by an earlier build are removed first
    (a command that is gone must not keep its page)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob(f"pinlab*.{SECTION}"):
        old.unlink()
    written = []
    for name, text in pages(group).items():
        (directory / name).write_text(text)
        written.append(directory / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pinlab.cli.manpages", description="Write pinlab's man pages (and completion scripts).")
    parser.add_argument("directory", type=Path, help="where the pages go (the man1 directory)")
    parser.add_argument("--completions", type=Path, metavar="SHARE", help="also write the bash, zsh and fish completion scripts under SHARE")
    args = parser.parse_args(argv)
    written = write(args.directory)
    if args.completions is not None:
        written += write_scripts(args.completions, cli)
    print(f"pinlab: wrote {len(written)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
