"""`pinlab autopin-report`: reading autopin logs and reporting them as a table, a verdict, a picture and HTML.

The logs are built by tests/autopin/logbuilder.py in the format documented in pinlab.autopin.log;
the numbers the report shows are recomputed here from the log's own lines.
"""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.autopin.log import read_log
from pinlab.errors import UsageError
from pinlab.report import autopin_data
from pinlab.report.autopin_timeline import save_picture, timeline
from tests.autopin.logbuilder import LogBuilder, phase_change_log
from tests.conftest import run_pinlab


def _rows(stdout: str) -> list[list[str]]:
    """The body rows of every table the terminal report printed, as lists of cells."""
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in stdout.splitlines() if re.match(r"^\s*│\s*\d+\s*│", line)]


def _by_hand(events: list[dict], first: int, last: int) -> dict[int, list[float]]:
    """Every candidate's sub-window rates in events[first:last], pooled over rounds."""
    pooled: dict[int, list[float]] = {}
    for e in events[first:last]:
        if e["event"] == "probe":
            pooled.setdefault(e["candidate"], []).extend(e["windows"])
    return pooled


def _mega(x: float) -> str:
    return f"{x / 1e6:.4g} M"


@pytest.fixture
def two_searches(tmp_path):
    b = phase_change_log(candidates=4, seed=3)
    for e in b.events:  # rates in the M range, so every mean prints as "x.xxx M"
        for key in ("mean", "rate"):
            if isinstance(e.get(key), float):
                e[key] *= 2
        if e["event"] == "probe":
            e["windows"] = [w * 2 for w in e["windows"]]
    return b, b.write(tmp_path / "autopin.jsonl")


def test_reader_reads_every_event_as_written(two_searches):
    b, path = two_searches
    log = read_log(path)
    kinds = [e["event"] for e in b.events]
    assert log.start.metric == "heartbeat" and log.start.metric_unit == "work units" and log.start.threads == 2
    assert [c.cpus for c in log.start.candidates] == [tuple(c["cpus"]) for c in b.cands]
    assert len(log.probes) == kinds.count("probe") == 16
    assert len(log.choices) == 2 and len(log.reprobes) == 1 and len(log.migrations) == 1
    assert len(log.rates) == kinds.count("rate") == 19
    written = [e for e in b.events if e["event"] == "probe"]
    for probe, event in zip(log.probes, written):
        assert probe.windows == tuple(event["windows"]) and probe.repinned_at == event["repinned_at"]
        assert probe.rates == event["rates"] and probe.round == event["round"]
    assert log.summary is not None and log.summary.exit_status == 0
    assert log.warnings == ()


def test_table_shows_the_means_and_percentages_of_the_log(two_searches):
    b, path = two_searches
    proc = run_pinlab("autopin-report", str(path))
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    n = len(b.cands)
    assert len(rows) == 2 * n  # one table per search
    cut = next(i for i, e in enumerate(b.events) if e["event"] == "reprobe")
    choices = [e for e in b.events if e["event"] == "choice"]
    for search, (first, last) in enumerate([(0, cut), (cut, len(b.events))]):
        pooled = _by_hand(b.events, first, last)
        chosen = choices[search]["candidate"]
        ref = np.mean(pooled[chosen])
        for row in rows[search * n : (search + 1) * n]:
            index = int(row[0])
            samples = pooled[index]
            assert row[1] == b.cands[index]["name"]
            assert row[2] == ",".join(map(str, b.cands[index]["cpus"])).replace("0,1", "0-1").replace("4,5", "4-5")
            assert row[3] == "2"  # rounds
            assert row[4] == _mega(np.mean(samples))
            sd = np.std(samples, ddof=1) / np.mean(samples)
            assert row[5] == f"± {100 * sd:.2f} % ({len(samples)})"
            if index == chosen:
                assert row[6] == "reference" and row[7] == "chosen"
            else:
                assert row[6] == f"{100 * (np.mean(samples) / ref - 1):+.1f} %"
    # the first search chose the last candidate, the second the first (the phase changed)
    assert [c["candidate"] for c in choices] == [n - 1, 0]
    assert "rates in work units/s per thread" in proc.stdout


def test_rechecks_of_the_runner_up_are_reported_in_text_and_html(tmp_path):
    b = LogBuilder(candidates=3).start()
    b.search([2.0e6, 2.2e6, 2.21e6])
    b.choice(probing_started=b.init)
    runner = next(e for e in b.events if e["event"] == "choice")["runner_up"]["candidate"]
    b.rates(10, 2.2e6)
    b.recheck(runner, 1.9e6, 2.2e6)
    b.rates(10, 2.2e6)
    b.recheck(runner, 3.1e6, 2.2e6)
    b.rates(1, 2.2e6)
    b.reprobe(rate=2.2e6, reference=2.2e6, intervals=0)
    b.summary(exit_status=0)
    path = b.write(tmp_path / "log.jsonl")
    proc = run_pinlab("autopin-report", str(path))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    name = b.cands[runner]["name"]
    assert f"Runner-up {name} re-checked 2 times while the choice was kept: 1.9 M against 2.2 M, 3.1 M against 2.2 M" in text, text
    html = tmp_path / "report.html"
    proc = run_pinlab("autopin-report", str(path), "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    assert f"Runner-up {name} re-checked 2 times" in (html / "index.html").read_text(encoding="utf-8")


def test_verdict_sentence_equivalents_and_reprobe(tmp_path):
    b = LogBuilder(candidates=3).start()
    b.search([2.0e6, 2.2e6, 2.21e6])
    choice = b.choice(probing_started=b.init)
    choice.update(
        candidate=2,
        name="shared-L2",
        cpus=[0, 4],
        p_value=0.0031,
        effect=0.12,
        decided=True,
        equivalent=[1],
        runner_up={"candidate": 0, "name": "compact", "cpus": [0, 1], "rate": 2.0e6},
        verdict="shared-L2 is faster than compact",
    )
    b.rates(4, 2.2e6)
    b.rates(3, 1.5e6)
    b.reprobe(rate=1.5e6, reference=2.2e6, intervals=3)
    b.summary(exit_status=0)
    proc = run_pinlab("autopin-report", str(b.write(tmp_path / "log.jsonl")))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "Verdict: shared-L2 is faster than compact." in text
    assert "shared-L2 beats compact by 12.0 %, p = 0.003 (decided at alpha = 0.05)." in text
    assert "Statistically equivalent to the choice: scatter (#1)." in text
    assert "Re-probe at" in text and "the rate stayed 32 % below the rate at the choice for 3 intervals" in text
    assert "-31.8 %" in text  # 1.5 M against 2.2 M
    probing = sum(e["end"] - e["repinned_at"] for e in b.events if e["event"] == "probe")
    wall = b.events[-1]["wall_seconds"]
    assert f"({probing / wall:.1%} of the run)" in text
    # a re-probe with nothing measured after it (the log ends there) is said, not tabulated
    assert "Search 2, after the re-probe" in text and "nothing was measured after it" in text


def test_p_below_a_thousandth_and_no_runner_up(tmp_path):
    b = LogBuilder(candidates=1).start()
    b.search([1.0e6])
    b.choice(probing_started=b.init)
    b.summary()
    proc = run_pinlab("autopin-report", str(b.write(tmp_path / "one.jsonl")))
    assert proc.returncode == 0, proc.stderr
    assert "Only one candidate was measured" in proc.stdout
    b = LogBuilder(candidates=2).start()
    b.search([1.0e6, 1.5e6])
    b.choice(probing_started=b.init)["p_value"] = 1e-9
    assert any(
        "p < 0.001" in line
        for s in autopin_data.searches(read_log(b.write(tmp_path / "two.jsonl")))
        for line in autopin_data.choice_lines(read_log(tmp_path / "two.jsonl"), s)
    )


def test_program_ended_during_probing(tmp_path):
    b = LogBuilder(candidates=4).start()
    b.probe(0, 1.0e6)
    b.probe(1, 1.3e6)
    b.probe(2, 1.1e6, length=7.5)  # cut short: the program ended in this window
    b.summary(exit_status=3, ended_during_probing=True, final=None)
    proc = run_pinlab("autopin-report", str(b.write(tmp_path / "short.jsonl")))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "No choice: the log ends before this search did (3 of 4 candidates measured)." in text
    assert "exited with status 3" in text and "during probing" in text
    rows = {int(r[0]): r for r in _rows(proc.stdout)}
    assert rows[1][6] == "reference"  # no choice: against the best measured
    assert rows[3][3] == "0" and rows[3][4] == "–"
    mean0, mean1 = (np.mean(e["windows"]) for e in b.events[1:3])
    assert rows[0][6] == f"{100 * (mean0 / mean1 - 1):+.1f} %"


def test_truncated_last_line_is_left_out_with_a_warning(tmp_path):
    b = phase_change_log(candidates=3)
    path = b.write(tmp_path / "killed.jsonl", cut_last=37)  # killed while writing the summary
    proc = run_pinlab("autopin-report", str(path))
    assert proc.returncode == 0, proc.stderr
    assert f"the last line ({len(b.events)}) of {path} is incomplete" in proc.stderr
    assert "The log has no summary" in " ".join(proc.stdout.split())
    assert len(_rows(proc.stdout)) == 2 * 3
    log = read_log(path)
    assert log.summary is None and len(log.events) == len(b.events) - 2  # start and summary are not events


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=400))
def test_a_log_cut_anywhere_in_its_last_line_reads(tmp_path, cut):
    b = phase_change_log(candidates=2, seed=5)
    last = b.lines()[-1]
    path = b.write(tmp_path / "cut.jsonl", cut_last=min(cut, len(last)))
    log = read_log(path)
    complete = cut >= len(last)
    assert (log.summary is not None) == complete
    assert len(log.events) == len(b.events) - 1 - (0 if complete else 1)
    assert bool(log.warnings) == (0 < cut < len(last))


@given(
    levels=st.lists(st.floats(min_value=1.0, max_value=1e9), min_size=2, max_size=6),
    windows=st.integers(min_value=1, max_value=8),
    rounds=st.integers(min_value=1, max_value=3),
)
@settings(max_examples=30, deadline=None)
def test_rows_are_the_pooled_sub_windows(levels, windows, rounds):
    b = LogBuilder(candidates=len(levels), windows=windows).start()
    b.search(levels, rounds=rounds, noise=0.05)
    b.choice(probing_started=b.init)
    from pinlab.autopin.log import parse_log

    search = autopin_data.searches(parse_log(b.lines()))[0]
    chosen = b.chosen
    for row in search.rows:
        pooled = b.samples[row.index]
        assert row.rounds == rounds and row.samples == windows * rounds
        assert row.mean == pytest.approx(np.mean(pooled), rel=1e-12)
        assert row.relative == pytest.approx(np.mean(pooled) / np.mean(b.samples[chosen]) - 1, abs=1e-12)
        assert row.chosen == (row.index == chosen)


def test_unknown_fields_and_events_are_kept(tmp_path):
    b = LogBuilder(candidates=2).start(future_field={"x": 1})
    b.search([1.0e6, 1.2e6], rounds=1)
    b.events[1]["cache_misses"] = 12345
    b.events.append({"event": "thermal", "t": b.clock, "celsius": 80})
    b.choice(probing_started=b.init)
    b.summary()
    log = read_log(b.write(tmp_path / "future.jsonl"))
    assert log.start.extra == {"future_field": {"x": 1}}
    assert log.probes[0].extra == {"cache_misses": 12345}
    assert [o["event"] for o in log.other] == ["thermal"]
    assert run_pinlab("autopin-report", str(tmp_path / "future.jsonl")).returncode == 0


def _bad(tmp_path, lines: list[str]) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _good_lines() -> list[str]:
    b = LogBuilder(candidates=2).start()
    b.search([1.0e6, 1.2e6], rounds=1)
    b.choice(probing_started=b.init)
    b.summary()
    return b.lines()


@pytest.mark.parametrize(
    "case, expected",
    [
        ("not json", r"line 2 of .* is not valid JSON"),
        ("no event", r"line 2 of .* is not a JSON object with an 'event' field"),
        ("no start", r"line 1 of .* is a 'probe' event, but an autopin log begins with its 'start' event"),
        ("version", r"line 1 of .*: log format version 7 is newer than this pinlab reads"),
        ("unknown candidate", r"line 2 of .*: candidate 9 is not one of the start event's candidates \(0, 1\)"),
        ("wrong type", r"line 2 of .*: field 'windows' should be a list of numbers"),
        ("missing field", r"line 3 of .*: the 'probe' event has no 'end' field"),
        ("two starts", r"line 4 of .* is a second 'start' event"),
        ("empty", r"autopin log .* is empty"),
    ],
)
def test_malformed_logs_are_refused_in_one_line(tmp_path, case, expected):
    lines = _good_lines()
    probe = json.loads(lines[1])
    if case == "not json":
        lines[1] = lines[1][:-5] + " junk"
    elif case == "no event":
        lines[1] = json.dumps([1, 2])
    elif case == "no start":
        lines = lines[1:]
    elif case == "version":
        lines[0] = json.dumps({**json.loads(lines[0]), "version": 7})
    elif case == "unknown candidate":
        lines[1] = json.dumps({**probe, "candidate": 9})
    elif case == "wrong type":
        lines[1] = json.dumps({**probe, "windows": ["fast"]})
    elif case == "missing field":
        second = json.loads(lines[2])
        del second["end"]
        lines[2] = json.dumps(second)
    elif case == "two starts":
        lines.insert(3, lines[0])
    elif case == "empty":
        lines = ["", "  "]
    path = _bad(tmp_path, lines)
    with pytest.raises(UsageError, match=expected):
        read_log(path)
    proc = run_pinlab("autopin-report", str(path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("pinlab: error: ") and "Traceback" not in proc.stderr
    assert re.search(expected, proc.stderr), proc.stderr
    assert proc.stdout == ""


def test_missing_and_unreadable_logs(tmp_path):
    for path, expected in ((tmp_path / "none.jsonl", "no autopin log at"), (tmp_path, "is a directory, not an autopin log")):
        proc = run_pinlab("autopin-report", str(path))
        assert proc.returncode == 2 and expected in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_bad_output_paths(tmp_path, two_searches):
    _, path = two_searches
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args, expected in (
        (["--html", str(blocker / "out")], "is a file, not a directory"),
        (["--picture", str(tmp_path / "p.jpg")], "must end in .svg or .png"),
        (["--picture", str(tmp_path / "missing" / "p.svg")], "its directory does not exist"),
    ):
        proc = run_pinlab("autopin-report", str(path), *args)
        assert proc.returncode == 2 and expected in proc.stderr and proc.stderr.count("\n") == 1, (args, proc.stderr)
    with pytest.raises(UsageError, match="must end in .svg or .png"):
        save_picture(timeline(read_log(path)), tmp_path / "p.pdf")


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_pictures_and_html_are_written(tmp_path, two_searches):
    b, path = two_searches
    svg, png, out = tmp_path / "t.svg", tmp_path / "t.png", tmp_path / "html"
    for picture in (svg, png):
        proc = run_pinlab("autopin-report", str(path), "--picture", str(picture))
        assert proc.returncode == 0, proc.stderr
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    width, height = _png_size(png.read_bytes())
    assert width == round(12 * 110) and height > 400
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 50  # not blank
    proc = run_pinlab("autopin-report", str(path), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    page = (out / "index.html").read_text(encoding="utf-8")
    for cand in b.cands:
        assert f"<td>{cand['name']}</td>" in page
    assert "beats" in page and "Re-probe at" in page
    found = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert found and ET.fromstring(base64.b64decode(found.group(1))).tag.endswith("svg")


def _spans(ax) -> int:
    from matplotlib.patches import Rectangle

    return sum(isinstance(p, Rectangle) for p in ax.patches)


def test_a_long_run_gets_its_probing_enlarged_and_sub_windows_as_long_as_they_lasted(tmp_path):
    """Probing of 5 min in a run of 2 h is a sliver on the run's axis: a second panel shows it
    enlarged, every window and warm-up of the search in it. A sub-window left long by a late
    wake-up is drawn as long as it lasted (the log's window_seconds)."""
    b = LogBuilder(candidates=3, init=15.0, warmup=15.0, interval=30.0).start()
    b.search([2.0e6, 2.2e6, 2.21e6], rounds=1)
    b.probe(1, 2.2e6, round_=2, window_seconds=[6.0, 6.0, 12.0, 3.0, 3.0])
    b.choice(probing_started=b.init)
    b.rates(230, 2.2e6)
    b.summary(exit_status=0)
    log = read_log(b.write(tmp_path / "log.jsonl"))
    fig = timeline(log)
    run, zoom = fig.axes[:2]
    assert _spans(zoom) == 2 * len(log.probes) == 8  # each window and its warm-up, enlarged
    low, high = zoom.get_xlim()
    assert low < log.probes[0].repinned_at < log.probes[-1].end <= log.choices[0].t < high < 0.2 * log.end_time
    stairs = [p for p in zoom.patches if type(p).__name__ == "StepPatch"]
    late = stairs[-1].get_data().edges
    assert list(np.round(np.diff(late), 6)) == [6.0, 6.0, 12.0, 3.0, 3.0]
    # a run where probing is most of it keeps one panel
    short = LogBuilder(candidates=3).start()
    short.search([2.0e6, 2.2e6, 2.21e6], rounds=1)
    short.choice(probing_started=short.init)
    short.rates(3, 2.2e6)
    short.summary(exit_status=0)
    assert len(timeline(read_log(short.write(tmp_path / "short.jsonl"))).axes) == 1
    _assert_inside(fig)


def test_timeline_marks_every_window_choice_and_reprobe(two_searches):
    b, path = two_searches
    log = read_log(path)
    fig = timeline(log)
    ax = fig.axes[0]
    probes = len(log.probes)
    assert _spans(ax) == 2 * probes  # each window and its warm-up
    vertical = [line for line in ax.get_lines() if len(set(line.get_xdata())) == 1 and len(line.get_xdata()) == 2]
    assert sorted(round(float(line.get_xdata()[0]) * 60, 6) for line in vertical) == sorted(
        round(e["t"], 6) for e in b.events if e["event"] in ("choice", "reprobe")
    )
    assert ax.get_ylabel() == "work units/s per thread"
    _assert_inside(fig)


def _assert_inside(fig) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    ticks = {id(t) for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()}
    drawn = {
        id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for tick in axis._update_ticks() for label in (tick.label1, tick.label2)
    }  # the locator also makes ticks outside the view, never drawn
    for text in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible() and a.get_text()):
        if id(text) in ticks and id(text) not in drawn:
            continue
        e = text.get_window_extent(renderer)
        assert e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1 and e.y0 >= box.y0 - 1 and e.y1 <= box.y1 + 1, text.get_text()
    for legend in fig.legends:
        e = legend.get_window_extent(renderer)
        assert e.x0 >= 0 and e.x1 <= box.x1 and e.y0 >= 0


def test_an_hour_with_twelve_candidates_stays_readable(tmp_path):
    b = LogBuilder(candidates=12, windows=6, metric="task-clock", metric_unit=None).start()
    b.search([1e9 * (1 + 0.02 * k) for k in range(12)], rounds=1)
    b.choice(probing_started=b.init)
    b.rates(110, 1.22e9)
    b.summary()
    fig = timeline(read_log(b.write(tmp_path / "hour.jsonl")))
    ax = fig.axes[0]
    assert "(min)" in ax.get_xlabel() and ax.get_xlim()[1] == pytest.approx(b.clock / 60)
    assert ax.get_ylabel() == "task-clock/s per thread"  # no metric_unit: the metric's name
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert all(any(t.startswith(f"{i}: ") for t in labels) for i in range(12))
    colours = {tuple(np.round(p.get_facecolor()[:3], 3)) for p in fig.legends[0].get_patches()[:12]}
    assert len(colours) == 12
    _assert_inside(fig)


def test_a_log_with_only_its_start(tmp_path):
    """autopin killed during the initialisation: the report says nothing was measured, the picture says so too."""
    b = LogBuilder(candidates=3).start(mode="attach")
    path = b.write(tmp_path / "start.jsonl")
    proc = run_pinlab("autopin-report", str(path), "--picture", str(tmp_path / "p.png"), "--html", str(tmp_path / "html"))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "attached to PID 4242" in text and "Nothing was measured: the log ends before the first probe." in text
    assert "The log has no summary" in text and _rows(proc.stdout) == []
    fig = timeline(read_log(path))
    assert "no rate was measured" in [t.get_text() for t in fig.axes[0].texts]
    assert (tmp_path / "html" / "index.html").is_file() and _png_size((tmp_path / "p.png").read_bytes())[0] > 0


def test_the_metric_is_named_once_with_why_it_was_chosen(tmp_path):
    path = LogBuilder(candidates=2).start().write(tmp_path / "m.jsonl")
    proc = run_pinlab("autopin-report", str(path), "--html", str(tmp_path / "html"))
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("Metric"))
    assert line == "Metric heartbeat, rates in work units/s per thread (the program reports its work through the heartbeat)"
    page = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert "<p>Metric heartbeat: the program reports its work through the heartbeat</p>" in page and "metric: heartbeat" not in page
