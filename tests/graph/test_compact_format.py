"""The compact graph file (.npz) and the thread count read before the weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pinlab.errors import UsageError
from pinlab.graph import model
from pinlab.graph.model import load_graph, peek_threads
from tests.conftest import run_pinlab
from tests.graph.graph_support import planted_graph


def assert_one_line_error(result, message):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("pinlab: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


# ---- round trips -----------------------------------------------------------------------------
@pytest.mark.parametrize("density", ["sparse", "dense"])
def test_compact_round_trip_keeps_everything(tmp_path, density):
    threads = 40
    graph = planted_graph(threads, [(0, 39, 1234.5), (3, 4, 7e20)], noise=10.0 if density == "dense" else 0.0)
    graph.volume = [float(100 + 7 * i) for i in range(threads)]
    graph.granularity, graph.unit_bytes = "line", 64
    graph.measured = {"method": "exact", "program": ["./pairs"], "slowdown": 2.5}
    graph.save(tmp_path / "g.npz")
    stored = np.load(tmp_path / "g.npz")
    assert ("triangle" in stored.files) == (density == "dense")  # pairs with indexes only when few are non-zero
    loaded = load_graph(tmp_path / "g.npz")
    assert np.array_equal(loaded.as_array(), graph.as_array())
    assert loaded.volume == graph.volume
    assert (loaded.granularity, loaded.unit_bytes, loaded.measured) == ("line", 64, graph.measured)
    assert loaded.total == pytest.approx(graph.total) and loaded.edges() == graph.edges()


def test_convert_json_to_compact_and_back_is_byte_exact(tmp_path):
    graph = planted_graph(33, [(0, 32, 99.0)])
    graph.measured = {"method": "sampled"}
    graph.save(tmp_path / "g.json")
    for source, target in (("g.json", "g.npz"), ("g.npz", "back.json")):
        result = run_pinlab("graph", "convert", str(tmp_path / source), str(tmp_path / target))
        assert result.returncode == 0 and result.stderr == "" and result.stdout == "", result.stderr
    assert (tmp_path / "back.json").read_bytes() == (tmp_path / "g.json").read_bytes()
    assert (tmp_path / "g.npz").stat().st_size < (tmp_path / "g.json").stat().st_size


def test_a_compact_graph_places_like_its_json(tmp_path):
    graph = planted_graph(8, [(0, 5, 100), (1, 6, 100), (2, 7, 100), (3, 4, 100)], noise=1.0)
    graph.save(tmp_path / "g.json")
    graph.save(tmp_path / "g.npz")
    outputs = [run_pinlab("place", "-t", "clovertown", "-s", "treematch", "--graph", str(tmp_path / name)) for name in ("g.json", "g.npz")]
    assert outputs[0].returncode == 0 and outputs[0].stdout == outputs[1].stdout


# ---- the thread count first --------------------------------------------------------------------
def _header_only(tmp_path, name, threads):
    """A file whose thread count is readable but whose weights are not: refusing it for its size
    proves the weights were never read (reading them gives another error)."""
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text('{\n "pinlab_graph": 1,\n "threads": %d,\n "weights": [\n  [0, 1, oops' % threads)
    elif name.endswith(".csv"):
        path.write_text(",".join(["0"] * threads) + "\nnot a row of numbers\n")
    else:
        with open(path, "wb") as out:
            np.savez_compressed(out, pinlab_graph=np.int64(1), threads=np.int64(threads), triangle=np.array(["oops"]))
    return path


@pytest.mark.parametrize("name", ["big.json", "big.csv", "big.npz"])
def test_more_threads_than_cores_is_refused_before_the_weights_are_read(tmp_path, name):
    path = _header_only(tmp_path, name, 3000)
    assert peek_threads(path) == 3000
    for command in (
        ["place", "-t", "nehalem-ep", "-s", "treematch", "--graph", str(path)],
        ["place", "-t", "nehalem-ep", "-s", "lpgp", "--domains", "1", "--graph", str(path)],
    ):
        assert_one_line_error(run_pinlab(*command), "3000 threads but only ")
    assert_one_line_error(
        run_pinlab("place", "-t", "nehalem-ep", "-s", "compact", "-n", "4", "--graph", str(path)),
        f"graph {path} has 3000 threads but 4 were asked for",
    )
    marker = tmp_path / "ran"
    result = run_pinlab("run", "-s", "gp", "--graph", str(path), "--", "touch", str(marker))
    assert_one_line_error(result, "3000 threads but only ")
    assert not marker.exists()


def test_the_library_checks_the_count_first_too(tmp_path):
    path = _header_only(tmp_path, "big.npz", 3000)
    seen = []

    def expect(n):
        seen.append(n)
        raise UsageError(f"{n} is too many")

    with pytest.raises(UsageError, match="3000 is too many"):
        load_graph(path, expect=expect)
    assert seen == [3000]
    good = tmp_path / "g.json"
    planted_graph(5, [(0, 1, 3.0)]).save(good)
    assert load_graph(good, expect=seen.append).threads == 5 and seen[-1] == 5


def test_a_nested_threads_key_is_not_taken_for_the_count(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"measured": {"threads": 99}, "weights": [[0, 1], [1, 0]]}))
    assert peek_threads(path) is None
    assert load_graph(path, expect=lambda n: None).threads == 2


def test_a_large_file_says_it_is_being_read(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    planted_graph(20, [(0, 1, 5.0)]).save(path)
    monkeypatch.setattr(model, "LARGE_FILE_BYTES", 100)
    notices = []
    load_graph(path, notice=notices.append)
    assert notices == [f"reading graph {path} (0 MiB); the compact form loads faster: pinlab graph convert {path} {tmp_path / 'g.npz'}"]


# ---- bad compact files -----------------------------------------------------------------------
def _npz(tmp_path, **arrays):
    path = tmp_path / "bad.npz"
    with open(path, "wb") as out:
        np.savez(out, **arrays)
    return path


@pytest.mark.parametrize(
    "arrays, message",
    [
        (None, "is not a compact (.npz) graph"),
        (dict(threads=np.int64(2)), "is not a pinlab compact graph of format 1"),
        (dict(pinlab_graph=np.int64(1), threads=np.float64(2)), "'threads' must be a whole number >= 1"),
        (dict(pinlab_graph=np.int64(1), threads=np.int64(3)), "has neither 'triangle' nor 'rows', 'cols', 'values'"),
        (dict(pinlab_graph=np.int64(1), threads=np.int64(3), triangle=np.array([1.0, 2.0])), "'triangle' has 2 weights but 3 threads have 3 pairs"),
        (dict(pinlab_graph=np.int64(1), threads=np.int64(3), triangle=np.array([1.0, -2.0, 0])), "between threads 0 and 2 is -2.0"),
        (dict(pinlab_graph=np.int64(1), threads=np.int64(3), triangle=np.array([1.0, np.inf, 0])), "is inf; weights must be finite"),
        (dict(pinlab_graph=np.int64(1), threads=np.int64(3), rows=np.array([1]), cols=np.array([1]), values=np.array([5.0])), "pair 0 is (1, 1)"),
        (
            dict(pinlab_graph=np.int64(1), threads=np.int64(3), rows=np.array([0]), cols=np.array([3]), values=np.array([5.0])),
            "two threads i < j below 3",
        ),
        (
            dict(pinlab_graph=np.int64(1), threads=np.int64(3), rows=np.array([0, 0]), cols=np.array([1, 1]), values=np.array([5.0, 1.0])),
            "listed twice",
        ),
        (
            dict(pinlab_graph=np.int64(1), threads=np.int64(3), rows=np.array([0]), cols=np.array([1, 2]), values=np.array([5.0])),
            "three lists of one length",
        ),
        (
            dict(pinlab_graph=np.int64(1), threads=np.int64(2), triangle=np.array([1.0]), volume=np.array([1.0])),
            "'volume' must list one finite number",
        ),
    ],
)
def test_a_bad_compact_file_is_refused_in_one_line_and_nothing_is_written(tmp_path, arrays, message):
    path = _npz(tmp_path, **arrays) if arrays is not None else tmp_path / "bad.npz"
    if arrays is None:
        path.write_text("0,1\n1,0\n")
    target = tmp_path / "out.json"
    for command in (["graph", "show", str(path)], ["graph", "convert", str(path), str(target)]):
        assert_one_line_error(run_pinlab(*command), message)
    assert not target.exists()


def test_a_missing_compact_file(tmp_path):
    assert_one_line_error(run_pinlab("graph", "show", str(tmp_path / "none.npz")), "does not exist; make one with pinlab trace")


def test_trace_writes_a_compact_graph_that_reads_back_as_traced(tmp_path):
    """pinlab trace -o G.npz: the traced graph in the compact form, the same as its JSON twin."""
    from pinlab.native import native_path

    pairs = str(native_path("pinlab-pairs"))
    for name in ("g.npz", "g.json"):
        result = run_pinlab(
            "trace", "--method", "pages", "-n", "4", "--no-baseline", "-o", str(tmp_path / name), "--", pairs, "--groups", "2", "--reps", "2000"
        )
        assert result.returncode == 0, result.stderr
    compact, text = load_graph(tmp_path / "g.npz"), load_graph(tmp_path / "g.json")
    assert compact.threads == 4 and compact.granularity == "page" and compact.measured["method"] == "pages"
    assert np.asarray(compact.weights).sum() > 0
    assert not list(tmp_path.glob(".*.part"))  # written through a temporary file renamed into place
    # one traced run each: the weights differ, their shapes and kinds do not
    assert (compact.threads, compact.granularity, compact.unit_bytes) == (text.threads, text.granularity, text.unit_bytes)


# ---- progress of long loads ------------------------------------------------------------------
class _Recorder:
    def __init__(self):
        self.calls = []

    def step(self, description, total=None):
        self.calls.append(("step", description, total))

    def advance(self, amount):
        self.calls.append(("advance", amount))

    def done(self):
        self.calls.append(("done",))


@pytest.mark.parametrize("suffix", [".json", ".csv", ".npz"])
def test_a_large_file_reports_each_phase_of_its_load(tmp_path, monkeypatch, suffix):
    path = tmp_path / f"g{suffix}"
    planted_graph(30, [(0, 1, 5.0)]).save(path)
    monkeypatch.setattr(model, "LARGE_FILE_BYTES", 100)
    monkeypatch.setattr(model, "READ_CHUNK_BYTES", 1000)
    progress, notices = _Recorder(), []
    graph = load_graph(path, notice=notices.append, progress=progress)
    assert graph.threads == 30 and graph.weights[0][1] == 5.0
    steps = [c[1] for c in progress.calls if c[0] == "step"]
    assert progress.calls[-1] == ("done",) and progress.calls.count(("done",)) == 1
    assert steps[-1] == f"checking graph {path.name}"
    if suffix == ".npz":
        assert steps[0] == f"reading graph {path.name} (30 threads)" and notices == []
    else:
        size = path.stat().st_size
        assert progress.calls[0] == ("step", f"reading graph {path.name}", size)
        assert sum(c[1] for c in progress.calls if c[0] == "advance") == size  # ASCII: one byte a character
        assert len(notices) == 1  # the notice of a large text file, once, as without progress


def test_a_small_file_or_a_refused_one_shows_no_progress_left_open(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    planted_graph(30, [(0, 1, 5.0)]).save(path)
    progress = _Recorder()
    load_graph(path, progress=progress)
    assert progress.calls == []
    monkeypatch.setattr(model, "LARGE_FILE_BYTES", 100)

    def refuse(n):
        raise UsageError(f"not {n}")

    with pytest.raises(UsageError, match="not 30"):
        load_graph(tmp_path / "g.json", progress=progress, expect=lambda n: None if progress.calls else refuse(n))
    assert progress.calls == [("done",)]  # refused from the count alone: nothing shown, and closed


def test_progress_is_shown_on_a_terminal_only(tmp_path):
    import io
    import os
    import pty

    from pinlab.graph.progress import TerminalProgress, terminal_progress

    assert terminal_progress(io.StringIO()) is None
    with open(tmp_path / "log", "w") as log:
        assert terminal_progress(log) is None
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            shown = terminal_progress(terminal)
            assert isinstance(shown, TerminalProgress)
            shown.step("reading graph g.json", total=1000)
            shown.advance(500)
            shown.done()
            terminal.flush()
        out = b""
        while b"reading graph g.json" not in out:
            out += os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)


def _large_json(path, threads=1200):
    """A JSON graph over 8 MiB (whole-number weights of 5 digits): the size that gets the notice."""
    cells = ["12345"] * threads
    rows = ["[" + ",".join(cells[:i] + ["0"] + cells[i + 1 :]) + "]" for i in range(threads)]
    path.write_text(f'{{"pinlab_graph": 1, "threads": {threads}, "weights": [{",".join(rows)}]}}')
    assert path.stat().st_size > model.LARGE_FILE_BYTES
    return path


def test_a_large_load_prints_only_its_notice_where_stderr_is_not_a_terminal(tmp_path):
    path = _large_json(tmp_path / "big.json")
    result = run_pinlab("graph", "convert", str(path), str(tmp_path / "big.npz"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"pinlab: notice: reading graph {path} ({path.stat().st_size / 2**20:.0f} MiB); the compact form loads "
        f"faster: pinlab graph convert {path} {tmp_path / 'big.npz'}\n"
    )


def test_a_large_load_shows_progress_where_stderr_is_a_terminal(tmp_path):
    import os
    import pty
    import select
    import subprocess

    from tests.conftest import PINLAB

    path = _large_json(tmp_path / "big.json")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(PINLAB), "graph", "convert", str(path), str(tmp_path / "big.npz")], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave
        )
        os.close(slave)
        out = b""
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                proc.kill()
                break
            try:
                piece = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the command is done
                break
            if not piece:
                break
            out += piece
        assert proc.wait(timeout=600) == 0, out
    finally:
        os.close(master)
    text = out.decode("utf-8", "replace")
    assert "pinlab: notice: reading graph" in text and "reading graph big.json" in text, text
