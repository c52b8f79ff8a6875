"""Weighted interleave (``--mem weighted-interleave:NODES[@WEIGHTS]``, Linux 6.9+).

MPOL_WEIGHTED_INTERLEAVE spreads pages round robin like interleave, but node i takes W[i] pages
per turn: memory goes where the bandwidth is (BWAP, a published bandwidth-aware interleave,
reports up to 66 % over the best uniform placements). The kernel keeps one weight per node for
the whole system, in /sys/kernel/mm/mempolicy/weighted_interleave/nodeN (1-255, root may write):
pinlab writes the run's weights there for the run and puts the old ones back after. Weights not
given come from the read bandwidth of each node's memory measured by the memory library
(``pinlab calibrate`` stores it; measured on first use otherwise), averaged over the nodes that
have CPUs, scaled so that the fastest node takes 16 pages per turn.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from pinlab.errors import UsageError
from pinlab.measure.linux import numa_nodes
from pinlab.memory.api import Memory, MemoryAPIError
from pinlab.words import plural

SYSFS = Path("/sys/kernel/mm/mempolicy/weighted_interleave")
#: Pages per turn of the node with the most bandwidth, when weights come from bandwidths.
SCALE = 16


def available(root: Path | None = None) -> bool:
    return (root or SYSFS).is_dir()


def parse_weighted(text: str, arg: str) -> tuple[str, tuple[int, ...] | None]:
    """The node list and the weights (None: derive them) of a ``weighted-interleave:`` argument."""
    if not available():
        raise UsageError(
            f"--mem {text}: this kernel ({os.uname().release}) has no weighted interleave (MPOL_WEIGHTED_INTERLEAVE, "
            f"Linux 6.9 or later, {SYSFS}); use interleave:NODES"
        )
    nodes, at, weights = arg.partition("@")
    if not nodes:
        raise UsageError(f"--mem {text}: give the nodes, e.g. weighted-interleave:0,1@3,1 or weighted-interleave:all")
    if not at:
        return nodes, None
    try:
        values = tuple(int(w) for w in weights.split(","))
    except ValueError:
        raise UsageError(f"--mem {text}: the weights {weights!r} must be whole numbers, one per node, e.g. @3,1") from None
    bad = [w for w in values if not 1 <= w <= 255]
    if bad:
        raise UsageError(f"--mem {text}: weight {bad[0]} is out of range: the kernel takes 1 to 255 pages per turn")
    return nodes, values


def check_weights(text: str, nodes: Sequence[int], weights: tuple[int, ...] | None) -> tuple[int, ...]:
    """The weights given (one per node) or derived from measured bandwidths."""
    if weights is None:
        return derived_weights(nodes)
    if len(weights) != len(nodes):
        raise UsageError(
            f"--mem {text}: {plural(len(weights), 'weight')} for {plural(len(nodes), 'node')}: give one weight per node, in the nodes' order"
        )
    return weights


def derived_weights(nodes: Sequence[int]) -> tuple[int, ...]:
    """Weights proportional to each node's read bandwidth (the memory library's cost hints)."""
    memory = Memory()
    sources = [node for node, cpus in numa_nodes().items() if cpus] or [nodes[0]]
    bandwidth = []
    for node in nodes:
        seen = []
        for source in sources:
            try:
                seen.append(memory.access_cost(source, node)["read_mb_s"])
            except MemoryAPIError:
                continue
        if not seen:
            raise UsageError(
                f"no bandwidth measured for node {node}: give the weights, e.g. weighted-interleave:{','.join(map(str, nodes))}@"
                + ",".join("1" for _ in nodes)
            )
        bandwidth.append(sum(seen) / len(seen))
    return scaled(bandwidth)


def scaled(bandwidth: Sequence[float]) -> tuple[int, ...]:
    """Integer weights in 1..SCALE proportional to ``bandwidth``, divided by their common factor."""
    top = max(bandwidth)
    weights = [max(1, min(255, round(SCALE * b / top))) for b in bandwidth]
    common = math.gcd(*weights)
    return tuple(w // common for w in weights)


def current(nodes: Sequence[int], root: Path | None = None) -> dict[int, int]:
    return {node: int(((root or SYSFS) / f"node{node}").read_text()) for node in nodes}


@contextlib.contextmanager
def weights_set(nodes: Sequence[int], weights: Sequence[int], root: Path | None = None) -> Iterator[dict[int, int]]:
    """The system's interleave weights of ``nodes`` set to ``weights`` for the block, then put back."""
    root = root or SYSFS
    try:
        before = current(nodes, root)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the interleave weights in {root}: {exc}") from None
    wanted = dict(zip(nodes, weights))
    changed: dict[int, int] = {}
    try:
        for node, weight in wanted.items():
            if before[node] != weight:
                try:
                    (root / f"node{node}").write_text(str(weight))
                except OSError as exc:
                    raise UsageError(
                        f"cannot set node {node}'s interleave weight to {weight} ({exc.strerror or exc}): the weights are the "
                        f"system's, only root may change them; run as root, or set them yourself "
                        f"(echo {weight} > {root}/node{node}) and give the same weights"
                    ) from None
                changed[node] = before[node]
        yield wanted
    finally:
        for node, old in changed.items():
            try:
                (root / f"node{node}").write_text(str(old))
            except OSError:
                pass
