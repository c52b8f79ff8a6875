"""The one console factory: a pipe gets a fixed, wide table; a terminal and plain text keep rich's width."""

import io

from rich.table import Table

from pinlab import terminal
from tests.conftest import run_pinlab


def _wide_table() -> Table:
    table = Table()
    for i in range(12):
        table.add_column(f"column-{i:02d}")
    table.add_row(*(f"value-{i:02d}-{'x' * 4}" for i in range(12)))
    return table


def test_piped_console_is_wide_and_plain_text_keeps_rich_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    out = io.StringIO()
    terminal.console(file=out).print(_wide_table())
    widths = {len(line) for line in out.getvalue().splitlines()}
    assert max(widths) > 80 and max(widths) <= terminal.PIPED_WIDTH
    assert terminal.console(file=io.StringIO(), piped_width=180).width == 180
    # Text that wraps itself is left to rich, which reads COLUMNS for a pipe.
    assert terminal.console(file=io.StringIO(), piped_width=None).width == 90


def test_piped_pinlab_check_does_not_fold_its_table_at_80_columns():
    result = run_pinlab("check")
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) > 80
    assert max(len(line) for line in lines) <= terminal.PIPED_WIDTH
