"""The example convention itself: the matcher, and the markers of examples that are not run."""

from __future__ import annotations

from pathlib import Path

from tests.docs.markdown_examples import NOT_RUN, ROOT, Block, blocks, console_blocks, output_matches


def test_every_not_run_marker_names_a_reason_and_an_existing_test():
    bad = []
    for block in console_blocks():
        reason = block.not_run
        if reason is None:
            continue
        parsed = NOT_RUN.match(reason)
        if not parsed or len(parsed["reason"].split()) < 2:
            bad.append(f"{block.where}: not-run marker needs 'REASON; covered by tests/...py', got {reason!r}")
        elif not (ROOT / parsed["test"]).is_file():
            bad.append(f"{block.where}: not-run marker names {parsed['test']}, which does not exist")
    assert not bad, "\n".join(bad)


def test_markers_only_stand_above_console_blocks():
    stray = [
        f"{b.where}: a {kind} marker above a {b.info or 'plain'} block"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        for b in blocks(path)
        for kind, _, _ in b.markers
        if b.info != "console"
    ]
    assert not stray, "\n".join(stray)


def test_the_manual_has_examples_that_run():
    runnable = [b for b in console_blocks() if b.not_run is None]
    assert len(runnable) >= 30
    assert any(b.path.name == "README.md" for b in runnable)


def test_the_matcher():
    assert output_matches(["0,4,1,5"], ["0,4,1,5", ""])
    assert not output_matches(["0,4,1,5"], ["0,4,1,6"])
    assert not output_matches(["a"], ["a", "b"])
    assert output_matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert output_matches(["a", "...", "d"], ["a", "d"])
    assert not output_matches(["a", "...", "d"], ["a", "b"])
    assert output_matches(["took ... s, x..."], ["took 1.25 s, x3.1"])
    assert not output_matches(["took ... s"], ["took 1.25 ms"])
    assert output_matches(["rank 0-1,...,60-61"], ["rank 0-1,...,60-61"])


def test_the_parser(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not-run: needs a GPU; covered by tests/x.py -->\n\n```console\n$ gpu\n```\n\n"
        "<!-- exit-status: 2 -->\n```console\n$ echo a \\\n  b\na b\n$ echo \"x\n> y\"\nx\ny\n$ cat > f <<'EOF'\nx\nEOF\n$ sleep 9 &\n$ false\n```\n"
        "```text\n$ not a command\n```\n"
    )
    first, second, third = blocks(page)
    assert first.not_run == "needs a GPU; covered by tests/x.py" and second.not_run is None
    assert second.exit_status == 2 and first.exit_status == 0 and third.info == "text"
    echo, quoted, cat, sleep, false = second.commands()
    assert echo.text == "echo a \\\n  b" and echo.expected == ["a b"]
    assert quoted.text == 'echo "x\ny"' and quoted.expected == ["x", "y"]
    assert cat.text == "cat > f <<'EOF'\nx\nEOF" and cat.expected == []
    assert sleep.background and sleep.text == "sleep 9" and not false.background
    assert isinstance(first, Block)
