"""`pinlab graph show`: the heat map, the summary and the picture, on graphs with planted pairs."""

from __future__ import annotations

import os
import re
import struct

import pytest

from pinlab.graph.model import AffinityGraph
from pinlab.graph.show import GLYPHS, MAX_CELLS, ZERO, aggregate, heatmap, heaviest_pairs, layout, level
from tests.conftest import run_pinlab
from tests.graph.graph_support import planted_graph, write_json

PAIR_LINE = re.compile(r"^\s+threads\s+(\d+) - (\d+)\s+([\d,.e+]+)\s+([\d.]+)% of the total$")


def show(path, *options, columns: int = 120):
    env = {**os.environ, "COLUMNS": str(columns)}
    return run_pinlab("graph", "show", str(path), *options, env=env)


def listed_pairs(stdout: str) -> list[tuple[int, int, float, float]]:
    found = []
    for line in stdout.splitlines():
        m = PAIR_LINE.match(line)
        if m:
            found.append((int(m[1]), int(m[2]), float(m[3].replace(",", "")), float(m[4])))
    return found


def map_rows(stdout: str, threads: int) -> list[str]:
    """The heat map's rows (label, then cells), header excluded."""
    lines = stdout.splitlines()
    label = len(str(threads - 1))
    return [line[label + 1 :] for line in lines[1 : threads + 1]]


@pytest.mark.parametrize("threads", [6, 16, 48])
def test_heaviest_pairs_listed_are_the_planted_ones(tmp_path, threads):
    planted = [(0, threads - 1, 5000), (2, 3, 4000), (1, threads // 2, 3000), (4, 5, 2000), (threads - 3, threads - 2, 1000)]
    graph = planted_graph(threads, planted, noise=50)
    graph.save(tmp_path / "g.json")
    result = show(tmp_path / "g.json")
    assert result.returncode == 0 and result.stderr == ""
    found = listed_pairs(result.stdout)
    assert [(i, j, w) for i, j, w, _ in found] == [(min(i, j), max(i, j), float(w)) for i, j, w in planted]
    for _, _, w, share in found:
        assert share == pytest.approx(100 * w / graph.total, abs=0.05)
    assert f"total weight {graph.total:,.0f} over" in result.stdout
    assert f"{threads} threads, granularity: unknown" in result.stdout


@pytest.mark.parametrize("threads", [4, 16, 60])
def test_heat_map_cells_show_the_planted_pairs_at_the_top_level(tmp_path, threads):
    pairs = [(i, i + 1, 1000) for i in range(0, threads - 1, 2)]
    graph = planted_graph(threads, pairs, noise=60)
    graph.save(tmp_path / "g.csv")
    result = show(tmp_path / "g.csv", columns=200)
    assert result.returncode == 0
    rows = map_rows(result.stdout, threads)
    cell = len(rows[0]) // threads
    assert cell in (1, 2) and all(len(r) == cell * threads for r in rows)
    top = {(i, j) for i, j, _ in pairs} | {(j, i) for i, j, _ in pairs}
    for i, row in enumerate(rows):
        for j in range(threads):
            glyph = row[j * cell : (j + 1) * cell]
            assert len(set(glyph)) == 1
            expected = GLYPHS[-1] if (i, j) in top else (ZERO if graph.weights[i][j] == 0 else GLYPHS[0])
            assert glyph[0] == expected, (i, j, glyph)
    assert "scale: " in result.stdout and "up to 1,000, the largest weight" in result.stdout


def test_many_threads_are_grouped_in_blocks_that_fit_the_width(tmp_path):
    threads = 200
    graph = planted_graph(threads, [(10, 190, 10**6)], noise=3)
    graph.save(tmp_path / "g.json")
    result = show(tmp_path / "g.json", columns=100)
    assert result.returncode == 0
    blocks = aggregate(graph, min(MAX_CELLS, 100 - 4))
    match = re.search(r"200 threads do not fit: grouped in (\d+) blocks of (\d+)", result.stdout)
    assert match and int(match[1]) == len(blocks.starts) and int(match[2]) == blocks.size > 1
    lines = result.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines)
    rows = lines[1 : 1 + len(blocks.starts)]
    assert [int(r.split()[0]) for r in rows] == blocks.starts
    assert listed_pairs(result.stdout)[0][:3] == (10, 190, 10**6)


@pytest.mark.parametrize("threads, cells", [(10, 3), (200, 64), (129, 64), (64, 64)])
def test_blocks_keep_every_weight_once(threads, cells):
    graph = planted_graph(threads, [(0, threads - 1, 77)], noise=9, seed=threads)
    blocks = aggregate(graph, cells)
    assert len(blocks.starts) <= cells
    inside = sum(blocks.matrix[a][a] for a in range(len(blocks.starts)))
    between = sum(blocks.matrix[a][b] for a in range(len(blocks.starts)) for b in range(a + 1, len(blocks.starts)))
    assert inside + between == pytest.approx(graph.total)
    assert blocks.matrix == [list(r) for r in zip(*blocks.matrix)]  # still symmetric


@pytest.mark.parametrize("width", [40, 80, 132, 300])
def test_map_fits_the_width(width):
    for threads in (3, 40, 64, 65, 500):
        graph = planted_graph(threads, [], noise=5)
        blocks, cell = layout(graph, width)
        assert len(blocks.starts) <= MAX_CELLS
        assert all(len(line) <= max(width, 12) for line in heatmap(graph, width).plain.splitlines())
        assert (blocks.size == 1) == (threads <= min(MAX_CELLS, width - len(str(threads - 1)) - 1))


def test_levels_scale_to_the_largest_weight():
    assert level(0, 10) == 0 and level(0.001, 10) == 1 and level(10, 10) == len(GLYPHS) and level(5, 10) == len(GLYPHS) // 2
    assert heaviest_pairs(AffinityGraph(weights=[[0, 2, 2], [2, 0, 1], [2, 1, 0]]), 2)[0].share == pytest.approx(0.4)


def test_heaviest_pairs_ties_go_by_thread_order_and_zero_pairs_are_never_listed():
    graph = planted_graph(6, [(4, 5, 7), (0, 3, 7), (1, 2, 7), (2, 5, 1)], noise=0)
    assert [(p.first, p.second) for p in heaviest_pairs(graph, 2)] == [(0, 3), (1, 2)]
    assert [(p.first, p.second, p.weight) for p in heaviest_pairs(graph, 10)] == [(0, 3, 7), (1, 2, 7), (4, 5, 7), (2, 5, 1)]
    assert sum(p.share for p in heaviest_pairs(graph, 10)) == pytest.approx(1.0)


def test_summary_says_how_it_was_measured(tmp_path):
    path = write_json(
        tmp_path / "g.json",
        {
            "pinlab_graph": 1,
            "threads": 3,
            "weights": [[0, 8, 0], [8, 0, 2], [0, 2, 0]],
            "volume": [9, 12, 3],
            "granularity": "line",
            "unit_bytes": 64,
            "measured": {"method": "exact", "program": ["./pairs", "-n", "3", "[bold]x"], "slowdown": 3.14159, "samples": 1200},
        },
    )
    result = show(path)
    assert result.returncode == 0
    assert "3 threads, granularity: cache line (64 bytes)" in result.stdout
    assert "measured: method exact, program ./pairs -n 3 '[bold]x', slowdown 3.14x, samples=1200" in result.stdout
    assert "total weight 10 over 2 of 3 pairs; volume per thread 3 to 12" in result.stdout


def test_a_graph_without_any_sharing_is_shown_as_such(tmp_path):
    path = write_json(tmp_path / "zero.json", {"weights": [[0, 0], [0, 0]]})
    result = show(path)
    assert result.returncode == 0 and "every weight is 0" in result.stdout and "heaviest" not in result.stdout


# ---- the picture --------------------------------------------------------------------------
def test_png_picture_is_a_png_of_sensible_size(tmp_path):
    planted_graph(24, [(0, 1, 900)]).save(tmp_path / "g.json")
    picture = tmp_path / "g.png"
    result = show(tmp_path / "g.json", "--picture", str(picture))
    assert result.returncode == 0, result.stderr
    data = picture.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert 400 <= width <= 3000 and 400 <= height <= 3000
    assert len(data) > 10_000
    assert "heaviest" in result.stdout  # the terminal map is printed too


@pytest.mark.parametrize("threads", [5, 12])
def test_svg_picture_carries_the_thread_labels_and_title(tmp_path, threads):
    graph = planted_graph(threads, [(1, 2, 50)])
    graph.measured = {"method": "pages"}
    graph.granularity = "page"
    graph.save(tmp_path / "g.json")
    picture = tmp_path / "g.svg"
    assert show(tmp_path / "g.json", "--picture", str(picture)).returncode == 0
    svg = picture.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    labels = re.findall(r">\s*(\d+)\s*</text>", svg)
    for i in range(threads):
        assert labels.count(str(i)) >= 2, i  # on both axes
    assert f"Affinity graph: {threads} threads, measured by pages, per page" in svg
    assert ">thread</text>" in svg


def test_picture_of_a_large_graph_is_drawn_by_blocks(tmp_path):
    from pinlab.graph.picture import MAX_CELLS as PICTURE_CELLS
    from pinlab.graph.picture import draw

    threads = PICTURE_CELLS + 88
    graph = planted_graph(threads, [(0, threads - 1, 100)], noise=2)
    draw(graph, tmp_path / "big.svg")
    svg = (tmp_path / "big.svg").read_text()
    assert "blocks of 2 threads" in svg and "first of a block of 2" in svg


def test_colours_only_on_a_terminal(tmp_path):
    """Piped output is plain text (the glyphs carry the levels); a terminal gets a colour per level."""
    planted_graph(4, [(0, 1, 100), (2, 3, 1)], noise=0).save(tmp_path / "g.json")
    plain = show(tmp_path / "g.json")
    assert "\x1b[" not in plain.stdout
    env = {**os.environ, "COLUMNS": "80", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    coloured = run_pinlab("graph", "show", str(tmp_path / "g.json"), env=env)
    codes = {re.search(r"\x1b\[([\d;]+)m" + glyph, coloured.stdout)[1] for glyph in (GLYPHS[0], GLYPHS[-1])}
    assert len(codes) == 2  # the lowest and the highest level in different colours
