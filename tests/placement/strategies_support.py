"""Hypothesis strategies for synthetic machines, shared by the placement property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from pinlab.topology import load_topology
from tests.conftest import with_allowed


@st.composite
def synthetic_descriptions(draw, max_pus: int = 256) -> str:
    """An hwloc synthetic string: packages, optional NUMA level and groups, caches, cores, SMT
    (sometimes with a cache between a core and its PUs), and a random OS numbering of the PUs (real machines rarely number them in tree order)."""
    levels: list[tuple[str, int]] = [("pack", draw(st.integers(1, 4)))]
    numa_at = draw(st.sampled_from(["none", "pack", "group"]))
    if numa_at == "group" or draw(st.booleans()):
        levels.append(("group", draw(st.integers(1, 3))))
    if draw(st.booleans()):
        levels.append(("l3", draw(st.integers(1, 2))))
    if draw(st.booleans()):
        levels.append(("l2", draw(st.integers(1, 4))))
    levels.append(("core", draw(st.integers(1, 4))))
    smt = draw(st.sampled_from([1, 1, 2, 4]))
    if smt > 1 and draw(st.booleans()):
        # A cache per hardware thread between the core and its PUs (CPUID leaf 0x1F parts, some
        # AMD/Hygon, QEMU guests): the PUs are not the core's children.
        levels.append(("l1d", smt))
        smt = 1
    levels.append(("pu", smt))
    total = 1
    for _, arity in levels:
        total *= arity
    if total > max_pus:
        levels[[name for name, _ in levels].index("core")] = ("core", 1)
    total = 1
    for _, arity in levels:
        total *= arity
    parts = []
    for name, arity in levels:
        text = f"{name}:{arity}"
        if name == "pu" and draw(st.booleans()):
            order = draw(st.permutations(range(total)))
            text += f"(indexes={','.join(map(str, order))})"
        parts.append(text)
        if (name == "pack" and numa_at == "pack") or (name == "group" and numa_at == "group"):
            parts.append("[numa]")
    return " ".join(parts)


@st.composite
def machines(draw, restrict: bool = True):
    """A synthetic topology, with a random non-empty subset of its CPUs allowed when restrict."""
    topo = load_topology("synthetic:" + draw(synthetic_descriptions()))
    if restrict and draw(st.booleans()):
        cpus = sorted(topo.pu_by_os)
        allowed = draw(st.sets(st.sampled_from(cpus), min_size=1))
        topo = with_allowed(topo, allowed)
    return topo
