"""Where a topology comes from: this machine, an XML file, a synthetic string, or a preset.

Every source ends as hwloc XML handed to :func:`pinlab.topology.hwloc_xml.parse_xml`:
``lstopo-no-graphics`` exports this machine and expands synthetic strings, presets are XML
files shipped in the package.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import xml.parsers.expat
from pathlib import Path

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.measure import system_parts
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.model import Topology


def load_topology(source: str = "this") -> Topology:
    """Load a topology from ``this``, ``synthetic:<desc>``, a preset name or an XML file path.

    For ``this``, only the CPUs in this process's affinity mask and cgroup cpuset, and the
    NUMA nodes in its ``Mems_allowed``, are allowed for placement; the others stay in the
    tree, marked unavailable.
    """
    source = source.strip()
    if source in ("this", ""):
        return load_this()
    if source.startswith("synthetic:"):
        return load_synthetic(source[len("synthetic:") :])
    if source.startswith("preset:"):
        return load_preset(source[len("preset:") :])
    if source in preset_names():
        return load_preset(source)
    path = Path(source)
    if path.exists() or "/" in source or source.endswith(".xml"):
        return load_file(path)
    raise UsageError(
        f"unknown topology {source!r}: give 'this', a path to an hwloc XML file, "
        f"'synthetic:<hwloc synthetic string>' or a preset ({', '.join(preset_names())})"
    )


def lstopo(args: list[str], *, what: str) -> str:
    """Run hwloc's lstopo (lstopo-no-graphics where there is one) and return its standard output;
    a missing or too old hwloc, or a failure, becomes a UsageError."""
    exe = system_parts.require_lstopo(what)
    # hwloc honours HWLOC_* variables that would silently replace the machine we are asked about.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    proc = subprocess.run([exe, *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        detail = " ".join(line.strip() for line in proc.stderr.splitlines() if line.strip()) or f"exit status {proc.returncode}"
        raise UsageError(f"hwloc could not read {what}: {detail}")
    return proc.stdout


def load_this() -> Topology:
    """This machine as hwloc sees it, restricted to what this process may use."""
    xml = lstopo(["--of", "xml", "--disallowed", "--no-io", "-"], what="this machine's topology")
    return parse_xml(xml, source="this", narrow_cpus=frozenset(os.sched_getaffinity(0)), narrow_nodes=_mems_allowed())


def load_whole() -> Topology:
    """This machine's cores, hardware threads and kinds of core, not narrowed to this process's
    mask: for judging where another process's threads run (``pinlab doctor``)."""
    xml = lstopo(["--of", "xml", "--disallowed", "--no-io", "-"], what="this machine's topology")
    return parse_xml(xml, source="this")


def load_node() -> Topology:
    """This machine with its I/O devices (GPUs), restricted to the CPUs of this process's
    cgroup but not to its affinity mask: an MPI launcher may already have bound each rank to a
    part of the node, and the node is split among the ranks from the whole of what the job
    was given (pinlab.ranks)."""
    xml = lstopo(["--of", "xml", "--disallowed", "-"], what="this machine's topology")
    return parse_xml(xml, source="this", narrow_nodes=_mems_allowed())


def _mems_allowed() -> frozenset[int] | None:
    """NUMA nodes this process may allocate on (``Mems_allowed_list`` in /proc/self/status), if readable."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Mems_allowed_list:"):
                    return frozenset(parse_cpulist(line.split(":", 1)[1], what="Mems_allowed_list"))
    except (OSError, UsageError):
        pass
    return None


@functools.lru_cache(maxsize=256)
def _synthetic_xml(description: str) -> str:
    return lstopo(["-i", description, "--of", "xml", "-"], what=f"synthetic topology {description!r}")


def load_synthetic(description: str) -> Topology:
    """A topology from an hwloc synthetic description such as ``pack:2 [numa] l3:1 core:4 pu:2``."""
    description = description.strip()
    if not description:
        raise UsageError("empty synthetic topology: give a description such as 'synthetic:pack:2 [numa] l3:1 core:4 pu:2'")
    if not re.fullmatch(r"[\w\s:\[\]()=,.\-]+", description):
        raise UsageError(f"malformed synthetic topology {description!r}: use hwloc's syntax, e.g. 'pack:2 [numa] l3:1 core:4 pu:2'")
    return parse_xml(_synthetic_xml(description), source=f"synthetic:{description}")


def load_file(path: Path) -> Topology:
    """A topology from an hwloc XML file: versions 2.x and 3.x read directly, 1.x converted by hwloc."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"topology file {str(path)!r} does not exist; export one with `lstopo-no-graphics --of xml FILE`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read topology file {str(path)!r}: {exc}") from None
    tag = re.search(r"<topology\b[^>]*>", text[:4096])
    if tag is None:
        if "<topology" in text[:4096]:
            _check_well_formed(text, path)
        return parse_xml(text, source=str(path))
    version = re.search(r"""\bversion\s*=\s*["']([^"']*)["']""", tag.group(0))
    major = version.group(1).split(".")[0] if version else "1"
    if major == "1":
        # hwloc 1.x (no version attribute): converted by hwloc itself, keeping disallowed CPUs
        # and nodes as 2.x exports of pinlab's do. Only a complete, well-formed file is taken for
        # 1.x: a file cut short or damaged is said to be so, not blamed on its hwloc version.
        _check_well_formed(text, path)
        try:
            text = lstopo(["-i", str(path), "--if", "xml", "--of", "xml", "--disallowed", "-"], what=f"hwloc 1.x file {str(path)!r}")
        except UsageError as exc:  # hwloc 3 reads no 1.x file: the conversion needs hwloc 2.x
            raise UsageError(f"{exc}; converting an hwloc 1.x file needs hwloc 2.x's lstopo-no-graphics") from None
    elif major not in SUPPORTED_XML_MAJORS:
        raise UsageError(
            f"{path}: hwloc XML version {version.group(1)}, which pinlab cannot read (it reads versions 1.x, 2.x and 3.x); "
            "export it again with an hwloc that writes 2.x files (hwloc 3: `lstopo --export-xml-flags v2 --of xml FILE`)"
        )
    return parse_xml(text, source=str(path))


# hwloc XML versions read directly: 3.x files differ from 2.x in what pinlab does not read
# (an id per object, topology-wide <info> moved under <topology>, I/O device attributes).
SUPPORTED_XML_MAJORS = ("2", "3")


def _check_well_formed(text: str, path: Path) -> None:
    """UsageError naming the line and column where ``text`` stops being well-formed XML."""
    parser = xml.parsers.expat.ParserCreate()
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as exc:
        raise UsageError(
            f"{path}: not valid XML ({xml.parsers.expat.ErrorString(exc.code)}: line {exc.lineno}, column {exc.offset}); "
            "the file may be cut short or damaged: export it again with `lstopo-no-graphics --of xml FILE`"
        ) from None


def _preset_dir() -> Path:
    # The presets are plain files installed with the package (cheaper than importlib.resources).
    return Path(__file__).resolve().parent / "presets"


@functools.lru_cache(maxsize=1)
def preset_names() -> tuple[str, ...]:
    """Names of the bundled machine descriptions, sorted."""
    return tuple(sorted(p.name[:-4] for p in _preset_dir().iterdir() if p.name.endswith(".xml")))


def load_preset(name: str) -> Topology:
    """One of the bundled machines (``clovertown``, ``nehalem-ep``, ...)."""
    if name not in preset_names():
        raise UsageError(f"unknown preset {name!r}: choose one of {', '.join(preset_names())}")
    text = (_preset_dir() / f"{name}.xml").read_text(encoding="utf-8")
    return parse_xml(text, source=f"preset:{name}")
