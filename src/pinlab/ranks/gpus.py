"""The node's GPUs, and the CPUs and NUMA nodes each one is local to, from hwloc's I/O objects.

hwloc shows a GPU as a PCI device (``PCIDev``, with its bus id) holding one OS device per
software stack that sees it: ``cudaN`` (CUDA runtime), ``nvmlN`` (NVIDIA's management library),
``rsmiN`` (AMD ROCm SMI), ``zeN`` (Intel Level Zero), ``openclNdM`` (OpenCL), plus display
devices (``cardN``, ``renderDN``) that say nothing about compute. A PCI device is a GPU here when
it holds at least one compute OS device, or is an NVIDIA or AMD display controller by its PCI
class and vendor that is not a server board's console chip (by vendor:device). Its locality is the CPU set (and NUMA nodes) of the
nearest object above it that is not an I/O object: the package, NUMA node's group or L3 region
whose CPUs sit next to the GPU's PCI bus.

Each GPU keeps the index every stack gives it, because the variable that selects it in a rank
is read by one stack: ``CUDA_VISIBLE_DEVICES`` (CUDA's index; NVML's, which follows PCI order,
with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` when hwloc saw no CUDA device), ``ROCR_VISIBLE_DEVICES``
(ROCm SMI's index) and ``ZE_AFFINITY_MASK`` (Level Zero's).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field

from pinlab.cpuset import format_cpulist, parse_hwloc_bitmap
from pinlab.errors import UsageError
from pinlab.topology.model import Topology

_IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev", "Misc"})
# OS device names of compute stacks: name pattern -> stack
_STACKS = (
    (re.compile(r"cuda(\d+)$"), "CUDA"),
    (re.compile(r"nvml(\d+)$"), "NVML"),
    (re.compile(r"rsmi(\d+)$"), "RSMI"),
    (re.compile(r"ze(\d+)$"), "LevelZero"),
    (re.compile(r"opencl(\d+)d(\d+)$"), "OpenCL"),
)
_VENDORS = {"NVML": "NVIDIA", "CUDA": "NVIDIA", "RSMI": "AMD", "LevelZero": "Intel"}


@dataclass
class Gpu:
    """One GPU: its PCI bus id, its index in each compute stack, and where it is local."""

    busid: str
    indexes: dict[str, int]  # stack (CUDA, NVML, RSMI, LevelZero, OpenCL) -> index
    cpus: frozenset[int]  # locality: CPUs next to its PCI bus
    nodes: frozenset[int]  # NUMA nodes of that locality
    model: str = ""
    infos: dict[str, str] = field(default_factory=dict)
    # NVIDIA: the node's CUDA numbers do not cover all its NVIDIA GPUs, so every rank names
    # them by NVML's (PCI order), the same way on the whole node
    pci_order: bool = False

    @property
    def vendor(self) -> str:
        for stack in ("NVML", "CUDA", "RSMI", "LevelZero"):
            if stack in self.indexes:
                return _VENDORS[stack]
        return self.infos.get("GPUVendor", "")

    @property
    def name(self) -> str:
        """How users know it: ``cuda0``, ``rsmi1``, ``ze0``, else the first stack's name."""
        for stack, prefix in (("CUDA", "cuda"), ("NVML", "nvml"), ("RSMI", "rsmi"), ("LevelZero", "ze")):
            if stack in self.indexes:
                return f"{prefix}{self.indexes[stack]}"
        return f"opencl{self.indexes.get('OpenCL', 0)}"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "busid": self.busid,
            "vendor": self.vendor,
            "model": self.model,
            "indexes": self.indexes,
            "cpus": format_cpulist(self.cpus),
            "nodes": sorted(self.nodes),
        }


def find_gpus(topo: Topology) -> list[Gpu]:
    """The GPUs in ``topo``'s hwloc XML, in the order of their locality's first CPU, then bus id.
    Their locality is narrowed to the CPUs this process may use (``topo.allowed_cpus``)."""
    try:
        root = ET.fromstring(topo.xml)
    except ET.ParseError:
        return []
    gpus: list[Gpu] = []
    machine = root.find("object")
    if machine is None:
        return []
    _walk(machine, None, gpus, topo)
    for stack in _BY_PCI_ORDER:
        _number_in_pci_order(gpus, stack)
    gpus.sort(key=lambda g: (min(g.cpus, default=1 << 30), g.busid))
    return gpus


# PCI vendors whose display controllers (class 03xx) are compute GPUs even when hwloc shows no
# OS device of a compute stack for them (hwloc built without the CUDA/NVML or ROCm plugin):
# NVIDIA's and AMD's. Intel's are left out: most are a desktop's integrated graphics.
_PCI_GPU_VENDORS = {"10de": "NVML", "1002": "RSMI"}
_BY_PCI_ORDER = ("NVML", "RSMI")
# The class alone does not tell them apart: AMD's Vega 20 Instinct cards say VGA (0300), as do the
# small display chips soldered on servers' boards for their console, which no compute stack
# drives. Those chips are known by vendor:device: ATI's ES1000 (515e, 5969), Rage XL (4752) and
# Radeon 7000/VE (5159).
_DISPLAY_ONLY = frozenset({"1002:515e", "1002:5969", "1002:4752", "1002:5159"})


def _pci_gpu_vendor(pci_type: str) -> str | None:
    """The stack that numbers a PCI device in PCI order, if it is an NVIDIA or AMD GPU by its
    class and vendor (hwloc's ``pci_type``: ``"0302 [10de:20b0] [10de:134f] a1"``) and not one
    of the display-only chips by its vendor:device."""
    match = re.match(r"\s*(03[0-9a-f]{2})\s*\[([0-9a-f]{4}):([0-9a-f]{4})\]", pci_type.lower())
    if match is None or f"{match.group(2)}:{match.group(3)}" in _DISPLAY_ONLY:
        return None
    return _PCI_GPU_VENDORS.get(match.group(2))


def _number_in_pci_order(gpus: list[Gpu], stack: str) -> None:
    """Give the vendor's GPUs that hwloc numbered for no library of the vendor's (no plugin for
    it; -1) the index NVML or ROCm SMI has for them: their place in PCI order among all the
    vendor's GPUs. An NVIDIA GPU named by CUDA only needs one too when another NVIDIA GPU has no
    CUDA index, since the rank's variables then name NVIDIA GPUs by NVML's numbers."""
    family = [g for g in gpus if stack in g.indexes or (stack == "NVML" and "CUDA" in g.indexes)]
    missing = [g for g in family if g.indexes.get(stack, -1) == -1]
    if stack == "NVML" and all("CUDA" in g.indexes for g in family):
        missing = [g for g in missing if stack in g.indexes]
    mixed = stack == "NVML" and any("CUDA" not in g.indexes for g in family)
    for index, gpu in enumerate(sorted(family, key=lambda g: g.busid)):
        if gpu in missing:
            gpu.indexes[stack] = index
        gpu.pci_order = gpu.pci_order or mixed


def _locality(el: ET.Element) -> tuple[frozenset[int], frozenset[int]]:
    cpuset = el.get("cpuset") or el.get("complete_cpuset")
    nodeset = el.get("nodeset") or el.get("complete_nodeset")
    return (parse_hwloc_bitmap(cpuset) if cpuset else frozenset(), parse_hwloc_bitmap(nodeset) if nodeset else frozenset())


def _walk(el: ET.Element, local: tuple | None, gpus: list[Gpu], topo: Topology) -> None:
    if el.get("type", "") not in _IO_TYPES:
        local = _locality(el)
    elif el.get("type") == "PCIDev":
        gpu = _gpu_of(el, local, topo)
        if gpu is not None:
            gpus.append(gpu)
    for child in el.findall("object"):
        _walk(child, local, gpus, topo)


def _gpu_of(pci: ET.Element, local: tuple | None, topo: Topology) -> Gpu | None:
    """The GPU a PCI device is, when one of its OS devices (at any depth below it, but not
    below another PCI device) belongs to a compute stack."""
    indexes: dict[str, int] = {}
    infos: dict[str, str] = {}

    def visit(el: ET.Element) -> None:
        for child in el.findall("object"):
            if child.get("type") == "PCIDev":
                continue  # a device behind this one (a bridge's) is its own GPU
            if child.get("type") == "OSDev":
                name = child.get("name", "")
                for pattern, stack in _STACKS:
                    match = pattern.match(name)
                    if match:
                        indexes.setdefault(stack, int(match.group(match.lastindex)))  # OpenCL: the device, not the platform
                        infos.update({i.get("name", ""): i.get("value", "") for i in child.findall("info")})
            visit(child)

    visit(pci)
    vendor = _pci_gpu_vendor(pci.get("pci_type", ""))
    if not indexes and vendor is None:
        return None
    if vendor is not None and vendor not in indexes and not (vendor == "NVML" and "CUDA" in indexes):
        indexes[vendor] = -1  # no OS device of the vendor's library (hwloc without its plugin): numbered below, in PCI order
    cpus, nodes = local if local is not None else (topo.root.cpus, frozenset(topo.node_by_os))
    model = (
        infos.get("GPUModel")
        or infos.get("CoProcModel")
        or pci.get("name", "")
        or next((i.get("value", "") for i in pci.findall("info") if i.get("name") == "PCIDevice"), "")
    )
    return Gpu(
        busid=pci.get("pci_busid", ""), indexes=indexes, cpus=frozenset(cpus) & topo.allowed_cpus, nodes=frozenset(nodes), model=model, infos=infos
    )


def visible_devices(gpus: list[Gpu], inherited: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that make exactly ``gpus`` visible to a rank, for each vendor among them.

    CUDA's and Level Zero's numbers are relative to the devices visible where hwloc looked: when
    the environment already narrows them (``inherited``: a scheduler set CUDA_VISIBLE_DEVICES=2,3
    for the job), hwloc's cuda0 is the job's first device, physical GPU 2, and that is what the
    rank's variable must name. NVML's and ROCm SMI's numbers are physical."""
    inherited = inherited or {}
    env: dict[str, str] = {}
    nvidia = [g for g in gpus if "CUDA" in g.indexes or "NVML" in g.indexes]
    if nvidia:
        if all("CUDA" in g.indexes and not g.pci_order for g in nvidia):
            env["CUDA_VISIBLE_DEVICES"] = _through(inherited.get("CUDA_VISIBLE_DEVICES"), [g.indexes["CUDA"] for g in nvidia])
        else:  # NVML numbers GPUs in PCI order: make CUDA number them the same way
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g.indexes["NVML"]) for g in nvidia)
    amd = [g for g in gpus if "RSMI" in g.indexes]
    if amd:
        env["ROCR_VISIBLE_DEVICES"] = ",".join(str(g.indexes["RSMI"]) for g in amd)
    intel = [g for g in gpus if "LevelZero" in g.indexes]
    if intel:
        env["ZE_AFFINITY_MASK"] = _through(inherited.get("ZE_AFFINITY_MASK"), [g.indexes["LevelZero"] for g in intel])
    return env


def _through(visible: str | None, indexes: list[int]) -> str:
    """``indexes`` (relative to the devices ``visible`` lets through) as entries of ``visible``."""
    entries = [e.strip() for e in visible.split(",")] if visible and visible.strip() else []
    return ",".join(entries[i] if i < len(entries) else str(i) for i in indexes)


def select_gpus(gpus: list[Gpu], text: str | None, where: str) -> list[Gpu]:
    """``--gpus``: ``all`` (every GPU hwloc found), or a comma list of GPUs by name (``cuda1``,
    ``nvml0``, ``rsmi3``, ``ze0``), by number (that of its name) or by PCI bus id. A GPU the node
    does not have is refused with the list of those it has, a GPU named twice as such."""
    if text is None or text.strip().lower() == "all":
        return list(gpus)
    have = ", ".join(f"{g.name} ({g.busid})" for g in gpus) or "none"
    chosen: list[Gpu] = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        found = None
        for gpu in gpus:
            names = {gpu.name, gpu.busid.lower(), gpu.busid.lower().removeprefix("0000:")}
            names |= {
                f"{prefix}{gpu.indexes[stack]}"
                for stack, prefix in (("CUDA", "cuda"), ("NVML", "nvml"), ("RSMI", "rsmi"), ("LevelZero", "ze"))
                if stack in gpu.indexes
            }
            if word.lower() in names or (word.isdigit() and gpu.name.endswith(word) and gpu.name[: -len(word)].isalpha()):
                found = gpu
                break
        if found is None:
            raise UsageError(f"--gpus {text}: {where} has no GPU {word!r} (GPUs: {have})")
        if found in chosen:
            raise UsageError(f"--gpus {text}: {word} names {found.name} ({found.busid}) a second time; name each GPU once")
        chosen.append(found)
    if not chosen:
        raise UsageError(f"--gpus {text!r}: name at least one GPU, or all (GPUs of {where}: {have})")
    return chosen
