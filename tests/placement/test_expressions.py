"""CPU lists and likwid-style domain expressions."""
import pytest

from pinlab.errors import UsageError
from pinlab.placement import make_placement
from pinlab.placement.expressions import resolve
from pinlab.topology import load_topology
from tests.conftest import with_allowed


@pytest.fixture(scope="module")
def x7560():
    return load_topology("x7560-4x8")


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("0,32,4-5", [0, 32, 4, 5]),
        ("S1:0-3", [1, 5, 9, 13]),  # first four cores of socket 1
        ("S1:8-9", [33, 37]),  # past the cores come the hardware-thread siblings, as in likwid
        ("M0:0-1@M1:0-1", [0, 4, 1, 5]),
        ("L3_2:0-3", [2, 6, 10, 14]),
        ("C3:0", [3]),
        ("N:0-3", [0, 4, 8, 12]),
        ("E:N:4:1:2", [0, 8, 16, 24]),
        ("E:S0:4:2:4", [0, 4, 16, 20]),
        ("E:S0:2", [0, 4]),
    ],
)
def test_expressions(x7560, expression, expected):
    assert resolve(x7560, expression) == expected


def test_whole_domain_is_one_pu_per_core_unless_smt(x7560):
    assert resolve(x7560, "S0") == list(range(0, 32, 4))
    assert resolve(x7560, "S0", smt=True) == list(range(0, 32, 4)) + list(range(32, 64, 4))


def test_die_and_group_domains():
    epyc = load_topology("epyc-7763-2s")
    assert resolve(epyc, "G1:0-1") == [16, 17]
    assert resolve(epyc, "M5:0") == [80]
    with pytest.raises(UsageError, match="no Die objects"):
        resolve(epyc, "D0")


def test_domain_lists_skip_cpus_that_are_not_allowed(x7560):
    narrowed = with_allowed(x7560, [1, 9, 13, 33])
    assert resolve(narrowed, "S1:0-2") == [1, 9, 13]
    with pytest.raises(UsageError, match="index 4 is out of range, S1 has 4 allowed CPUs"):
        resolve(narrowed, "S1:4")
    with pytest.raises(UsageError, match="CPU 5 is not allowed"):
        resolve(narrowed, "5")
    for expression in ("S0", "S0:0", "E:S0:1", "M2:0-1"):
        with pytest.raises(UsageError, match=r"domain (S0|M2) has no CPU this process may use \(allowed CPUs: 1,9,13,33\)"):
            resolve(narrowed, expression)


@pytest.mark.parametrize(
    "expression, message",
    [
        ("X0:1", "unknown domain 'X0'"),
        ("S9:0", "domain S9 does not exist: this topology has 4"),
        ("S0:0-99", "out of range"),
        ("S0:a", "malformed index list"),
        ("E:S0", "malformed expression"),
        ("E:S0:0", "must be at least 1"),
        ("E:S0:99", "needs more CPUs than S0 has"),
        ("L9_0", "no level-9 cache"),
        ("64", "CPU 64 does not exist"),
        ("1-", "malformed CPU list"),
        ("", "empty CPU list"),
    ],
)
def test_bad_expressions(x7560, expression, message):
    with pytest.raises(UsageError, match=message):
        resolve(x7560, expression)


def test_explicit_placement_thread_count_and_duplicates(x7560):
    assert make_placement(x7560, cpus="S0:0-3", threads=2).cpus == [0, 4]
    assert make_placement(x7560, cpus="0,4", threads=5, oversubscribe=True).cpus == [0, 4, 0, 4, 0]
    with pytest.raises(UsageError, match="selects only 2 CPUs"):
        make_placement(x7560, cpus="0,4", threads=3)
    with pytest.raises(UsageError, match="CPU 0 is selected twice"):
        make_placement(x7560, cpus="0,0")
    assert make_placement(x7560, cpus="0,0", oversubscribe=True).cpus == [0, 0]
    with pytest.raises(UsageError, match="not both"):
        make_placement(x7560, strategy="compact", cpus="0")
