"""Where the native parts built by the package (CMake, installed under pinlab/_native) live."""

from __future__ import annotations

from pathlib import Path

from pinlab.errors import UsageError

NATIVE_DIR = Path(__file__).resolve().parent / "_native"


def native_path(name: str) -> Path:
    """Path of a native executable or library shipped with pinlab (``pinlab-probe``, ...)."""
    path = NATIVE_DIR / name
    if not path.exists():
        raise UsageError(f"pinlab's native part {name!r} is missing from {NATIVE_DIR}: reinstall pinlab (make install)")
    return path


def include_dir() -> Path:
    """Directory of pinlab's C headers (``pinlab_heartbeat.h``), for ``cc -I``."""
    header = NATIVE_DIR / "include" / "pinlab_heartbeat.h"
    if not header.is_file():
        raise UsageError(f"pinlab's C header pinlab_heartbeat.h is missing from {header.parent}: reinstall pinlab (make install)")
    return header.parent
