"""The thread-pool libraries a process has loaded, told from the files it maps.

A process's threads do not say which library started them (Linux keeps no start routine per
thread): the preload library of ``pinlab run`` records it when the program runs under a plan
(see :mod:`pinlab.measure.roles`), and for any other process what is known is which pool
libraries are mapped, and how big each one's pool is set to be (its environment variable, else
the allowed CPUs, as the libraries size themselves). The doctor's fixes name a library's own
variable, so each library here carries it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PoolLibrary:
    """A library that runs a pool of threads: its name for people, how its file is recognised,
    and the environment variables that size its pool, strongest first."""

    name: str
    pattern: re.Pattern
    variables: tuple[str, ...]
    openmp: bool = False  # an OpenMP runtime (two of them in one process fight over the CPUs)


#: The pool libraries pinlab knows, in the order reports list them. OpenBLAS and BLIS built
#: with OpenMP take the OpenMP runtime's pool (and OMP_NUM_THREADS) instead of their own.
LIBRARIES = (
    PoolLibrary("libgomp", re.compile(r"(^|/)libgomp[.-]"), ("OMP_NUM_THREADS",), openmp=True),
    PoolLibrary("libomp", re.compile(r"(^|/)lib(omp|iomp5)[.-]"), ("OMP_NUM_THREADS",), openmp=True),
    PoolLibrary("OpenBLAS", re.compile(r"(^|/)lib(scipy_)?openblas"), ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")),
    PoolLibrary("MKL", re.compile(r"(^|/)libmkl_(intel_thread|gnu_thread|tbb_thread|rt|core)"), ("MKL_NUM_THREADS", "OMP_NUM_THREADS")),
    PoolLibrary("BLIS", re.compile(r"(^|/)libblis"), ("BLIS_NUM_THREADS", "OMP_NUM_THREADS")),
    PoolLibrary("TBB", re.compile(r"(^|/)libtbb(\.|_|12)"), ()),
)


def identify(path: str | None) -> PoolLibrary | None:
    """The pool library a file is, None for any other file (or no file)."""
    if not path:
        return None
    name = os.path.basename(path)
    return next((lib for lib in LIBRARIES if lib.pattern.search(name)), None)


def mapped_files(pid: int) -> list[str]:
    """The files process ``pid`` maps (from /proc/PID/maps), each once, in address order; empty
    when they are not ours to read or the process has ended."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    seen: dict[str, None] = {}
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            seen.setdefault(fields[5].removesuffix(" (deleted)"), None)
    return list(seen)


def loaded_pools(files: list[str]) -> dict[str, str]:
    """Pool library name -> the first file of it that is mapped, in :data:`LIBRARIES` order."""
    found: dict[str, str] = {}
    for path in files:
        lib = identify(path)
        if lib is not None:
            found.setdefault(lib.name, path)
    return {lib.name: found[lib.name] for lib in LIBRARIES if lib.name in found}


def pool_files(files: list[str]) -> list[tuple[PoolLibrary, str]]:
    """Every mapped copy of a pool library, with its file, in :data:`LIBRARIES` order then address
    order. Copies are separate pools: numpy and scipy wheels each bring their own OpenBLAS, and
    each starts its own threads."""
    found = [(lib, path) for path in files if (lib := identify(path)) is not None]
    return sorted(found, key=lambda pair: LIBRARIES.index(pair[0]))


def by_name(name: str) -> PoolLibrary | None:
    return next((lib for lib in LIBRARIES if lib.name == name), None)


def python_file(path: str | None) -> bool:
    """Whether ``path`` is a CPython interpreter: libpython, or a python3 program with it built in
    (a thread started there is a Python thread)."""
    name = os.path.basename(path or "")
    return name.startswith("libpython3") or name.startswith("python3")


def python_process(files: list[str]) -> bool:
    """Whether the process runs a CPython interpreter (its threads may be Python threads)."""
    return any(python_file(f) for f in files)


#: The BLAS libraries among :data:`LIBRARIES` (called from the program's own threads).
BLAS = ("OpenBLAS", "MKL", "BLIS")
