"""The compact graph file (``.npz``): numpy's zip of arrays, compressed, read without pickles.

A dense JSON matrix of 4096 threads is 50 MB and takes seconds to parse and check number by
number; the same graph here is its non-zero pairs (or, when more than about a third of the pairs
are non-zero, the upper triangle without indexes), checked with a few whole-array operations.
Any numpy (or ``numpy.load`` in a notebook) reads it. Arrays:

- ``pinlab_graph``: the format version (1), ``threads``: the thread count (read first: a graph
  of the wrong size is refused before its weights are read);
- either ``rows``, ``cols``, ``values``: each pair with a weight once, ``rows < cols``; or
  ``triangle``: the upper triangle row by row (``numpy.triu_indices(threads, 1)`` order);
- ``volume`` (one number per thread), ``meta``: a JSON string with ``granularity``,
  ``unit_bytes`` and ``measured``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any, Callable

from pinlab.errors import UsageError

FORMAT_VERSION = 1


def write_binary(graph, out) -> None:
    """Write ``graph`` (an AffinityGraph) in the compact form to the binary file ``out``
    (:meth:`AffinityGraph.save` gives it a temporary file that it renames into place)."""
    import numpy as np

    w = graph.as_array()
    n = w.shape[0]
    upper = np.triu_indices(n, 1)
    triangle = w[upper]
    arrays: dict[str, Any] = {"pinlab_graph": np.int64(FORMAT_VERSION), "threads": np.int64(n)}
    nonzero = np.flatnonzero(triangle)
    # Whole numbers stay whole (counts) in the smallest integer type that holds them.
    values = triangle if nonzero.size * 3 > triangle.size else triangle[nonzero]
    values = _compact_numbers(values, np)
    if nonzero.size * 3 > triangle.size:
        arrays["triangle"] = values
    else:
        index = np.int32 if n < 2**31 else np.int64
        arrays["rows"], arrays["cols"], arrays["values"] = upper[0][nonzero].astype(index), upper[1][nonzero].astype(index), values
    arrays["volume"] = np.asarray(graph.volume, dtype=np.float64)
    arrays["meta"] = np.array(json.dumps({"granularity": graph.granularity, "unit_bytes": graph.unit_bytes, "measured": graph.measured}))
    np.savez_compressed(out, **arrays)


def _compact_numbers(values, np):
    if values.size and np.all(values == np.rint(values)) and values.max(initial=0) < 2**32:
        return values.astype(np.uint32)
    return values.astype(np.float64)


def binary_threads(path: Path) -> int:
    """The thread count of a compact graph file, read without its weights."""
    with _open(path) as data:
        return _threads(data, path)


def load_binary(path: Path, *, expect: Callable[[int], None] | None = None, max_weight: float, progress: Any = None) -> dict[str, Any]:
    """The checked contents of a compact graph file: ``weights`` (a symmetric numpy matrix),
    ``volume``, ``granularity``, ``unit_bytes``, ``measured``. ``expect(threads)`` runs before
    the weights are read; ``progress`` (pinlab.graph.progress) is told when they are read and
    when checked."""
    import numpy as np

    with _open(path) as data:
        n = _threads(data, path)
        if expect is not None:
            expect(n)
        if progress is not None:
            progress.step(f"reading graph {path.name} ({n} threads)")
        names = set(data.files)
        w = np.zeros((n, n))
        try:
            if "triangle" in names:
                values = _numbers(data["triangle"], path, "triangle", np)
                if values.shape != (n * (n - 1) // 2,):
                    raise UsageError(f"graph file {path}: 'triangle' has {values.size} weights but {n} threads have {n * (n - 1) // 2} pairs")
                rows, cols = np.triu_indices(n, 1)
            elif {"rows", "cols", "values"} <= names:
                rows, cols = data["rows"], data["cols"]
                values = _numbers(data["values"], path, "values", np)
                if not (rows.ndim == cols.ndim == values.ndim == 1 and rows.size == cols.size == values.size):
                    raise UsageError(f"graph file {path}: 'rows', 'cols' and 'values' must be three lists of one length")
                if rows.size and (rows.dtype.kind not in "iu" or cols.dtype.kind not in "iu"):
                    raise UsageError(f"graph file {path}: 'rows' and 'cols' must be whole numbers (thread numbers)")
                bad = np.flatnonzero((rows < 0) | (cols >= n) | (rows >= cols))
                if bad.size:
                    i = int(bad[0])
                    raise UsageError(
                        f"graph file {path}: pair {i} is ({int(rows[i])}, {int(cols[i])}); each pair must be two threads i < j below {n}, once"
                    )
                if np.unique(rows.astype(np.int64) * n + cols).size != rows.size:
                    raise UsageError(f"graph file {path}: a pair of threads is listed twice")
            else:
                raise UsageError(f"graph file {path} has neither 'triangle' nor 'rows', 'cols', 'values'")
            if progress is not None:
                progress.step(f"checking graph {path.name}")
            bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > max_weight))
            if bad.size:
                i = int(bad[0])
                raise UsageError(
                    f"graph file {path}: the weight between threads {int(rows[i])} and {int(cols[i])} is "
                    f"{float(values[i])!r}; weights must be finite and >= 0 (at most {max_weight:g})"
                )
            w[rows, cols] = values
            w[cols, rows] = values
            volume = _numbers(data["volume"], path, "volume", np) if "volume" in names else w.sum(axis=1)
            meta = json.loads(str(data["meta"])) if "meta" in names else {}
        except (ValueError, KeyError, zipfile.BadZipFile, OSError, EOFError) as exc:
            raise UsageError(f"graph file {path} is damaged ({exc}); write it again with pinlab graph convert") from None
    if volume.shape != (n,) or not np.all(np.isfinite(volume) & (volume >= 0)):
        raise UsageError(f"graph file {path}: 'volume' must list one finite number >= 0 per thread ({n})")
    if not isinstance(meta, dict):
        raise UsageError(f"graph file {path}: 'meta' must be a JSON object")
    return {
        "weights": w,
        "volume": volume.tolist(),
        "granularity": meta.get("granularity", "unknown"),
        "unit_bytes": meta.get("unit_bytes"),
        "measured": meta.get("measured") or {},
    }


def _open(path: Path):
    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"graph file {path} does not exist; make one with pinlab trace") from None
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise UsageError(f"graph file {path} is not a compact (.npz) graph ({getattr(exc, 'strerror', None) or exc})") from None
    if not hasattr(data, "files"):
        raise UsageError(f"graph file {path} holds one array, not a compact graph (pinlab graph convert writes one)")
    return data


def _threads(data, path: Path) -> int:
    try:
        version = int(data["pinlab_graph"]) if "pinlab_graph" in data.files else None
        threads = data["threads"] if "threads" in data.files else None
    except (ValueError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise UsageError(f"graph file {path} is damaged ({exc}); write it again with pinlab graph convert") from None
    if version != FORMAT_VERSION:
        raise UsageError(f"graph file {path} is not a pinlab compact graph of format {FORMAT_VERSION} (format {version!r})")
    if threads is None or threads.shape != () or threads.dtype.kind not in "iu" or int(threads) < 1:
        raise UsageError(f"graph file {path}: 'threads' must be a whole number >= 1")
    return int(threads)


def _numbers(values, path: Path, name: str, np):
    if values.dtype.kind not in "iuf":
        raise UsageError(f"graph file {path}: '{name}' must hold numbers (it holds {values.dtype})")
    return values.astype(np.float64)
