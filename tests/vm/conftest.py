"""Running shell snippets inside the emulated NUMA machine (``tests/vm/numavm``, a QEMU guest).

The guest sees the host's root file system read-only (with a throw-away tmpfs overlay), so the
pinlab installed in this virtual environment runs inside it unchanged, on a real Linux kernel
that reports several sockets and NUMA nodes with their distances.

When tests skip and when they fail
----------------------------------
A test *skips* (with the reason) only when the VM itself cannot run here:

- ``qemu-system-x86_64`` is not on PATH (Debian package qemu-system-x86);
- ``/bin/busybox`` is missing or not statically linked (package busybox-static);
- the kernel/initramfs cache is missing and ``tests/vm/numavm --setup`` fails (no network,
  no apt lists, ...);
- the harness reports a failure (exit status 125 before the guest ran anything: QEMU would not
  start, the guest did not boot, its root file system could not be mounted).

Anything that goes wrong *inside* a guest that booted is a test failure: a command's exit status
is returned to the test, which asserts on it, and a VM timeout (exit status 124) fails the test.

Booting is slow (seconds with KVM, up to a minute under software emulation), so tests batch their
commands: :meth:`NumaVM.batch` runs many named commands in one boot, concurrently within a group,
and returns each command's stdout, stderr and exit status.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

NUMAVM = Path(__file__).resolve().parent / "numavm"
CACHE = Path(os.environ.get("NUMAVM_CACHE", "/var/tmp/pinlab-numavm"))
#: Seconds one VM may run (boot + commands) before numavm kills it (exit 124 -> test failure).
#: Each boot's commands are sized to take at most a quarter of it on a quiet host, so that a host
#: four times slower (busy with other work) still finishes them; a boot that takes longer than
#: that is reported as a warning naming it, to be split.
VM_TIMEOUT = int(os.environ.get("PINLAB_VM_TIMEOUT", "900"))
#: Seconds the guest may take to reach its init. A few seconds on a quiet host with KVM, over a
#: minute on one busy with other work: only a guest that never boots is a "cannot run here" skip.
VM_BOOT_TIMEOUT = int(os.environ.get("PINLAB_VM_BOOT_TIMEOUT", "300"))
#: QEMU's niceness: as root, ahead of the host's other work, so that the guest keeps its pace
#: (what runs inside it is checked for correctness, never for speed).
VM_NICE = os.environ.get("PINLAB_VM_NICE", "-10")
_STARTED = "@@PINLAB-VM-STARTED@@"
_RESULT = "@@PINLAB-VM-RESULT@@"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass
class VMResult:
    """What one command (or one whole guest script) printed, and its exit status."""

    stdout: str
    stderr: str
    returncode: int

    def check(self, what: str = "command") -> VMResult:
        """Fail the test unless the command succeeded; the failure shows its output."""
        if self.returncode != 0:
            pytest.fail(f"{what} failed in the VM with exit status {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")
        return self


@dataclass
class Group:
    """Commands run concurrently in one guest, after an optional ``setup`` run in the guest's main shell.

    ``setup`` runs in the script's own shell (not a subshell), so it may change what every later
    command inherits, e.g. move the shell into a cgroup with ``echo $$ > .../cgroup.procs``.
    Its output and status are recorded under the name ``<name>.setup``.
    """

    name: str
    commands: dict[str, str]
    setup: str | None = None
    parallel: bool = True


def marked_sections(text: str) -> dict[str, list[str]]:
    """The lines of a guest script's output under each ``@@name@@`` line it printed, by name."""
    sections: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        mark = re.fullmatch(r"@@(\w+)@@", line)
        if mark:
            name = mark.group(1)
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    return sections


def pinlab_exe() -> str:
    """The pinlab command of the interpreter running the tests (the guest sees the same path)."""
    candidate = Path(sys.executable).parent / "pinlab"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("pinlab")
    if found is None:
        pytest.skip("pinlab is not installed next to this Python (run `make install`)")
    return found


def _is_static(path: str) -> bool:
    """True for a statically linked ELF executable (no PT_INTERP program header), what numavm needs."""
    try:
        with open(path, "rb") as exe:
            head = exe.read(64)
            if head[:4] != b"\x7fELF":
                return False
            is64, little = head[4] == 2, head[5] == 1
            end = "<" if little else ">"
            if is64:
                (phoff,) = struct.unpack_from(end + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
            else:
                (phoff,) = struct.unpack_from(end + "I", head, 28)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
            exe.seek(phoff)
            table = exe.read(phentsize * phnum)
    except (OSError, struct.error):
        return False
    PT_INTERP = 3
    return all(struct.unpack_from(end + "I", table, i * phentsize)[0] != PT_INTERP for i in range(phnum))


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _one_line(text: str, lines: int = 4) -> str:
    """The last few meaningful lines of numavm's stderr on one line (for a skip reason)."""
    kept = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("==> ")]
    return " | ".join(kept[-lines:]) or "no message"


# Runs many pinlab command lines in one Python process, through pinlab.cli.main (what the
# `pinlab` console script calls), and prints {name: {stdout, stderr, returncode}} as JSON.
# Under software emulation every Python start costs seconds; this pays it once per condition.
_DRIVER = r"""
import contextlib, io, json, shlex, sys, traceback
from pinlab.cli import main
results = {}
for name, args in json.loads(sys.argv[1]).items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(shlex.split(args))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            rc = 1
    results[name] = {"stdout": out.getvalue(), "stderr": err.getvalue(), "returncode": rc}
json.dump(results, sys.stdout)
"""


def pinlab_many(runs: dict[str, str]) -> str:
    """A shell command running ``pinlab ARGS`` for every ``{name: ARGS}`` in one Python process.

    Parse its output with :func:`split_pinlab_many`. Each run goes through ``pinlab.cli.main``
    exactly as the console script does, in the process's own affinity mask and cgroup.
    """
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(_DRIVER)} {shlex.quote(json.dumps(runs))}"


def split_pinlab_many(result: VMResult, prefix: str = "") -> dict[str, VMResult]:
    """``{prefix + name: VMResult}`` from the output of a :func:`pinlab_many` command."""
    result.check("the pinlab driver")
    try:
        data = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"the pinlab driver printed no JSON\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    return {prefix + name: VMResult(r["stdout"], r["stderr"], r["returncode"]) for name, r in data.items()}


class NumaVM:
    """Boots throw-away guests of a given shape; one :meth:`run` or :meth:`batch` = one boot."""

    # so that test modules need not import conftest
    Group = Group
    pinlab_many = staticmethod(pinlab_many)
    split_pinlab_many = staticmethod(split_pinlab_many)

    def __init__(self) -> None:
        self._ready: str | None = None  # None: not checked yet; "" ready; else the skip reason

    # -- can it run here? ---------------------------------------------------------------------
    def _unavailable(self) -> str:
        """Why the VM cannot run here ('' when it can); prepares the kernel cache once."""
        if self._ready is not None:
            return self._ready
        reason = ""
        if shutil.which("qemu-system-x86_64") is None:
            reason = "qemu-system-x86_64 not found (install qemu-system-x86, or run `make install` as root)"
        elif not os.path.exists("/bin/busybox") or not _is_static("/bin/busybox"):
            reason = "no static /bin/busybox for the VM's init (install busybox-static)"
        elif shutil.which("cpio") is None:
            reason = "cpio not found, needed to build the VM's initramfs (install cpio)"
        elif not ((CACHE / "initrd.gz").exists() and (CACHE / "vmlinuz").exists()):
            proc = subprocess.run([str(NUMAVM), "--setup"], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                reason = (
                    f"cannot prepare the VM's kernel cache in {CACHE} (`tests/vm/numavm --setup` exit {proc.returncode}): {_one_line(proc.stderr)}"
                )
        self._ready = reason
        return reason

    def _require(self) -> None:
        reason = self._unavailable()
        if reason:
            pytest.skip(f"NUMA VM unavailable: {reason}")

    # -- one boot -----------------------------------------------------------------------------
    def run(
        self, script: str, *, nodes: int = 2, sockets: int | None = None, cpus: int = 4, timeout: int = VM_TIMEOUT, layout: tuple[str, ...] = ()
    ) -> VMResult:
        """Run a shell snippet (``/bin/sh``) in a fresh guest; return its stdout, stderr and status.

        Skips the test when the VM cannot boot; a snippet failing inside the guest is returned
        as a non-zero ``returncode`` (the caller asserts), a VM timeout fails the test.
        """
        self._require()
        # layout: more numavm options of the shape (--node-cpus, --node-mem, --dist)
        shape = ["--nodes", str(nodes), "--sockets", str(sockets or nodes), "--cpus", str(cpus), *layout]
        # The marker tells "the guest ran our snippet" apart from a harness failure (also 125).
        wrapped = f"echo {_STARTED}\n{script}"
        command = [
            str(NUMAVM),
            *shape,
            "--timeout",
            str(timeout),
            "--boot-timeout",
            str(VM_BOOT_TIMEOUT),
            "--nice",
            VM_NICE,
            "--",
            "/bin/sh",
            "-c",
            wrapped,
        ]
        began = time.monotonic()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout + 2 * VM_BOOT_TIMEOUT + 120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"numavm {' '.join(shape)} did not return within {timeout + 2 * VM_BOOT_TIMEOUT + 120} s")
        took = time.monotonic() - began
        if took > timeout / 4:
            warnings.warn(
                f"a VM boot ({' '.join(shape)}) took {took:.0f} s, over a quarter of its {timeout} s timeout: "
                "split its commands over more boots so that a busy host still finishes them",
                stacklevel=2,
            )
        started = proc.stdout.startswith(_STARTED + "\n")
        stdout = proc.stdout[len(_STARTED) + 1 :] if started else proc.stdout
        if not started:
            if proc.returncode == 124:
                pytest.fail(f"the VM ({' '.join(shape)}) timed out after {timeout} s\n{_tail(proc.stderr)}")
            if proc.returncode == 125:
                pytest.skip(f"NUMA VM ({' '.join(shape)}) could not boot here (numavm exit 125): {_one_line(proc.stderr)}")
            pytest.fail(f"the VM ({' '.join(shape)}) ran nothing (numavm exit {proc.returncode})\n{_tail(proc.stderr)}")
        return VMResult(stdout, proc.stderr, proc.returncode)

    def batch(
        self,
        groups: list[Group],
        *,
        nodes: int = 2,
        sockets: int | None = None,
        cpus: int = 4,
        timeout: int = VM_TIMEOUT,
        layout: tuple[str, ...] = (),
    ) -> dict[str, VMResult]:
        """Run named commands in one boot; return ``{name: VMResult}`` for every command (and setup).

        Groups run one after the other; the commands of a group run concurrently (the guest has
        several CPUs and each pinlab start is dominated by Python's start-up).
        """
        lines = [
            "OUT=$(mktemp -d)",
            # run NAME CMD: CMD's stdout, stderr and status into $OUT/NAME.{out,err,rc}
            'run() { n=$1; shift; /bin/sh -c "$1" >"$OUT/$n.out" 2>"$OUT/$n.err" </dev/null; echo $? >"$OUT/$n.rc"; }',
        ]
        names: list[str] = []
        for group in groups:
            if group.setup is not None:
                name = f"{group.name}.setup"
                names.append(name)
                lines.append(f'{{ {group.setup}\n}} >"$OUT/{name}.out" 2>"$OUT/{name}.err" </dev/null; echo $? >"$OUT/{name}.rc"')
            for name, command in group.commands.items():
                if not _NAME.match(name) or name in names:
                    raise ValueError(f"bad or duplicate command name {name!r}")
                names.append(name)
                lines.append(f"run {shlex.quote(name)} {shlex.quote(command)}" + (" &" if group.parallel else ""))
            lines.append("wait")
        lines.append(
            'for f in "$OUT"/*.rc; do n=$(basename "$f" .rc); '
            f'printf \'{_RESULT} %s %s %sx %sx\\n\' "$n" "$(cat "$f")" "$(base64 -w0 <"$OUT/$n.out")" "$(base64 -w0 <"$OUT/$n.err")"; done'
        )
        whole = self.run("\n".join(lines), nodes=nodes, sockets=sockets, cpus=cpus, timeout=timeout, layout=layout).check("the batch script")
        results: dict[str, VMResult] = {}
        for line in whole.stdout.splitlines():
            if line.startswith(_RESULT + " "):
                _, name, rc, out, err = line.split(" ")
                decode = lambda b: base64.b64decode(b[:-1]).decode("utf-8", "replace")  # noqa: E731
                results[name] = VMResult(decode(out), decode(err), int(rc))
        missing = [n for n in names if n not in results]
        if missing:
            pytest.fail(f"the VM returned no result for {missing}\n--- stdout\n{whole.stdout}\n--- stderr\n{whole.stderr}")
        return results


@pytest.fixture(scope="session")
def numavm() -> NumaVM:
    """The NUMA VM runner: ``numavm.run(script, nodes=, sockets=, cpus=)`` and ``numavm.batch(groups, ...)``."""
    return NumaVM()


@pytest.fixture(scope="session")
def pinlab_cmd() -> str:
    """Shell-quoted path of the pinlab command, usable inside the guest."""
    return shlex.quote(pinlab_exe())
