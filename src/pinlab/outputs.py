"""Output files checked before the work that fills them, and pinlab's JSON files read back.

A command that measures for seconds (calibrate, trace) or prints a table before drawing must
not find out at the end that its output cannot be written: ``/proc`` and read-only mounts pass
``os.access`` for root, so the only sound check is to create a file where the output will go.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pinlab.errors import UsageError


def check_writable(path: str | Path, what: str) -> None:
    """Raise a one-line UsageError unless a file can be created at ``path``'s place.

    ``what`` names the output in the message ("picture", "the graph"). Nothing is left behind:
    the probe is a temporary file in the same directory, removed at once.
    """
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"cannot write {what} {str(target)!r}: it is a directory; give a file name")
    parent = target.resolve().parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {what} {str(target)!r}: its directory does not exist; create it first (mkdir -p {target.parent})")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".pinlab-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write {what} {str(target)!r}: {exc.strerror or exc}; give a path in a directory you can write to") from None


#: Picture formats by file suffix: every picture pinlab draws is one of these.
PICTURE_FORMATS = {".svg": "svg", ".png": "png"}


def check_picture(path: str | Path) -> str:
    """The picture format ("svg" or "png") of ``path``, once a file can be written there.

    Every command that draws (place, ps, graph show, calibrate, autopin-report) checks its
    picture path here before any work, so they all refuse the same paths with the same words.
    """
    fmt = PICTURE_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"picture file {str(path)!r} must end in .svg or .png")
    check_writable(path, "picture")
    return fmt


def check_writable_directory(directory: str, option: str) -> None:
    """Fail now, in one line, if files cannot be written into ``directory`` (made if missing).

    Directories made for the check are removed again: the report makes them when it writes, and
    a report that fails before then (a damaged database, an unknown study) leaves nothing behind.
    """
    made = []
    try:
        path = os.path.abspath(directory)
        missing = []
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for path in reversed(missing):
            os.mkdir(path)
            made.append(path)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".pinlab-check-"):
            pass
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"cannot write {option} {directory}: a part of that path is a file, not a directory; give a directory path") from None
    except OSError as exc:
        raise UsageError(f"cannot write {option} {directory}: {exc.strerror or exc}; give a directory you can write to") from None
    finally:
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                pass


def read_json_file(path: str, what: str, hint: str) -> Any:
    """The JSON in the file ``path``, or a one-line UsageError naming ``what`` it should be (a
    "plan file", a "run record") and, for a file that is not JSON, ``hint``: how to write one."""
    try:
        with open(path, encoding="utf-8") as source:
            return json.load(source)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path!r}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what} {path!r} is not valid JSON ({exc}); {hint}") from None
