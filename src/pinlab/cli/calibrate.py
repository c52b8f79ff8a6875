"""pinlab calibrate: latencies and bandwidths measured on this machine, stored as topology distances."""

from __future__ import annotations

import click

from pinlab import terminal
from pinlab.topology import load_topology
from pinlab.topology.calibrate import CalibrationOutputs
from pinlab.topology.calibrate import calibrate as measure
from pinlab.topology.calibrate_show import LATENCY_TITLE, MEMORY_TITLE, draw, latency_table, legend, memory_table
from pinlab.words import plural


@click.command()
@click.option("--quick", is_flag=True, help="Fewer repetitions: 2 ms per CPU pair instead of 8, smaller memory buffers.")
@click.option("--sample", is_flag=True, help="Large machines: a sample of CPU pairs per topology level (trusts the tree; not for VMs).")
@click.option("--no-memory", is_flag=True, help="Only the core-to-core latency, not the NUMA nodes' bandwidth and latency.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the topology's hwloc XML with the measured distances to FILE.xml.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw the matrices to FILE.png or FILE.svg.")
@click.option("--topology", "-t", "source", default="this", show_default=True, help="The topology of this machine to measure and extend.")
def calibrate(quick, sample, no_memory, output, picture, source) -> None:
    """Measure this machine's distances: core-to-core latency and each NUMA node's bandwidth and latency.

    With -o, the topology is written with the measurements in it (hwloc user distances); give that
    file to --topology of any pinlab command and placements follow the measured machine.
    """
    outputs = CalibrationOutputs(output, picture)
    topo = load_topology(source)
    result = measure(topo, quick=quick, sample=sample, memory=not no_memory)
    console = terminal.console()
    console.print(LATENCY_TITLE, highlight=False)
    console.print(latency_table(result))
    console.print(legend(result))
    estimated = f", {result.estimated_pairs} estimated from their level's median" if result.estimated_pairs else ""
    console.print(f"{plural(result.measured_pairs, 'pair')} of CPUs measured in {result.latency_seconds:.2f} s{estimated}")
    if result.memory is not None:
        console.print(MEMORY_TITLE, highlight=False)
        console.print(memory_table(result))
        console.print(f"memory measured in {result.memory_seconds:.2f} s")
    if output is not None:
        outputs.write_topology(topo, result)
        click.echo(f"pinlab: wrote {output}; use it with --topology {output}", err=True)
    if picture:
        draw(result, picture)
        click.echo(f"pinlab: picture: {picture}", err=True)
