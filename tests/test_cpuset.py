import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinlab.cpuset import format_cpulist, format_hwloc_bitmap, parse_cpulist, parse_hwloc_bitmap
from pinlab.errors import UsageError


def test_cpulist_keeps_order_and_expands_ranges_and_strides():
    assert parse_cpulist("4,0,2-3,8-12:2") == [4, 0, 2, 3, 8, 10, 12]


@pytest.mark.parametrize("bad", ["", "a", "1-", "3-1", "1,,2", "0-4:0", "0-4:x", "-1"])
def test_cpulist_rejects_malformed_input_with_a_usage_error(bad):
    with pytest.raises(UsageError):
        parse_cpulist(bad)


@given(st.sets(st.integers(0, 5000), max_size=300))
def test_cpulist_format_parse_round_trip(cpus):
    if cpus:
        assert sorted(parse_cpulist(format_cpulist(cpus))) == sorted(cpus)
    else:
        assert format_cpulist(cpus) == ""


@given(st.sets(st.integers(0, 5000), min_size=1, max_size=300))
def test_hwloc_bitmap_round_trip(bits):
    assert parse_hwloc_bitmap(format_hwloc_bitmap(bits)) == bits


def test_hwloc_bitmap_as_hwloc_writes_it():
    # Words are 32 bits, most significant first; an empty word means zero (hwloc writes "0xffffffff,,0x0").
    assert parse_hwloc_bitmap("0x00000003") == {0, 1}
    assert parse_hwloc_bitmap("0x00000001,0x00000000") == {32}
    assert parse_hwloc_bitmap("0xffffffff,,0x0") == set(range(64, 96))
    with pytest.raises(ValueError):
        parse_hwloc_bitmap("0xf...f,0x1")
