"""scatter is hwloc_distrib: checked against hwloc's own ``hwloc-distrib`` on irregular trees.

Real machines are irregular where hwloc groups packages by distance (a Group of three packages
beside a lone one, on 4-socket servers whose links are not all equal), on cgroup-restricted
machines, and on hybrid processors (clusters of 4 E-cores beside single P-cores). hwloc's
synthetic descriptions are regular, so the trees are written here as hwloc XML: nested lists,
a number being a package of that many cores (one PU each, numbered in tree order, so that
hwloc's choice of a set's first PU and pinlab's tree order agree).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.placement import make_placement
from pinlab.topology import load_topology

needs_distrib = pytest.mark.skipif(shutil.which("hwloc-distrib") is None, reason="hwloc-distrib is not installed (make install installs hwloc)")


def machine_xml(shape: list) -> str:
    """hwloc 2 XML of ``shape``: a list is a Group of its items, a number a Package of that many cores."""
    next_pu = [0]
    next_os = {"Package": 0, "Core": 0, "Group": 0}

    def mask(cpus: range) -> str:
        """The set attributes hwloc wants on every object (it crashes on XML without them)."""
        value = hex(sum(1 << c for c in cpus))
        return f'{value}" complete_cpuset="{value}" nodeset="0x1" complete_nodeset="0x1'

    def build(item) -> tuple[str, range]:
        if isinstance(item, int):
            first = next_pu[0]
            cores = []
            for _ in range(item):
                pu = next_pu[0]
                next_pu[0] += 1
                core_os = next_os["Core"]
                next_os["Core"] += 1
                cores.append(
                    f'<object type="Core" os_index="{core_os}" cpuset="{mask(range(pu, pu + 1))}">'
                    f'<object type="PU" os_index="{pu}" cpuset="{mask(range(pu, pu + 1))}"/></object>'
                )
            cpus = range(first, next_pu[0])
            package_os = next_os["Package"]
            next_os["Package"] += 1
            return f'<object type="Package" os_index="{package_os}" cpuset="{mask(cpus)}">{"".join(cores)}</object>', cpus
        first = next_pu[0]
        inner = "".join(build(child)[0] for child in item)
        cpus = range(first, next_pu[0])
        return f'<object type="Group" cpuset="{mask(cpus)}">{inner}</object>', cpus

    inner = "".join(build(item)[0] for item in shape)
    full = hex((1 << next_pu[0]) - 1)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">\n'
        f'<object type="Machine" os_index="0" cpuset="{full}" complete_cpuset="{full}" allowed_cpuset="{full}" nodeset="0x1" '
        f'complete_nodeset="0x1" allowed_nodeset="0x1">'
        f'<object type="NUMANode" os_index="0" cpuset="{full}" complete_cpuset="{full}" nodeset="0x1" complete_nodeset="0x1" '
        f'local_memory="1073741824"/>{inner}</object>\n</topology>\n'
    )


def hwloc_distrib(path: str, n: int) -> list[int]:
    out = subprocess.run(["hwloc-distrib", "--single", "-i", path, "--if", "xml", str(n)], capture_output=True, text=True, check=True).stdout
    # hwloc's bitmap strings: 32-bit words, most significant first, separated by commas
    return [int("".join(word.strip()[2:].rjust(8, "0") for word in line.split(",")), 16).bit_length() - 1 for line in out.split()]


def scatter(path: str, n: int) -> list[int]:
    return make_placement(load_topology(path), strategy="scatter", threads=n).cpus


def per_package(path: str, cpus: list[int]) -> list[int]:
    return [sum(1 for c in cpus if c in p.cpus) for p in load_topology(path).packages]


@needs_distrib
def test_a_group_of_three_packages_beside_a_lone_one_gets_one_thread_per_package(tmp_path):
    """The issue's case: equal shares per child gave the packages 0, 1, 1, 2 threads."""
    path = tmp_path / "m.xml"
    path.write_text(machine_xml([[4, 4, 4], 4]))
    assert hwloc_distrib(str(path), 4) == scatter(str(path), 4) == [0, 4, 8, 12]
    assert per_package(str(path), scatter(str(path), 4)) == [1, 1, 1, 1]
    for n in range(1, 17):
        assert scatter(str(path), n) == hwloc_distrib(str(path), n), n


package_sizes = st.integers(1, 4)
shapes = st.lists(
    st.one_of(
        package_sizes,
        st.lists(package_sizes, min_size=1, max_size=3),
        st.lists(st.one_of(package_sizes, st.lists(package_sizes, min_size=1, max_size=2)), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=4,
)


@needs_distrib
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes, data=st.data())
def test_scatter_places_threads_where_hwloc_distrib_does(tmp_path, shape, data):
    path = tmp_path / "m.xml"
    path.write_text(machine_xml(shape))
    total = len(load_topology(str(path)).pus)
    n = data.draw(st.integers(1, total))
    assert scatter(str(path), n) == hwloc_distrib(str(path), n), (shape, n)
