"""pinlab trace, cc, cflags and ldflags: measure a program's affinity graph."""

from __future__ import annotations

import click

from pinlab.cli.common import RenamingCommand, renamed
from pinlab.cli.program import started
from pinlab.native import include_dir, native_path
from pinlab.trace import trace_program
from pinlab.trace.cc import build, compile_flags, link_flags
from pinlab.trace.common import TraceRequest


@renamed({"-m": "--method"})
@click.command(cls=RenamingCommand, context_settings={"allow_interspersed_args": False})
@click.option("--threads", "-n", type=int, required=True, help="Threads of the program (OMP_NUM_THREADS is set to it unless set).")
@click.option(
    "--method",
    type=click.Choice(["auto", "exact", "sampled", "pages"]),
    default="auto",
    show_default=True,
    help="exact: built with pinlab cc; sampled: memory-sampling hardware; pages: any program. auto picks in that order.",
)
@click.option("--output", "-o", required=True, help="The graph file: FILE.json (or .csv for a bare matrix).")
@click.option("--no-baseline", is_flag=True, help="Do not run the program a second time untraced to measure the slowdown.")
@click.option(
    "--after",
    metavar="WHEN",
    help="Count only from WHEN: SECONDS after the start, 'parallel' (the first thread "
    "created: an OpenMP program's first parallel region) or 'mark' (the program's call to pinlab_trace_start()).",
)
@click.option("--original", metavar="PROGRAM", help="exact: the program built without pinlab cc, run with the same arguments for the slowdown.")
@click.option("--period-ms", type=int, help="pages: milliseconds between protection rounds [default: 10].")
@click.option("--min-bytes", type=int, help="pages: only mappings at least this large are watched [default: 65536].")
@click.option(
    "--heap", is_flag=True, help="pages: watch malloc's main heap too (small blocks; the manual's guide to placing by sharing says what it risks)."
)
@click.option("--sample-period", type=int, help="sampled: one data-address sample every this many loads/stores [default: 1000].")
@click.option("--quiet", "-q", is_flag=True, help="No summary line on stderr.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def trace(threads, method, output, no_baseline, after, original, period_ms, min_bytes, heap, sample_period, quiet, program) -> int:
    """Measure which threads share data: pinlab trace -n THREADS -o FILE -- PROGRAM [ARGS...]

    The program's output and exit status pass through unchanged (pinlab exits with the program's
    status, 128+N if it died of signal N); 128+N when pinlab is stopped by signal N (Ctrl-C: 130);
    127/126 for a program that cannot be found or executed; 2 for bad options.
    """
    settings = {"period_ms": period_ms, "min_bytes": min_bytes, "heap": True if heap else None, "sample_period": sample_period}
    request = TraceRequest(argv=list(program), threads=threads, options={k: v for k, v in settings.items() if v is not None}, after=after)
    outcome = started(lambda: trace_program(request, method, baseline=not no_baseline, output=output, original=original))
    if isinstance(outcome, int):
        return outcome
    result = outcome.result
    for warning in result.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    if not quiet:
        measured = result.graph.measured
        speed = f", untraced {outcome.baseline_seconds:.3f} s, slowdown x{outcome.slowdown:.1f}" if outcome.slowdown else ""
        where = f"graph of {threads} threads -> {output}" if outcome.written else "no graph written"
        click.echo(
            f"pinlab: traced with {outcome.method} in {result.wall_seconds:.3f} s{speed}; "
            f"{measured.get('units_seen', '?')} {result.graph.granularity}s seen; {where}",
            err=True,
        )
    return 128 + outcome.interrupted if outcome.interrupted else result.exit_status


@click.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
@click.option("--verbose", "-v", is_flag=True, help="Print each compiler command before it runs.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def cc(verbose, command) -> int:
    """Build a program for pinlab trace --method exact: pinlab cc -- COMPILER ARGS...

    Compile steps get -fsanitize=thread; the link step gets pinlab's tracer runtime instead of
    ThreadSanitizer's (a command doing both is split). Exits with the compiler's status; 127 for a
    compiler that is not found, 126 for one that cannot be executed, 2 for one that does not build.
    """
    return started(lambda: build(list(command), echo=(lambda line: click.echo(line, err=True)) if verbose else None))


@click.command()
@click.option("--mem", is_flag=True, help="The flags of a program using pinlab's memory API (pinlab_mem.h) instead.")
def cflags(mem) -> None:
    """Print the compile flags of a program to trace exactly (for Makefiles: CFLAGS += $(pinlab cflags)).

    With --mem, those of a program using the memory API: CFLAGS += $(pinlab cflags --mem).
    """
    if mem:
        click.echo(f"-I{include_dir()}")
        return

    click.echo(" ".join(compile_flags()))


@click.command()
@click.option("--mem", is_flag=True, help="Link pinlab's memory library (libpinlab-mem) instead.")
def ldflags(mem) -> None:
    """Print the link flags of a program to trace exactly (pinlab's tracer runtime, with an rpath).

    With --mem, those of a program using the memory API: LDLIBS += $(pinlab ldflags --mem).
    """
    if mem:
        directory = native_path("libpinlab-mem.so").parent
        click.echo(f"-L{directory} -Wl,-rpath,{directory} -lpinlab-mem")
        return

    click.echo(" ".join(link_flags()))
