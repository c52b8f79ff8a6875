"""Shell completion: the values options complete to, and the scripts that turn completion on.

Completion is click's own (``_PINLAB_COMPLETE=bash_source pinlab`` prints the script); this
module adds what click cannot know: the placement strategies, which ``-s`` takes as free text
(comma lists in ``pinlab study``) rather than as a :class:`click.Choice`, from the names the
library knows, imported when a completion is asked for (the placement package is not light).
"""

from __future__ import annotations

from pathlib import Path

import click
from click.shell_completion import CompletionItem, get_completion_class

#: The shells whose scripts :func:`write_scripts` writes, and where each looks for them (under a
#: prefix's share/ directory: bash-completion, zsh's site-functions, fish's vendor completions).
SCRIPTS = {
    "bash": "bash-completion/completions/pinlab",
    "zsh": "zsh/site-functions/_pinlab",
    "fish": "fish/vendor_completions.d/pinlab.fish",
}

#: The environment variable click reads (from the program name ``pinlab``).
COMPLETE_VAR = "_PINLAB_COMPLETE"


def strategy_names() -> list[str]:
    """Every name ``-s`` accepts: the strategies, the graph strategies, then the aliases."""
    from pinlab.placement.strategies import ALIASES, GRAPH_STRATEGIES, STRATEGIES

    return [*STRATEGIES, *GRAPH_STRATEGIES, *ALIASES]


def complete_strategies(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The strategies that start with the word being typed; after a comma (``none,comp``), the
    last name of the list is completed and the ones before it kept."""
    done, comma, last = incomplete.rpartition(",")
    prefix = done + comma
    return [CompletionItem(prefix + name) for name in strategy_names() if name.startswith(last)]


def source(shell: str, group: click.Command) -> str:
    """The completion script of ``shell`` for ``group`` (the same text ``_PINLAB_COMPLETE=SHELL_source pinlab`` prints)."""
    cls = get_completion_class(shell)
    if cls is None:
        raise click.UsageError(f"no completion for shell {shell!r}")
    return cls(group, {}, "pinlab", COMPLETE_VAR).source()


def write_scripts(share: Path, group: click.Command) -> list[Path]:
    """Write the bash, zsh and fish scripts under ``share`` (a prefix's share/ directory)."""
    written = []
    for shell, relative in SCRIPTS.items():
        path = share / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source(shell, group))
        written.append(path)
    return written
