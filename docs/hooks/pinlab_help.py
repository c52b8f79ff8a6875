"""MkDocs hook: the command pages show each command's `--help`, rendered from the click objects.

A page of docs/commands/ holds `<!-- pinlab-help: NAME -->` (NAME: `run`, `graph`, `workload
run`...); the hook replaces it with the help `pinlab NAME --help` prints, and, for a group, the
help of each of its commands, so that the manual and the help cannot disagree. The click group is
`pinlab.cli.cli`, the group the console script's `main` runs (its commands load on first use).
"""
from __future__ import annotations

import re

import click

MARKER = re.compile(r"^<!--\s*pinlab-help:\s*(?P<name>[a-z][a-z -]*?)\s*-->\s*$", re.M)
WIDTH = 78   # the width click gives help in any terminal of 80 columns or more


def root_group() -> click.Group:
    from pinlab.cli import cli

    return cli


def context_of(path: str) -> tuple[click.Command, click.Context]:
    """The command at `path` ('' for pinlab itself, 'graph show'...) and its context."""
    command: click.Command = root_group()
    settings = dict(resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH)
    ctx = command.make_context("pinlab", [], **settings)   # the command's own context settings, as on the command line
    for name in path.split():
        sub = command.get_command(ctx, name) if isinstance(command, click.Group) else None
        if sub is None:
            raise KeyError(f"pinlab has no command '{path}'")
        ctx = sub.make_context(name, [], parent=ctx, **settings)
        command = sub
    return command, ctx


def help_text(path: str) -> str:
    command, ctx = context_of(path)
    return command.get_help(ctx)


def commands(group_path: str = "") -> list[str]:
    """Every visible command path below `group_path`, groups included."""
    command, ctx = context_of(group_path)
    found = []
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            path = f"{group_path} {name}".strip()
            found.append(path)
            found.extend(commands(path))
    return found


def rendered(path: str) -> str:
    parts = [f"```text\n{help_text(path)}\n```"]
    for sub in commands(path):
        parts.append(f"## pinlab {sub}\n\n```text\n{help_text(sub)}\n```")
    return "\n\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: rendered(m["name"]), markdown)
