"""The machine a study runs on, as the store keeps it: a description of the whole machine for the
study, and a one-line identity of the node for every run (a study spread over a cluster's nodes
groups its runs by it)."""

from __future__ import annotations

import functools
import platform
from pathlib import Path
from typing import Any

from pinlab.errors import UsageError
from pinlab.measure.noise import governor
from pinlab.topology import load_topology
from pinlab.topology.render import topology_to_json
from pinlab.words import plural


def machine_description() -> dict[str, Any]:
    """Where the study ran: topology summary, kernel, CPU model, governor, tool version."""
    described: dict[str, Any] = {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine()}
    try:
        topo = load_topology("this")
        described["topology"] = topology_to_json(topo)["summary"]
        described["cpu_model"] = next((p.infos.get("CPUModel") for p in topo.packages if p.infos.get("CPUModel")), None)
        described["topology_xml"] = topo.xml
    except UsageError as exc:
        described["topology_error"] = str(exc)
    described["governor"] = governor(Path("/")).found
    return described


@functools.lru_cache(maxsize=1)
def node_identity() -> dict[str, str]:
    """The machine a run ran on, kept in every run's record: its host name and its hardware in
    one line (CPU model, packages, cores, PUs, NUMA nodes, memory). Runs of one study spread over
    a cluster's nodes are grouped by it, and nodes of different hardware are told apart."""
    hardware = platform.machine()
    try:
        topo = this_topology()
        s = topo.summary()
        model = next((p.infos.get("CPUModel") for p in topo.packages if p.infos.get("CPUModel")), None) or platform.machine()
        memory = installed_memory() or sum(n.attributes.get("local_memory", 0) for n in topo.numa_nodes)
        hardware = (
            f"{model}, {plural(s['packages'], 'package')}, {plural(s['cores'], 'core')}, {plural(s['pus'], 'PU')}, "
            f"{plural(s['numa_nodes'], 'NUMA node')}" + (f", {round(memory / 2**30)} GiB" if memory else "")
        )
    except UsageError:
        pass
    return {"hostname": platform.node(), "hardware": hardware}


@functools.lru_cache(maxsize=1)
def installed_memory(root: Path = Path("/sys/devices/system/memory")) -> int | None:
    """Bytes of memory online, counted in the kernel's memory blocks (None where it has none).
    The hardware line names a node by it rather than by hwloc's figure (the nodes' MemTotal),
    which moves on one machine: a VM's balloon and the kernel's own reservations change it, so
    one host would look like several kinds of node."""
    try:
        block = int((root / "block_size_bytes").read_text().strip(), 16)
        online = sum(1 for d in root.glob("memory[0-9]*") if (d / "state").read_text().strip() == "online")
    except (OSError, ValueError):
        return None
    return block * online or None


def this_topology():
    """This machine's topology, read once per study (hwloc takes tens of milliseconds)."""
    return load_topology("this")
