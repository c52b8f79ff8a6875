"""The checks that compare the threads with the machine: NUMA nodes (where the memory is),
huge pages, cores shared by hardware threads, and kinds of core (P- and E-cores).

Each needs what this machine is made of: the node of each CPU (sysfs), hwloc's cores and kinds
of core (:attr:`~pinlab.doctor.observe.ProcessObservation.topology`, None where hwloc is
missing: those checks then say nothing), the process's pages per node and its huge pages.
"""

from __future__ import annotations

from pinlab.cpuset import format_cpulist
from pinlab.doctor.evidence import busy_threads, thread_entry, with_env
from pinlab.doctor.findings import Finding
from pinlab.doctor.libraries import by_name, loaded_pools
from pinlab.doctor.observe import ProcessObservation
from pinlab.measure.threads import LiveThread
from pinlab.words import plural

#: Resident pages below which where the memory lives is not worth a finding (40 MiB of 4 KiB pages).
MIN_FAR_PAGES = 10240


def memory_far(obs: ProcessObservation) -> list[Finding]:
    """Most of the memory on NUMA nodes none of the busy threads ran on: every access crosses
    the interconnect."""
    pages = obs.pages_per_node
    total = sum(pages.values())
    busy, ran, nodes = _busy_nodes(obs)
    far = {node: n for node, n in pages.items() if node not in nodes and n > 0}
    if not nodes or total < MIN_FAR_PAGES or sum(far.values()) < total / 2:
        return []
    to = format_cpulist(nodes)
    return [
        Finding(
            "memory-far-from-threads",
            "warning",
            f"{100 * sum(far.values()) // total}% of the memory is on node{'s' if len(far) > 1 else ''} {format_cpulist(sorted(far))}, "
            f"where none of the {plural(len(busy), 'busy thread')} runs (they run on node{'s' if len(nodes) > 1 else ''} {to})",
            {
                "pages_per_node": {str(n): p for n, p in sorted(pages.items())},
                "thread_nodes": sorted(nodes),
                "thread_cpus": format_cpulist(ran),
            },
            "every access to memory on another node crosses the interconnect, slower and shared with the other node's threads",
            [f"pinlab migrate {obs.pid} --to {to}", f"pinlab run -s compact -n {len(busy)} --mem follow -- {obs.command_line()}"],
        )
    ]


#: Share of the memory on one node from which threads spread over several nodes are said to
#: work on one node's data (the rest is noise: stacks, libraries).
ONE_NODE_SHARE = 0.9


def _busy_nodes(obs: ProcessObservation) -> tuple[list[LiveThread], set[int], set[int]]:
    """The busy threads, the CPUs they ran on during the window, and those CPUs' NUMA nodes."""
    busy = busy_threads(obs)
    tids = {t.tid for t in busy}
    ran = {t.cpu for sample in obs.samples for t in sample.threads if t.tid in tids}
    return busy, ran, {obs.cpu_nodes[cpu] for cpu in ran if cpu in obs.cpu_nodes}


def memory_one_node(obs: ProcessObservation) -> list[Finding]:
    """Busy threads on several NUMA nodes working on memory that sits on one of them: the
    others reach all of it remotely, and that node's memory bandwidth serves them all."""
    pages = obs.pages_per_node
    total = sum(pages.values())
    busy, ran, nodes = _busy_nodes(obs)
    if len(nodes) < 2 or total < MIN_FAR_PAGES:
        return []
    node, most = max(pages.items(), key=lambda item: item[1])
    if node not in nodes or most < ONE_NODE_SHARE * total:
        return []
    spread = format_cpulist(nodes)
    return [
        Finding(
            "memory-on-one-node",
            "warning",
            f"{100 * most // total}% of the memory is on node {node}, but the {plural(len(busy), 'busy thread')} run on nodes {spread}",
            {"pages_per_node": {str(n): p for n, p in sorted(pages.items())}, "thread_nodes": sorted(nodes), "thread_cpus": format_cpulist(ran)},
            "the threads on the other nodes reach all their data across the interconnect, and one node's memory bandwidth serves every thread",
            [
                f"pinlab run -s scatter -n {len(busy)} --mem interleave:{spread} -- {obs.command_line()}",
                f"numactl --interleave={spread} {obs.command_line()}",
                "# or initialise the data in parallel, each thread the part it works on (first touch puts each page on its toucher's node)",
            ],
        )
    ]


#: Resident memory from which a process without transparent huge pages is worth a word (1 GiB of
#: 4 KiB pages), and the share of its anonymous memory in huge pages below which it has none to speak of.
THP_PAGES = 262144
THP_SHARE = 0.1


def huge_pages_off(obs: ProcessObservation) -> list[Finding]:
    """A large resident set with (almost) no transparent huge pages, because the system gives
    them only on request or never, or the process turned them off: every 4 KiB page takes a TLB
    entry of its own."""
    total = sum(obs.pages_per_node.values())
    if total < THP_PAGES or obs.huge_kib is None or obs.huge_kib >= THP_SHARE * total * 4:
        return []
    if not obs.thp_disabled and obs.thp not in ("never", "madvise"):
        return []
    if obs.thp_disabled:
        why_none, fix = (
            "the process turned them off for itself (prctl PR_SET_THP_DISABLE)",
            [f"# drop the program's PR_SET_THP_DISABLE, then: {obs.command_line()}"],
        )
    elif obs.thp == "never":
        why_none = "the system's mode is never"
        fix = [
            "# as root, the system's setting:",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
            f"pinlab run --thp always -- {obs.command_line()}",
        ]
    else:
        why_none = "the system gives them only to memory that asks (madvise), and this program's does not"
        fix = [f"pinlab run --thp always -- {obs.command_line()}"]
    return [
        Finding(
            "thp-off",
            "info",
            f"{total * 4 // 1024} MiB resident and {obs.huge_kib // 1024} MiB of it in transparent huge pages: {why_none}",
            {"thp": obs.thp, "resident_pages": total, "anon_huge_kib": obs.huge_kib, "disabled_by_process": obs.thp_disabled},
            "with 4 KiB pages a large working set misses the TLB more often; 2 MiB pages cover it with 512 times fewer entries",
            fix,
        )
    ]


def _openmp_loaded(obs: ProcessObservation) -> bool:
    return any((lib := by_name(name)) is not None and lib.openmp for name in loaded_pools(obs.files))


def smt_shared(obs: ProcessObservation) -> list[Finding]:
    """Busy threads whose masks hold fewer cores than there are of them, so that some share a
    core's hardware threads, while whole cores the process may use stay idle."""
    topo = obs.topology
    if topo is None:
        return []
    core_of = {cpu: core.cpus for core in topo.cores for cpu in core.cpus}
    busy = busy_threads(obs)
    if len(busy) < 2 or all(len(pus) < 2 for pus in core_of.values()):
        return []
    masks = frozenset().union(*(t.mask for t in busy))
    cores = {core_of[cpu] for cpu in masks if cpu in core_of}
    allowed_cores = {pus for pus in core_of.values() if pus <= obs.allowed}
    if len(busy) <= len(cores) or len(masks) < len(busy) or len(busy) > len(allowed_cores):
        return []  # a core each already; fewer CPUs than threads (another finding); or too few cores to have one each
    idle = sorted((pus for pus in allowed_cores if not pus & masks), key=min)
    if not idle:
        return []
    shared = sorted((pus for pus in cores if len(pus & masks) > 1), key=min)
    idle_cpus = frozenset().union(*idle)
    fix = [f"pinlab run -s compact -n {len(busy)} -- {obs.command_line()}"]
    if _openmp_loaded(obs):
        fix.append(with_env(obs, {"OMP_NUM_THREADS": str(len(busy)), "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}))
    return [
        Finding(
            "smt-siblings-shared",
            "warning",
            f"{len(busy)} busy threads may use only {plural(len(cores), 'core')} (CPUs {format_cpulist(masks)}), so they share "
            f"hardware threads of one core, while {plural(len(idle), 'whole core')} stay idle (CPUs {format_cpulist(idle_cpus)})",
            {
                "threads": [{**thread_entry(t), "mask": format_cpulist(t.mask)} for t in busy],
                "shared_cores": [format_cpulist(pus) for pus in shared],
                "idle_cores": [format_cpulist(pus) for pus in idle],
                "allowed_cpus": format_cpulist(obs.allowed),
            },
            "hardware threads of one core share its execution units and caches, so each of two busy ones runs slower than alone on a core",
            fix,
        )
    ]


#: CPU time of the least busy thread of a team against its busiest, from which their work counts
#: as equal (a team splitting a loop evenly; its threads wait for each other at the end).
EQUAL_WORK = 0.5


def kinds_split(obs: ProcessObservation) -> list[Finding]:
    """Busy threads doing equal work on both performance and efficiency cores: the fast ones
    finish first and wait for the slow ones at every barrier."""
    topo = obs.topology
    if topo is None or len(topo.cpu_kinds) < 2:
        return []
    kind_of = {cpu: kind for kind in topo.cpu_kinds for cpu in kind.cpus}
    busy = busy_threads(obs)
    used = obs.cpu_seconds()
    if len(busy) < 2 or min(used[t.tid] for t in busy) < EQUAL_WORK * max(used[t.tid] for t in busy):
        return []
    ran: dict[int, dict[int, int]] = {}  # tid -> kind efficiency -> samples seen on it
    for sample in obs.samples:
        for t in sample.threads:
            if t.tid in used and t.cpu in kind_of:
                counts = ran.setdefault(t.tid, {})
                counts[kind_of[t.cpu].efficiency] = counts.get(kind_of[t.cpu].efficiency, 0) + 1
    on: dict[int, list[LiveThread]] = {}
    for t in busy:
        if ran.get(t.tid):
            on.setdefault(max(ran[t.tid], key=lambda e: ran[t.tid][e]), []).append(t)
    if len(on) < 2:
        return []
    kinds = sorted(topo.cpu_kinds, key=lambda k: -k.efficiency)
    fast = kinds[0]
    fast_allowed = fast.cpus & obs.allowed
    fast_cores = {core.cpus for core in topo.cores if core.cpus & fast_allowed}
    count = min(len(busy), len(fast_cores)) or len(busy)
    fix = [f"pinlab run -s compact -n {count} --cpu-kind {fast.name} -- {obs.command_line()}"]
    if _openmp_loaded(obs):
        fix.append(
            with_env(
                obs,
                {
                    "OMP_NUM_THREADS": str(count),
                    "OMP_PLACES": "{" + "},{".join(str(min(c)) for c in sorted(fast_cores, key=min)) + "}",
                    "OMP_PROC_BIND": "close",
                },
            )
        )
    by_kind = {next(k.name for k in topo.cpu_kinds if k.efficiency == e): [thread_entry(t) for t in ts] for e, ts in sorted(on.items(), reverse=True)}
    return [
        Finding(
            "split-over-core-kinds",
            "warning",
            f"{len(busy)} busy threads doing equal work run on {len(on)} kinds of core: "
            + ", ".join(f"{len(ts)} on {name}" for name, ts in by_kind.items()),
            {"threads_by_kind": by_kind, "kind_cpus": {k.name: format_cpulist(k.cpus) for k in kinds}, "allowed_cpus": format_cpulist(obs.allowed)},
            "threads given equal shares finish at the pace of the slowest cores, and the fast cores wait for them",
            fix,
        )
    ]
