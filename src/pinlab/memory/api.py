"""Python binding of pinlab's memory API (libpinlab-mem, native/include/pinlab_mem.h), for tests and notebooks.

    from pinlab.memory.api import Memory
    mem = Memory()
    region = mem.alloc(64 << 20, "interleave", [0, 1])
    region.view()[:] = b"x" * region.size        # a writable memoryview of the pages
    region.where()                               # {0: 8192, 1: 8192} pages per node, plus region.absent
    region.migrate(1); region.next_touch("page"); region.attach(); region.free()
    mem.free_memory(0), mem.access_cost(0, 1), mem.migrate_cost(1 << 30, 0, 1)

Every failure raises :class:`MemoryAPIError` with the library's code and message. Next touch
works for accesses made from Python (they fault like any other); system calls that Python makes
on an armed region are not covered here, since the library's I/O wrappers only take the place of
the C library's in programs linked with it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from pinlab.native import native_path

POLICIES = {"first-touch": 0, "bind": 1, "interleave": 2, "local": 3}
GRANULARITY = {"page": 0, "region": 1}
_MAX_NODES = 1024


class MemoryAPIError(OSError):
    """A call of the memory API failed: ``code`` is the PM_E* number, the message pm_last_error's."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


_lib: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """libpinlab-mem, loaded once, with its functions' signatures declared."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(native_path("libpinlab-mem.so")))
        vp, sz, ip, lp = ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_long)
        pid = ctypes.c_int
        signatures = {
            "pm_alloc": [ctypes.POINTER(vp), sz, ctypes.c_int, ip, ctypes.c_int],
            "pm_register": [vp, sz],
            "pm_free": [vp],
            "pm_region_size": [vp, ctypes.POINTER(sz)],
            "pm_attach": [vp, pid],
            "pm_detach": [vp],
            "pm_attached": [vp, ctypes.POINTER(pid)],
            "pm_attached_bytes": [pid, ctypes.POINTER(sz)],
            "pm_move_thread": [pid, ctypes.c_int],
            "pm_migrate": [vp, ctypes.c_int],
            "pm_migrate_on_next_touch": [vp, ctypes.c_int],
            "pm_next_touch_pending": [vp, lp],
            "pm_where": [vp, sz, lp, ctypes.c_int, lp],
            "pm_nodes": [ip],
            "pm_node_of_cpu": [ctypes.c_int, ip],
            "pm_current_node": [ip],
            "pm_next_touch_stats": [lp, lp, ip],
            "pm_next_touch_fallbacks": [lp, lp],
            "pm_free_memory": [ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)],
            "pm_access_cost": [ctypes.c_int, ctypes.c_int] + [ctypes.POINTER(ctypes.c_double)] * 3,
            "pm_migrate_cost": [sz, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double)],
        }
        for name, args in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        for name in ("pm_last_error", "pm_costs_source"):
            getattr(lib, name).restype = ctypes.c_char_p
            getattr(lib, name).argtypes = []
        lib.pm_strerror.restype, lib.pm_strerror.argtypes = ctypes.c_char_p, [ctypes.c_int]
        _lib = lib
    return _lib


def _check(code: int) -> None:
    if code != 0:
        lib = library()
        raise MemoryAPIError(code, f"{lib.pm_strerror(code).decode()}: {lib.pm_last_error().decode()}")


@dataclass
class Region:
    """A region of the API, named by its start address."""

    address: int
    size: int
    absent: int = 0

    def view(self) -> memoryview:
        """The region's bytes, writable, without a copy."""
        return memoryview((ctypes.c_char * self.size).from_address(self.address)).cast("B")

    def where(self) -> dict[int, int]:
        """Pages per node now (nodes without pages left out); pages never touched are in ``absent``."""
        counts, absent = (ctypes.c_long * _MAX_NODES)(), ctypes.c_long()
        _check(library().pm_where(self.address, self.size, counts, _MAX_NODES, ctypes.byref(absent)))
        self.absent = absent.value
        return {node: count for node, count in enumerate(counts) if count}

    def migrate(self, node: int) -> None:
        _check(library().pm_migrate(self.address, node))

    def next_touch(self, granularity: str = "page") -> None:
        if granularity not in GRANULARITY:
            raise ValueError(f"granularity {granularity!r}: page or region")
        _check(library().pm_migrate_on_next_touch(self.address, GRANULARITY[granularity]))

    def pending(self) -> int:
        """Pages still waiting for their next touch."""
        pages = ctypes.c_long()
        _check(library().pm_next_touch_pending(self.address, ctypes.byref(pages)))
        return pages.value

    def attach(self, tid: int = 0) -> None:
        _check(library().pm_attach(self.address, tid))

    def detach(self) -> None:
        _check(library().pm_detach(self.address))

    def attached(self) -> int:
        tid = ctypes.c_int()
        _check(library().pm_attached(self.address, ctypes.byref(tid)))
        return tid.value

    def free(self) -> None:
        _check(library().pm_free(self.address))


class Memory:
    """The API's calls that are not about one region."""

    def __init__(self) -> None:
        self.lib = library()

    def alloc(self, size: int, policy: str = "first-touch", nodes: list[int] | tuple[int, ...] = ()) -> Region:
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: one of {', '.join(POLICIES)}")
        out = ctypes.c_void_p()
        array = (ctypes.c_int * max(1, len(nodes)))(*nodes)
        _check(self.lib.pm_alloc(ctypes.byref(out), size, POLICIES[policy], array, len(nodes)))
        length = ctypes.c_size_t()
        _check(self.lib.pm_region_size(out, ctypes.byref(length)))
        return Region(out.value or 0, length.value)

    def register(self, address: int, size: int) -> Region:
        _check(self.lib.pm_register(address, size))
        length = ctypes.c_size_t()
        _check(self.lib.pm_region_size(address, ctypes.byref(length)))
        return Region(address, length.value)

    def nodes(self) -> int:
        count = ctypes.c_int()
        _check(self.lib.pm_nodes(ctypes.byref(count)))
        return count.value

    def node_of_cpu(self, cpu: int) -> int:
        node = ctypes.c_int()
        _check(self.lib.pm_node_of_cpu(cpu, ctypes.byref(node)))
        return node.value

    def current_node(self) -> int:
        node = ctypes.c_int()
        _check(self.lib.pm_current_node(ctypes.byref(node)))
        return node.value

    def free_memory(self, node: int) -> tuple[int, int]:
        """(free bytes, total bytes) of ``node``."""
        free, total = ctypes.c_ulonglong(), ctypes.c_ulonglong()
        _check(self.lib.pm_free_memory(node, ctypes.byref(free), ctypes.byref(total)))
        return free.value, total.value

    def attached_bytes(self, tid: int = 0) -> int:
        size = ctypes.c_size_t()
        _check(self.lib.pm_attached_bytes(tid, ctypes.byref(size)))
        return size.value

    def move_thread(self, tid: int, cpu: int) -> None:
        _check(self.lib.pm_move_thread(tid, cpu))

    def access_cost(self, src: int, dst: int) -> dict[str, float]:
        """Latency (ns) and read/write bandwidth (MB/s) of node ``dst``'s memory from a CPU of node ``src``."""
        lat, rd, wr = ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
        _check(self.lib.pm_access_cost(src, dst, ctypes.byref(lat), ctypes.byref(rd), ctypes.byref(wr)))
        return {"latency_ns": lat.value, "read_mb_s": rd.value, "write_mb_s": wr.value}

    def migrate_cost(self, size: int, src: int, dst: int) -> float:
        seconds = ctypes.c_double()
        _check(self.lib.pm_migrate_cost(size, src, dst, ctypes.byref(seconds)))
        return seconds.value

    def next_touch_stats(self) -> dict[str, int]:
        """What next touches did in this process: pages moved, pages the kernel refused and the
        errno of the last refusal, regions that fell back to region granularity at the kernel's
        limit on mappings and the pages they had pending."""
        moved, failed, regions, pages, err = ctypes.c_long(), ctypes.c_long(), ctypes.c_long(), ctypes.c_long(), ctypes.c_int()
        _check(self.lib.pm_next_touch_stats(ctypes.byref(moved), ctypes.byref(failed), ctypes.byref(err)))
        _check(self.lib.pm_next_touch_fallbacks(ctypes.byref(regions), ctypes.byref(pages)))
        return {
            "moved": moved.value,
            "failed": failed.value,
            "last_errno": err.value,
            "fallback_regions": regions.value,
            "fallback_pages": pages.value,
        }

    def costs_source(self) -> str:
        return self.lib.pm_costs_source().decode()
