"""The autopin report page in a real browser: it loads, logs nothing to the console, and its
timeline picture is decoded, visible and inside the window at 1400 and 1920 px."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest

from pinlab.autopin.log import read_log
from pinlab.report.autopin_html import write_autopin_html
from tests.autopin.logbuilder import LogBuilder, phase_change_log

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH to render the page in a real browser")

_PROBE = """<script>
const errors = [];
window.addEventListener('error', (e) => errors.push(String(e.message || (e.target && e.target.tagName))), true);
window.addEventListener('load', () => document.body.setAttribute('data-layout', JSON.stringify({
  errors: errors, innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth,
  images: Array.from(document.images).map(i => { const r = i.getBoundingClientRect();
    return {loaded: i.complete ? i.naturalWidth : -1, left: r.left, right: r.right, width: r.width, height: r.height,
            visibility: getComputedStyle(i).visibility, display: getComputedStyle(i).display}; }),
  tables: Array.from(document.querySelectorAll('table.candidates')).map(t => t.getBoundingClientRect().right)})));
</script>"""


def _layout(page, width: int, tmp_path) -> tuple[dict, str]:
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
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
    assert found, f"chromium did not load the page (status {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1))), proc.stderr


@pytest.fixture(scope="module", params=["phase change", "twelve candidates"])
def page(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("autopin-html")
    if request.param == "phase change":
        builder = phase_change_log(candidates=5)
    else:
        builder = LogBuilder(candidates=12, windows=6).start()
        builder.search([1e9 * (1 + 0.02 * k) for k in range(12)], rounds=2)
        builder.choice(probing_started=builder.init)
        builder.rates(100, 1.22e9)
        builder.summary()
    log = read_log(builder.write(tmp / "log.jsonl"))
    return write_autopin_html(log, tmp / "out")


@needs_chromium
@pytest.mark.parametrize("width", [1400, 1920])
def test_page_loads_without_errors_and_shows_its_picture(page, width, tmp_path):
    layout, stderr = _layout(page, width, tmp_path)
    assert layout["errors"] == []
    assert not [line for line in stderr.splitlines() if ":CONSOLE" in line], stderr[-2000:]
    assert layout["innerWidth"] == width and layout["scrollWidth"] <= width, layout
    (image,) = layout["images"]
    assert image["loaded"] > 0, "the timeline picture did not decode"
    assert image["visibility"] == "visible" and image["display"] != "none"
    assert image["width"] > 600 and image["height"] > 200
    assert image["left"] >= 0 and image["right"] <= width + 0.5
    assert layout["tables"] and all(right <= width + 0.5 for right in layout["tables"])
