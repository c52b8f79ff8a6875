"""Show what ``pinlab calibrate`` measured: a heat map in the terminal (rich) and a picture (matplotlib).

The terminal heat map colours each cell on one scale from the smallest to the largest latency
(a legend gives the scale), so levels of sharing stand out as blocks of one colour; the numbers are
printed too, for reading exact values.
"""

from __future__ import annotations

from pinlab.errors import UsageError
from pinlab.topology.calibrate import Calibration

# From near (cool) to far (hot): background colours of the scale, in order.
_SCALE = ["#1a9850", "#66bd63", "#a6d96a", "#d9ef8b", "#fee08b", "#fdae61", "#f46d43", "#d73027"]


def _colour(value: float, low: float, high: float) -> str:
    if high <= low:
        return _SCALE[0]
    step = (value - low) / (high - low) * (len(_SCALE) - 1)
    return _SCALE[max(0, min(len(_SCALE) - 1, round(step)))]


def latency_table(result: Calibration):
    """A rich Table: the CPU x CPU latency matrix, each cell coloured by its value."""
    from rich.table import Table
    from rich.text import Text

    latency = result.latency
    off_diagonal = [v for i, row in enumerate(latency.matrix) for j, v in enumerate(row) if i != j]
    low, high = min(off_diagonal), max(off_diagonal)
    table = Table(show_lines=False, pad_edge=False, box=None)
    table.add_column("cpu", justify="right", style="bold")
    for cpu in latency.cpus:
        table.add_column(str(cpu), justify="right")
    for cpu, row in zip(latency.cpus, latency.matrix):
        cells = []
        for other, value in zip(latency.cpus, row):
            if other == cpu:
                cells.append(Text("  -  ", style="dim"))
            else:
                cells.append(Text(f"{value:5.0f}", style=f"black on {_colour(value, low, high)}"))
        table.add_row(str(cpu), *cells)
    return table


LATENCY_TITLE = "Core-to-core latency (one-way, ns; a cache line bounced between two pinned threads):"
MEMORY_TITLE = "Memory read bandwidth (MB/s) / latency (ns); row: the package read from (one of its CPUs), column: the NUMA node read:"


def legend(result: Calibration):
    from rich.text import Text

    off_diagonal = [v for i, row in enumerate(result.latency.matrix) for j, v in enumerate(row) if i != j]
    low, high = min(off_diagonal), max(off_diagonal)
    text = Text("scale: ")
    text.append(f"{low:.1f} ns ")
    for colour in _SCALE:
        text.append("  ", style=f"on {colour}")
    text.append(f" {high:.1f} ns")
    return text


def memory_table(result: Calibration):
    """A rich Table: per package read from, the bandwidth and latency of each node's memory."""
    from rich.table import Table

    memory = result.memory
    table = Table(pad_edge=False, box=None)
    table.add_column("from", style="bold")
    for node in memory.nodes:
        table.add_column(f"node {node}", justify="right")
    for row, (name, cpu) in enumerate(zip(result.reader_names, result.reader_cpus)):
        table.add_row(
            f"{name} (CPU {cpu})", *(f"{memory.bandwidth_mbps[row][c]:.0f} / {memory.latency_ns[row][c]:.1f}" for c in range(len(memory.nodes)))
        )
    return table


def draw(result: Calibration, path: str) -> None:
    """The latency matrix as a heat map, and the memory bandwidth and latency matrices beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    memory = result.memory
    panels = 3 if memory is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.8), squeeze=False)
    latency = result.latency
    ax = axes[0][0]
    # The diagonal (a CPU with itself) is left blank: its 0 would stretch the colour scale.
    shown = [[float("nan") if i == j else v for j, v in enumerate(row)] for i, row in enumerate(latency.matrix)]
    image = ax.imshow(shown, cmap="RdYlGn_r")
    ax.set_title("Core-to-core latency (one-way, ns)")
    ax.set_xlabel("CPU")
    ax.set_ylabel("CPU")
    ticks = range(len(latency.cpus))
    step = max(1, len(latency.cpus) // 16)
    ax.set_xticks(list(ticks)[::step], [str(c) for c in latency.cpus][::step])
    ax.set_yticks(list(ticks)[::step], [str(c) for c in latency.cpus][::step])
    fig.colorbar(image, ax=ax, label="ns")
    if memory is not None:
        for ax, values, title, unit, cmap in (
            (axes[0][1], memory.bandwidth_mbps, "Read bandwidth", "MB/s", "RdYlGn"),
            (axes[0][2], memory.latency_ns, "Memory latency", "ns", "RdYlGn_r"),
        ):
            image = ax.imshow(values, cmap=cmap)
            ax.set_title(f"{title} ({unit})")
            ax.set_xlabel("NUMA node read")
            ax.set_ylabel("read from")
            ax.set_xticks(range(len(memory.nodes)), [str(n) for n in memory.nodes])
            ax.set_yticks(range(len(result.reader_names)), result.reader_names)
            for r, row in enumerate(values):
                for c, value in enumerate(row):
                    ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=8)
            fig.colorbar(image, ax=ax, label=unit)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UsageError(f"cannot write picture {path!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
