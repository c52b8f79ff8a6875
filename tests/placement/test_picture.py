"""Pictures of placements: real SVG and PNG files, checked for content, shape and errors."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pinlab.errors import UsageError
from pinlab.placement import make_placement
from pinlab.placement.picture import draw, layout, thread_text, threads_by_cpu
from pinlab.topology import load_topology
from tests.conftest import run_pinlab, with_allowed

SVG_NS = "{http://www.w3.org/2000/svg}"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SYNTH = "synthetic:pack:2 [numa] l3:1 core:4 pu:2"
TOPOLOGIES = ["clovertown", "x7560-4x8", "epyc-7763-2s", "alderlake-i9", "this", SYNTH]


@pytest.fixture(scope="module")
def topologies():
    """Each topology loaded once for the module (loading 'this' runs lstopo)."""
    return {name: load_topology(name) for name in TOPOLOGIES}


def svg_texts(path: Path) -> list[str]:
    """Every text of an SVG file, parsed as XML (so a malformed file fails here)."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG_NS}svg"
    return ["".join(el.itertext()) for el in root.iter(f"{SVG_NS}text")]


def thread_numbers(texts: list[str]) -> list[int]:
    """The thread numbers written in PUs: texts made only of numbers and commas ("3", "0,8")."""
    return sorted(int(n) for t in texts if re.fullmatch(r"\d+(,\d+)*", t) for n in t.split(","))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def threads_per_cpu(placement) -> dict[int, str]:
    """What the PU of each used CPU should say, computed here from the placement's CPU list."""
    found: dict[int, list[int]] = {}
    for thread, cpu in enumerate(placement.cpus):
        found.setdefault(cpu, []).append(thread)
    return {cpu: ",".join(map(str, threads)) for cpu, threads in found.items()}


def threads_for(topo, strategy: str) -> int:
    """A thread count every topology can take without --smt: at most 4, at most its allowed cores."""
    allowed_cores = [c for c in (topo.cores or topo.pus) if c.cpus & topo.allowed_cpus]
    return min(4, len(allowed_cores)) if strategy != "none" else 4


@pytest.mark.parametrize("strategy", ["scatter", "compact"])
@pytest.mark.parametrize("name", TOPOLOGIES)
def test_svg_shows_every_thread_in_its_cpu(topologies, name, strategy, tmp_path):
    topo = topologies[name]
    placement = make_placement(topo, strategy=strategy, threads=threads_for(topo, strategy))
    out = tmp_path / "placement.svg"
    draw(placement, out)
    texts = svg_texts(out)
    assert thread_numbers(texts) == list(range(placement.threads))
    for cpu, label in threads_per_cpu(placement).items():
        assert f"P#{cpu}" in texts
        assert label in texts
    assert f"{strategy}, {placement.threads} thread" in texts[0]
    assert topo.name in texts[0]


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_png_is_a_png_of_sane_size(topologies, name, tmp_path):
    topo = topologies[name]
    out = tmp_path / "placement.png"
    draw(make_placement(topo, strategy="scatter", threads=threads_for(topo, "scatter")), out)
    width, height = png_size(out)
    assert 300 <= width <= 9000 and 150 <= height <= 9000
    assert width >= height / 2  # landscape-ish, not a thin column


def test_every_pu_of_the_biggest_preset_is_labelled(topologies, tmp_path):
    topo = topologies["epyc-7763-2s"]
    out = tmp_path / "epyc.svg"
    draw(make_placement(topo, strategy="compact", threads=16), out)
    texts = set(svg_texts(out))
    assert {f"P#{pu.os_index}" for pu in topo.pus} <= texts
    assert {f"NUMANode P#{n.os_index} 64GiB" for n in topo.numa_nodes} <= texts
    assert "L3 32MiB" in texts and "Package P#1" in texts


def test_caches_are_labelled_with_their_size_and_l1i_is_skipped(topologies, tmp_path):
    out = tmp_path / "x7560.svg"
    draw(make_placement(topologies["x7560-4x8"], strategy="compact", threads=2), out)
    texts = svg_texts(out)
    assert "L3 24MiB" in texts
    assert "L2 256KiB" in texts  # the L2 + L1d + Core chain is one box, named by its L2
    assert not any(t.startswith("L1i") for t in texts)


def test_none_draws_the_machine_without_thread_numbers(topologies, tmp_path):
    out = tmp_path / "none.svg"
    draw(make_placement(topologies["clovertown"], strategy="none", threads=4), out)
    texts = svg_texts(out)
    assert "none: the OS places the threads" in texts[0]
    assert thread_numbers(texts) == []
    assert {f"P#{cpu}" for cpu in range(8)} <= set(texts)


def test_oversubscribed_pu_shows_all_its_threads(topologies, tmp_path):
    topo = topologies["clovertown"]
    placement = make_placement(topo, strategy="compact", threads=16, oversubscribe=True)
    first = placement.cpus[0]
    sharing = [t for t, cpu in enumerate(placement.cpus) if cpu == first]
    assert len(sharing) == 2
    out = tmp_path / "over.svg"
    draw(placement, out)
    texts = svg_texts(out)
    assert ",".join(map(str, sharing)) in texts
    assert thread_numbers(texts) == list(range(16))
    assert "PU shared by several threads" in texts


def test_many_threads_on_one_pu_are_abbreviated():
    assert thread_text([3]) == "3"
    assert thread_text([0, 8]) == "0,8"
    assert thread_text([0, 8, 16]) == "0,8,16"
    assert thread_text([0, 8, 16, 24, 32]) == "0,8,+3"


def test_disallowed_pus_are_hatched_and_explained(topologies, tmp_path):
    topo = with_allowed(topologies["clovertown"], [0, 2, 4, 6])
    placement = make_placement(topo, strategy="compact", threads=2)
    out = tmp_path / "restricted.svg"
    draw(placement, out)
    text = out.read_text()
    texts = svg_texts(out)
    assert "not allowed for this process" in texts
    assert "<pattern" in text  # matplotlib writes hatching as an SVG pattern
    assert {f"P#{cpu}" for cpu in (1, 3, 5, 7)} <= set(texts)  # still drawn, just greyed


def test_svg_output_is_reproducible(topologies, tmp_path):
    placement = make_placement(topologies["clovertown"], strategy="scatter", threads=4)
    draw(placement, tmp_path / "a.svg")
    draw(placement, tmp_path / "b.svg")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_suffix_is_case_insensitive(topologies, tmp_path):
    placement = make_placement(topologies["clovertown"], strategy="scatter", threads=2)
    draw(placement, tmp_path / "UPPER.PNG")
    assert png_size(tmp_path / "UPPER.PNG")[0] > 0
    draw(placement, str(tmp_path / "upper.Svg"))
    svg_texts(tmp_path / "upper.Svg")


@pytest.mark.parametrize("name", ["picture.pdf", "picture", "picture.svg.txt"])
def test_other_suffixes_are_refused(topologies, tmp_path, name):
    placement = make_placement(topologies["clovertown"], strategy="scatter", threads=2)
    with pytest.raises(UsageError, match=r"\.svg or \.png") as err:
        draw(placement, tmp_path / name)
    assert "\n" not in str(err.value)
    assert not (tmp_path / name).exists()


def test_missing_directory_is_refused(topologies, tmp_path):
    placement = make_placement(topologies["clovertown"], strategy="scatter", threads=2)
    target = tmp_path / "no" / "such" / "dir" / "picture.svg"
    with pytest.raises(UsageError, match="does not exist") as err:
        draw(placement, target)
    assert "\n" not in str(err.value) and "mkdir" in str(err.value)


def test_directory_as_target_is_refused(topologies, tmp_path):
    placement = make_placement(topologies["clovertown"], strategy="scatter", threads=2)
    (tmp_path / "dir.svg").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        draw(placement, tmp_path / "dir.svg")


def test_layout_nests_boxes_without_overlap(topologies):
    """Geometry: every box inside its parent, siblings apart, for a few machines."""
    for name in ("clovertown", "epyc-7763-2s", "alderlake-i9", SYNTH):
        picture = layout(make_placement(topologies[name], strategy="scatter", threads=2))
        for box in picture.root.walk():
            for child in box.children:
                assert box.x <= child.x and child.x + child.width <= box.x + box.width + 1e-6, name
                assert box.y <= child.y and child.y + child.height <= box.y + box.height + 1e-6, name
            kids = sorted(box.children, key=lambda b: (b.y, b.x))
            for i, a in enumerate(kids):
                for b in kids[i + 1 :]:
                    side_by_side = a.x + a.width <= b.x + 1e-6 or b.x + b.width <= a.x + 1e-6
                    one_above = a.y + a.height <= b.y + 1e-6 or b.y + b.height <= a.y + 1e-6
                    assert side_by_side or one_above, name
        assert picture.root.x + picture.root.width <= picture.width
        assert picture.root.y + picture.root.height <= picture.height


def test_layout_draws_each_pu_once(topologies):
    topo = topologies["epyc-7763-2s"]
    picture = layout(make_placement(topo, strategy="compact", threads=16))
    drawn = [box.objects[0].os_index for box in picture.root.walk() if box.is_pu]
    assert sorted(drawn) == sorted(pu.os_index for pu in topo.pus)


def test_threads_by_cpu_keeps_thread_order(topologies):
    placement = make_placement(topologies["clovertown"], cpus="0,1,0", oversubscribe=True)
    assert threads_by_cpu(placement) == {0: [0, 2], 1: [1]}
    assert threads_by_cpu(make_placement(topologies["clovertown"], strategy="none", threads=3)) == {}


def test_a_1024_pu_machine_still_draws(tmp_path):
    topo = load_topology("synthetic:pack:2 [numa] l3:2 core:64 pu:4")
    assert len(topo.pus) == 1024
    placement = make_placement(topo, strategy="scatter", threads=64)
    draw(placement, tmp_path / "big.png")
    width, height = png_size(tmp_path / "big.png")
    assert 1000 <= width <= 9000 and 500 <= height <= 9000
    draw(placement, tmp_path / "big.svg")
    assert thread_numbers(svg_texts(tmp_path / "big.svg")) == list(range(64))


def test_importing_the_module_does_not_load_matplotlib():
    code = "import sys, pinlab.placement.picture; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_cli_writes_the_picture(tmp_path):
    out = tmp_path / "X.svg"
    result = run_pinlab("place", "-t", "clovertown", "-s", "scatter", "-n", "4", "--picture", str(out))
    assert result.returncode == 0, result.stderr
    texts = svg_texts(out)
    assert texts[0] == "scatter, 4 threads on clovertown"
    assert thread_numbers(texts) == [0, 1, 2, 3]


def test_cli_refuses_a_picture_in_a_missing_directory(tmp_path):
    result = run_pinlab("place", "-t", "clovertown", "-s", "scatter", "-n", "4", "--picture", str(tmp_path / "missing" / "X.png"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr
