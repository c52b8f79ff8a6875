"""What tests/memory/mem_check.c must report on a machine of N NUMA nodes (shared by the test on
this machine and the ones in the emulated NUMA machine)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "mem_check.c"


def build(pinlab: str, out: Path, source: Path = SOURCE) -> Path:
    """mem_check (or another program of this directory) compiled with the flags pinlab prints for
    the memory API (which checks them too)."""
    cflags = subprocess.run([pinlab, "cflags", "--mem"], capture_output=True, text=True, check=True).stdout.split()
    ldflags = subprocess.run([pinlab, "ldflags", "--mem"], capture_output=True, text=True, check=True).stdout.split()
    # _FORTIFY_SOURCE as Ubuntu's and Fedora's compilers set it by default: glibc then marks calls
    # whose result must be used, and pinlab's headers must build there with -Werror too
    fortify = ["-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=2"]
    subprocess.run(["cc", "-O2", *fortify, "-Wall", "-Wextra", "-Werror", "-pthread", *cflags, str(source), "-o", str(out), *ldflags], check=True)
    return out


def parse(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def only(checks: list[dict], name: str) -> list[dict]:
    found = [c for c in checks if c["check"] == name]
    assert found, f"mem_check printed no {name!r} check"
    return found


def pages(where: dict) -> dict[int, int]:
    return {int(node): count for node, count in where.items()}


def assert_as_promised(checks: list[dict], nodes: int) -> None:
    """Every policy, migration and next touch placed the pages where the API says, contents kept."""
    assert only(checks, "machine")[0]["nodes"] == nodes
    for check in only(checks, "bind"):
        assert check["rc"] == 0 and pages(check["where"]) == {check["node"]: 1024}, check
    spread = pages(only(checks, "interleave")[0]["where"])
    assert sorted(spread) == list(range(nodes)) and max(spread.values()) - min(spread.values()) <= 1, spread
    for name in ("local", "first-touch"):
        for check in only(checks, name):
            assert check["rc"] == 0 and pages(check["where"]) == {check["node"]: 1024}, check
    for check in only(checks, "first-touch-untouched"):
        assert check["where"] == {} and check["absent"] == 1024, check
    migrations = only(checks, "migrate")
    assert len(migrations) == nodes
    for check in migrations:
        assert check["rc"] == 0 and check["same"] and pages(check["where"]) == {check["node"]: 4096}, check
    registered = only(checks, "register-migrate")[0]
    assert registered["register_rc"] == 0 and pages(registered["where"]) == {nodes - 1: 512}, registered
    assert only(checks, "register-migrate-rc")[0]["rc"] == 0

    shared = only(checks, "next-touch-page-shared")[0]
    assert shared["arm_rc"] == 0 and shared["same"] and shared["pending_armed"] == shared["pages"] and shared["pending_after"] == 0
    assert sum(pages(shared["where"]).values()) == shared["pages"] and set(pages(shared["where"])) <= set(range(nodes))
    disjoint = only(checks, "next-touch-page-disjoint")[0]
    assert disjoint["same"] and disjoint["pending_after"] == 0
    owners = only(checks, "next-touch-page-disjoint-owners")[0]
    assert owners["wrong"] == 0, f"pages not on the node of the thread that touched them: {owners}"
    assert owners["failed"] == 0 and owners["moved"] == shared["pages"] + disjoint["pages"], owners
    for node_check in only(checks, "next-touch-region"):
        assert node_check["same"] and pages(node_check["where"]) == {node_check["toucher_node"]: 2048}, node_check
        assert node_check["failed_so_far"] == 0, node_check

    untouched = only(checks, "next-touch-untouched")
    assert len(untouched) == 2 * nodes
    for check in untouched:
        assert check["arm_rc"] == 0 and pages(check["where"]) == {check["toucher_node"]: 256}, check
    pending = only(checks, "pending-into-region")[0]
    assert pending == {"check": "pending-into-region", "rc": 0, "answer": 8, "after": 7}, "the answer's own page was moved by writing it"

    calls = only(checks, "syscalls")[0]
    assert calls["wrote"] == calls["got"] == calls["wrote2"] == calls["got2"] == 3 * 4096, calls
    assert calls["same_out"] and calls["same_in"], calls
    assert calls["pending"] == calls["pages"] - 4, "the read into pages 10-12 and the touch of page 13 moved exactly those"

    moved = only(checks, "attach-move-thread")[0]
    assert moved["attach_rc"] == 0 and moved["attached_mib"] == 4 and moved["move_rc"] == 0
    assert moved["cpu"] == moved["target_cpu"] and moved["pages_on_target_node"] == moved["pages"], moved

    expected = {
        "alloc-size-0": -1,
        "alloc-bad-policy": -1,
        "alloc-bind-no-nodes": -1,
        "alloc-missing-node": -2,
        "alloc-first-touch-nodes": -1,
        "alloc-local-nodes": -1,
        "register-unaligned": -3,
        "register-unmapped": -4,
        "register-overlap": -6,
        "migrate-unregistered": -5,
        "migrate-missing-node": -2,
        "attach-no-thread": -11,
        "free-unregistered": -5,
        "where-unaligned": -3,
        "where-unmapped": -4,
        "size-unregistered": -5,
        "next-touch-bad-granularity": -1,
        "free-memory-missing-node": -2,
    }
    assert {c["what"]: c["rc"] for c in only(checks, "error")} == expected
    assert "is not page-aligned" in only(checks, "error-message")[0]["message"]

    free = only(checks, "free-memory")[0]
    assert free["rc"] == 0 and 0 < free["free"] <= free["total"]
    costs = only(checks, "costs")[0]
    assert costs["rc"] == costs["local_rc"] == costs["migrate_rc"] == 0, costs
    assert costs["latency_ns"] > 1 and costs["read_mb_s"] > 10 and costs["write_mb_s"] > 10 and costs["local_latency_ns"] > 1
    assert (costs["migrate_1g_s"] > 0) == (nodes > 1), "moving to another node costs time; to the same node nothing"
