"""pinlab topology: show the machine (or another one) as a tree, JSON, XML or a synthetic string."""

from __future__ import annotations

import json
import tempfile

import click

from pinlab.cli.common import TOPOLOGY_HELP
from pinlab.topology import load_topology, preset_names
from pinlab.topology.render import render_tree, topology_to_json
from pinlab.topology.sources import lstopo


@click.command()
@click.option("--topology", "-t", "source", default="this", show_default=True, help=TOPOLOGY_HELP)
@click.option("--format", "-f", "fmt", type=click.Choice(["tree", "json", "xml", "synthetic"]), default="tree", show_default=True)
@click.option("--list-presets", is_flag=True, help="List the bundled machine descriptions and exit.")
def topology(source: str, fmt: str, list_presets: bool) -> None:
    """Show the machine's topology (or another one's)."""
    if list_presets:
        for name in preset_names():
            topo = load_topology(name)
            click.echo(f"{name:16} {topo.root.infos.get('PinlabDescription', '')}")
        return
    topo = load_topology(source)
    if fmt == "tree":
        click.echo(render_tree(topo))
    elif fmt == "json":
        click.echo(json.dumps(topology_to_json(topo), indent=2))
    elif fmt == "xml":
        click.echo(topo.xml, nl=not topo.xml.endswith("\n"))
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".xml") as tmp:
            tmp.write(topo.xml)
            tmp.flush()
            click.echo(lstopo(["-i", tmp.name, "--of", "synthetic", "-"], what=f"{topo.name} as a synthetic string").strip())
