"""The user's OpenMP runtime variables against pinlab's plan: one warning line for each that disagrees.

pinlab sets ``OMP_NUM_THREADS`` (to the plan's thread count) and ``KMP_AFFINITY=disabled`` only
when the user has not set them, and never touches the other binding variables: what the user
set wins. Some of those settings fight the plan, and did so silently:

* ``OMP_NUM_THREADS`` other than the plan's thread count: more threads than the plan wrap onto
  its CPUs (two or more per CPU), fewer leave planned CPUs idle.
* ``KMP_AFFINITY`` other than ``disabled``: LLVM's libomp (and Intel's) re-binds every thread
  right after pinlab pinned it, by its own rule over the CPUs the main thread starts with (the
  plan's): in its own compact or scatter order, or (type ``none``) to all of them.
* ``OMP_PROC_BIND`` (other than ``false``), ``OMP_PLACES``, ``GOMP_CPU_AFFINITY``: not applied
  (libgomp's binding at thread creation is replaced by pinlab's, libomp ignores them under
  ``KMP_AFFINITY=disabled``), so the user's placement is silently not the one used.

Messages name the variable and its value, say what happens, and what to do. They mention no CPU
number, so that a study can state each once for all the runs it concerns.
"""

from __future__ import annotations

from collections.abc import Mapping

from pinlab.words import plural

#: The thread-placement types of KMP_AFFINITY (other words are modifiers, granularity, proclist).
KMP_TYPES = ("none", "compact", "scatter", "explicit", "balanced", "logical", "physical", "disabled")
OVERFLOW_EFFECT = {
    "wrap": "share the plan's CPUs",
    "unpinned": "run unpinned (--overflow unpinned)",
    "error": "cannot be created (--overflow error)",
}


def disagreements(env: Mapping[str, str], threads: int | None, pinned: bool, overflow: str = "wrap") -> list[str]:
    """Warnings for the variables of ``env`` that disagree with a plan of ``threads`` threads.

    ``pinned``: each thread is pinned by the preload library (the binding variables matter only
    then); an unpinned run (strategy ``none``) still asks for a thread count.
    """
    found = [_thread_count(env.get("OMP_NUM_THREADS"), threads, pinned, overflow)]
    if pinned:
        found += [_kmp_affinity(env.get("KMP_AFFINITY"))]
        binding_off = env.get("OMP_PROC_BIND", "").strip().lower() == "false"
        found += [_not_applied("OMP_PROC_BIND", env.get("OMP_PROC_BIND"), "or set it to false", binding_off)]
        # With OMP_PROC_BIND=false the runtimes bind nothing, whatever the places say.
        found += [_not_applied("OMP_PLACES", env.get("OMP_PLACES"), "and give pinlab the CPUs instead (-c)", binding_off)]
        found += [_not_applied("GOMP_CPU_AFFINITY", env.get("GOMP_CPU_AFFINITY"), "and give pinlab the CPUs instead (-c)", binding_off)]
    return [text for text in found if text]


def _thread_count(value: str | None, threads: int | None, pinned: bool, overflow: str) -> str | None:
    """OMP_NUM_THREADS against the plan's thread count (its first level: ``4,2`` asks 4 at the top)."""
    if value is None or not threads:
        return None
    first = value.split(",")[0].strip()
    if not first.isdigit() or int(first) == 0:
        return (
            f"OMP_NUM_THREADS={value} is not a thread count: an OpenMP runtime ignores it or refuses to start; "
            f"unset it (pinlab then sets it to {threads})"
        )
    wanted = int(first)
    if wanted == threads:
        return None
    against = f"the plan of {plural(threads, 'thread')}" if pinned else f"-n {threads}"
    if not pinned:
        effect = ""
    elif wanted > threads:
        effect = f", and the {wanted - threads} past the plan {OVERFLOW_EFFECT.get(overflow, OVERFLOW_EFFECT['wrap'])}"
    else:
        effect = f", leaving {plural(threads - wanted, 'planned CPU')} unused"
    return (
        f"OMP_NUM_THREADS={value} disagrees with {against}: an OpenMP program starts {plural(wanted, 'thread')}{effect}; "
        f"unset OMP_NUM_THREADS (pinlab then sets it to {threads}) or ask for {wanted} (-n {wanted})"
    )


def _kmp_affinity(value: str | None) -> str | None:
    """KMP_AFFINITY: any placement type but ``disabled`` (no type means ``none``) makes libomp re-bind."""
    if value is None:
        return None
    words = [w.strip().lower() for w in value.split(",")]
    kind = next((w for w in words if w in KMP_TYPES), "none")
    if kind == "disabled":
        return None
    if "norespect" in words:
        where = "to CPUs of its own choosing (norespect)"
    elif kind == "none":
        where = "to all the plan's CPUs, unpinned among them"
    else:
        where = f"in its own {kind} order over the plan's CPUs, not the plan's"
    return (
        f"KMP_AFFINITY={value} disagrees with the plan: an LLVM/Intel OpenMP runtime re-binds every thread after pinlab "
        f"pinned it, {where}; unset KMP_AFFINITY (pinlab then sets it to disabled)"
    )


def _not_applied(name: str, value: str | None, remedy: str, binding_off: bool) -> str | None:
    """A binding variable that the runtime cannot apply on top of the plan."""
    if value is None or binding_off:
        return None
    return (
        f"{name}={value} disagrees with the plan and is not applied: pinlab pins each thread as the plan says, in place "
        f"of the OpenMP runtime's binding; unset {name} {remedy}"
    )
