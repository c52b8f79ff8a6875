"""NUMA memory policies with numactl's words, applied with the real system call.

| policy | meaning | numactl |
|---|---|---|
| ``first-touch`` | Linux's default: a page goes to the node of the CPU that first touches it | (none) |
| ``local`` | allocate on the node of the CPU doing the allocation (MPOL_LOCAL) | ``--localalloc`` |
| ``bind:NODES`` | strictly on these nodes, failing rather than spilling elsewhere (MPOL_BIND) | ``--membind`` |
| ``interleave:NODES`` / ``interleave:all`` | round-robin page by page over the nodes (MPOL_INTERLEAVE) | ``--interleave`` |
| ``preferred:NODE`` | on this node while it has room, elsewhere after (MPOL_PREFERRED) | ``--preferred`` |
| ``weighted-interleave:NODES[@WEIGHTS]`` | round-robin with node i taking WEIGHTS[i] pages in turn (MPOL_WEIGHTED_INTERLEAVE, Linux 6.9+); weights given, or from the bandwidths pinlab calibrate measured | ``--weighted-interleave`` |
| ``follow`` | each pinned thread binds its own allocations to the node of its CPU | (none) |

``bind`` is numactl's strict MPOL_BIND; hwloc's ``HWLOC_MEMBIND_BIND`` may fall back on other
nodes, this does not. The policy is set on the launching thread around the spawn (see
:mod:`pinlab.launch.spawn`), so it holds from the program's first instruction and is inherited
by every thread it creates.
"""

from __future__ import annotations

import ctypes  # only where a policy is really set (keeps the launch path's imports small)
import os
from dataclasses import dataclass

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.measure import linux
from pinlab.measure.linux import mems_allowed, numa_nodes
from pinlab.memory.memmap import machine_nodes
from pinlab.memory.weights import check_weights, parse_weighted

MPOL_DEFAULT, MPOL_PREFERRED, MPOL_BIND, MPOL_INTERLEAVE, MPOL_LOCAL, MPOL_WEIGHTED_INTERLEAVE = 0, 1, 2, 3, 4, 6
_MODES = {
    "local": MPOL_LOCAL,
    "bind": MPOL_BIND,
    "interleave": MPOL_INTERLEAVE,
    "preferred": MPOL_PREFERRED,
    "weighted-interleave": MPOL_WEIGHTED_INTERLEAVE,
}
_SYSCALL_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 261, "s390x": 270, "riscv64": 237}
_SYSCALL_GET_MEMPOLICY = {"x86_64": 239, "aarch64": 236, "ppc64le": 260, "s390x": 269, "riscv64": 236}
POLICIES = "first-touch, local, bind:NODES, interleave:NODES|all, preferred:NODE, follow, weighted-interleave:NODES[@WEIGHTS]"


@dataclass(frozen=True)
class MemPolicy:
    """A parsed memory policy: ``kind`` is one of first-touch, local, bind, interleave, preferred, follow."""

    kind: str
    nodes: tuple[int, ...] = ()
    weights: tuple[int, ...] | None = None  # weighted-interleave: pages per turn of each node, in node order

    def __str__(self) -> str:
        if self.weights is not None:
            return f"{self.kind}:{','.join(map(str, self.nodes))}@{','.join(map(str, self.weights))}"
        return f"{self.kind}:{format_cpulist(self.nodes)}" if self.nodes else self.kind

    @property
    def mode(self) -> int | None:
        """The MPOL_* mode set before exec, or None when nothing is set then (first-touch, follow)."""
        return _MODES.get(self.kind)


def parse_policy(text: str | None) -> MemPolicy:
    """Parse a ``--mem`` value, checking the nodes exist and this process may use them."""
    if text is None or text.strip() in ("", "first-touch", "default"):
        return MemPolicy("first-touch")
    kind, _, arg = text.strip().partition(":")
    if kind in ("first-touch", "local", "follow"):
        if arg:
            raise UsageError(f"memory policy {kind} takes no nodes (got {text!r}); use one of: {POLICIES}")
        return MemPolicy(kind)
    if kind == "weighted-interleave":
        nodes_text, weights = parse_weighted(text, arg)
        nodes = _checked_nodes(kind, nodes_text)

        return MemPolicy(kind, nodes, check_weights(text, nodes, weights))
    if kind not in ("bind", "interleave", "preferred"):
        raise UsageError(f"unknown memory policy {text!r}: use one of: {POLICIES}")
    if ";" in arg:
        raise UsageError(f"--mem takes one memory policy for the whole program, not a list (got {text!r}); use one of: {POLICIES}")
    if not arg:
        raise UsageError(f"memory policy {kind} needs nodes, e.g. {kind}:0{'' if kind == 'preferred' else ',1'}")
    return MemPolicy(kind, _checked_nodes(kind, arg))


def _checked_nodes(kind: str, arg: str) -> tuple[int, ...]:
    """The nodes of ``arg`` (a node list, or ``all`` for the interleaves), each existing and allowed."""
    existing, allowed = frozenset(numa_nodes()), mems_allowed()
    nodes = (
        sorted(allowed) if arg == "all" and kind in ("interleave", "weighted-interleave") else parse_cpulist(arg, what=f"node list of --mem {kind}")
    )
    if kind == "preferred" and len(nodes) != 1:
        raise UsageError(f"memory policy preferred takes exactly one node (got {arg!r})")
    for node in nodes:
        if node not in existing:
            raise UsageError(f"NUMA node {node} does not exist (nodes: {format_cpulist(existing)}); see `pinlab topology`")
        if node not in allowed:
            raise UsageError(f"NUMA node {node} is not allowed for this process (Mems_allowed: {format_cpulist(allowed)})")
    return tuple(dict.fromkeys(nodes))


def nearest_memory_node(node: int) -> int:
    """``node`` when it has memory; for a node of CPUs only, the node with memory at the least
    distance (the lowest numbered of equals), where the kernel's local allocation from its CPUs
    goes too: binding to a node without memory is refused (EINVAL)."""
    with_memory = machine_nodes()
    if node in with_memory or not with_memory:
        return node
    try:
        distances = [int(d) for d in (linux.NODE_DIR / f"node{node}" / "distance").read_text().split()]
    except (OSError, ValueError):
        return with_memory[0]
    return min(with_memory, key=lambda other: (distances[other] if other < len(distances) else 1 << 30, other))


def _syscall(name: str, table: dict[str, int]) -> int:
    machine = os.uname().machine
    number = table.get(machine)
    if number is None:
        raise OSError(f"{name}: unknown system call number on {machine}")
    return number


def set_mempolicy(mode: int, nodes: tuple[int, ...] = ()) -> None:
    """Set the calling thread's memory policy (inherited by children and kept across exec)."""
    number = _syscall("set_mempolicy", _SYSCALL_SET_MEMPOLICY)
    maxnode = max(nodes, default=0) + 2
    words = (maxnode + 63) // 64
    mask = (ctypes.c_ulong * words)()
    for node in nodes:
        mask[node // 64] |= 1 << (node % 64)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, mode, mask if nodes else None, ctypes.c_ulong(maxnode if nodes else 0)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"set_mempolicy: {os.strerror(errno)}")


#: Bits of the node mask get_mempolicy is given: at least the kernel's MAX_NUMNODES.
_GET_MAXNODE = 4096


def get_mempolicy() -> tuple[int, tuple[int, ...]]:
    """The calling thread's memory policy: its mode (with any mode flags) and its nodes."""
    number = _syscall("get_mempolicy", _SYSCALL_GET_MEMPOLICY)
    mode = ctypes.c_int(0)
    mask = (ctypes.c_ulong * (_GET_MAXNODE // 64))()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, ctypes.byref(mode), mask, ctypes.c_ulong(_GET_MAXNODE), None, ctypes.c_ulong(0)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"get_mempolicy: {os.strerror(errno)}")
    nodes = tuple(w * 64 + b for w, word in enumerate(mask) if word for b in range(64) if word >> b & 1)
    return mode.value, nodes
