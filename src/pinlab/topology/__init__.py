"""The machine model: hwloc's object tree, loaded from this machine, a file, a synthetic string or a preset."""
from pinlab.topology.model import CpuKind, NumaDistances, Topology, TopoObject
from pinlab.topology.sources import load_topology, preset_names

__all__ = ["CpuKind", "NumaDistances", "Topology", "TopoObject", "load_topology", "preset_names"]
