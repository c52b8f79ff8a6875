"""Properties every strategy keeps on any machine (hypothesis over synthetic topologies)."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.placement import make_placement
from pinlab.placement.strategies import STRATEGIES, UNPINNED
from pinlab.placement.units import units_under
from tests.placement.strategies_support import machines

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PINNING = [s for s in STRATEGIES if s not in UNPINNED]


def n_units(topo, smt):
    return len(units_under(topo, topo.root, smt))


def core_id(topo, cpu):
    return id(topo.core_of(topo.pu(cpu)))


@SETTINGS
@given(topo=machines(), strategy=st.sampled_from(PINNING), smt=st.booleans(), data=st.data())
def test_only_allowed_cpus_no_cpu_or_core_twice(topo, strategy, smt, data):
    n = data.draw(st.integers(1, n_units(topo, smt)))
    if strategy == "intra-socket":
        n = min(n, max(len(units_under(topo, p, smt)) for p in (topo.packages or [topo.root])))
    cpus = make_placement(topo, strategy=strategy, threads=n, smt=smt, seed=data.draw(st.integers(0, 2**32 - 1))).cpus
    assert len(cpus) == n
    assert set(cpus) <= topo.allowed_cpus
    assert len(set(cpus)) == n
    if not smt:
        assert len({core_id(topo, c) for c in cpus}) == n


@SETTINGS
@given(topo=machines(), strategy=st.sampled_from(PINNING), smt=st.booleans(), extra=st.integers(1, 9))
def test_oversubscription_wraps_round_robin(topo, strategy, smt, extra):
    units = n_units(topo, smt)
    if strategy == "intra-socket":
        units = max(len(units_under(topo, p, smt)) for p in (topo.packages or [topo.root]))
    n = units + extra
    cpus = make_placement(topo, strategy=strategy, threads=n, smt=smt, oversubscribe=True, seed=7).cpus
    assert len(cpus) == n and set(cpus) <= topo.allowed_cpus
    assert all(cpus[i] == cpus[i % units] for i in range(n))
    assert max(Counter(cpus).values()) - min(Counter(cpus).values()) <= 1


def domains_of(topo, kind, cpus):
    return [topo.pu(c).ancestor(kind) for c in cpus]


def contiguous_blocks(sequence):
    """The domains in order of first use, asserting each one's threads form a single block."""
    blocks = [d for i, d in enumerate(sequence) if i == 0 or d is not sequence[i - 1]]
    assert len(blocks) == len(set(map(id, blocks))), "a domain's threads are split in two runs"
    return blocks


@SETTINGS
@given(topo=machines(), smt=st.booleans(), data=st.data())
def test_compact_fills_each_domain_before_moving_on(topo, smt, data):
    n = data.draw(st.integers(1, n_units(topo, smt)))
    cpus = make_placement(topo, strategy="compact", threads=n, smt=smt).cpus
    for kind in ["Package", "Group0", *topo.data_caches(), "Core"]:
        if not topo.objects(kind) or (kind == "Core" and not smt):
            continue
        sequence = domains_of(topo, kind, cpus)
        # Each domain's threads form one contiguous block...
        blocks = contiguous_blocks(sequence)
        # ...and every block but the last uses all the units of its domain.
        for domain in blocks[:-1]:
            assert sum(1 for d in sequence if d is domain) == len(units_under(topo, domain, smt))


@SETTINGS
@given(topo=machines(restrict=False), smt=st.booleans(), data=st.data())
def test_scatter_is_balanced_across_packages_and_caches(topo, smt, data):
    n = data.draw(st.integers(1, n_units(topo, smt)))
    cpus = make_placement(topo, strategy="scatter", threads=n, smt=smt).cpus
    # On a symmetric, fully allowed machine, siblings at every level differ by at most one thread.
    for obj in topo.root.walk():
        if len(obj.children) > 1:
            counts = [sum(1 for c in cpus if c in child.cpus) for child in obj.children]
            assert max(counts) - min(counts) <= 1, (obj, counts)
    packages = topo.packages
    if len(packages) > 1:
        per_package = [sum(1 for c in cpus if c in p.cpus) for p in packages]
        assert max(per_package) - min(per_package) <= 1
    # Consecutive threads stay close: each package's threads are one contiguous run.
    contiguous_blocks(domains_of(topo, "Package", cpus))


@SETTINGS
@given(topo=machines(restrict=True), smt=st.booleans(), data=st.data())
def test_scatter_shares_threads_by_capacity_at_every_level(topo, smt, data):
    """hwloc_distrib's rule with holes (disallowed CPUs make siblings unequal): below every
    object, each child gets its share of that object's threads by the units it has, within one,
    and children of equal capacity differ by at most one."""
    n = data.draw(st.integers(1, n_units(topo, smt)))
    cpus = make_placement(topo, strategy="scatter", threads=n, smt=smt).cpus
    for obj in topo.root.walk():
        children = [c for c in obj.children if units_under(topo, c, smt)]
        if len(children) < 2:
            continue
        below = sum(1 for c in cpus if c in obj.cpus)
        capacities = [len(units_under(topo, c, smt)) for c in children]
        counts = [sum(1 for c in cpus if c in child.cpus) for child in children]
        for count, capacity in zip(counts, capacities):
            assert abs(count - below * capacity / sum(capacities)) < 1, (obj, counts, capacities)
        for a in range(len(children)):
            for b in range(len(children)):
                if capacities[a] == capacities[b]:
                    assert abs(counts[a] - counts[b]) <= 1, (obj, counts, capacities)


@SETTINGS
@given(topo=machines(), smt=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_random_is_a_permutation_that_depends_only_on_the_seed(topo, smt, seed):
    units = sorted(u.os_index for u in units_under(topo, topo.root, smt))
    first = make_placement(topo, strategy="random", threads=len(units), smt=smt, seed=seed)
    make_placement(topo, strategy="random", threads=len(units), smt=smt, seed=seed + 1)  # other draws in between
    again = make_placement(topo, strategy="random", threads=len(units), smt=smt, seed=seed)
    assert sorted(first.cpus) == units
    assert first.cpus == again.cpus and first.seed == seed
    # A prefix of threads gets a prefix of the same permutation.
    assert make_placement(topo, strategy="random", threads=1, smt=smt, seed=seed).cpus == first.cpus[:1]


@SETTINGS
@given(topo=machines(), smt=st.booleans(), data=st.data())
def test_intra_socket_stays_in_one_package_inter_socket_alternates(topo, smt, data):
    packages = [p for p in topo.packages if units_under(topo, p, smt)]
    biggest = max(len(units_under(topo, p, smt)) for p in packages)
    n = data.draw(st.integers(1, biggest))
    intra = make_placement(topo, strategy="intra-socket", threads=n, smt=smt).cpus
    assert len({id(d) for d in domains_of(topo, "Package", intra)}) == 1
    m = data.draw(st.integers(1, n_units(topo, smt)))
    inter = make_placement(topo, strategy="inter-socket", threads=m, smt=smt).cpus
    used = domains_of(topo, "Package", inter)
    k = min(len(packages), m)
    assert len({id(d) for d in used[:k]}) == k  # the first threads each get a package of their own


@given(capacities=st.lists(st.integers(0, 12), min_size=1, max_size=12), data=st.data())
def test_share_follows_capacity(capacities, data):
    from pinlab.placement.units import share

    n = data.draw(st.integers(0, sum(capacities)))
    counts = share(n, capacities)
    assert sum(counts) == n
    total = sum(capacities)
    for count, capacity in zip(counts, capacities):
        assert 0 <= count <= capacity
        assert total == 0 or abs(count - n * capacity / total) < 1
    for a, ca in enumerate(counts):
        for b, cb in enumerate(counts):
            if capacities[a] == capacities[b]:
                assert abs(ca - cb) <= 1
    if n and capacities[0] and len(set(capacities)) == 1:
        assert counts[0] == max(counts)  # the first child gets an extra thread first
