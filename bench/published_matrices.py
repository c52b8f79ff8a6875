#!/usr/bin/env python3
"""Published communication matrices of real applications, as pinlab affinity graphs.

The mapping benchmarks compare pinlab's strategies on graphs measured by others, not only on
synthetic ones. The matrices are the NAS Parallel Benchmarks (MPI, class W, 32 processes) that
the EagerMap repository ships (see ``bench/data/eagermap/README.md`` for the source, commit and
licence): the number of messages between each pair of processes.

EagerMap's files list the processes in reverse order (its README: "the first task is on the last
line of the matrix"), columns in natural order; :func:`load` puts the rows back in order, so
``weights[i][j]`` is between processes i and j. After that the diagonal holds messages a process
sends to itself (CG's transpose partner is itself on some processes): they say nothing about
placement and are dropped (with a notice). DT's matrix is directed (a source sends, sinks
receive); it is symmetrised by the mean of both directions (with a notice), as ``load_graph`` does.
EP communicates only through reductions the tracer did not count: its matrix is all zeros (an
empty graph, kept so that callers see it and skip it).

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
SOURCE = "EagerMap (github.com/ehmcruz/eagermap, commit 34dbdda7f2105ea934266a89342212767d228ed4)"


def names() -> list[str]:
    """The matrices available, as ``SET/APP`` (``nas-mpi-32t/cg``, ...), sorted."""
    return sorted(f"{path.parent.name}/{path.name.split('_')[0]}" for path in DATA.glob("*/*.csv"))


def _path(name: str) -> Path:
    folder, app = name.split("/", 1) if "/" in name else ("", name)
    matches = sorted((DATA / folder).glob(f"{app}_*.csv")) if folder else []
    if not matches:
        raise KeyError(f"no published matrix {name!r}; there are: {', '.join(names())}")
    return matches[0]


def read_rows(name: str) -> list[list[float]]:
    """The file's rows as published (reverse process order), numbers only."""
    text = _path(name).read_text()
    return [[float(cell) for cell in line.split(",")] for line in text.splitlines() if line.strip()]


def load(name: str, notice: Callable[[str], None] | None = None) -> AffinityGraph:
    """Matrix ``name`` as an AffinityGraph over processes 0..n-1 (rows put back in order)."""
    rows = read_rows(name)[::-1]
    return graph_from_matrix(rows, source=f"published {name}", notice=notice, granularity="message",
                             measured={"method": "published", "source": SOURCE, "weight": "messages",
                                       "application": name})


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
        print(f"{name:<18} {graph.threads:>3} processes {pairs:>4} pairs  total {graph.total:>10.0f}"
              f"  heaviest {heaviest[:2] if heaviest else '-'}{'  (' + '; '.join(notes) + ')' if notes else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
