"""The doctor's checks: each reads one process's observation and returns its findings.

Every check is a function of a :class:`~pinlab.doctor.observe.ProcessObservation` alone, so that
it can be tried on a made-up observation; :data:`CHECKS` lists them in the order findings are
reported. A check says nothing rather than guess: a finding names the threads, CPUs and
variables it rests on, and its fix is lines to paste (the process's own command line with the
variable that fixes it, a ``pinlab run`` line), not advice.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.doctor.evidence import busy_threads, call_entry, thread_count, thread_entry, with_env
from pinlab.doctor.findings import Finding
from pinlab.doctor.libraries import BLAS, PoolLibrary, by_name, identify, loaded_pools, pool_files, python_file, python_process
from pinlab.doctor.machine_checks import huge_pages_off, kinds_split, memory_far, memory_one_node, smt_shared
from pinlab.doctor.observe import BINDING_VARIABLES, ProcessObservation, binding_requested
from pinlab.measure.threads import LiveThread
from pinlab.words import plural

#: Share of the window's samples with more runnable threads than CPUs from which the process is
#: said to be oversubscribed: less is a burst (a pool starting, a barrier), not a steady state.
OVERSUBSCRIBED_SHARE = 0.5

#: Samples below which no judgement is made on runnable threads (about 0.3 s at 100 ms).
MIN_SAMPLES = 3


def _copy_of(library: str | None, copies: list[tuple[PoolLibrary, str]]) -> str | None:
    """The mapped pool file a thread's start library is: the same path, else the same file by its
    real path (the loader names ``libgomp.so.1``, /proc/PID/maps its target), else the first copy
    of the same library; None when it is no pool library."""
    lib = identify(library)
    if library is None or lib is None:
        return None
    paths = [path for _, path in copies]
    if library in paths:
        return library
    real = os.path.realpath(library)
    same = [path for path in paths if os.path.realpath(path) == real]
    return same[0] if same else next((path for other, path in copies if other is lib), None)


def _pool_sizes(obs: ProcessObservation) -> list[tuple[PoolLibrary, str, int, str]]:
    """Each loaded copy of a pool library: (library, file, its pool's size, where the size comes
    from: observed, a variable, or default). Threads are counted against the file that started
    them, so two copies of one library (numpy's and scipy's OpenBLAS) are two pools."""
    env = obs.environ or {}
    allowed = len(obs.allowed)
    copies = pool_files(obs.files)
    observed: dict[str, int] = {}
    for t in obs.last_threads().values():
        path = _copy_of(t.library, copies)
        if path is not None and t.tid != obs.pid:
            observed[path] = observed.get(path, 0) + 1
    sizes = []
    for lib, path in copies:
        if path in observed:
            # A pool counts the thread that calls into it (an OpenMP team's primary thread, the
            # caller of a BLAS routine, a TBB arena's master): its workers and that one.
            sizes.append((lib, path, observed[path] + 1, "observed"))
            continue
        variable = next((v for v in lib.variables if thread_count(env.get(v)) is not None), None)
        if variable is not None:
            sizes.append((lib, path, thread_count(env.get(variable)) or 1, variable))
        else:
            sizes.append((lib, path, 1 if lib.name == "BLIS" else allowed, "default"))
    return sizes


def pools(obs: ProcessObservation) -> list[Finding]:
    """Each thread pool by its library, against the CPUs the process may use."""
    allowed = len(obs.allowed)
    env = obs.environ or {}
    findings = []
    covered = {v for v in _oversized_variables(obs)}
    sizes = _pool_sizes(obs)
    for lib, path, size, source in sizes:
        name = lib.name
        if sum(1 for other, *_ in sizes if other is lib) > 1:
            name = f"{lib.name} ({os.path.basename(path)})"  # one of several copies: say which
        origin = {"observed": "threads seen", "default": "the library's default: the allowed CPUs" if lib.name != "BLIS" else "BLIS's default"}.get(
            source, f"{source}={env.get(source)}"
        )
        evidence = {"library": lib.name, "file": path, "size": size, "size_from": source, "allowed_cpus": format_cpulist(obs.allowed)}
        if source != "observed" and not obs.stacks_readable:
            evidence["threads_not_counted"] = (
                "the process's memory is not ours to read (kernel.yama.ptrace_scope): its threads' start libraries are not known"
            )
        cpus = _cpus_for_threads(obs)
        if size > cpus and not covered & {source, *lib.variables}:  # else env-threads-above-cpus says it
            variable = lib.variables[0] if lib.variables else None
            if variable is not None and (thread_count(env.get(variable)) or cpus + 1) <= cpus:
                variable = None  # already small enough: the program sized its pool itself
            findings.append(
                Finding(
                    "pool-too-large",
                    "warning",
                    f"the {name} pool has {plural(size, 'thread')} ({origin}) for {_cpus_named(obs, cpus)}",
                    evidence,
                    "threads beyond the CPUs wait their turn, and a parallel loop waits for its slowest thread",
                    [with_env(obs, {variable: str(cpus)})]
                    if variable
                    else [f"# the program sets the size itself: give it at most {plural(cpus, 'thread')} with its own option"],
                )
            )
        else:
            findings.append(Finding("pool", "info", f"{name} pool: {plural(size, 'thread')} ({origin}), {plural(allowed, 'allowed CPU')}", evidence))
    return findings


def _runnable(obs: ProcessObservation) -> list[int]:
    return [sum(1 for t in sample.threads if t.state == "R") for sample in obs.samples]


def _fewer_threads(obs: ProcessObservation) -> list[str]:
    """The lines that give the process no more busy threads than allowed CPUs: each loaded pool's
    variable on its command line (one BLAS thread per calling thread when BLAS is called from
    Python's or OpenMP's threads), threadpoolctl for Python, else a thread count to choose."""
    if slurm_step_cpus_missing(obs):
        return slurm_step_fewer_cpus(obs)[0].fix
    env = obs.environ or {}
    allowed = len(obs.allowed)
    loaded = loaded_pools(obs.files)
    python = python_process(obs.files)
    blas = [name for name in loaded if name in BLAS]
    openmp = [name for name in loaded if (lib := by_name(name)) is not None and lib.openmp]
    settings: dict[str, str] = {}
    for name in blas:
        lib = by_name(name)
        assert lib is not None
        settings[lib.variables[0]] = "1" if (python or openmp) else str(allowed)
    if openmp:
        settings["OMP_NUM_THREADS"] = str(allowed)
    settings = {k: v for k, v in settings.items() if env.get(k) != v}  # a variable already so changes nothing
    fix = []
    if settings:
        fix.append(with_env(obs, settings))
    if python and blas and env.get("OPENBLAS_NUM_THREADS") != "1":
        fix += [
            "# or in the Python program, before its threads start (pip install threadpoolctl):",
            "from threadpoolctl import threadpool_limits",
            'threadpool_limits(limits=1, user_api="blas")',
        ]
    if not settings:
        fix.append(f"# start at most {plural(allowed, 'busy thread')} (the program's own thread-count option), or give it more CPUs:")
        if len(obs.available) > allowed:
            fix.append(f"pinlab run -c {format_cpulist(obs.available)} -- {obs.command_line()}")
    return fix


def _pools_named(obs: ProcessObservation) -> str:
    loaded = loaded_pools(obs.files)
    return ", ".join(loaded) or ("Python threads" if python_process(obs.files) else "the program's own threads")


def oversubscribed(obs: ProcessObservation) -> list[Finding]:
    """More runnable threads than allowed CPUs for much of the window: they take turns on the
    run queue. Failing that, more busy threads than allowed CPUs: they take turns all the same,
    on a lock or spinning (a BLAS pool called from several threads)."""
    allowed = len(obs.allowed)
    counts = _runnable(obs)
    if len(counts) < MIN_SAMPLES:
        return []
    over = [c for c in counts if c > allowed]
    loaded = loaded_pools(obs.files)
    if len(over) >= OVERSUBSCRIBED_SHARE * len(counts):
        runnable_in: dict[int, int] = {}
        for sample in obs.samples:
            for t in sample.threads:
                if t.state == "R":
                    runnable_in[t.tid] = runnable_in.get(t.tid, 0) + 1
        last = obs.last_threads()
        often = [last[tid] for tid, n in sorted(runnable_in.items()) if n >= 0.25 * len(counts)]
        return [
            Finding(
                "oversubscribed",
                "problem",
                f"{max(counts)} threads runnable at once on {plural(allowed, 'allowed CPU')} ({len(over)} of {len(counts)} samples over); pools: {_pools_named(obs)}",
                {
                    "samples": len(counts),
                    "samples_over": len(over),
                    "runnable_mean": round(sum(counts) / len(counts), 2),
                    "runnable_max": max(counts),
                    "allowed_cpus": format_cpulist(obs.allowed),
                    "pool_libraries": loaded,
                    "runnable_threads": [thread_entry(t) for t in often],
                },
                "runnable threads beyond the CPUs wait for one, so each thread's work takes longer and threads that wait for each other wait longest",
                _fewer_threads(obs),
            )
        ]
    busy = busy_threads(obs)
    if len(busy) <= allowed:
        return []
    used = obs.cpu_seconds()
    return [
        Finding(
            "busy-threads-above-cpus",
            "warning",
            f"{len(busy)} busy threads share {plural(allowed, 'allowed CPU')}; pools: {_pools_named(obs)}",
            {
                "busy_threads": [{**thread_entry(t), "cpu_share": round(used[t.tid] / obs.seconds, 2)} for t in busy],
                "allowed_cpus": format_cpulist(obs.allowed),
                "runnable_mean": round(sum(counts) / len(counts), 2),
                "pool_libraries": loaded,
            },
            "threads beyond the CPUs take turns, on the run queue or on a lock (a BLAS pool called from several threads serves one caller at a time)",
            _fewer_threads(obs),
        )
    ]


def pools_in_python_threads(obs: ProcessObservation) -> list[Finding]:
    """Busy Python threads (a ``ThreadPoolExecutor``, joblib's threading backend) that call into
    a library with a pool of its own (BLAS, OpenMP), while that pool's threads are busy too: the
    pools multiply. Told from the threads' start libraries, so it does not hang on how many
    threads a sample happened to catch runnable."""
    allowed = len(obs.allowed)
    busy = busy_threads(obs)
    # Python threads at work: busy in the window, or seen waiting inside a pool library (the
    # caller a BLAS pool makes wait while it serves another gets no CPU, yet it calls that pool).
    waiting = {tid for tid, paths in obs.waited_in.items() if any(identify(p) is not None for p in paths)}
    last = obs.last_threads()
    python = [t for t in last.values() if t.tid != obs.pid and python_file(t.library) and (t in busy or t.tid in waiting)]
    busy_pools = {lib.name for t in busy if t.tid != obs.pid and (lib := identify(t.library)) is not None}
    workers: dict[str, list[LiveThread]] = {}  # pool library -> all its threads seen, busy or not
    for t in last.values():
        lib = identify(t.library)
        if lib is not None and lib.name in busy_pools and t.tid != obs.pid:
            workers.setdefault(lib.name, []).append(t)
    total = len(python) + sum(len(ts) for ts in workers.values())
    if len(python) < 2 or not workers or total <= allowed:
        return []
    named = ", ".join(f"{name} ({plural(len(ts), 'thread')})" for name, ts in workers.items())
    return [
        Finding(
            "nested-pools",
            "warning",
            f"{len(python)} Python threads at work call into pools of their own: {named}; up to {total} threads for {plural(allowed, 'allowed CPU')}",
            {
                "python_threads": [
                    {
                        **thread_entry(t),
                        **({"waited_in": sorted(os.path.basename(p) for p in obs.waited_in[t.tid])} if t.tid in obs.waited_in else {}),
                    }
                    for t in python
                ],
                "pool_threads": {name: [thread_entry(t) for t in ts] for name, ts in workers.items()},
                "allowed_cpus": format_cpulist(obs.allowed),
            },
            "each Python thread's call brings the library's pool along, so the threads multiply and take turns (a BLAS pool serves one caller at a time)",
            _fewer_threads(obs),
        )
    ]


def two_openmp_runtimes(obs: ProcessObservation) -> list[Finding]:
    """libgomp and libomp/libiomp5 in one process: two pools that know nothing of each other."""
    loaded = loaded_pools(obs.files)
    if not ("libgomp" in loaded and "libomp" in loaded):
        return []
    return [
        Finding(
            "two-openmp-runtimes",
            "problem",
            f"two OpenMP runtimes are loaded: {os.path.basename(loaded['libgomp'])} and {os.path.basename(loaded['libomp'])}",
            {"libgomp": loaded["libgomp"], "libomp": loaded["libomp"]},
            "each runtime sizes its own pool from all the CPUs and spins on them, so their threads compete and binding settings apply to one only",
            [
                "# build the program and its libraries with one OpenMP runtime; until then, let libomp serve libgomp's callers:",
                f"LD_PRELOAD={loaded['libomp']} {obs.command_line()}",
            ],
        )
    ]


def _oversized_variables(obs: ProcessObservation) -> dict[str, int]:
    """Thread-count variables read by a loaded library and larger than the allowed CPUs."""
    env = obs.environ or {}
    readers: dict[str, list[PoolLibrary]] = {}
    for name in loaded_pools(obs.files):
        lib = by_name(name)
        for variable in lib.variables if lib else ():
            readers.setdefault(variable, []).append(lib)  # type: ignore[arg-type]
    allowed = _cpus_for_threads(obs)
    found = {}
    for variable in readers:
        count = thread_count(env.get(variable))
        if count is not None and count > allowed:
            found[variable] = count
    return found


def _cpus_for_threads(obs: ProcessObservation) -> int:
    """The CPUs a thread count is rightly set against: the allowed ones, except in a step that
    srun narrowed (:func:`slurm_step_fewer_cpus`), where it is the job's CPUs per task (the step
    is wrong, not the count), and under pinlab's plan, whose CPUs are all the threads get (a
    thread past them shares one, however many the process may use)."""
    if slurm_step_cpus_missing(obs):
        return slurm_cpus_per_task(obs) or len(obs.allowed)
    if obs.plan_cpus:
        return len(obs.plan_cpus)
    return len(obs.allowed)


def _cpus_named(obs: ProcessObservation, count: int) -> str:
    """``count`` CPUs said as what they are: the plan's or the allowed ones."""
    return f"{plural(count, 'CPU')} of pinlab's plan" if obs.plan_cpus and count == len(obs.plan_cpus) else plural(count, "allowed CPU")


def slurm_cpus_per_task(obs: ProcessObservation) -> int | None:
    """The job's CPUs per task (SLURM_CPUS_PER_TASK in the process's environment), None when unset or not a count."""
    return thread_count((obs.environ or {}).get("SLURM_CPUS_PER_TASK"))


def slurm_step_cpus_missing(obs: ProcessObservation) -> bool:
    """Whether the process is a Slurm step's task with fewer CPUs than the job's per-task count."""
    asked = slurm_cpus_per_task(obs)
    return "SLURM_STEP_ID" in (obs.environ or {}) and asked is not None and asked > len(obs.allowed)


def slurm_step_fewer_cpus(obs: ProcessObservation) -> list[Finding]:
    """A Slurm step whose task got fewer CPUs than the job asked for per task: beginning with
    Slurm 22.05, ``srun`` does not inherit the job's ``--cpus-per-task``, so on a cluster that
    binds tasks each is bound to one CPU (or core) unless srun is told again."""
    if not slurm_step_cpus_missing(obs):
        return []
    env = obs.environ or {}
    asked = slurm_cpus_per_task(obs) or 0
    allowed = len(obs.allowed)
    return [
        Finding(
            "slurm-step-fewer-cpus",
            "problem",
            f"the job asked for {plural(asked, 'CPU')} per task but this step's task got {plural(allowed, 'CPU')} ({format_cpulist(obs.allowed)})",
            {
                "SLURM_CPUS_PER_TASK": env["SLURM_CPUS_PER_TASK"],
                "SLURM_STEP_ID": env["SLURM_STEP_ID"],
                "allowed_cpus": format_cpulist(obs.allowed),
            },
            "since Slurm 22.05 srun does not pass the job's --cpus-per-task on to its steps, so the task's threads share fewer CPUs than the job holds",
            [
                f"srun -c $SLURM_CPUS_PER_TASK {obs.command_line()}",
                "# or once in the job script, before its srun lines:",
                "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK",
            ],
        )
    ]


def environment(obs: ProcessObservation) -> list[Finding]:
    """Thread and binding variables that disagree with the CPUs, with Slurm, or with each other."""
    env = obs.environ or {}
    allowed = len(obs.allowed)
    loaded = loaded_pools(obs.files)
    openmp = [name for name in loaded if (lib := by_name(name)) is not None and lib.openmp]
    findings = []
    oversized = _oversized_variables(obs)
    if oversized:
        named = ", ".join(f"{v}={env[v]}" for v in oversized)
        cpus, listed = (len(obs.plan_cpus), obs.plan_cpus) if obs.plan_cpus else (allowed, obs.allowed)
        findings.append(
            Finding(
                "env-threads-above-cpus",
                "warning",
                f"{named} asks for more threads than the {_cpus_named(obs, cpus)} ({format_cpulist(listed)})",
                {"variables": {v: env[v] for v in oversized}, "allowed_cpus": format_cpulist(obs.allowed), "pool_libraries": loaded},
                "the pool starts that many threads anyway, and they take turns on the allowed CPUs",
                [with_env(obs, {v: str(cpus) for v in oversized})],
            )
        )
    slurm, omp = slurm_cpus_per_task(obs), thread_count(env.get("OMP_NUM_THREADS"))
    if openmp and slurm is not None and omp is not None and slurm != omp:
        findings.append(
            Finding(
                "env-slurm-mismatch",
                "warning",
                f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']} but Slurm gave the task {plural(slurm, 'CPU')} (SLURM_CPUS_PER_TASK)",
                {"OMP_NUM_THREADS": env["OMP_NUM_THREADS"], "SLURM_CPUS_PER_TASK": env["SLURM_CPUS_PER_TASK"]},
                "more threads than the task's CPUs take turns; fewer leave CPUs the job pays for idle",
                ["export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK", with_env(obs, {"OMP_NUM_THREADS": str(slurm)})],
            )
        )
    findings += _binding_ignored(obs, openmp)
    blas = [name for name in loaded if name in BLAS]
    if openmp and blas and omp is not None and omp > 1:
        inner = {by_name(n).variables[0]: thread_count(env.get(by_name(n).variables[0])) for n in blas}  # type: ignore[union-attr]
        nested = {v: n for v, n in inner.items() if n is not None and n > 1 and n * omp > allowed}
        if nested:
            findings.append(
                Finding(
                    "env-nested-pools",
                    "warning",
                    "OMP_NUM_THREADS="
                    + env["OMP_NUM_THREADS"]
                    + " with "
                    + ", ".join(f"{v}={env[v]}" for v in nested)
                    + f": up to {omp * max(nested.values())} threads for {allowed} allowed CPUs",
                    {"OMP_NUM_THREADS": env["OMP_NUM_THREADS"], **{v: env[v] for v in nested}, "allowed_cpus": format_cpulist(obs.allowed)},
                    "a BLAS call inside each OpenMP thread starts its own pool, so the threads multiply",
                    [with_env(obs, {**{v: "1" for v in nested}, "OMP_NUM_THREADS": str(min(omp, allowed))})],
                )
            )
    return findings


def _binding_ignored(obs: ProcessObservation, openmp: list[str]) -> list[Finding]:
    """OMP_PLACES/OMP_PROC_BIND set, yet the busy threads may still run anywhere."""
    env = obs.environ or {}
    asked = {v: env[v] for v in ("OMP_PLACES", "OMP_PROC_BIND") if env.get(v, "").strip() and env[v].strip().lower() != "false"}
    busy = [t for t in busy_threads(obs) if len(t.mask) > 1]
    if not openmp or not asked or len(busy) < 2 or len(busy) != len(busy_threads(obs)):
        return []
    named = ", ".join(f"{v}={value}" for v, value in asked.items())
    unset = tuple(v for v in ("KMP_AFFINITY",) if "disabled" in env.get(v, "").lower() or "none" in env.get(v, "").lower())
    fix = [with_env(obs, {}, unset)] if unset else []
    fix.append(f"pinlab run -s compact -n {len(busy)} -- {obs.command_line()}")
    return [
        Finding(
            "env-binding-ignored",
            "warning",
            f"{named} asks OpenMP to bind its threads, but {len(busy)} busy threads may each run on {len(busy[0].mask)} CPUs"
            + (f" ({', '.join(f'{v}={env[v]}' for v in unset)} turns binding off)" if unset else ""),
            {"asked": asked, "threads": [{**thread_entry(t), "mask": format_cpulist(t.mask)} for t in busy], "runtimes": openmp},
            "unbound threads are moved between CPUs by the scheduler and leave their caches and memory behind",
            fix,
        )
    ]


#: Variables that keep idle OpenMP threads spinning (variable -> the values that do).
ACTIVE_WAIT = {"OMP_WAIT_POLICY": ("active",), "KMP_BLOCKTIME": ("infinite",), "GOMP_SPINCOUNT": ("infinite", "infinity")}


def active_wait(obs: ProcessObservation) -> list[Finding]:
    """Idle OpenMP threads told to spin while more threads are runnable than CPUs: the spinning
    takes CPU time from the threads that have work."""
    env = obs.environ or {}
    loaded = loaded_pools(obs.files)
    if not any((lib := by_name(name)) is not None and lib.openmp for name in loaded):
        return []
    spinning = {v: env[v] for v, values in ACTIVE_WAIT.items() if env.get(v, "").strip().lower() in values}
    counts = _runnable(obs)
    allowed = len(obs.allowed)
    over = [c for c in counts if c > allowed]
    if not spinning or len(counts) < MIN_SAMPLES or len(over) < 0.25 * len(counts):
        return []
    named = ", ".join(f"{v}={value}" for v, value in spinning.items())
    passive = {"OMP_WAIT_POLICY": "passive"} | ({"KMP_BLOCKTIME": "0"} if "KMP_BLOCKTIME" in spinning else {})
    unset = tuple(v for v in spinning if v == "GOMP_SPINCOUNT")
    return [
        Finding(
            "env-active-wait",
            "warning",
            f"{named} keeps idle OpenMP threads spinning while up to {max(counts)} threads are runnable on {plural(allowed, 'allowed CPU')}",
            {"variables": spinning, "samples": len(counts), "samples_over": len(over), "allowed_cpus": format_cpulist(obs.allowed)},
            "a spinning thread holds a CPU that a thread with work is waiting for",
            [with_env(obs, passive, unset)],
        )
    ]


def threads_share_cpu(obs: ProcessObservation) -> list[Finding]:
    """Busy threads each pinned to the same one CPU while others are allowed: a pile-up."""
    busy = busy_threads(obs)
    by_cpu: dict[int, list[LiveThread]] = {}
    for t in busy:
        if len(t.mask) == 1:
            by_cpu.setdefault(next(iter(t.mask)), []).append(t)
    piled = {cpu: threads for cpu, threads in by_cpu.items() if len(threads) > 1}
    allowed = obs.allowed
    used = frozenset(cpu for t in busy for cpu in t.mask)
    if not piled or not allowed - used:
        return []  # no allowed CPU left free: more threads than CPUs (oversubscribed), not a pile-up
    env = obs.environ or {}
    unset = tuple(v for v in BINDING_VARIABLES if binding_requested({v: env.get(v, "")}))
    count = min(len(busy), len(allowed))
    line = f"pinlab run -s compact -n {count} -- {obs.command_line()}"
    fix = [shlex.join(["env", *[f"-u{v}" for v in unset]]) + " " + line if unset else line]
    cpu, threads = max(piled.items(), key=lambda item: len(item[1]))
    piled_tids = {t.tid for ts in piled.values() for t in ts}
    calls = [c for c in obs.affinity_calls if c.applied and (c.target_tid if c.target_tid is not None else c.tid) in piled_tids]
    callers = sorted({os.path.basename(c.library) if c.library else "?" for c in calls})
    set_by = ", ".join([*(f"{v}={env[v]}" for v in unset), *(f"{name} (its own affinity calls)" for name in callers)])
    if callers and not unset:
        # A mask set by the program's own call after the start overrides any placement given from outside.
        fix = [
            f"# {', '.join(callers)} binds these threads itself, after any placement from outside (pinlab run, taskset, numactl):",
            "# turn its binding off (its own setting or option), or have it bind each thread to a CPU of its own",
        ]
    return [
        Finding(
            "threads-share-cpu",
            "problem",
            f"{len(threads)} busy threads are all pinned to CPU {cpu} while {len(allowed)} CPUs are allowed ({format_cpulist(allowed)})"
            + (f"; set by {set_by}" if set_by else ""),
            {
                "cpus": {str(c): [thread_entry(t) for t in ts] for c, ts in sorted(piled.items())},
                "allowed_cpus": format_cpulist(allowed),
                "binding_variables": {v: env[v] for v in unset},
                **({"set_by_calls": [call_entry(c) for c in calls[:MAX_LISTED]]} if calls else {}),
            },
            "threads pinned to one CPU run one at a time, however many CPUs are free",
            fix,
        )
    ]


def affinity_changes(obs: ProcessObservation) -> list[Finding]:
    """Masks the program set itself (under pinlab's launcher, which records each call): which
    library changed which thread's mask, and when it moved a thread pinlab's plan had placed."""
    calls = [c for c in obs.affinity_calls if c.applied and c.new is not None]
    if not calls:
        return []
    by_library: dict[str, int] = {}
    for c in calls:
        name = os.path.basename(c.library) if c.library else "?"
        by_library[name] = by_library.get(name, 0) + 1
    moved = []
    for c in calls:
        target = c.target_tid if c.target_tid is not None else c.tid
        planned = obs.planned.get(target)
        if planned is not None and planned >= 0 and c.new is not None and frozenset(parse_cpulist(c.new)) != {planned}:
            moved.append((c, target, planned))
    evidence = {
        "calls_by_library": by_library,
        "calls": [call_entry(c) for c in calls[:MAX_LISTED]],
    }
    named = ", ".join(f"{name} ({n})" for name, n in sorted(by_library.items(), key=lambda kv: -kv[1]))
    if not moved:
        return [Finding("affinity-calls", "info", f"the program set {plural(len(calls), 'thread mask')} itself: {named}", evidence)]
    libraries = sorted({os.path.basename(c.library) if c.library else "?" for c, _, _ in moved})
    env = obs.environ or {}
    fix = []
    if any("gomp" in name for name in libraries):
        unset = tuple(v for v in ("OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY") if v in env)
        fix.append(with_env(obs, {"OMP_PROC_BIND": "false"}, unset))
    fix.append(f"# {'or ' if fix else ''}keep {', '.join(libraries)}'s own binding and leave pinlab's plan out:")
    fix.append(obs.command_line())
    evidence["moved"] = [{"tid": target, "planned_cpu": planned, "new": c.new, "library": c.library, "call": c.call} for c, target, planned in moved]
    return [
        Finding(
            "affinity-calls-moved-plan",
            "warning",
            f"{', '.join(libraries)} moved {plural(len({t for _, t, _ in moved}), 'thread')} off the CPUs pinlab's plan gave them "
            f"({plural(len(calls), 'mask')} set by the program: {named})",
            evidence,
            "two placements fight: the library's wins after pinlab's, so the plan's thread-to-CPU choice no longer holds",
            fix,
        )
    ]


#: The most affinity calls a finding lists (all are counted).
MAX_LISTED = 20


#: The checks, in the order their findings are reported.
CHECKS: tuple[Callable[[ProcessObservation], list[Finding]], ...] = (
    slurm_step_fewer_cpus,
    oversubscribed,
    pools_in_python_threads,
    threads_share_cpu,
    smt_shared,
    kinds_split,
    affinity_changes,
    two_openmp_runtimes,
    environment,
    active_wait,
    memory_far,
    memory_one_node,
    huge_pages_off,
    pools,
)


def diagnose(obs: ProcessObservation) -> list[Finding]:
    """Every finding about one process, problems first, then warnings, then information."""
    findings = [f for check in CHECKS for f in check(obs)]
    for f in findings:
        f.pid = obs.pid
    order = {"problem": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: order[f.severity])
