"""CPU and node sets in the two notations users meet.

- CPU lists as Linux, taskset and numactl write them: ``0,2,4-7`` (also ``0-7:2``, a range with
  a stride, as the kernel's cpulist parser accepts).
- hwloc bitmaps as hwloc's XML writes them: comma-separated 32-bit hex words, most significant
  first (``0x00000003``, ``0x000000ff,0xffffffff``), possibly with a leading ``0xf...f,`` for an
  infinite set.

Sets are plain ``frozenset[int]`` so that every other module can use set algebra directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pinlab.errors import UsageError

_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also accepts '²', which int() refuses
#: A range longer than this is refused before it is expanded (no machine has that many CPUs).
MAX_RANGE = 1 << 20


def parse_cpulist(text: str, what: str = "CPU list") -> list[int]:
    """Parse ``0,2,4-7`` (and ``a-b:stride``) into a list of integers, in the order written.

    Order and repetition are kept, since an explicit placement lists one CPU per thread.
    """
    text = text.strip()
    if not text:
        raise UsageError(f"empty {what}: give numbers such as 0,2,4-7")
    result: list[int] = []
    for part in text.split(","):
        part = part.strip()
        stride = 1
        part, colon, stride_text = part.partition(":")
        lo, dash, hi = part.partition("-")
        if not _DIGITS.fullmatch(lo) or (dash and not _DIGITS.fullmatch(hi)):
            raise UsageError(f"malformed {what} {text!r}: expected numbers and ranges such as 0,2,4-7")
        if colon:  # only a well-formed range is told about its stride
            if not _DIGITS.fullmatch(stride_text) or int(stride_text) == 0:
                raise UsageError(f"malformed {what} {text!r}: the stride after ':' must be a positive integer")
            stride = int(stride_text)
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise UsageError(f"malformed {what} {text!r}: range {first}-{last} goes backwards")
        if last - first > MAX_RANGE:
            raise UsageError(f"{what} {text!r}: range {first}-{last} is larger than any machine ({MAX_RANGE} numbers at most)")
        result.extend(range(first, last + 1, stride))
    return result


def format_cpulist(cpus: Iterable[int]) -> str:
    """Write a set of integers compactly, ascending, with ranges: ``{0,1,2,5}`` -> ``0-2,5``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_hwloc_bitmap(text: str) -> frozenset[int]:
    """Parse an hwloc bitmap string (``0x000000ff,0xffffffff``) into the set of bits it holds.

    An infinite set (``0xf...f,`` prefix) cannot be represented; hwloc writes one only for
    sets that are meant to be "everything", which never happens for the objects we read, so
    it is rejected rather than silently truncated.
    """
    text = text.strip()
    if text.startswith("0xf...f"):
        raise ValueError(f"infinite hwloc bitmap {text!r}")
    if not text:
        raise ValueError("empty hwloc bitmap")
    # Each comma-separated word is 32 bits; hwloc leaves a word empty when it is zero ("0xff,,0x0").
    words = [w.strip() for w in text.split(",")]
    try:
        value = int("".join(f"{int(w, 16) if w else 0:08x}" for w in words), 16)
    except ValueError:
        raise ValueError(f"malformed hwloc bitmap {text!r}") from None
    binary = bin(value)[:1:-1]  # least significant bit first
    return frozenset(i for i, bit in enumerate(binary) if bit == "1")


def format_hwloc_bitmap(bits: Iterable[int]) -> str:
    """Write a set in hwloc's bitmap notation (inverse of :func:`parse_hwloc_bitmap`)."""
    value = 0
    for bit in bits:
        value |= 1 << bit
    words = []
    while True:
        words.append(f"0x{value & 0xFFFFFFFF:08x}")
        value >>= 32
        if not value:
            break
    return ",".join(reversed(words))
