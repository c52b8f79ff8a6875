"""Outputs that cannot be written are refused before any work, in one line with exit status 2.

``/proc`` is the case that matters: ``os.access`` says root may write there, yet no file can be
created, so a check by permission bits passes and the command used to measure for seconds (or
run the user's program) before failing or, for trace, end with status 0 and no graph.
"""

import json

import pytest

from pinlab.errors import UsageError
from pinlab.outputs import check_writable, check_writable_directory
from tests.conftest import run_pinlab


def test_check_writable_creates_nothing_and_refuses_what_cannot_be_created(tmp_path):
    check_writable(tmp_path / "x.json", "the graph")
    assert list(tmp_path.iterdir()) == []
    for path, why in (
        (tmp_path, "it is a directory"),
        (tmp_path / "no" / "x.json", "its directory does not exist"),
        ("/proc/x.json", "No such file or directory"),
    ):
        with pytest.raises(UsageError, match=why):
            check_writable(path, "the graph")


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"threads": 2, "weights": [[0, 1], [1, 0]]}))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["graph", "show", "{graph}", "--picture", "/proc/pinlab-x.png"],
        ["graph", "convert", "{graph}", "/proc/pinlab-x.csv"],
        ["calibrate", "--quick", "--no-memory", "-o", "/proc/pinlab-x.xml"],
        ["calibrate", "--quick", "--no-memory", "--picture", "/proc/pinlab-x.png"],
        ["trace", "-n", "1", "-o", "/proc/pinlab-x.json", "--", "sh", "-c", "touch {marker}"],
    ],
    ids=["graph-show-picture", "graph-convert", "calibrate-o", "calibrate-picture", "trace-o"],
)
def test_unwritable_outputs_are_refused_before_the_work(args, graph_file, tmp_path):
    marker = tmp_path / "ran"
    result = run_pinlab(*[a.format(graph=graph_file, marker=marker) for a in args])
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith("pinlab: error: cannot write") and "/proc/pinlab-x" in result.stderr
    assert not marker.exists(), "the program ran although its graph could not be written"


def test_graph_strategy_options_are_checked_by_name_and_counted_in_words(graph_file):
    bogus = run_pinlab("place", "-s", "gp", "--graph", str(graph_file), "-n", "2", "--level", "bogus")
    assert bogus.returncode == 2 and "--level bogus: not a level name" in bogus.stderr
    domains = run_pinlab("place", "-t", "clovertown", "-s", "lpgp", "--graph", str(graph_file), "-n", "2", "--domains", "3")
    assert domains.returncode == 2 and "this machine has 2 sockets (or NUMA nodes)" in domains.stderr
    one = run_pinlab("place", "-t", "alderlake-i9", "-s", "lpgp", "--graph", str(graph_file), "-n", "2", "--domains", "0")
    assert one.returncode == 2 and "this machine has 1 socket (or NUMA nodes)" in one.stderr


def test_an_output_directory_is_checked_made_for_the_check_and_removed_again(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    check_writable_directory(str(deep), "--html")
    assert not (tmp_path / "a").exists(), "directories made only for the check are removed again"
    (tmp_path / "plain").write_text("x")
    with pytest.raises(UsageError, match=r"cannot write --csv .*plain/out: a part of that path is a file, not a directory"):
        check_writable_directory(str(tmp_path / "plain" / "out"), "--csv")
    assert (tmp_path / "plain").read_text() == "x" and list(tmp_path.iterdir()) == [tmp_path / "plain"]
