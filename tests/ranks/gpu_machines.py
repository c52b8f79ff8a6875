"""GPU nodes built for the tests: hwloc's XML of a synthetic machine with GPUs added where real
nodes attach them (under a package, a NUMA node's group, or the machine), in hwloc 2's I/O
shape: Bridge > PCIDev (bus id) > OSDev per compute stack (cudaN, nvmlN, rsmiN, zeN,
openclNdM) and display devices (cardN) that must not count.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

STACK_OSDEVS = {
    "nvidia": lambda i: [
        ("cuda%d" % i, "CUDA", "5"),
        ("nvml%d" % i, "NVML", "1"),
        ("opencl0d%d" % i, "OpenCL", "5"),
        ("card%d" % (i + 1), None, "1"),
    ],
    "nvidia-nvml": lambda i: [("nvml%d" % i, "NVML", "1")],
    "nvidia-cuda": lambda i: [("cuda%d" % i, "CUDA", "5")],  # hwloc with the CUDA plugin but not NVML's
    "amd": lambda i: [("rsmi%d" % i, "RSMI", "1"), ("opencl0d%d" % i, "OpenCL", "5"), ("card%d" % (i + 1), None, "1")],
    "intel": lambda i: [("ze%d" % i, "LevelZero", "5"), ("opencl0d%d" % i, "OpenCL", "5")],
    "display": lambda i: [("card0", None, "1")],  # a BMC's VGA: no compute stack
    "nvidia-bare": lambda i: [("card%d" % (i + 1), None, "1")],  # hwloc without the CUDA/NVML plugins: a 3D controller of NVIDIA's
}


PCI_TYPES = {
    "nvidia": "0302 [10de:20b0] [10de:134f] a1",
    "nvidia-nvml": "0302 [10de:20b0] [10de:134f] a1",
    "nvidia-cuda": "0302 [10de:20b0] [10de:134f] a1",
    "nvidia-bare": "0302 [10de:2330] [10de:16c1] a1",
    "amd": "0380 [1002:740c] [1002:0b0c] 01",
    "intel": "0380 [8086:0bd5] [8086:0000] 2f",
    "display": "0300 [1a03:2000] [1a03:2000] 41",
}


def synthetic_xml(description: str) -> str:
    return subprocess.run(["lstopo-no-graphics", "-i", description, "--of", "xml", "-"], capture_output=True, text=True, check=True).stdout


def add_gpus(xml: str, gpus: list[tuple[str, int, str]], *, under: str = "Package") -> str:
    """``xml`` with GPUs added: each ``(vendor, logical index of the object of type `under` it
    attaches to (-1: the machine), bus)`` in order, the stack indexes counting per vendor."""
    root = ET.fromstring(xml)
    machine = root.find("object")
    holders = [el for el in machine.iter("object") if el.get("type") == under] if under != "Machine" else [machine]
    gp = 100000
    counters: dict[str, int] = {}
    for vendor, where, bus in gpus:
        holder = machine if where < 0 else holders[where]
        index = counters.get(vendor, 0)
        counters[vendor] = index + 1
        gp += 1
        bridge = ET.SubElement(
            holder,
            "object",
            {"type": "Bridge", "gp_index": str(gp), "bridge_type": "0-1", "depth": "0", "bridge_pci": f"0000:[{bus[5:7]}-{bus[5:7]}]"},
        )
        gp += 1
        pci = ET.SubElement(
            bridge, "object", {"type": "PCIDev", "gp_index": str(gp), "pci_busid": bus, "pci_type": PCI_TYPES[vendor], "pci_link_speed": "0.000000"}
        )
        ET.SubElement(pci, "info", {"name": "PCIVendor", "value": vendor})
        for name, subtype, osdev_type in STACK_OSDEVS[vendor](index):
            gp += 1
            attrs = {"type": "OSDev", "gp_index": str(gp), "name": name, "osdev_type": osdev_type}
            if subtype:
                attrs["subtype"] = subtype
            osdev = ET.SubElement(pci, "object", attrs)
            ET.SubElement(osdev, "info", {"name": "GPUModel", "value": f"{vendor} test GPU"})
    return ET.tostring(root, encoding="unicode")


def write(tmp_path: Path, name: str, xml: str) -> str:
    path = tmp_path / f"{name}.xml"
    path.write_text(xml)
    return str(path)
