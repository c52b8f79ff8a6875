"""The affinity graph's files: round trips, and every bad input refused in one line through the real CLI."""

from __future__ import annotations

import json

import pytest

from pinlab.errors import UsageError
from pinlab.graph.model import AffinityGraph, convert_graph, graph_format, load_graph
from tests.conftest import run_pinlab
from tests.graph.graph_support import planted_graph, write_json


def measured_graph(threads: int) -> AffinityGraph:
    graph = planted_graph(threads, [(0, threads - 1, 1234.5)])
    graph.volume = [float(100 + 7 * i) for i in range(threads)]
    graph.granularity = "line"
    graph.unit_bytes = 64
    graph.measured = {"method": "exact", "program": ["./pairs", "-n", str(threads)], "slowdown": 2.5}
    return graph


# ---- round trips -----------------------------------------------------------------------
@pytest.mark.parametrize("threads", [1, 2, 5, 33])
def test_json_round_trip_is_byte_exact_and_keeps_everything(tmp_path, threads):
    graph = measured_graph(threads) if threads > 1 else AffinityGraph(weights=[[0.0]], granularity="page", unit_bytes=4096)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    graph.save(first)
    loaded = load_graph(first)
    loaded.save(second)
    assert first.read_bytes() == second.read_bytes()
    assert loaded.weights == graph.weights and loaded.volume == graph.volume
    assert (loaded.granularity, loaded.unit_bytes, loaded.measured) == (graph.granularity, graph.unit_bytes, graph.measured)
    data = json.loads(first.read_text())
    assert set(data) == {"pinlab_graph", "threads", "weights", "volume", "granularity", "unit_bytes", "measured"}
    assert data["threads"] == threads == len(data["weights"])
    lines = first.read_text().splitlines()  # one matrix row a line: the file reads as the matrix
    assert [line.strip().rstrip(",") for line in lines[4 : 4 + threads]] == [json.dumps(row) for row in data["weights"]]


@pytest.mark.parametrize("threads", [3, 7, 40])
def test_matrix_round_trip_is_byte_exact(tmp_path, threads):
    graph = planted_graph(threads, [(0, 1, 0.125), (threads - 2, threads - 1, 3e9)])
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    graph.save(first)
    loaded = load_graph(first)
    loaded.save(second)
    assert first.read_bytes() == second.read_bytes()
    assert loaded.weights == graph.weights
    lines = first.read_text().splitlines()
    assert len(lines) == threads and all(len(line.split(",")) == threads for line in lines)
    assert lines[0].split(",")[1] == "0.125" and lines[-1].split(",")[-2] == "3000000000"  # fractions kept, whole numbers whole


def test_matrix_with_spaces_semicolons_and_comments(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text("# an exported communication matrix\n0 3 1\n\n3;0;2\n1, 2, 0\n")
    assert load_graph(path).weights == [[0, 3, 1], [3, 0, 2], [1, 2, 0]]


def test_json_defaults(tmp_path):
    graph = load_graph(write_json(tmp_path / "g.json", {"weights": [[0, 2, 1], [2, 0, 0], [1, 0, 0]]}))
    assert graph.threads == 3 and graph.volume == [3, 2, 1] and graph.granularity == "unknown" and graph.measured == {}


def test_convert_json_to_matrix_and_back_through_the_cli(tmp_path):
    graph = measured_graph(6)
    graph.save(tmp_path / "g.json")
    result = run_pinlab("graph", "convert", str(tmp_path / "g.json"), str(tmp_path / "g.csv"))
    assert result.returncode == 0 and result.stdout == ""
    # The matrix keeps only the weights, and says so.
    assert result.stderr.startswith("pinlab: notice: ") and result.stderr.count("\n") == 1
    for lost in ("volume", "granularity", "unit_bytes", "measured"):
        assert lost in result.stderr
    assert (tmp_path / "g.csv").read_text() == graph.to_csv()
    back = run_pinlab("graph", "convert", str(tmp_path / "g.csv"), str(tmp_path / "back.json"))
    assert back.returncode == 0 and back.stderr == "" and back.stdout == ""
    data = json.loads((tmp_path / "back.json").read_text())
    assert data["weights"] == json.loads((tmp_path / "g.json").read_text())["weights"]
    assert data["measured"] == {"method": "import", "file": "g.csv"}


def test_convert_of_a_matrix_to_a_matrix_is_silent(tmp_path):
    planted_graph(4, []).save(tmp_path / "a.csv")
    result = run_pinlab("graph", "convert", str(tmp_path / "a.csv"), str(tmp_path / "b.mat"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.mat").read_bytes()


# ---- fixed with a notice, or refused with --strict --------------------------------------
def test_asymmetric_matrix_is_symmetrised_with_a_notice(tmp_path):
    path = tmp_path / "asym.csv"
    path.write_text("0,10,0\n2,0,5\n0,5,0\n")
    result = run_pinlab("graph", "convert", str(path), str(tmp_path / "sym.json"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("pinlab: notice: ") and result.stderr.count("\n") == 1
    assert "not symmetric" in result.stderr and "threads 0 and 1" in result.stderr and "mean" in result.stderr
    assert json.loads((tmp_path / "sym.json").read_text())["weights"] == [[0, 6, 0], [6, 0, 5], [0, 5, 0]]
    shown = run_pinlab("graph", "show", str(path))
    assert shown.returncode == 0 and "not symmetric" in shown.stderr and "heaviest" in shown.stdout


def test_non_zero_diagonal_is_ignored_with_a_notice(tmp_path):
    path = write_json(tmp_path / "diag.json", {"threads": 2, "weights": [[7, 1], [1, 0]]})
    result = run_pinlab("graph", "convert", str(path), str(tmp_path / "out.csv"))
    assert result.returncode == 0 and "diagonal" in result.stderr and result.stderr.startswith("pinlab: notice: ")
    assert (tmp_path / "out.csv").read_text() == "0,1\n1,0\n"


# ---- bad input: one line, exit status 2, nothing written ---------------------------------
GOOD4 = {"threads": 4, "weights": [[0, 5, 1, 0], [5, 0, 0, 1], [1, 0, 0, 5], [0, 1, 5, 0]]}

# (file name, content (None: no file), extra options of show, the message's key words)
BAD = [
    ("four.json", json.dumps(GOOD4), ["-n", "3"], "has 4 threads but 3 were asked for"),
    ("neg.json", json.dumps({"weights": [[0, -1], [-1, 0]]}), [], "is -1; weights must be finite and >= 0"),
    ("string.json", json.dumps({"weights": [[0, "5"], ["5", 0]]}), [], "is '5', not a number"),
    ("bool.json", json.dumps({"weights": [[0, True], [True, 0]]}), [], "is True, not a number"),
    ("nan.json", '{"weights": [[0, NaN], [NaN, 0]]}', [], "is nan; weights must be finite"),
    ("nan.csv", "0,nan\nnan,0\n", [], "is nan; weights must be finite"),
    ("inf.csv", "0 inf\ninf 0\n", [], "is inf; weights must be finite"),
    ("word.csv", "0,1\n1,lots\n", [], "line 2: 'lots' is not a number"),
    ("asym.csv", "0,10\n2,0\n", ["--strict"], "is not symmetric: 10 from thread 0 to 1 but 2 back"),
    ("diag.json", json.dumps({"weights": [[0, 1], [1, 3]]}), ["--strict"], "thread 1 has a weight with itself (3)"),
    ("empty.json", json.dumps({"threads": 0, "weights": []}), [], "is empty: it needs one row of weights per thread"),
    ("rows.json", "[]", [], "has no 'weights'"),
    ("empty.csv", "# nothing but a comment\n", [], "is empty: it needs one row of weights per thread"),
    ("ragged.json", json.dumps({"weights": [[0, 1, 2], [1, 0], [2, 0, 0]]}), [], "row 1 has 2 weights but there are 3 threads"),
    ("wide.csv", "0,1,2\n1,0,3\n", [], "row 0 has 3 weights but there are 2 threads"),
    ("count.json", json.dumps({"threads": 3, "weights": [[0, 1], [1, 0]]}), [], "says 'threads': 3 but 'weights' has 2 rows"),
    ("notlist.json", json.dumps({"weights": {"0": [0]}}), [], "'weights' must be a list of rows"),
    ("volume.json", json.dumps({"weights": [[0, 1], [1, 0]], "volume": [3, -2]}), [], "'volume' of thread 1 is -2; it must be a finite number >= 0"),
    ("volumes.json", json.dumps({"weights": [[0, 1], [1, 0]], "volume": [3]}), [], "'volume' must list one number per thread (2)"),
    ("missing.json", None, [], "does not exist; make one with pinlab trace"),
    ("text.json", "0,1\n1,0\n", [], "is not JSON"),
    ("version.json", json.dumps({"pinlab_graph": 7, "weights": [[0]]}), [], "is format 7"),
    ("gran.json", json.dumps({"weights": [[0]], "granularity": "byte"}), [], "unknown granularity 'byte'"),
    # A JSON integer too large for a float (Python's json reads it as an int float() cannot hold).
    (
        "digits.json",
        '{"weights": [[0, 1%s], [1%s, 0]]}' % ("0" * 399, "0" * 399),
        [],
        "the weight between threads 0 and 1 is a number of 400 digits; weights must be finite and >= 0 (at most 1e+290)",
    ),
    ("digits.csv", "0,1%s\n1%s,0\n" % ("0" * 399, "0" * 399), [], "line 1: a number of 400 digits is too large"),
    ("big.json", json.dumps({"weights": [[0, 1e300], [1e300, 0]]}), [], "is 1e+300; weights must be finite"),
    (
        "vdigits.json",
        '{"weights": [[0, 1], [1, 0]], "volume": [1, 1%s]}' % ("0" * 399),
        [],
        "'volume' of thread 1 is a number of 400 digits; it must be a finite number >= 0 and at most 1e+290",
    ),
    # The name's ending says the format: anything else is refused, not read as JSON.
    ("graph.xyz", json.dumps(GOOD4), [], "graph.xyz: pinlab reads a graph by its name's ending: .json for JSON, .csv, .txt, .mat"),
    ("graph", "0,1\n1,0\n", [], "pinlab reads a graph by its name's ending"),
]


def assert_one_line_error(result, message):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("pinlab: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("name, content, options, message", BAD, ids=[b[0] for b in BAD])
def test_bad_graph_is_refused_by_show(tmp_path, name, content, options, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    picture = tmp_path / "picture.png"
    result = run_pinlab("graph", "show", str(path), "--picture", str(picture), *options)
    assert_one_line_error(result, message)
    assert not picture.exists()


@pytest.mark.parametrize("name, content, options, message", [b for b in BAD if b[2] != ["-n", "3"]], ids=[b[0] for b in BAD if b[2] != ["-n", "3"]])
def test_bad_graph_is_refused_by_convert_and_nothing_is_written(tmp_path, name, content, options, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    target = tmp_path / "out.json"
    result = run_pinlab("graph", "convert", str(path), str(target), *options)
    assert_one_line_error(result, message)
    assert not target.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["convert", "{good}", "{tmp}/out.cvs"], "end its name in .json for JSON, .csv, .txt, .mat for a matrix or .npz for the compact form"),
        (["convert", "{good}", "{tmp}/no/such/dir/out.json"], "its directory does not exist; create it first"),
        (["show", "{good}", "--picture", "{tmp}/g.gif"], "must end in .svg or .png"),
        (["show", "{good}", "--picture", "{tmp}/no/such/dir/g.png"], "does not exist; create it first"),
        (["show", "{good}", "-n", "0"], "has 4 threads but 0 were asked for"),
    ],
)
def test_bad_output_or_option_is_refused(tmp_path, args, message):
    good = write_json(tmp_path / "good.json", GOOD4)
    result = run_pinlab("graph", *[a.format(good=good, tmp=tmp_path) for a in args])
    assert_one_line_error(result, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json"]


def test_the_library_refuses_the_same_things(tmp_path):
    """The checks live with the model: the Python API raises what the CLI prints."""
    graph = load_graph(write_json(tmp_path / "g.json", GOOD4))
    graph.check_threads(4)
    with pytest.raises(UsageError, match="has 4 threads but 8 were asked for"):
        graph.check_threads(8)
    with pytest.raises(UsageError, match="end its name in .json"):
        graph_format(tmp_path / "g.out")
    with pytest.raises(UsageError, match="is not symmetric"):
        (tmp_path / "a.csv").write_text("0 1\n2 0\n")
        convert_graph(tmp_path / "a.csv", tmp_path / "b.json", strict=True)
    assert not (tmp_path / "b.json").exists()
    assert graph_format("x.CSV") == "matrix" and graph_format("x.json") == "json"
