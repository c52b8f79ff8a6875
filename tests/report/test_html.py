"""The HTML report: self-contained, shows the tables, warnings and pictures, and renders in a browser."""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import math
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pinlab.report import html as report_html
from pinlab.report import plots
from tests.conftest import run_pinlab

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WARNING = "address randomisation (ASLR): on <randomize_va_space = 2>"


def _thread(tid, role, times, cpus):
    return {"tid": tid, "role": role, "sample_times": list(times), "sample_cpus": list(cpus)}


def _record(i, placement):
    t = [round(0.01 * k, 4) for k in range(40)]
    if placement == "none":  # the scheduler moves threads around
        main = [(k // 7) % 4 for k in range(40)]
        worker = [(k // 5 + 1) % 4 for k in range(40)]
    else:
        main, worker = [0] * 40, [1] * 40
    return {"threads": [_thread(1000 + i, "main", t, main), _thread(1001 + i, "worker", t[3:], worker[3:])]}


def make_report(metric: str = "time", many: bool = False) -> SimpleNamespace:
    """A StudyReport-shaped fixture: two programs x two placements, plus awkward cases."""
    rng = np.random.default_rng(1)
    rows = []
    configs = [
        ("primes", 2, "none", 1.80, 8),
        ("primes", 2, "compact", 1.50, 8),
        ("stream", 2, "none", 3.00, 6),
        ("stream", 2, "compact", 3.40, 6),
        ("single", 1, "none", 0.5, 1),
        ("single", 1, "compact", 0.4, 1),
    ]
    if many:
        configs += [(f"prog{k}", t, p, 1.0 + 0.1 * k, 5) for k in range(4) for t in (1, 4) for p in ("none", "compact", "scatter")]
    for program, threads, placement, centre, n in configs:
        for i in range(n):
            rows.append(
                {
                    "study": "t",
                    "program": program,
                    "threads": threads,
                    "placement": placement,
                    "mem": "first-touch",
                    "corun": "none",
                    "config": f"{program} x{threads} {placement}",
                    "run_index": i,
                    "status": "ok",
                    "wall_seconds": centre,
                    "metric": float(centre + rng.normal(0, 0.03)),
                    "migrations": 3 if placement == "none" else 0,
                    "record": _record(i, placement),
                    "placement_cpus": None if placement == "none" else [0, 1],
                }
            )
    # a failed run, a timeout and a NaN metric: left out of the pictures and counted
    rows[1].update(status="failed", metric=float("nan"))
    rows[2].update(status="timeout", metric=float("nan"))
    rows[3].update(metric=float("nan"))
    runs = pd.DataFrame(rows)

    def srow(program, threads, placement, mean, n, **cmp):
        base = {
            "program": program,
            "threads": threads,
            "placement": placement,
            "mem": "first-touch",
            "corun": "none",
            "config": f"{program} x{threads} {placement}",
            "n": n,
            "mean": mean,
            "median": mean - 0.001,
            "min": mean - 0.05,
            "max": mean + 0.05,
            "variance": 0.0009,
            "std": 0.03,
            "av": 0.1,
            "rv": 0.1 / (mean + 0.05),
            "unstable": True,
            "mean_ci_low": mean - 0.02,
            "mean_ci_high": mean + 0.02,
            "median_ci_low": mean - 0.03,
            "median_ci_high": mean + 0.03,
        }
        base.update(cmp)
        return base

    stats = pd.DataFrame(
        [
            srow("primes", 2, "none", 1.8012, 5, failed=3),
            srow(
                "primes",
                2,
                "compact",
                1.5023,
                8,
                mean_speedup=1.19897,
                median_speedup=1.19876,
                mean_verdict="faster",
                median_verdict="faster",
                verdict="faster",
                mean_p=0.0001,
                median_p=0.0002,
            ),
            srow("stream", 2, "none", 3.0031, 6),
            srow(
                "stream",
                2,
                "compact",
                3.4042,
                6,
                mean_speedup=0.88217,
                median_speedup=0.88199,
                mean_verdict="slower",
                median_verdict="slower",
                verdict="slower",
                mean_p=0.9999,
                median_p=0.9998,
            ),
            srow("single", 1, "none", 0.5, 1, std=float("nan"), mean_ci_low=None, mean_ci_high=None),
            srow(
                "single",
                1,
                "compact",
                0.4,
                1,
                std=float("nan"),
                mean_ci_low=None,
                mean_ci_high=None,
                mean_speedup=1.25,
                median_speedup=1.25,
                mean_verdict="more runs needed",
                median_verdict="no significant difference",
                verdict="more runs needed",
                mean_p=float("nan"),
                median_p=0.5,
            ),
        ]
    )
    overall = [
        {
            "placement": "compact",
            "n_programs": 3,
            "mean_speedup": 1.11037,
            "median_speedup": 1.10025,
            "geomean_speedup": 1.0987,
            "min_variance": 0.000123,
            "max_variance": 0.00456,
            "n_faster": 1,
            "share_faster": 1 / 3,
            "share_faster_ci": (0.0084, 0.9057),
        }
    ]
    study = SimpleNamespace(
        name="t <demo>",
        created_at=1_700_000_000.0,
        warnings=[WARNING, "virtual machine: yes"],
        parameters={"runs": 8, "strategies": ["none", "compact"], "programs": [["primes", ["primes", "-n", "2"]]]},
        machine={
            "hostname": "bench-host",
            "kernel": "6.1.0-test",
            "cpu_model": "Example CPU 9000",
            "topology": {"packages": 2, "cores": 8, "pus": 16, "numa_nodes": 2},
            "governor": "performance",
            "topology_xml": "<topology>SECRET-XML</topology>",
        },
    )
    return SimpleNamespace(study=study, runs=runs, stats=stats, overall=overall, baseline="none", alpha=0.05, metric=metric)


def _images(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)]


def _svgs(text: str) -> list[str]:
    return [base64.b64decode(m).decode("utf-8") for m in re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', text)]


def _assert_self_contained(text: str) -> None:
    assert "<link" not in text.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", text, re.I)
    assert "<script" not in text.lower()
    srcs = re.findall(r'src="([^"]*)"', text)
    assert srcs and all(s.startswith(("data:image/png;base64,", "data:image/svg+xml;base64,")) for s in srcs)
    for svg in _svgs(text):  # a placement picture links to nothing either
        assert not re.search(r"""(href)\s*=\s*["']?(https?:|//|file:)""", svg, re.I) and "<image" not in svg


def _read_png(data: bytes):
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(data), format="png")


def test_page_is_self_contained_with_tables_warnings_and_pictures(tmp_path):
    path = report_html.write_html(make_report(), tmp_path / "out")
    assert path == tmp_path / "out" / "index.html"
    text = path.read_text(encoding="utf-8")
    _assert_self_contained(text)
    # autoescaping: the study name and a warning with markup characters are shown as text
    assert "t &lt;demo&gt;" in text and "<demo>" not in text
    assert 'class="warnings"' in text
    assert "address randomisation (ASLR): on &lt;randomize_va_space = 2&gt;" in text
    assert "virtual machine: yes" in text
    # machine and parameters; the hwloc XML is not dumped into the page
    for s in ("bench-host", "6.1.0-test", "Example CPU 9000", "performance", "numa_nodes: 2"):
        assert s in text
    assert "SECRET-XML" not in text
    assert "primes primes -n 2" in text and "none compact" in text
    # the overall table
    for s in ("1.110", "1.100", "1.099", "0.000123", "0.00456", "1 of 3", "33 %", "[1 %, 91 %]"):
        assert s in text, s
    # the per-configuration table: numbers and coloured verdicts
    for s in ("1.801", "1.502", "3.404", "1.199", "0.882", "+3 failed", "[1.781, 1.821]"):
        assert s in text, s
    assert '<td class="v-faster">faster</td>' in text
    assert '<td class="v-slower">slower</td>' in text
    assert '<td class="v-more">more runs needed</td>' in text
    assert "unstable" in text and "RV" in text and "1 %" in text and "α = 0.05" in text.replace("&alpha;", "α")
    # the fixture's topology XML is not hwloc's: no placement picture, a note saying why
    assert "could not be read, so its placements are not drawn" in text and not _svgs(text)
    # neither counters nor an adaptive study
    assert 'id="counters"' not in text and "Adaptive study" not in text
    # violins, speedups, one timeline per placement; every image a real PNG
    images = _images(text)
    assert len(images) == 4
    for data in images:
        assert data.startswith(PNG_MAGIC)
        img = _read_png(data)
        assert img.shape[0] > 100 and img.shape[1] > 100


def test_figures_handle_awkward_data(tmp_path):
    report = make_report(many=True)
    fig = plots.violin(report)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 3 + 8  # one panel per program x threads
    titles = " ".join(ax.get_title() for ax in fig.axes)
    assert "3 runs failed/excluded" in titles
    assert plots.save(fig, tmp_path / "v.png").read_bytes().startswith(PNG_MAGIC)
    assert abs(_read_png((tmp_path / "v.png").read_bytes()).shape[1] - 3 * 4.3 * plots.DPI) <= 1
    fig = plots.speedups(report)
    marks = [t.get_text() for t in fig.axes[0].texts]
    assert marks.count("*") == 1 and marks.count("x") == 1
    assert any(line.get_ydata()[0] == 1.0 for line in fig.axes[0].get_lines())
    fig = plots.timeline(report, "none", program="primes")
    ax = fig.axes[0]
    assert len(ax.get_legend().get_texts()) == 2
    assert "primes x2 none, run 0" in ax.get_title() or "run 3" in ax.get_title()
    # no such placement: a figure that says so
    fig = plots.timeline(report, "nowhere")
    assert "no ok run" in fig.texts[0].get_text()
    # a non-time metric labels the axis with its name
    other = make_report(metric="json:bandwidth")
    assert any("json:bandwidth" in ax.get_ylabel() for ax in plots.violin(other).axes)
    # only the baseline: no comparison to draw, still a figure
    only_base = make_report()
    only_base.stats = only_base.stats[only_base.stats["placement"] == "none"]
    assert "no placement other than the baseline" in plots.speedups(only_base).texts[0].get_text()


def test_template_is_installed_with_the_package():
    assert (report_html.TEMPLATE_DIR / report_html.TEMPLATE).is_file()


CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH to render the page in a real browser")
def test_page_renders_in_a_real_browser(tmp_path):
    path = report_html.write_html(make_report(many=True), tmp_path / "out")
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,2400",
            path.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert shot.is_file(), f"chromium wrote no screenshot (status {proc.returncode}): {proc.stderr[-2000:]}"
    img = _read_png(shot.read_bytes())
    assert img.shape[:2] == (2400, 1200)
    pixels = (img[..., :3] * 255).round().astype(np.uint8).reshape(-1, 3)
    colours = np.unique(pixels, axis=0)
    assert len(colours) > 200, f"the screenshot looks blank ({len(colours)} colours)"
    # the warning box's amber background is on the page
    assert np.any(np.all(np.abs(pixels.astype(int) - [0xFF, 0xF4, 0xD6]) <= 2, axis=1))
    widths = _loaded_widths(path, tmp_path)
    assert len(widths) == path.read_text(encoding="utf-8").count("<img") and all(w > 0 for w in widths), widths


def _loaded_widths(page: Path, tmp_path: Path) -> list[int]:
    """The naturalWidth of every image of ``page`` once Chromium has loaded it (0: it did not decode).

    The page has no script (it must not need one); a copy of it gets one that writes the
    widths into the DOM, which ``--dump-dom`` prints after the load event.
    """
    probe = tmp_path / "probe.html"
    script = (
        "<script>window.addEventListener('load', () => document.body.setAttribute('data-widths', "
        "Array.from(document.images).map(i => i.complete ? i.naturalWidth : -1).join(',')));</script>"
    )
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'probe-profile'}",
            "--virtual-time-budget=20000",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = re.search(r'data-widths="([-0-9,]*)"', proc.stdout)
    assert found, f"chromium did not load the page (status {proc.returncode}): {proc.stderr[-2000:]}"
    return [int(w) for w in found.group(1).split(",") if w]


def test_real_study(tmp_path, pinlab):
    """A tiny real study through the store and pinlab.report.data, written as HTML."""
    data = pytest.importorskip("pinlab.report.data")
    db = tmp_path / "s.db"
    proc = pinlab("study", "--db", str(db), "--name", "t", "-s", "none,compact", "-n", "1", "--runs", "4", "-q", "--", "true")
    assert proc.returncode == 0, proc.stderr
    report = data.study_report(str(db), "t")
    text = report_html.write_html(report, tmp_path / "out").read_text(encoding="utf-8")
    _assert_self_contained(text)
    # `true` (nearly always) ends before its one thread is sampled twice: a timeline is then a sentence, not a dot
    drawn = _drawn_timelines(text)
    assert set(drawn) == set(report.runs["placement"])
    assert len(_images(text)) == 2 + sum(drawn.values())
    for w in report.study.warnings:
        assert str(w).replace("<", "&lt;").replace(">", "&gt;") in text
    median = report.stats.set_index("placement").loc["compact", "median_speedup"]
    assert f"{median:.3f}" in text
    # a fixed number of runs and no counters: neither section; one picture, compact with 1 thread
    assert "Adaptive study" not in text and 'id="counters"' not in text
    assert len(_svgs(text)) == 1 and "compact, 1 thread" in text


# -- counters, adaptive studies and placement pictures, from real studies ----------------------
EVENTS = ["task-clock", "page-faults"]


def _study(path: Path, name: str, *args: str):
    data = pytest.importorskip("pinlab.report.data")
    proc = run_pinlab("study", "--db", str(path), "--name", name, "--warmup", "0", "-q", "-w", "primes:--limit 100k", *args)
    assert proc.returncode == 0, proc.stderr
    return data.study_report(str(path), name)


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """(report, page path, page text) of a study counting software events, four placements, 1 and 2 threads."""
    tmp = tmp_path_factory.mktemp("counted")
    report = _study(tmp / "c.db", "c", "-s", "none,compact,scatter,random", "-n", "1,2", "--runs", "3", "--counters", ",".join(EVENTS))
    path = report_html.write_html(report, tmp / "out")
    return report, path, path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adaptive")
    report = _study(tmp / "a.db", "a", "-s", "none,compact", "-n", "1,2", "--runs", "auto", "--min-runs", "3", "--max-runs", "6")
    return report, report_html.render_html(report)


class _Tables(HTMLParser):
    """The text of every cell of every table, by the table's id: {id: [[cell, ...], ...]}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.table: str | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.table = dict(attrs).get("id") or ""
            self.tables[self.table] = []
        elif tag == "tr" and self.table is not None:
            self.tables[self.table].append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.table][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _table(text: str, table_id: str) -> list[list[str]]:
    parser = _Tables()
    parser.feed(text)
    return parser.tables[table_id]


def _drawn_timelines(text: str) -> dict[str, bool]:
    """placement -> whether its "Where the threads ran" is a picture (else it says why not in words)."""
    found = re.findall(r'<figure class="timeline">\s*<h3>Where the threads ran: ([^<]*)</h3>(.*?)</figure>', text, re.S)
    for _, body in found:
        assert ("<img" in body) != ("Not drawn: " in body), body
    return {placement: "<img" in body for placement, body in found}


def _plain(text: str) -> str:
    """The page's text as a reader sees it: no tags, entities decoded, white space collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def test_counters_table_and_figure_show_the_stats(counted):
    report, _, text = counted
    _assert_self_contained(text)
    assert report.counters == EVENTS
    rows = {r[0]: r[1:] for r in _table(text, "counters-table")[2:]}
    assert set(rows) == set(report.stats["config"])
    for stat in report.stats.to_dict(orient="records"):
        cells = rows[stat["config"]]
        for i, event in enumerate(EVENTS):
            mean, shown = stat[f"counter:{event}"], float(cells[2 * i].replace(",", ""))
            assert abs(shown - mean) <= (0.5 if abs(mean) >= 100 else 0.005 * abs(mean)), (stat["config"], event, cells)
            ratio = stat.get(f"counter:{event}:ratio")
            if stat["placement"] == report.baseline:
                assert ratio == 1.0 and cells[2 * i + 1] == "baseline"
            elif ratio is None or math.isnan(ratio):
                assert cells[2 * i + 1] == "–"
            else:
                assert abs(float(cells[2 * i + 1]) - ratio) <= 0.0005, (stat["config"], event, cells)
    assert "task-clock (ns)" in _plain(text)
    assert "this machine offered only software counters" in text
    assert report_html._software_only(["cs", "faults"]) and not report_html._software_only(["task-clock", "cycles"])
    # the figure: one panel per event, a bar per non-baseline configuration at its ratio, a line at 1
    fig = plots.counters(report)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == EVENTS
    compared = report.stats[report.stats["placement"] != report.baseline]
    for ax, event in zip(axes, EVENTS):
        ratios = sorted(compared[f"counter:{event}:ratio"].dropna())
        assert sorted(p.get_height() for p in ax.patches) == pytest.approx(ratios)
        assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())
    assert len(compared) == 3 * 2 and {t.get_text() for t in axes[0].get_xticklabels()} == {"primes\n1 thread", "primes\n2 threads"}


def test_a_missing_ratio_is_said_not_drawn(counted):
    report = counted[0]
    stats = report.stats.copy()
    missing = stats.index[stats["placement"] == "scatter"][0]
    stats.loc[missing, "counter:page-faults:ratio"] = float("nan")
    report = dataclasses.replace(report, stats=stats)
    fig = plots.counters(report)
    assert [t.get_text() for t in fig.axes[1].texts].count("n/a") == 1
    assert any("n/a: no ratio" in t.get_text() for t in fig.texts)
    compared = stats[stats["placement"] != report.baseline]
    assert len(fig.axes[1].patches) == len(compared) - 1
    row = {r[0]: r[1:] for r in _table(report_html.render_html(report), "counters-table")[2:]}[stats.loc[missing, "config"]]
    assert row[3] == "–" and row[2] != "–"


def _pinned_texts(svg: str) -> dict[int, str]:
    """CPU -> the thread numbers the picture writes in its box ("0", "1,3"), from the SVG's texts.

    Each PU box writes its CPU ("P#5") and then, when threads are pinned there, their numbers.
    """
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    pinned = {}
    for label, following in zip(texts, texts[1:] + [""]):
        cpu = re.fullmatch(r"P#(\d+)", label)
        if cpu and re.fullmatch(r"[0-9,+]+", following):
            pinned[int(cpu.group(1))] = following
    return pinned


def test_one_placement_picture_per_pinned_placement_and_thread_count(counted):
    report, _, text = counted
    svgs = _svgs(text)
    ok = report.runs[report.runs["status"] == "ok"].sort_values("run_index", kind="stable")
    pinned = [(p, t) for p in ("compact", "scatter", "random") for t in (1, 2)]
    assert len(svgs) == len(pinned)
    captions = re.findall(r'<figure class="placement"[^>]*>(.*?)</figure>', text, re.S)
    for (placement, threads), svg, caption in zip(pinned, svgs, captions):
        first = ok[(ok["placement"] == placement) & (ok["threads"] == threads)].iloc[0]
        cpus = list(first["placement_cpus"])
        assert len(cpus) == threads
        expected = {}
        for thread, cpu in enumerate(cpus):
            expected[cpu] = f"{expected[cpu]},{thread}" if cpu in expected else str(thread)
        assert _pinned_texts(svg) == expected, (placement, threads)
        assert f"{placement}" in svg and f"{threads} thread" in svg  # the picture's title
        words = _plain(caption)
        assert "Thread→CPU: " + ", ".join(f"{t}→{c}" for t, c in enumerate(cpus)) in words
        if placement == "random":
            assert f"Each run draws its own random placement: this is the one of run {first['run_index']} of {first['config']}" in words
            assert f"seed {first['record']['plan']['seed']}" in svg
        else:
            assert "random" not in words
    # none is never drawn: the OS placed those threads
    assert "none, 1 thread" not in _plain(text)


def test_no_picture_without_the_topology(counted):
    report = counted[0]
    machine = {k: v for k, v in report.study.machine.items() if k != "topology_xml"}
    text = report_html.render_html(dataclasses.replace(report, study=dataclasses.replace(report.study, machine=machine)))
    assert not _svgs(text) and "did not record the machine's topology" in _plain(text)
    _assert_self_contained(text)
    # runs that recorded no CPUs, or CPUs the machine does not have: said, not drawn
    runs = report.runs.copy()
    runs["placement_cpus"] = [
        None if p == "scatter" else [999] * len(c) if p == "compact" else c for p, c in zip(runs["placement"], runs["placement_cpus"])
    ]
    words = _plain(report_html.render_html(dataclasses.replace(report, runs=runs)))
    assert "No successful run recorded the CPUs of scatter: it is not drawn." in words
    assert words.count("Not drawn: CPU 999 is not in the recorded topology.") == 2


def test_adaptive_summary(adaptive):
    report, text = adaptive
    runs, stats = report.runs, report.stats
    per_config = runs.groupby("config").size()
    k, measured = len(per_config), len(runs)
    assert k == 4 and set(per_config) <= set(range(3, 7))
    words = _plain(text)
    assert (
        f"Adaptive study: {measured} measured runs over {k} configurations ({per_config.min()}..{per_config.max()} per configuration, "
        f"between 3 and 6), against 35 × {k} = {35 * k} for a fixed 35 runs each ({100 * measured / (35 * k):.0f} % of that)"
    ) in words
    # the summary is near the top, before the machine's description
    assert text.index('id="adaptive"') < text.index('id="machine"')
    compared = stats[stats["placement"] != report.baseline]
    undecided = [c for c, d in zip(compared["config"], compared["decided"]) if d is not True]
    shown = re.findall(r"<li>([^<]*)</li>", text.split('<ul class="undecided">')[1].split("</ul>")[0]) if undecided else []
    assert shown == undecided
    assert ("not decided at --max-runs 6" in words) == bool(undecided)
    # and with everything undecided, each comparison is listed
    info = dict(report.adaptive, undecided=list(compared["config"]))
    words = _plain(report_html.render_html(dataclasses.replace(report, adaptive=info)))
    assert "Comparisons with the baseline not decided at --max-runs 6 (α = 0.05): " + " ".join(compared["config"]) in words


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH to render the page in a real browser")
def test_counters_and_placement_pictures_load_in_a_real_browser(counted, tmp_path):
    path, text = counted[1], counted[2]
    widths = _loaded_widths(path, tmp_path)
    drawn = _drawn_timelines(text)  # a run of primes may be too short to be sampled twice: then no picture
    assert set(drawn) == {"none", "compact", "scatter", "random"}
    assert len(widths) == text.count("<img") == 2 + 1 + sum(drawn.values()) + 6  # violins, speedups, counters, timelines, placements
    assert all(w > 0 for w in widths), widths
