"""The HTML report at real sizes: tables and figures fit a 1400 or 1920 px wide window.

A study with long names (programs and co-runners given as workload specifications) and many
configurations, built in memory, and a real one run by `pinlab study`: the page, rendered in
headless Chromium, never scrolls sideways and shows every table whole (the Verdict column
included); in every figure, checked in matplotlib after drawing, titles, tick labels, legends
and notes lie inside the image and no two x tick labels overlap; and a placement whose runs have
no usable thread samples gets a sentence in the page, not an empty or one-dot chart.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pinlab.report import html as report_html
from pinlab.report import plots
from tests.conftest import run_pinlab

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH to render the page in a real browser")

LONG = "stream:--size 2M --ntimes 3"
PROGRAMS = ["primes", LONG]
THREADS = [1, 8]
PLACEMENTS = ["none", "compact", "scatter", "random"]
CORUNS = ["none", "cpu:1", LONG]
EVENTS = ["cycles", "instructions", "cache-misses", "task-clock", "context-switches", "cpu-migrations", "page-faults"]


def _samples(placement: str, threads: int, run: int, pid: int) -> list[dict]:
    """The thread samples of one run. none and compact: long runs, every thread sampled 40 times;
    scatter: the run ended before the workers were sampled (the main thread once, and not at all
    when it is the only thread); random: every thread sampled once."""
    t = [round(0.01 * k, 4) for k in range(40)]
    out = []
    for i in range(1 + (threads if threads > 1 else 0)):
        role = "unknown" if placement == "none" else ("main" if i == 0 else "worker")
        if placement in ("none", "compact"):
            times = t
            cpus = [((k // 5) + i) % 8 for k in range(40)] if placement == "none" else [i % 8] * 40
        elif placement == "scatter":
            times = [0.0011] if (i == 0 and threads > 1) else []
            cpus = [0] * len(times)
        else:
            times, cpus = [0.0011], [i % 8]
        out.append(
            {"tid": pid + i, "pid": pid, "index": None if placement == "none" else i, "role": role, "sample_times": times, "sample_cpus": cpus}
        )
    return out


def long_report() -> SimpleNamespace:
    """A StudyReport-shaped study of 2 programs x 2 thread counts x 4 placements x 3 co-runners = 48
    configurations, with long program and co-runner names and seven counted events."""
    rng = np.random.default_rng(7)
    runs, stats = [], []
    for ci, (program, threads, corun, placement) in enumerate(itertools.product(PROGRAMS, THREADS, CORUNS, PLACEMENTS)):
        config = f"{program} x{threads} {placement}" + (f" corun={corun}" if corun != "none" else "")
        centre = 0.0123456 * (1 + 0.37 * (ci % 7)) * (1.4 if placement == "none" else 1.0)
        values = centre * (1 + rng.normal(0, 0.02, 3))
        for i, v in enumerate(values):
            pid = 40000 + 10 * (3 * ci + i)
            record = {"pid": pid, "sample_ms": 100.0, "threads": _samples(placement, threads, i, pid)}
            row = {
                "study": "long",
                "program": program,
                "threads": threads,
                "placement": placement,
                "mem": "first-touch",
                "corun": corun,
                "config": config,
                "run_index": i,
                "status": "ok",
                "wall_seconds": float(v),
                "metric": float(v),
                "migrations": 0,
                "record": record,
                "placement_cpus": None if placement == "none" else list(range(threads)),
            }
            for k, event in enumerate(EVENTS):
                row[f"counter:{event}"] = float(10 ** (3 + k % 7) * (1.2345 + ci))
            runs.append(row)
        base = placement == "none"
        verdict = ["faster", "slower", "no significant difference", "more runs needed"][ci % 4]
        row = {
            "program": program,
            "threads": threads,
            "placement": placement,
            "mem": "first-touch",
            "corun": corun,
            "config": config,
            "n": 3,
            "failed": 2 if ci % 5 == 0 else 0,
            "mean": values.mean(),
            "median": float(np.median(values)),
            "min": values.min(),
            "max": values.max(),
            "variance": values.var(ddof=1),
            "std": values.std(ddof=1),
            "av": np.ptp(values),
            "rv": np.ptp(values) / values.max(),
            "unstable": True,
            "mean_ci_low": values.mean() * 0.98123,
            "mean_ci_high": values.mean() * 1.01987,
            "median_ci_low": values.min(),
            "median_ci_high": values.max(),
        }
        if not base:
            row.update(
                mean_speedup=1.4 + 0.01 * ci,
                median_speedup=1.39 + 0.01 * ci,
                mean_verdict=verdict,
                median_verdict=verdict,
                verdict=verdict,
                mean_p=0.000123 * ci,
                median_p=0.0123 * ci,
            )
        for k, event in enumerate(EVENTS):
            row[f"counter:{event}"] = float(10 ** (3 + k % 7) * (1.2345 + ci))
            if not base:
                row[f"counter:{event}:ratio"] = 0.5 + 0.05 * (ci % 20)
        stats.append(row)
    study = SimpleNamespace(
        name="long",
        created_at=1_700_000_000.0,
        warnings=["virtual machine: yes"],
        parameters={
            "runs": 3,
            "strategies": PLACEMENTS,
            "threads": THREADS,
            "corun": CORUNS,
            "programs": [
                [p, ["/usr/lib/some/very/long/path/to/the/installed/pinlab/_native/pinlab-" + p.split(":")[0]] + p.split(":", 1)[1:]]
                for p in PROGRAMS
            ],
            "counters": EVENTS,
        },
        machine={
            "hostname": "bench-host",
            "kernel": "6.1.0-test",
            "cpu_model": "Example CPU 9000",
            "topology": {"packages": 2, "cores": 8, "pus": 16, "numa_nodes": 2},
            "governor": "performance",
        },
    )
    overall = [
        {
            "placement": p,
            "n_programs": 12,
            "mean_speedup": 1.11037,
            "median_speedup": 1.10025,
            "geomean_speedup": 1.0987,
            "min_variance": 0.000123,
            "max_variance": 0.00456,
            "n_faster": 5,
            "share_faster": 5 / 12,
            "share_faster_ci": (0.1934, 0.6805),
        }
        for p in PLACEMENTS[1:]
    ]
    return SimpleNamespace(
        study=study,
        runs=pd.DataFrame(runs),
        stats=pd.DataFrame(stats),
        overall=overall,
        baseline="none",
        alpha=0.05,
        metric="time",
        counters=EVENTS,
        adaptive=None,
    )


@pytest.fixture(scope="module")
def long_page(tmp_path_factory):
    report = long_report()
    path = report_html.write_html(report, tmp_path_factory.mktemp("long") / "out")
    return report, path


@pytest.fixture(scope="module")
def real_page(tmp_path_factory):
    """A real study of 36 configurations: two workloads, 1 and 2 threads, three placements, three co-runners."""
    data = pytest.importorskip("pinlab.report.data")
    coruns = "none,cpu:1,sleep:1+cpu:1" if len(os.sched_getaffinity(0)) >= 2 else "none,cpu:1,sleep:1"
    tmp = tmp_path_factory.mktemp("real")
    db = tmp / "s.db"
    proc = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "big",
        "--warmup",
        "0",
        "-q",
        "-s",
        "none,compact,scatter",
        "-n",
        "1,2",
        "--runs",
        "2",
        "--corun",
        coruns,
        "-w",
        "primes:--limit 100000",
        "-w",
        "stream:--size 2M --ntimes 3",
        "--counters",
        "task-clock,page-faults",
    )
    assert proc.returncode == 0, proc.stderr
    report = data.study_report(str(db), "big")
    assert len(report.stats) == 36
    return report, report_html.write_html(report, tmp / "out")


# -- in the browser ------------------------------------------------------------------------------
_PROBE = """<script>window.addEventListener('load', () => {
  const clip = (e) => { let right = window.innerWidth;
    for (let a = e.parentElement; a; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') right = Math.min(right, a.getBoundingClientRect().right); }
    return right; };
  const verdict = Array.from(document.querySelectorAll('th')).filter(th => th.textContent.trim() === 'Verdict')
    .map(th => ({right: th.getBoundingClientRect().right, visible: clip(th)}));
  document.body.setAttribute('data-layout', JSON.stringify({
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
    tables: Array.from(document.querySelectorAll('table')).map(t => ({table: t.id || t.className,
      right: t.getBoundingClientRect().right, visible: clip(t)})),
    images: Array.from(document.images).map(i => ({right: i.getBoundingClientRect().right, loaded: i.naturalWidth})),
    verdict: verdict,
    wide: Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
      .map(e => e.tagName + '.' + e.className).slice(0, 10)}));
});</script>"""


def _layout(page: Path, width: int, tmp_path: Path) -> dict:
    """What Chromium laid out for ``page`` in a window ``width`` px wide (see _PROBE)."""
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / f'profile-{width}'}",
            f"--window-size={width},1000",
            "--virtual-time-budget=20000",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert found, f"chromium did not lay the page out (status {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def _assert_fits(layout: dict, width: int) -> None:
    assert layout["innerWidth"] == width
    assert layout["scrollWidth"] <= layout["innerWidth"], f"the page scrolls sideways: {layout['wide']}"
    for t in layout["tables"]:
        # inside the window, and not cut by a box that scrolls it either
        assert t["right"] <= min(width, t["visible"]) + 0.5, (width, t)
    assert layout["verdict"], "no Verdict column"
    for v in layout["verdict"]:
        assert v["right"] <= min(width, v["visible"]) + 0.5, (width, v)
    assert all(i["right"] <= width + 0.5 and i["loaded"] > 0 for i in layout["images"]), layout["images"]


@needs_chromium
@pytest.mark.parametrize("width", [1400, 1920])
def test_long_names_and_many_configurations_fit_the_window(long_page, width, tmp_path):
    _assert_fits(_layout(long_page[1], width, tmp_path), width)


@needs_chromium
@pytest.mark.parametrize("width", [1400, 1920])
def test_a_real_study_of_36_configurations_fits_the_window(real_page, width, tmp_path):
    _assert_fits(_layout(real_page[1], width, tmp_path), width)


# -- in matplotlib ------------------------------------------------------------------------------
def _figure_problems(fig) -> list[str]:
    """What is cut off or overlaps in ``fig`` once drawn: titles, tick labels, legends and texts
    outside the figure, x tick labels over one another."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    problems = []

    def inside(artist, what):
        e = artist.get_window_extent(renderer)
        if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1 or e.y1 > box.y1 + 1:
            problems.append(f"{what} {getattr(artist, 'get_text', lambda: '')()!r} at {e.bounds} is not inside {box.bounds}")

    texts = [t for t in fig.texts if t.get_visible() and t.get_text()]
    if getattr(fig, "_suptitle", None) is not None and fig._suptitle not in texts and fig._suptitle.get_text():
        texts.append(fig._suptitle)
    for t in texts:
        inside(t, "figure text")
    for legend in fig.legends:
        inside(legend, "figure legend")
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for title in (ax.title, ax._left_title, ax._right_title):
            if title.get_text():
                inside(title, "axes title")
        if ax.get_legend() is not None:
            inside(ax.get_legend(), "axes legend")
        for t in ax.texts:
            if t.get_text() and t.get_visible():
                inside(t, "axes text")
        labels = [t.label1 for t in ax.xaxis._update_ticks() if t.label1.get_visible() and t.label1.get_text()]
        extents = [(lab.get_text(), lab.get_window_extent(renderer)) for lab in labels]
        for lab in labels:
            inside(lab, "x tick label")
        for (a, ea), (b, eb) in itertools.combinations(extents, 2):
            if ea.overlaps(eb):
                problems.append(f"x tick labels {a!r} and {b!r} overlap")
    return problems


def _all_figures(report) -> dict[str, object]:
    figures = {"violin": plots.violin(report), "speedups": plots.speedups(report)}
    if getattr(report, "counters", None):
        figures["counters"] = plots.counters(report)
    for p in plots._placements(report, report.runs):
        figures[f"timeline {p}"] = plots.timeline(report, p)
    return figures


def test_long_names_and_many_configurations_fit_their_figures():
    report = long_report()
    problems = {name: _figure_problems(fig) for name, fig in _all_figures(report).items()}
    assert not any(problems.values()), {k: v[:3] for k, v in problems.items() if v}


def test_a_real_study_of_36_configurations_fits_its_figures(real_page):
    problems = {name: _figure_problems(fig) for name, fig in _all_figures(real_page[0]).items()}
    assert not any(problems.values()), {k: v[:3] for k, v in problems.items() if v}


def test_short_figures_keep_their_titles_inside():
    """A figure of one or two panels is narrow: its title (suptitle included) wraps to stay inside."""
    report = long_report()
    one = report.stats["program"] == "primes"
    report.stats = report.stats[one & (report.stats["threads"] == 1) & (report.stats["corun"] == "none")]
    report.runs = report.runs[(report.runs["program"] == "primes") & (report.runs["threads"] == 1) & (report.runs["corun"] == "none")]
    report.counters = ["cycles"]
    for name, fig in _all_figures(report).items():
        assert not _figure_problems(fig), (name, _figure_problems(fig))
    # a figure that only says why it has nothing to draw keeps its sentence inside too
    report.stats = report.stats[report.stats["placement"] == "none"]
    for fig in (plots.speedups(report), plots.counters(report), plots.timeline(report, "nowhere", program=LONG * 3)):
        assert not _figure_problems(fig)


# -- the timelines, in words when there is nothing to draw ----------------------------------------
def _plain(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def _timelines(text: str) -> dict[str, str]:
    """placement -> the HTML of its "Where the threads ran" figure."""
    return {
        m.group(1): m.group(0)
        for m in re.finditer(r'<figure class="timeline"[^>]*>\s*<h3>Where the threads ran: ([^<]*)</h3>.*?</figure>', text, re.S)
    }


def test_a_timeline_without_worker_samples_is_said_in_words(long_page):
    report, path = long_page
    shown = _timelines(path.read_text(encoding="utf-8"))
    assert set(shown) == set(PLACEMENTS)
    for placement in ("none", "compact"):
        assert "<img" in shown[placement]
    scatter, random = _plain(shown["scatter"]), _plain(shown["random"])
    assert "<img" not in shown["scatter"] and "<img" not in shown["random"]
    assert f"no worker thread was sampled in any of the {3 * 12} successful runs with placement scatter" in scatter
    assert f"no worker thread was sampled more than once in the {3 * 12} successful runs with placement random" in random
    assert "too few samples to draw a line" in random
    for words in (scatter, random):
        assert "sampled every 100 ms" in words and "the longest run took" in words
    # the figure says the same, rather than drawing a dot
    for placement, words in (("scatter", "no worker thread was sampled"), ("random", "sampled more than once")):
        fig = plots.timeline(report, placement)
        assert not [ax for ax in fig.axes if ax.get_visible()] and words in " ".join(t.get_text().replace("\n", " ") for t in fig.texts)


def test_the_drawn_run_is_one_with_a_line_to_draw():
    """The first run with a worker sampled twice or more is drawn, not the first run of all."""
    report = long_report()
    runs = report.runs.copy()
    first = runs.index[runs["placement"] == "compact"][:2]
    for i in first:  # the first two runs of compact were sampled only once
        runs.at[i, "record"] = {
            "pid": 1,
            "sample_ms": 100.0,
            "threads": [
                {"tid": 1, "role": "main", "sample_times": [0.001], "sample_cpus": [0]},
                {"tid": 2, "role": "worker", "sample_times": [0.001], "sample_cpus": [1]},
            ],
        }
    report.runs = runs
    ax = plots.timeline(report, "compact").axes[0]
    assert ", run 2" in ax.get_title().replace("\n", " ")
    assert len(ax.get_legend().get_texts()) == 1  # primes x1 compact: the main thread only


def test_a_real_run_without_threads_is_said_in_words(tmp_path):
    """`true` starts no thread: asked for 2 threads, none of its runs has a worker to draw."""
    data = pytest.importorskip("pinlab.report.data")
    db = tmp_path / "t.db"
    proc = run_pinlab("study", "--db", str(db), "--name", "t", "-s", "none,compact", "-n", "2", "--runs", "3", "-q", "--", "true")
    assert proc.returncode == 0, proc.stderr
    text = report_html.render_html(data.study_report(str(db), "t"))
    shown = _timelines(text)
    assert set(shown) == {"none", "compact"}
    for placement, figure in shown.items():
        assert "<img" not in figure
        assert f"no worker thread was sampled in any of the 3 successful runs with placement {placement}" in _plain(figure)
