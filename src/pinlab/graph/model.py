"""The affinity graph: how much each pair of threads shares ([mazouz2011hpcs], section 3.2).

Nodes are the program's threads in creation order (0 = the main thread, as in a placement);
``weights[i][j]`` is the gain of putting threads i and j close together: for a traced program,
the accesses i and j have in common on the memory units (cache lines or pages) both of them
touched (see :func:`pinlab.trace.common.graph_from_counts`).
The matrix is symmetric with a zero diagonal. ``volume[i]`` is thread i's own count of accesses
(shared or not), which tells a thread that shares little from one that does little.

File formats (all read by :func:`load_graph`, chosen by the name's ending):

- JSON (format version 1)::

      {"pinlab_graph": 1, "threads": 4, "weights": [[0, 9, 0, 0], ...], "volume": [12, 9, 7, 7],
       "granularity": "line", "unit_bytes": 64, "measured": {"method": "exact", ...}}

  ``threads`` and ``weights`` are required; ``volume`` defaults to the row sums, ``granularity``
  to ``"unknown"``.
- a matrix (``.csv``, ``.txt``, ``.mat``): one row per thread, numbers separated by commas or
  white space; lines starting with ``#`` are comments.
- compact (``.npz``): the pairs with a weight, binary and compressed (:mod:`pinlab.graph.binary`);
  the form for graphs of thousands of threads.

Any other ending is refused. The thread count is read first (the JSON's ``threads``, the
matrix's first row, the compact file's ``threads``) so that a caller can refuse a graph of the
wrong size before its weights are read (``expect`` of :func:`load_graph`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pinlab.errors import UsageError
from pinlab.graph.binary import binary_threads, load_binary, write_binary
from pinlab.outputs import check_writable

#: The version of the JSON graph (key ``pinlab_graph``); this module owns the format: it writes it
#: (AffinityGraph.to_json, to_json_text, save) and reads it (graph_from_json, load_graph). Schema:
#: docs/reference/formats/affinity-graph.schema.json.
JSON_FORMAT_VERSION = 1
GRANULARITIES = ("line", "page", "message", "unknown")
MATRIX_SUFFIXES = (".csv", ".txt", ".mat")
BINARY_SUFFIX = ".npz"
#: Reading a graph file larger than this says so first (a JSON of 4096 threads takes seconds).
LARGE_FILE_BYTES = 8 << 20


@dataclass
class AffinityGraph:
    """A symmetric thread x thread weight matrix plus how it was measured."""

    weights: list[list[float]]  # or a numpy matrix (the compact file's, too large for lists)
    volume: list[float] | None = None
    granularity: str = "unknown"
    unit_bytes: int | None = None
    measured: dict[str, Any] = field(default_factory=dict)
    source: str = "memory"  # where it was read from (a file name), for messages

    def __post_init__(self) -> None:
        if self.volume is None:
            self.volume = [float(sum(row)) for row in self.weights] if isinstance(self.weights, list) else self.as_array().sum(axis=1).tolist()

    @property
    def threads(self) -> int:
        return len(self.weights)

    def weight(self, i: int, j: int) -> float:
        return self.weights[i][j]

    @property
    def total(self) -> float:
        """The sum of the weights of all pairs (each pair once)."""
        if not isinstance(self.weights, list):
            import numpy as np

            return float(np.triu(self.as_array(), 1).sum())
        return sum(self.weights[i][j] for i in range(self.threads) for j in range(i + 1, self.threads))

    @property
    def empty(self) -> bool:
        """No weight between any two threads: nothing to map by."""
        return self.total == 0

    def edges(self) -> list[tuple[int, int, float]]:
        """Every pair with a positive weight, once (i < j)."""
        if not isinstance(self.weights, list):
            import numpy as np

            rows, cols = np.nonzero(np.triu(self.as_array(), 1))
            return [(int(i), int(j), float(self.weights[i][j])) for i, j in zip(rows, cols)]
        return [(i, j, w) for i, row in enumerate(self.weights) for j, w in enumerate(row) if j > i and w > 0]

    def as_array(self):
        """The weights as a numpy float64 array (numpy imported only here)."""
        import numpy as np

        return np.asarray(self.weights, dtype=np.float64)

    def check_threads(self, n: int) -> None:
        """Refuse a graph measured for another thread count than the placement asks for."""
        if n != self.threads:
            raise UsageError(
                f"graph {self.source} has {self.threads} threads but {n} were asked for: trace again with -n {n}, or ask for {self.threads} threads"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "pinlab_graph": JSON_FORMAT_VERSION,
            "threads": self.threads,
            "weights": [[_plain(w) for w in row] for row in self.weights],
            "volume": [_plain(v) for v in (self.volume or [])],
            "granularity": self.granularity,
            "unit_bytes": self.unit_bytes,
            "measured": self.measured,
        }

    def to_json_text(self) -> str:
        """The JSON file's text: one key a line and one matrix row a line, so the file reads as a matrix."""
        fields = []
        for key, value in self.to_json().items():
            if key == "weights":
                text = "[\n  " + ",\n  ".join(json.dumps(row) for row in value) + "\n ]"
            else:
                text = json.dumps(value)
            fields.append(f" {json.dumps(key)}: {text}")
        return "{\n" + ",\n".join(fields) + "\n}\n"

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for row in self.weights:
            writer.writerow([_plain(w) for w in row])
        return out.getvalue()

    def save(self, path: str | Path) -> None:
        """Write the graph as JSON, as a matrix when the name ends in .csv/.txt/.mat, compact for .npz."""
        path = Path(path)
        binary = path.suffix.lower() == BINARY_SUFFIX
        if not binary:
            text = self.to_csv() if path.suffix.lower() in MATRIX_SUFFIXES else self.to_json_text()
        # Written beside the target and renamed over it: a full disk or a kill midway leaves
        # neither a truncated graph nor an empty file, and a graph already there stays whole.
        temporary = None
        try:
            with tempfile.NamedTemporaryFile(
                "wb" if binary else "w", dir=path.resolve().parent, prefix=f".{path.name}.", suffix=".part", delete=False
            ) as out:
                temporary = out.name
                if binary:
                    write_binary(self, out)
                else:
                    out.write(text)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)  # as a file created in place would be, not the temporary's 0600
            os.replace(temporary, path)
            temporary = None
        except OSError as exc:
            raise UsageError(f"cannot write the graph to {path}: {exc.strerror or exc}") from None
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass


def graph_format(path: str | Path, *, reading: bool = False) -> str:
    """``"matrix"``, ``"json"`` or ``"binary"`` (compact) by the file name's ending; any other ending is refused.

    Writing, guessing JSON for a typo such as ``out.cvs`` would silently write the wrong format;
    reading, a file named ``g.xyz`` or ``g`` may be anything (a matrix read as JSON fails with a
    JSON error that does not say why), so the name must say what the file holds.
    """
    suffix = Path(path).suffix.lower()
    if suffix in MATRIX_SUFFIXES:
        return "matrix"
    if suffix == ".json":
        return "json"
    if suffix == BINARY_SUFFIX:
        return "binary"
    if reading:
        raise UsageError(
            f"graph file {path}: pinlab reads a graph by its name's ending: .json for JSON, "
            f"{', '.join(MATRIX_SUFFIXES)} for a matrix, {BINARY_SUFFIX} compact; rename the file (or copy it) to one of those"
        )
    raise UsageError(
        f"graph file {path}: end its name in .json for JSON, {', '.join(MATRIX_SUFFIXES)} for a matrix or {BINARY_SUFFIX} for the compact form"
    )


def convert_graph(
    source: str | Path, target: str | Path, *, strict: bool = False, notice: Callable[[str], None] | None = None, progress: Any = None
) -> AffinityGraph:
    """Read ``source`` (checked as by :func:`load_graph`) and write it to ``target``, formats by suffix.

    Nothing is written when the source is refused. A matrix keeps only the weights, so writing one
    from a graph that carries more (how it was measured, its granularity, volumes other than the
    row sums) says what is left behind. ``progress``: as for :func:`load_graph`.
    """
    fmt = graph_format(target)
    graph = load_graph(source, strict=strict, notice=notice, progress=progress)
    check_writable(target, "the graph")
    if fmt == "matrix":
        lost = []
        if graph.volume != [float(sum(row)) for row in graph.weights]:
            lost.append("volume")
        if graph.granularity != "unknown":
            lost.append("granularity")
        if graph.unit_bytes is not None:
            lost.append("unit_bytes")
        if graph.measured and graph.measured.get("method") != "import":
            lost.append("measured")
        if lost:
            _say(notice, f"the matrix {target} keeps only the weights: {', '.join(lost)} left out (write .json to keep them)")
    graph.save(target)
    return graph


def _plain(x: float) -> int | float:
    """Whole numbers written without a fraction (counts stay counts in the file)."""
    return int(x) if float(x).is_integer() else float(x)


def check_strict(path: str | Path | None, strict: bool) -> None:
    """Refuse ``strict`` without a graph file: it changes how a graph is read, so asked for with
    none it is a mistake (the graph forgotten), not something to ignore."""
    if path is None and strict:
        raise UsageError("--strict checks the graph of --graph FILE: give one or leave --strict out")


def load_graph(
    path: str | Path,
    *,
    strict: bool = False,
    notice: Callable[[str], None] | None = None,
    expect: Callable[[int], None] | None = None,
    progress: Any = None,
) -> AffinityGraph:
    """Read and check a graph file (JSON, a matrix or compact, see the module's docstring).

    An asymmetric matrix is made symmetric (the mean of both directions) with a notice, or refused
    with ``strict``; a non-zero diagonal is ignored the same way. Anything else wrong (not a
    square matrix, negative or non-numeric weights, no threads) is refused with a UsageError.
    ``expect(threads)`` is called with the thread count before the weights are read (it raises
    to refuse the graph: another thread count than asked for, more threads than cores).
    ``progress`` (see pinlab.graph.progress) is told each phase of reading a file larger than
    LARGE_FILE_BYTES, after the notice that such a file gets.
    """
    path = Path(path)
    fmt = graph_format(path, reading=True)
    size = path.stat().st_size if path.is_file() else 0
    shown = progress if progress is not None and size > LARGE_FILE_BYTES else None
    try:
        return _load(path, fmt, size, strict=strict, notice=notice, expect=expect, progress=shown)
    finally:
        if shown is not None:
            shown.done()


def _load(path: Path, fmt: str, size: int, *, strict: bool, notice, expect, progress) -> AffinityGraph:
    if fmt == "binary":
        data = load_binary(path, expect=expect, max_weight=MAX_WEIGHT, progress=progress)
        return AffinityGraph(
            weights=data["weights"],
            volume=data["volume"],
            granularity=_granularity(data["granularity"], str(path)),
            unit_bytes=_unit_bytes(data["unit_bytes"], str(path)),
            measured=_measured(data["measured"], str(path)),
            source=str(path),
        )
    if expect is not None:
        threads = peek_threads(path)
        if threads is not None:
            expect(threads)
    if size > LARGE_FILE_BYTES:
        _say(
            notice,
            f"reading graph {path} ({size / 2**20:.0f} MiB); the compact form loads faster: "
            f"pinlab graph convert {path} {path.with_suffix(BINARY_SUFFIX)}",
        )
    try:
        text = _read_text(path, size, progress)
    except FileNotFoundError:
        raise UsageError(f"graph file {path} does not exist; make one with pinlab trace") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read graph file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if fmt == "matrix":
        if progress is not None:
            progress.step(f"checking graph {path.name}")
        graph = graph_from_matrix(
            _parse_matrix(text, path), source=str(path), strict=strict, notice=notice, measured={"method": "import", "file": path.name}
        )
    else:
        if progress is not None:
            progress.step(f"parsing graph {path.name}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"graph file {path} is not JSON ({exc.msg} at line {exc.lineno}); a matrix file must end in {', '.join(MATRIX_SUFFIXES)}"
            ) from None
        del text
        if progress is not None:
            progress.step(f"checking graph {path.name}")
        graph = graph_from_json(data, source=str(path), strict=strict, notice=notice)
    if expect is not None:
        expect(graph.threads)
    return graph


#: A large text graph is read in pieces of this size, so that progress can follow the bytes.
READ_CHUNK_BYTES = 4 << 20


def _read_text(path: Path, size: int, progress) -> str:
    """The file's text, as Path.read_text reads it; with ``progress``, in pieces, each counted
    (in characters: a graph's text is ASCII, one byte each)."""
    if progress is None:
        return path.read_text()
    progress.step(f"reading graph {path.name}", total=size)
    chunks = []
    with open(path) as f:
        while chunk := f.read(READ_CHUNK_BYTES):
            chunks.append(chunk)
            progress.advance(len(chunk))
    return "".join(chunks)


def peek_threads(path: str | Path) -> int | None:
    """A graph file's thread count from its first bytes, or None where they do not tell.

    JSON as pinlab writes it has ``"threads": N`` before the weights; a matrix has as many
    numbers on its first row as it has rows; a compact file stores the count on its own.
    """
    path = Path(path)
    fmt = graph_format(path, reading=True)
    if fmt == "binary":
        return binary_threads(path)
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return None  # the full read says why
    if fmt == "json":
        before = head.split('"weights"', 1)[0] if '"weights"' in head else ""
        for found in re.finditer(r'"threads"\s*:\s*(\d+)\s*[,}]', before):
            opened = before[: found.start()]
            if opened.count("{") - opened.count("}") == 1:  # a key of the top object, not of "measured"
                return int(found.group(1))
        return None
    for line in head.splitlines()[:-1] if len(head) == 1 << 16 else head.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return len(line.replace(",", " ").replace(";", " ").split())
    return None


def graph_from_json(data: Any, *, source: str = "JSON", strict: bool = False, notice: Callable[[str], None] | None = None) -> AffinityGraph:
    if not isinstance(data, dict) or "weights" not in data:
        raise UsageError(f"graph {source} has no 'weights' (a list of rows); is it a pinlab graph?")
    version = data.get("pinlab_graph", JSON_FORMAT_VERSION)
    if version != JSON_FORMAT_VERSION:
        raise UsageError(
            f"graph {source} is format {version!r}; this pinlab reads format {JSON_FORMAT_VERSION}: "
            "write it again with this pinlab (pinlab trace -o, or pinlab graph convert from a matrix)"
        )
    weights = data["weights"]
    if not isinstance(weights, list):
        raise UsageError(f"graph {source}: 'weights' must be a list of rows, one per thread (got {type(weights).__name__})")
    threads = data.get("threads", len(weights))
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise UsageError(f"graph {source}: 'threads' must be a whole number (got {threads!r})")
    if threads != len(weights):
        raise UsageError(f"graph {source} says 'threads': {threads} but 'weights' has {len(weights)} rows")
    granularity = _granularity(data.get("granularity", "unknown"), source)
    unit_bytes = _unit_bytes(data.get("unit_bytes"), source)
    measured = _measured(data.get("measured") or {}, source)
    graph = graph_from_matrix(weights, source=source, strict=strict, notice=notice, measured=measured, granularity=granularity, unit_bytes=unit_bytes)
    volume = data.get("volume")
    if volume is not None:
        graph.volume = _check_vector(volume, graph.threads, source, "volume")
    return graph


def _granularity(granularity: Any, source: str) -> str:
    if granularity not in GRANULARITIES:
        raise UsageError(f"graph {source}: unknown granularity {granularity!r}; use one of {', '.join(GRANULARITIES)}")
    return granularity


def _unit_bytes(unit_bytes: Any, source: str) -> int | None:
    if unit_bytes is not None and (not isinstance(unit_bytes, int) or isinstance(unit_bytes, bool) or unit_bytes <= 0):
        raise UsageError(f"graph {source}: 'unit_bytes' must be a positive whole number (got {unit_bytes!r})")
    return unit_bytes


def _measured(measured: Any, source: str) -> dict[str, Any]:
    if not isinstance(measured, dict):
        raise UsageError(f"graph {source}: 'measured' must be an object")
    return measured


def graph_from_matrix(
    rows: Any,
    *,
    source: str = "matrix",
    strict: bool = False,
    notice: Callable[[str], None] | None = None,
    measured: dict[str, Any] | None = None,
    granularity: str = "unknown",
    unit_bytes: int | None = None,
) -> AffinityGraph:
    """Check a square matrix of non-negative numbers and make it an AffinityGraph."""
    if not isinstance(rows, list) or not rows:
        raise UsageError(f"graph {source} is empty: it needs one row of weights per thread")
    n = len(rows)
    matrix: list[list[float]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != n:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise UsageError(f"graph {source}: row {i} has {got} weights but there are {n} threads (the matrix must be square)")
        matrix.append([_weight(w, source, i, j) for j, w in enumerate(row)])
    diagonal = [i for i in range(n) if matrix[i][i] != 0]
    if diagonal:
        if strict:
            raise UsageError(
                f"graph {source}: thread {diagonal[0]} has a weight with itself ({_plain(matrix[diagonal[0]][diagonal[0]])}); "
                "the diagonal must be 0 (drop --strict to ignore it)"
            )
        for i in diagonal:
            matrix[i][i] = 0.0
        _say(notice, f"graph {source}: the diagonal ({len(diagonal)} non-zero) is ignored")
    worst = max(((abs(matrix[i][j] - matrix[j][i]), i, j) for i in range(n) for j in range(i + 1, n)), default=(0.0, 0, 0))
    if worst[0] > 0:
        _, i, j = worst
        if strict:
            raise UsageError(
                f"graph {source} is not symmetric: {_plain(matrix[i][j])} from thread {i} to {j} but "
                f"{_plain(matrix[j][i])} back (drop --strict to use the mean of both directions)"
            )
        for a in range(n):
            for b in range(a + 1, n):
                matrix[a][b] = matrix[b][a] = (matrix[a][b] + matrix[b][a]) / 2
        _say(notice, f"graph {source} is not symmetric (largest difference between threads {i} and {j}): using the mean of both directions")
    return AffinityGraph(weights=matrix, granularity=granularity, unit_bytes=unit_bytes, measured=dict(measured or {}), source=source)


def _weight(value: Any, source: str, i: int, j: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"graph {source}: the weight between threads {i} and {j} is {_shown(value)}, not a number")
    number = _finite(value)
    if number is None or number < 0:
        raise UsageError(
            f"graph {source}: the weight between threads {i} and {j} is {_shown(value)}; "
            f"weights must be finite and >= 0" + (f" (at most {MAX_WEIGHT:g})" if number is None else "")
        )
    return number


#: The largest weight accepted: costs are sums of weight x distance over up to millions of pairs
#: in float64, which must stay finite (1e300 x 8 x 10^12 pairs is still below 1.8e308).
MAX_WEIGHT = 1e290


def _finite(value: int | float) -> float | None:
    """``value`` as a float when it is finite and not above MAX_WEIGHT, else None.

    A JSON integer of hundreds of digits is a Python int that float() cannot hold (OverflowError).
    """
    try:
        number = float(value)
    except OverflowError:
        return None
    if not math.isfinite(number) or abs(number) > MAX_WEIGHT:
        return None
    return number


def _shown(value: Any) -> str:
    """A value for a message, a huge number as its number of digits rather than all of them."""
    text = repr(value)
    digits = str(value).lstrip("+-") if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if digits.isdigit() and len(digits) > 24:
        return f"a number of {len(digits)} digits"
    return text if len(text) <= 40 else text[:37] + "..."


def _check_vector(values: Any, n: int, source: str, name: str) -> list[float]:
    if not isinstance(values, list) or len(values) != n:
        raise UsageError(f"graph {source}: '{name}' must list one number per thread ({n})")
    checked = []
    for i, v in enumerate(values):
        number = None if isinstance(v, bool) or not isinstance(v, (int, float)) else _finite(v)
        if number is None or number < 0:
            raise UsageError(
                f"graph {source}: '{name}' of thread {i} is {_shown(v)}; it must be a finite number >= 0"
                + (f" and at most {MAX_WEIGHT:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) and number is None else "")
            )
        checked.append(number)
    return checked


def _parse_matrix(text: str, path: Path) -> list[list[float]]:
    rows: list[list[float]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c for c in (line.replace(",", " ").replace(";", " ").split())]
        row = []
        for cell in cells:
            try:
                value = float(cell)
            except ValueError:
                raise UsageError(f"graph file {path}, line {number}: {_shown(cell)} is not a number") from None
            if math.isinf(value) and cell.lstrip("+-").lower() not in ("inf", "infinity"):
                raise UsageError(f"graph file {path}, line {number}: {_shown(cell)} is too large; weights must be at most {MAX_WEIGHT:g}")
            row.append(value)
        rows.append(row)
    return rows


def _say(notice: Callable[[str], None] | None, text: str) -> None:
    if notice is not None:
        notice(text)
