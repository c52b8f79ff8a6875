"""A controlled environment for measurements, as the variability study ([mazouz2011variability]) demands:
no address-space randomisation, an environment of constant size, and a chosen page size.
"""

from __future__ import annotations

import os

from pinlab.errors import UsageError
from pinlab.measure.linux import thp_mode

ADDR_NO_RANDOMIZE = 0x0040000
PR_SET_THP_DISABLE = 41
#: Total size, in bytes, of the environment block a --clean-env program receives.
CLEAN_ENV_SIZE = 4096
_PAD = "PINLAB_ENV_PAD"
#: Variables a program needs to run as the user expects; everything else is dropped by --clean-env.
KEEP = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR", "TZ", "LD_LIBRARY_PATH", "LD_PRELOAD", "PWD")
KEEP_PREFIXES = ("LC_", "OMP_", "KMP_", "GOMP_", "PINLAB_", "GLIBC_TUNABLES")


def clean_environment(env: dict[str, str]) -> dict[str, str]:
    """Only the variables a program needs, padded so the environment block always has the same
    size: the stack then starts at the same address run after run (with --no-aslr)."""
    kept = {k: v for k, v in env.items() if k in KEEP or k.startswith(KEEP_PREFIXES)}
    kept.pop(_PAD, None)
    return pad_environment(kept)


def pad_environment(env: dict[str, str], size: int = CLEAN_ENV_SIZE) -> dict[str, str]:
    """Add a padding variable so that the environment block (``NAME=value\\0`` each) is ``size`` bytes."""
    used = sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())
    room = size - used - len(_PAD) - 2
    if room < 0:
        raise UsageError(f"the cleaned environment needs {used} bytes, more than {size}: unset some variables")
    return {**env, _PAD: "x" * room}


def thp_environment(choice: str | None) -> dict[str, str]:
    """Variables that make --thp always work where the system only gives huge pages on request.

    With the system in ``madvise`` mode, glibc's malloc asks for huge pages itself when its
    tunable ``glibc.malloc.hugetlb=1`` is set; in ``never`` mode nothing a process does helps.
    """
    if choice != "always":
        return {}
    mode = thp_mode()
    if mode == "never":
        raise UsageError(
            "--thp always: transparent huge pages are disabled on this machine (/sys/kernel/mm/transparent_hugepage/enabled is 'never'); as root: echo madvise > that file"
        )
    if mode == "madvise":
        tunables = os.environ.get("GLIBC_TUNABLES", "")
        return {"GLIBC_TUNABLES": ":".join(t for t in (tunables, "glibc.malloc.hugetlb=1") if t)}
    return {}
