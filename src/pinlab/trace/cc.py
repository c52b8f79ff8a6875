"""``pinlab cc``: build a program for the exact tracer (compiler instrumentation).

gcc and clang instrument every load, store and atomic of the code they compile with
``-fsanitize=thread``: each becomes a call to a ``__tsan_*`` function. pinlab's runtime
(libpinlab-trace.so, native/tracer) defines those functions and counts accesses per thread and
cache line, instead of ThreadSanitizer's race detector. So:

- compile steps get ``-fsanitize=thread`` (:func:`compile_flags`, ``pinlab cflags``);
- the link step gets libpinlab-trace with an rpath to it (:func:`link_flags`, ``pinlab ldflags``)
  and must *not* have ``-fsanitize=thread``, which would make the compiler link libtsan too. A
  command that compiles and links at once is therefore split: each source is compiled to a
  temporary object, then the objects are linked.

Only the program's own code is counted; libraries it calls (libc, the OpenMP runtime) are not,
unless they were built the same way.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from pinlab.errors import UsageError
from pinlab.launch.runner import ProgramNotExecutable, ProgramNotFound
from pinlab.measure import system_parts
from pinlab.native import native_path

TRACE_LIBRARY = "libpinlab-trace.so"
INSTRUMENT = "-fsanitize=thread"
SOURCE_SUFFIXES = (".c", ".cc", ".cp", ".cpp", ".cxx", ".c++", ".C", ".CPP", ".i", ".ii", ".m", ".mm", ".f", ".f90", ".f95", ".F", ".F90")
# Options after which the next word is their argument, not a file.
_TAKES_ARGUMENT = {
    "-o",
    "-I",
    "-D",
    "-U",
    "-include",
    "-imacros",
    "-isystem",
    "-idirafter",
    "-iquote",
    "-iprefix",
    "-x",
    "-MF",
    "-MT",
    "-MQ",
    "-L",
    "-l",
    "-Xlinker",
    "-Xassembler",
    "-Xpreprocessor",
    "-T",
    "-u",
    "-z",
    "-e",
    "--param",
    "-aux-info",
    "-isysroot",
    "--sysroot",
}
# Options that stop before the link: the command compiles only.
_NO_LINK = {"-c", "-S", "-E", "-M", "-MM", "-fsyntax-only"}
# Link-only options, left out of the split compile steps (a compiler warns about unused linker input).
_LINK_ONLY_PREFIXES = ("-l", "-L", "-Wl,")
_LINK_ONLY = {"-shared", "-static", "-pie", "-no-pie", "-rdynamic", "-static-libgcc", "-static-libstdc++"}


def _runtime_dir() -> Path:
    return native_path(TRACE_LIBRARY).parent


def compile_flags() -> list[str]:
    """Flags for every compile step of a program to trace exactly."""
    return [INSTRUMENT]


def link_flags() -> list[str]:
    """Flags for the link step: pinlab's tracer runtime, found at run time through an rpath."""
    directory = str(_runtime_dir())
    return [f"-L{directory}", f"-Wl,-rpath,{directory}", "-lpinlab-trace"]


def check_compiler(compiler: str) -> None:
    """Refuse a compiler that is missing (ProgramNotFound, exit 127), cannot be executed
    (ProgramNotExecutable, 126), or does not build an instrumented object from a one-line test
    (UsageError): a command such as ``true`` that exits 0 without compiling would otherwise
    "build" nothing and say so by its silence."""
    with tempfile.TemporaryDirectory(prefix="pinlab-cc-probe-") as probe_dir:
        probe = os.path.join(probe_dir, "probe.o")
        try:
            done = subprocess.run(
                [compiler, INSTRUMENT, "-x", "c", "-c", "-", "-o", probe],
                input=b"int pinlab_probe(int *p) { return *p; }\n",
                capture_output=True,
                timeout=120,
            )
        except FileNotFoundError:
            raise ProgramNotFound(
                f"compiler {compiler!r} not found: give a compiler on PATH, for example pinlab cc -- gcc ... "
                f"(to install one: {system_parts.COMPILER.install_line()})"
            ) from None
        except (PermissionError, IsADirectoryError):
            raise ProgramNotExecutable(f"compiler {compiler!r} cannot be executed: give a C/C++ compiler, for example gcc or clang") from None
        except OSError as exc:  # ENOEXEC: not a program the kernel can run
            raise ProgramNotExecutable(
                f"compiler {compiler!r} cannot be executed ({exc.strerror or exc}): give a C/C++ compiler, for example gcc or clang"
            ) from None
        except subprocess.TimeoutExpired:
            raise UsageError(f"compiler {compiler!r} did not compile a one-line test in 2 minutes: check it, or use gcc or clang") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            detail = f" ({said[0]})" if said else ""
            raise UsageError(
                f"compiler {compiler!r} does not support {INSTRUMENT}{detail}: the exact tracer needs gcc or clang; "
                "for a program you cannot rebuild use pinlab trace --method pages"
            )
        try:
            with open(probe, "rb") as made:
                instrumented = b"__tsan_" in made.read()
        except OSError:
            raise UsageError(
                f"{compiler!r} exited 0 but wrote no object file for a one-line C test: it is not a compiler; "
                "give a C/C++ compiler, for example gcc or clang"
            ) from None
        if not instrumented:
            raise UsageError(
                f"compiler {compiler!r} compiled a one-line test without instrumenting it ({INSTRUMENT} had no effect): "
                "the exact tracer needs gcc or clang"
            )


def _is_source(word: str) -> bool:
    return not word.startswith("-") and word.endswith(SOURCE_SUFFIXES)


def _link_only(word: str) -> bool:
    return (
        word in _LINK_ONLY
        or any(word.startswith(p) and word != "-" for p in _LINK_ONLY_PREFIXES)
        or word.endswith((".o", ".a", ".so"))
        or ".so." in word
    )


def plan_commands(argv: list[str], workdir: str) -> list[list[str]]:
    """The compiler commands that build ``argv`` (``COMPILER ARGS...``) instrumented for the exact tracer.

    Compile-only commands (-c, -S, -E...) get -fsanitize=thread; link-only commands get the runtime
    instead; a command that does both is split into one compile per source (objects in ``workdir``)
    and a link.
    """
    if not argv:
        raise UsageError("no compiler command given: pinlab cc -- COMPILER ARGS... (for example pinlab cc -- gcc -O2 -fopenmp x.c -o x)")
    compiler, args = argv[0], [a for a in argv[1:] if a != INSTRUMENT]
    if "-x" in args:
        raise UsageError("pinlab cc cannot split a command using -x LANGUAGE: compile with pinlab cflags and link with pinlab ldflags instead")
    if any(a in _NO_LINK for a in args):
        return [[compiler, *args, *compile_flags()]]
    # Which words are sources, options, or their arguments.
    sources, compile_args, link_args = [], [], []
    i = 0
    while i < len(args):
        word = args[i]
        pair = [word, args[i + 1]] if word in _TAKES_ARGUMENT and i + 1 < len(args) else [word]
        i += len(pair)
        if word == "-o":
            link_args += pair
        elif _is_source(word):
            sources.append(word)
            link_args.append(len(sources) - 1)  # the object takes the source's place on the link line
        elif word in ("-l", "-L", "-Xlinker", "-T", "-u", "-z") or _link_only(word):
            link_args += pair
        else:
            compile_args += pair
            link_args += pair  # -O2, -fopenmp, -m64... matter to the link too
    if not sources:
        return [[compiler, *args, *link_flags()]]
    commands, objects = [], []
    for n, source in enumerate(sources):
        obj = os.path.join(workdir, f"{n}-{Path(source).stem}.o")
        objects.append(obj)
        commands.append([compiler, *compile_args, *compile_flags(), "-c", source, "-o", obj])
    link = [objects[w] if isinstance(w, int) else w for w in link_args]
    commands.append([compiler, *link, *link_flags()])
    return commands


def build(argv: list[str], *, echo=None) -> int:
    """Run the instrumented build of ``argv``; returns the compiler's exit status (0 = built).

    ``echo`` (a callable taking one line) is told each command before it runs.
    """
    if not argv:
        plan_commands(argv, "")
    check_compiler(argv[0])
    _runtime_dir()  # the runtime must be installed before anything is built against it
    with tempfile.TemporaryDirectory(prefix="pinlab-cc-") as workdir:
        for command in plan_commands(argv, workdir):
            if echo is not None:
                echo(shlex.join(command))
            status = subprocess.run(command).returncode
            if status != 0:
                return status
    return 0
