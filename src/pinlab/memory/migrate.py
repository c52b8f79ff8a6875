"""Moving a running process's pages to other NUMA nodes with ``migrate_pages(2)``.

After autopin moves a program's threads to CPUs of other nodes, their data stays where it was
first touched: every access is then remote. ``migrate_pages(pid, maxnode, old, new)`` asks the
kernel to move the pages of the whole process that lie on the ``old`` nodes to the ``new`` ones
(the k-th lowest node of ``old`` to the k-th lowest of ``new`` when the sets have the same size;
otherwise the kernel folds them in order, see ``nodes_remap`` in the kernel): pairs written in
another order are moved one call each (:func:`pairwise_steps`). It needs the same rights as
``kill`` (same user, or CAP_SYS_NICE).
"""

from __future__ import annotations

import ctypes
import errno as errnos
import os
from collections import Counter
from collections.abc import Iterable

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.measure.threads import check_process, pages_per_node
from pinlab.memory.memmap import machine_nodes

_SYSCALL = {"x86_64": 256, "aarch64": 238, "ppc64le": 258, "s390x": 287, "riscv64": 238}
_MAX_NODES = 1024
_libc: ctypes.CDLL | None = None


def _mask(nodes: Iterable[int]) -> ctypes.Array:
    bits = 8 * ctypes.sizeof(ctypes.c_ulong)
    words = (ctypes.c_ulong * (_MAX_NODES // bits))()
    for node in nodes:
        if not 0 <= node < _MAX_NODES:
            raise ValueError(f"node {node} out of range")
        words[node // bits] |= 1 << (node % bits)
    return words


def errno_name(code: int) -> str:
    """The symbolic name of an errno value (``EBUSY``), or its number when it has none."""
    return errnos.errorcode.get(code, str(code))


class ProcessEnded(ProcessLookupError):
    """The process ended while its pages were being moved; ``moved`` of them had reached the node
    by then. Not a failure of the move: a program may end at any time, its data with it."""

    def __init__(self, pid: int, moved: int):
        super().__init__(errnos.ESRCH, f"process {pid} ended while its pages were being moved")
        self.moved = moved


def _has_memory(pid: int) -> bool:
    """Whether process ``pid`` still exists with an address space: an exiting process loses it
    first (its ``statm`` reads all zeros), then becomes a zombie, then is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return f.read().split()[0] != "0"
    except (OSError, IndexError):
        return False


def _syscall(name: str, numbers: dict[str, int]) -> tuple[ctypes.CDLL, int]:
    """The C library (loaded once) and this machine's number of system call ``name``."""
    global _libc
    number = numbers.get(os.uname().machine)
    if number is None:
        raise OSError(errnos.ENOSYS, f"{name}: unknown system call number on {os.uname().machine}")
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc, number


def migrate_pages(pid: int, from_nodes: Iterable[int], to_nodes: Iterable[int]) -> int:
    """Move the pages of process ``pid`` on ``from_nodes`` to ``to_nodes``; the number of pages
    the kernel could not move. Raises OSError (ENOSYS without NUMA support, EPERM, ESRCH)."""
    libc, number = _syscall("migrate_pages", _SYSCALL)
    old, new = _mask(from_nodes), _mask(to_nodes)
    left = libc.syscall(ctypes.c_long(number), ctypes.c_long(pid), ctypes.c_ulong(_MAX_NODES + 1), old, new)
    if left < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(left)


_MOVE_PAGES = {"x86_64": 279, "aarch64": 239, "ppc64le": 301, "s390x": 310, "riscv64": 239}
_MPOL_MF_MOVE = 1 << 1
_BATCH = 1024


def move_pages(pid: int, start: int, size: int, node: int, attempts: int = 3, why: Counter | None = None) -> tuple[int, int]:
    """Move the pages of ``[start, start + size)`` in process ``pid`` to ``node``: see
    :func:`move_page_list`."""
    page = os.sysconf("SC_PAGE_SIZE")
    return move_page_list(pid, range(start - start % page, start + size, page), node, attempts, why)


def move_page_list(pid: int, addresses, node: int, attempts: int = 3, why: Counter | None = None) -> tuple[int, int]:
    """Move the pages at ``addresses`` (page-aligned) in process ``pid`` to ``node`` with
    ``move_pages(2)``, in batches. Returns (pages now on node, pages not moved), each page as the
    kernel answers for it; pages never touched (or not mapped any more) count in neither. A page the kernel leaves behind (busy: the program
    is using it) is tried again, up to ``attempts`` times in all; ``why`` (when given) counts the
    reasons of the pages left, by errno name (or ``node N`` for a page the kernel left on node N).
    Raises :class:`ProcessEnded` when the process ends meanwhile (the kernel then answers ESRCH, or
    EINVAL while it exits), and OSError otherwise as :func:`migrate_pages` does."""
    libc, number = _syscall("move_pages", _MOVE_PAGES)

    def call(batch: list[int], target: int | None) -> list[int]:
        count = len(batch)
        pages = (ctypes.c_void_p * count)(*batch)
        nodes = (ctypes.c_int * count)(*([target] * count)) if target is not None else None
        status = (ctypes.c_int * count)()
        done = libc.syscall(
            ctypes.c_long(number),
            ctypes.c_long(pid),
            ctypes.c_ulong(count),
            pages,
            nodes,
            status,
            ctypes.c_int(_MPOL_MF_MOVE if target is not None else 0),
        )
        if done < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        if done > 0 and target is not None:
            return call(batch, None)  # some were not moved: where is each page now
        return list(status)

    addresses = list(addresses)
    there = stuck = 0
    for first in range(0, len(addresses), _BATCH):
        batch = addresses[first : first + _BATCH]
        unseen: list[tuple[int, int]] = []  # (address, answer) of pages the kernel did not find
        for attempt in range(attempts):
            try:
                status = call(batch, node)
            except OSError as exc:
                if exc.errno in (errnos.ESRCH, errnos.EINVAL) and not _has_memory(pid):
                    raise ProcessEnded(pid, there) from None
                raise
            there += sum(1 for answer in status if answer == node)
            unseen += [(a, answer) for a, answer in zip(batch, status) if answer in (-errnos.ENOENT, -errnos.EFAULT)]
            left = [(a, answer) for a, answer in zip(batch, status) if answer != node and answer not in (-errnos.ENOENT, -errnos.EFAULT)]
            batch = [a for a, _ in left]
            if not batch:
                break
        # Not found is not always never touched: a kernel may answer EFAULT for a page that is
        # there but that it will not move (before Linux 6.5, one mapped PROT_NONE, as next touch
        # and the page tracer leave them). The page table says which were there: those are left.
        present = resident(pid, [a for a, _ in unseen])
        refused = [answer for a, answer in unseen if a in present]
        stuck += len(batch) + len(refused)
        if why is not None:
            why.update(errno_name(-answer) if answer < 0 else f"node {answer}" for _, answer in left)
            why.update(errno_name(-answer) for answer in refused)
    return there, stuck


def resident(pid: int, addresses: list[int]) -> set[int]:
    """Those of ``addresses`` (page-aligned) that are in memory or swapped out in process ``pid``,
    from its page table (/proc/PID/pagemap: bit 63 present, bit 62 swapped; readable by its user).
    When the page table cannot be read, none (as before: not found, not counted)."""
    if not addresses:
        return set()
    page = os.sysconf("SC_PAGE_SIZE")
    found = set()
    try:
        with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
            for address in addresses:
                pagemap.seek(address // page * 8)
                entry = int.from_bytes(pagemap.read(8), "little")
                if entry >> 62 & 3:
                    found.add(address)
    except OSError:
        return set()
    return found


def move_process(pid: int, to_nodes: str, from_nodes: str | None = None) -> tuple[dict[int, int], dict[int, int], int]:
    """``pinlab migrate``: move process ``pid``'s pages from ``from_nodes`` (every other node by
    default) to ``to_nodes``, as migratepages(8) does. Returns its pages per node before and after
    and the pages the kernel left behind. One-line UsageErrors for a gone or foreign process, nodes
    that do not exist or have no memory, and a kernel without NUMA.
    """
    memory_nodes = machine_nodes()
    to = _nodes(to_nodes, "--to", memory_nodes)
    old = _nodes(from_nodes, "--from", memory_nodes) if from_nodes else [n for n in memory_nodes if n not in to]
    steps = pairwise_steps(old, to) if from_nodes and len(old) == len(to) else [(old, to)]
    check_process(pid, repin=True)
    before = pages_per_node(pid)
    if not old:
        return before, before, 0
    try:
        left = sum(migrate_pages(pid, source, target) for source, target in steps)
    except OSError as exc:
        if exc.errno == errnos.ESRCH:
            raise UsageError(f"no process {pid}: it has ended") from None
        if exc.errno == errnos.EPERM:
            raise UsageError(f"process {pid} is not yours: moving its pages needs its user, root or CAP_SYS_NICE") from None
        if exc.errno == errnos.ENOSYS:
            raise UsageError("this kernel has no migrate_pages (built without NUMA support)") from None
        raise UsageError(f"migrate_pages of process {pid}: {exc.strerror}") from None
    return before, pages_per_node(pid), left


def pairwise_steps(old: list[int], new: list[int]) -> list[tuple[list[int], list[int]]]:
    """The migrate_pages calls that send node ``old[i]`` to node ``new[i]`` for every i.

    One call pairs the nodes of its two masks in ascending order (the k-th lowest of ``old`` to the
    k-th lowest of ``new``), whatever order they were written in: pairs given in another order are
    moved one at a time, each node emptied before it receives, so that no page moves twice. Pairs
    that form a cycle (``--from 0,1 --to 1,0``) cannot be moved so and are refused."""
    if len(set(old)) != len(old):
        raise UsageError(f"--from names node {next(n for n in old if old.count(n) > 1)} twice: each node's pages go to one node")
    pairs = [(a, b) for a, b in zip(old, new) if a != b]
    if [b for _, b in sorted(pairs)] == sorted(b for _, b in pairs) and len({b for _, b in pairs}) == len(pairs):
        return [([a for a, _ in pairs], [b for _, b in pairs])] if pairs else []
    steps, waiting = [], list(pairs)
    while waiting:
        # a pair whose target is no waiting pair's source: its target holds nothing still to move
        ready = [p for p in waiting if not any(q[0] == p[1] for q in waiting if q is not p)]
        if not ready:
            cycle = ",".join(f"{a}->{b}" for a, b in waiting)
            raise UsageError(
                f"--from/--to move pages in a cycle ({cycle}), which migrate_pages cannot do: "
                "move one node through a node outside the cycle first, in two commands"
            )
        for pair in ready:
            steps.append(([pair[0]], [pair[1]]))
            waiting.remove(pair)
    return steps


def _nodes(text: str, option: str, memory_nodes: list[int]) -> list[int]:
    """The nodes of a --to/--from value (a node list, or all), each one with memory."""
    nodes = memory_nodes if text.strip() == "all" else parse_cpulist(text, what=f"node list of {option}")
    for node in nodes:
        if node not in memory_nodes:
            raise UsageError(f"{option} {text}: node {node} does not exist or has no memory (nodes with memory: {format_cpulist(memory_nodes)})")
    return list(nodes)
