#!/usr/bin/env python3
"""Published communication matrices of real applications, as pinlab affinity graphs.

The mapping benchmarks compare pinlab's strategies on graphs measured by others, not only on
synthetic ones. The matrices are the NAS Parallel Benchmarks (MPI, class W, 32 and 64 processes)
that the EagerMap repository ships (see ``bench/data/eagermap/README.md`` for the source, commits
and licence): the number of messages between each pair of processes.

EagerMap's files list one index in reverse order. For the 32-process set it is the rows, as its
README says ("the first task is on the last line of the matrix"); the 64-process set, added later,
reverses the columns instead: DT, which ran on 11 processes, has its non-zero lines at the end of
the 32-process file and at the start of the 64-process one, and in both cases only the reading
below connects processes 0-10 among themselves. :func:`load` puts the index back in order, so
``weights[i][j]`` is between processes i and j (checked by the tests: CG's partners at distance 1,
2 and 4, IS's chain, LU's 8 x 8 grid). The diagonal then holds messages a process sends to itself
(CG's transpose partner is itself on some processes): they say nothing about placement and are
dropped (with a notice). A matrix that is not symmetric would be symmetrised by the mean of both
directions (with a notice), as ``load_graph`` does. EP and FT communicate only through
collectives the tracer did not count: their matrices are all zeros (empty graphs, kept so that
callers see them and skip them).

No published mapping (EagerMap's output for these matrices) is in the repository, so
:func:`published_mapping` returns None for every matrix; it is the place to add one.

Run by hand to list them: ``.venv/bin/python bench/published_matrices.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from pinlab.graph.model import AffinityGraph, graph_from_matrix

DATA = Path(__file__).resolve().parent / "data" / "eagermap"
SOURCE = "EagerMap (github.com/ehmcruz/eagermap, example-matrices/)"
REVERSED = {"nas-mpi-32t": "rows", "nas-mpi-64t": "columns"}  # which index each set lists backwards


def names() -> list[str]:
    """The matrices available, as ``SET/APP`` (``nas-mpi-32t/cg``, ...), sorted."""
    return sorted(f"{path.parent.name}/{_app(path)}" for path in DATA.glob("*/*.csv"))


def _app(path: Path) -> str:
    """``cg`` for ``cg_W.nb_messages.csv`` (32 processes) and ``cg.W.csv`` (64)."""
    return path.name.split("_")[0].split(".")[0]


def _path(name: str) -> Path:
    folder, app = name.split("/", 1) if "/" in name else ("", name)
    matches = [p for p in sorted((DATA / folder).glob("*.csv")) if _app(p) == app] if folder else []
    if not matches:
        raise KeyError(f"no published matrix {name!r}; there are: {', '.join(names())}")
    return matches[0]


def read_rows(name: str) -> list[list[float]]:
    """The file's rows as published (one index in reverse process order), numbers only."""
    text = _path(name).read_text()
    return [[float(cell) for cell in line.split(",")] for line in text.splitlines() if line.strip()]


def load(name: str, notice: Callable[[str], None] | None = None) -> AffinityGraph:
    """Matrix ``name`` as an AffinityGraph over processes 0..n-1 (indices put back in order)."""
    rows = read_rows(name)
    rows = rows[::-1] if REVERSED[name.split("/")[0]] == "rows" else [row[::-1] for row in rows]
    return graph_from_matrix(
        rows,
        source=f"published {name}",
        notice=notice,
        granularity="message",
        measured={"method": "published", "source": SOURCE, "weight": "messages", "application": name},
    )


def published_mapping(name: str) -> list[int] | None:
    """The PU of each process in a mapping published with the matrix, or None (none is published)."""
    _path(name)
    return None


def main() -> int:
    for name in names():
        notes: list[str] = []
        graph = load(name, notice=notes.append)
        heaviest = max(graph.edges(), key=lambda e: e[2], default=None)
        pairs = len(graph.edges())
        print(
            f"{name:<18} {graph.threads:>3} processes {pairs:>4} pairs  total {graph.total:>10.0f}"
            f"  heaviest {heaviest[:2] if heaviest else '-'}{'  (' + '; '.join(notes) + ')' if notes else ''}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
