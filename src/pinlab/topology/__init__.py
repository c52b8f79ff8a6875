"""The machine model: hwloc's object tree, loaded from this machine, a file, a synthetic string or a preset.

Names are imported on first use, so that ``import pinlab.cpuset`` (on the launch path)
does not pull in the hwloc loader.
"""

from __future__ import annotations

from typing import Any

from pinlab.topology import model, sources

__all__ = ["CpuKind", "CpuLatency", "MeasuredMemory", "NumaDistances", "Topology", "TopoObject", "load_topology", "preset_names"]


def __getattr__(name: str) -> Any:
    if name in ("CpuKind", "CpuLatency", "MeasuredMemory", "NumaDistances", "Topology", "TopoObject"):
        return getattr(model, name)
    if name in ("load_topology", "preset_names"):
        return getattr(sources, name)
    raise AttributeError(f"module 'pinlab.topology' has no attribute {name!r}")
