"""``pinlab study --backend slurm``: a study's runs spread over a Slurm cluster as a job array.

The campaign lives in a directory of the shared results directory, ``RESULTS/NAME``:

- ``campaign.json``: the study (parameters, seed, configurations), which runs each array task
  does, and the Slurm job that runs each task (updated when tasks are resubmitted);
- ``job.sh``: the batch script (one array task = one whole node, ``--exclusive``, so a run never
  shares a node with another run of the campaign);
- ``task-K.db``: the runs of task K, written only by that task (so no two nodes ever write one
  SQLite file, which network file systems do not lock reliably), with ``task-K.out`` (its output,
  each attempt's appended after the last's) and ``task-K.status`` (its exit status, written when it ends).

Task K does, on its node, a warm-up round of every configuration, then the measured runs whose
index is K modulo the number of tasks, for every configuration, in the study's order: every
node runs every configuration equally often, so a node's own speed cannot favour one placement.
``pinlab study --collect NAME`` merges the task databases into the study of the main database
(``--db``), with the warnings each task's checks of its node gave (named by node): a run is identified by (configuration, run index, warm-up), which exactly one task
owns, so collecting again adds only what is new and never counts a run twice. ``--status NAME``
tells each task's state from ``squeue``, ``sacct`` when Slurm keeps accounting, and the task's
own files; ``--resume NAME`` resubmits the tasks that failed (a resubmitted task keeps the runs
it had stored and does the rest).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pinlab.errors import UsageError
from pinlab.study.columns import RUN_FIELDS
from pinlab.study.engine import StudyFailed, StudyInterrupted, run_study
from pinlab.study.machine import machine_description
from pinlab.study.plan import plan_from_parameters
from pinlab.study.schedule import schedule
from pinlab.study.store import Store, leave_in_rollback_journal
from pinlab.version import __version__
from pinlab.words import plural

CAMPAIGN = "campaign.json"
JOB_SCRIPT = "job.sh"
#: File systems a cluster's nodes share; others are local to the machine that submits.
SHARED_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "beegfs",
        "cephfs",
        "ceph",
        "cifs",
        "smb3",
        "glusterfs",
        "fuse.glusterfs",
        "panfs",
        "pvfs2",
        "orangefs",
        "fuse.sshfs",
        "9p",
        "virtiofs",
        "wekafs",
        "fuse.weka",
        "afs",
        "fuse.juicefs",
    }
)
_TIME = re.compile(r"(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2}|UNLIMITED|INFINITE)", re.I)


@dataclass
class SlurmOptions:
    """Where and how the campaign runs: ``results`` (a directory every node sees), ``nodes``
    (array tasks, one whole node each), Slurm's ``partition`` and ``time`` limit per task, and
    any other ``sbatch`` arguments."""

    results: str
    nodes: int = 1
    partition: str | None = None
    time: str | None = None
    sbatch_args: tuple[str, ...] = ()

    def validate(self) -> None:
        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise UsageError(f"--nodes must be at least 1 (got {self.nodes})")
        if self.time is not None and not _TIME.fullmatch(self.time.strip()):
            raise UsageError(f"--time {self.time!r} is not a Slurm time limit: use MINUTES, HH:MM:SS, D-HH or D-HH:MM:SS")
        if self.partition is not None and not re.fullmatch(r"[\w.,-]+", self.partition):
            raise UsageError(f"--partition {self.partition!r} is not a partition name (letters, digits, '_', '-', '.'; several with ',')")
        results = Path(self.results)
        if not results.is_dir():
            raise UsageError(f"results directory {self.results!r} does not exist: create it on a file system every node sees")
        if not os.access(results, os.W_OK | os.X_OK):
            raise UsageError(f"results directory {self.results!r} is not writable: choose one you can write to")


def filesystem_type(path: Path) -> str:
    """The type of the file system holding ``path`` (the longest mount point above it)."""
    best, kind = "", "unknown"
    target = str(path.resolve())
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                mount = fields[4].replace("\\040", " ")
                fstype = fields[fields.index("-") + 1]
                if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                    best, kind = mount, fstype
    except (OSError, ValueError, IndexError):
        pass
    return kind


def split_runs(plan, n_configs: int, tasks: int) -> list[list[tuple[int, int, bool]]]:
    """Each task's runs: a warm-up round of every configuration (its own warm-up indexes), then
    the measured runs whose index is the task's number modulo ``tasks``, in the study's order."""
    if plan.adaptive:
        raise UsageError("--runs auto chooses each next run from the results so far: a Slurm campaign needs a fixed --runs")
    if tasks > plan.runs:
        raise UsageError(f"--nodes {tasks} is more than --runs {plan.runs}: some nodes would have no run; give at most {plan.runs} nodes")
    shares: list[list[tuple[int, int, bool]]] = [
        [(c, k * plan.warmup + w, True) for w in range(plan.warmup) for c in range(n_configs)] for k in range(tasks)
    ]
    for c, r, warmup in schedule(plan, n_configs):
        if not warmup:
            shares[r % tasks].append((c, r, False))
    return shares


def _pinlab_command() -> str:
    """How the nodes start pinlab: this installation's command (on the shared file system)."""
    beside = Path(sys.executable).parent / "pinlab"
    found = str(beside) if beside.exists() else shutil.which("pinlab")
    if found is None:
        raise UsageError("cannot find the pinlab command to run on the nodes: install pinlab where every node sees it")
    return str(Path(found).absolute())


def _check_path(campaign_dir: Path) -> None:
    if any(c in str(campaign_dir) for c in '"\n'):
        raise UsageError(
            f"results directory {str(campaign_dir)!r} has a double quote or a newline in its path, which sbatch cannot take: choose another"
        )


def job_script(campaign_dir: Path, name: str, tasks: int, options: SlurmOptions) -> str:
    d = shlex.quote(str(campaign_dir))
    _check_path(campaign_dir)
    job_name = re.sub(r"[^\w.-]", "_", f"pinlab-{name}")  # sbatch splits #SBATCH lines at blanks; only double quotes group
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --array=0-{tasks - 1}",
        "#SBATCH --nodes=1",
        "#SBATCH --exclusive",
        f'#SBATCH --output="{campaign_dir}/task-%a.out"',
        "#SBATCH --open-mode=append",
    ]  # a resubmitted task adds to its output: the first attempt's end stays readable
    if options.partition:
        lines.append(f"#SBATCH --partition={options.partition}")
    if options.time:
        lines.append(f"#SBATCH --time={options.time}")
    lines += [
        "# one task = one whole node; its runs go to task-$SLURM_ARRAY_TASK_ID.db, its exit status to .status",
        'echo "pinlab: task $SLURM_ARRAY_TASK_ID, Slurm job ${SLURM_JOB_ID:-?}, on $(hostname), starts at $(date -u +%Y-%m-%dT%H:%M:%SZ)"',
        f'{shlex.quote(_pinlab_command())} study-task {d} "$SLURM_ARRAY_TASK_ID"',
        "rc=$?",
        f'echo $rc > {d}/task-"$SLURM_ARRAY_TASK_ID".status.tmp && mv {d}/task-"$SLURM_ARRAY_TASK_ID".status.tmp {d}/task-"$SLURM_ARRAY_TASK_ID".status',
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


def _sbatch_command() -> str:
    exe = shutil.which("sbatch")
    if exe is None:
        raise UsageError("sbatch not found: run on a machine with Slurm's client commands (module load slurm?), or use the local backend")
    return exe


def sbatch(args: list[str], env: dict[str, str] | None = None) -> str:
    """Submit with ``sbatch --parsable ARGS``; the job id. Slurm's own message when it refuses."""
    exe = _sbatch_command()
    proc = subprocess.run([exe, "--parsable", *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        message = " ".join(line.strip() for line in proc.stderr.splitlines() if line.strip()) or f"exit status {proc.returncode}"
        raise UsageError(f"sbatch failed: {message}")
    return proc.stdout.strip().split(";")[0]


def _write_json(path: Path, data: dict) -> None:
    """Write ``data`` whole or not at all (a temporary file renamed over the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def load_campaign(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / CAMPAIGN
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} not found: the campaign's results directory is not visible here (is it on a shared file system?)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def submit(plan, db: str, options: SlurmOptions, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Validate ``plan``, write the campaign into ``options.results``/NAME, submit its job array
    and create the study in ``db``, where ``--collect`` will bring its runs."""
    _sbatch_command()  # before anything slower: without Slurm's commands nothing else matters
    plan.validate(fits=False)  # each node checks that the placements fit it as its task starts
    options.validate()
    configs = plan.configs()
    shares = split_runs(plan, len(configs), options.nodes)
    results = Path(options.results).resolve()
    campaign_dir = results / plan.name
    _check_path(campaign_dir)
    _check_db(db, plan.name)  # the database itself is created only once the job is submitted
    if (campaign_dir / CAMPAIGN).exists():
        raise UsageError(f"{campaign_dir} already holds a campaign: choose another --name or another results directory")
    fstype = filesystem_type(results)
    local_fs = fstype not in SHARED_FILESYSTEMS
    try:
        campaign_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {campaign_dir}: {exc.strerror}") from None
    parameters = {
        **plan.parameters(),
        "slurm": {
            "dir": str(campaign_dir),
            "nodes": options.nodes,
            "partition": options.partition,
            "time": options.time,
            "sbatch_args": list(options.sbatch_args),
        },
    }
    campaign = {
        "pinlab_campaign": 1,
        "name": plan.name,
        "db": str(Path(db).resolve()),
        "parameters": parameters,
        "seed": plan.seed,
        "max_failures": plan.max_failures,
        "tasks": [[list(run) for run in share] for share in shares],
        "jobs": {},
        "submitted_at": time.time(),
    }
    _write_json(campaign_dir / CAMPAIGN, campaign)
    script = campaign_dir / JOB_SCRIPT
    try:
        script.write_text(job_script(campaign_dir, plan.name, options.nodes, options))
        script.chmod(0o755)
        job = sbatch([*options.sbatch_args, str(script)])
    except BaseException:  # nothing was submitted: leave nothing behind, so the same name can be tried again
        for leftover in (campaign_dir / CAMPAIGN, script):
            leftover.unlink(missing_ok=True)
        try:
            campaign_dir.rmdir()
        except OSError:
            pass
        raise
    campaign["jobs"] = {str(k): f"{job}_{k}" for k in range(options.nodes)}
    _write_json(campaign_dir / CAMPAIGN, campaign)
    with Store.open(db, create=True) as store:
        store.create_study(plan.name, parameters, configs, plan.seed, machine_description(), __version__, new=True)
    if local_fs:  # said once the campaign stands: a refused one is told in its one line alone
        say(
            f"pinlab: warning: results directory {results} is on a {fstype} file system, which only this machine may see: "
            "every node must see it at the same path (NFS, Lustre, GPFS, BeeGFS...)"
        )
    return {"study": plan.name, "job": job, "tasks": options.nodes, "dir": str(campaign_dir), "runs": sum(len(s) for s in shares)}


def _check_db(db: str, name: str) -> None:
    """Refuse a --db that could not take the study, without creating or changing it."""
    path = Path(os.path.abspath(db))
    if path.exists() and not path.is_dir() and path.stat().st_size > 0:
        with Store.open(path, create=False, readonly=True) as store:
            if store.study(name) is not None:
                raise UsageError(f"a study named {name} already exists in {db}: choose another --name")
        if not os.access(path, os.W_OK):
            raise UsageError(f"the study database {path} is not writable: choose another --db")
        return
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a study database: give a file path such as {path / 'study.db'}")
    if not path.parent.is_dir():
        raise UsageError(f"cannot create the study database {path}: directory {path.parent} does not exist; create it or choose another path")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot create the study database {path}: directory {path.parent} is not writable; choose another path")


class TaskStopped(Exception):
    """A task was sent SIGTERM or SIGHUP between two runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _stopped(signum, frame) -> None:
    raise TaskStopped(signum)


def run_task(directory: str, task: int) -> int:
    """``pinlab study-task DIR K``, on a node: task K's runs into ``DIR/task-K.db``."""
    campaign = load_campaign(directory)
    tasks = campaign["tasks"]
    if not 0 <= task < len(tasks):
        raise UsageError(f"task {task} is not one of the campaign's {len(tasks)} tasks")
    name = campaign["name"]
    parameters = {k: v for k, v in campaign["parameters"].items() if k != "slurm"}
    plan = plan_from_parameters(name, parameters, campaign["seed"], campaign["max_failures"])
    db = Path(directory) / f"task-{task}.db"
    try:
        with Store.open(db, create=True) as store:
            exists = store.study(name) is not None
    except UsageError as exc:
        raise UsageError(f"task {task}'s database cannot be read ({unreadable_reason(exc)}): {_move_aside(db, name, campaign['db'])}") from None
    only = [(c, r, bool(w)) for c, r, w in tasks[task]]
    # scancel, the time limit and a node's shutdown send SIGTERM to every process of the task: during
    # a run the launcher takes it (StudyInterrupted after that run), between runs this handler does
    previous = {signum: signal.signal(signum, _stopped) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        summary = run_study(
            None if exists else plan, str(db), resume=name if exists else None, max_failures=campaign["max_failures"], progress=False, only=only
        )
    except StudyFailed as exc:  # the runs are stored: collect shows them with the rest
        print(f"pinlab: {exc}", file=sys.stderr)
        return 0
    except (StudyInterrupted, TaskStopped, KeyboardInterrupt) as exc:  # scancel, the time limit, a node going down
        signum = getattr(exc, "signum", signal.SIGINT)
        stored = _stored_runs(db, name)
        print(
            f"pinlab: task {task} of study {name} stopped by signal {signum} (scancel, its time limit or its node going down); "
            f"{plural(stored, 'run') if isinstance(stored, int) else 'its runs'} of its {len(only)} stored: resubmit it with "
            f"`pinlab study --resume {name} --db {shlex.quote(campaign['db'])}` (it keeps them and does the rest)",
            file=sys.stderr,
        )
        return 128 + signum
    finally:  # however the task ends, its file is left whole, without -wal/-shm beside it
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        try:
            leave_in_rollback_journal(db)
        except sqlite3.Error as exc:
            print(f"pinlab: warning: {db} stays in write-ahead-log mode ({exc}): collect it from a machine that sees its -wal file", file=sys.stderr)
    print(
        f"pinlab: task {task} of study {name}: {plural(summary['runs'], 'run')} stored in {db} ({summary['new_runs']} new, "
        f"{summary['failures']} failed)",
        file=sys.stderr,
    )
    return 0


def _campaign_of(db: str, name: str, option: str = "--collect"):
    with Store.open(db, create=False) as store:
        study = store.study(name)
        if study is None:
            names = ", ".join(s.name for s in store.studies()) or "none"
            raise UsageError(f"no study named {name!r} in {db} (studies there: {names})")
        slurm = study.parameters.get("slurm")
        if not slurm:
            raise UsageError(f"study {name} in {db} ran here, not on Slurm: {option} is for a Slurm campaign's tasks (see pinlab report {name})")
    return study, load_campaign(slurm["dir"]), Path(slurm["dir"])


def collect(db: str, name: str) -> dict[str, Any]:
    """Merge every task's runs of campaign ``name`` into the study in ``db``; repeatable: runs
    already collected are skipped. Returns counts and the tasks still missing or incomplete."""
    study, campaign, directory = _campaign_of(db, name)
    # a task still queued or running is not read: its file is being written on another node,
    # and SQLite's journal is not coherent across the machines of a network file system
    waiting = [t["task"] for t in task_states(db, name, count=False) if t["state"] in ("pending", "running", "unknown")]
    added = already = 0
    missing: list[int] = []
    incomplete: dict[int, tuple[int, int]] = {}
    damaged: dict[int, str] = {}
    node_warnings: list[str] = []  # each task's checks of its node (ASLR, a VM, busy CPUs...), said of that node
    with Store.open(db, create=False) as store:
        config_id = {c["position"]: c["id"] for c in store.configs(study.id)}
        have = {(r["config_id"], r["run_index"], r["warmup"]) for r in store.run_rows(name)}
        for task, share in enumerate(campaign["tasks"]):
            path = directory / f"task-{task}.db"
            if task in waiting:
                continue
            if not path.exists():
                missing.append(task)
                continue
            try:
                with Store.open(path, create=False, readonly=True) as source:
                    if source.study(name) is None:
                        missing.append(task)
                        continue
                    rows = source.run_rows(name, record=True)
                    task_study = source.study(name)
            except (UsageError, sqlite3.Error) as exc:  # a damaged task file: the others are merged all the same
                damaged[task] = unreadable_reason(exc)
                continue
            for row in rows:
                key = (config_id[row["position"]], row["run_index"], row["warmup"])
                if key in have:
                    already += 1
                    continue
                store.add_run(*key, **{f: row[f] for f in RUN_FIELDS})
                have.add(key)
                added += 1
            if len(rows) < len(share):
                incomplete[task] = (len(rows), len(share))
            host = task_study.machine.get("hostname") or f"task {task}"
            node_warnings += [f"node {host}: {w}" for w in task_study.warnings]
        new_warnings = [w for w in dict.fromkeys(node_warnings) if w not in study.warnings]
        store.add_warnings(study.id, new_warnings)
        expected = sum(len(share) for share in campaign["tasks"])
        if not missing and not incomplete and not damaged and not waiting and study.finished_at is None:
            store.finish(study.id)
    return {
        "study": name,
        "added": added,
        "already": already,
        "missing": missing,
        "incomplete": incomplete,
        "damaged": damaged,
        "waiting": waiting,
        "collected": len(have),
        "expected": expected,
        "warnings": new_warnings,
    }


def _squeue(job_ids: list[str]) -> dict[str, str] | None:
    """Array task id (``123_4``) -> state, for the tasks Slurm still has in its queue; None when
    squeue cannot be asked (missing, or failing: the controller is busy or down), so that no
    task is taken for ended when it may be running."""
    exe = shutil.which("squeue")
    if exe is None:
        return None
    if not job_ids:
        return {}
    jobs = sorted({j.split("_")[0] for j in job_ids})
    proc = subprocess.run([exe, "-h", "-r", "-j", ",".join(jobs), "-o", "%i|%T"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        # squeue answers "Invalid job id specified" once every job has left the queue
        return {} if "invalid job id" in proc.stderr.lower() else None
    states = {}
    for line in proc.stdout.splitlines():
        if "|" in line:
            job, state = line.strip().split("|", 1)
            states[job] = state
    return states


def _sacct(job_ids: list[str]) -> dict[str, str]:
    """Array task id -> state, where Slurm keeps accounting (else nothing)."""
    exe = shutil.which("sacct")
    if exe is None or not job_ids:
        return {}
    jobs = sorted({j.split("_")[0] for j in job_ids})
    proc = subprocess.run([exe, "-n", "-P", "-X", "-j", ",".join(jobs), "-o", "JobID,State"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {}
    return {line.split("|")[0]: line.split("|")[1].split()[0] for line in proc.stdout.splitlines() if line.count("|") >= 1}


_WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED", "RESIZING", "CONFIGURING"})
_RUNNING = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"})


def _stored_runs(path: Path, name: str) -> int | str:
    """The runs a task's database holds, or why it cannot be read."""
    if not path.exists():
        return 0
    try:
        with Store.open(path, create=False, readonly=True) as source:
            return len(source.run_rows(name)) if source.study(name) else 0
    except (UsageError, sqlite3.Error) as exc:
        return unreadable_reason(exc)


def unreadable_reason(exc: Exception) -> str:
    """Why a task's database cannot be read, without the advice meant for a study's own --db
    (a task's file is not one the user names)."""
    text = str(exc)
    for advice in (": give another --db path", "; give another --db path", "; nothing was written", ": run a study into it first", "; check "):
        text = text.split(advice)[0]
    return text


def _move_aside(path: Path, name: str, db: str) -> str:
    return f"move {path} aside (its runs are then run again) and resubmit the task with `pinlab study --resume {name} --db {shlex.quote(db)}`"


def task_states(db: str, name: str, count: bool = True, option: str = "--status") -> list[dict[str, Any]]:
    """Each task: its job, its state, runs stored and expected. The state is ``done`` or
    ``failed`` once the task has ended (its status file, else Slurm's accounting, else its absence
    from the queue), ``pending`` or ``running`` while Slurm has it, and ``unknown`` when squeue
    cannot be asked. ``count=False`` reads no task file (``runs`` is None): whether a task still
    runs needs none, and ``done`` then means only that it ended well."""
    study, campaign, directory = _campaign_of(db, name, option)
    jobs = campaign.get("jobs", {})
    queued = _squeue(list(jobs.values()))
    accounted = _sacct(list(jobs.values()))
    out = []
    for task, share in enumerate(campaign["tasks"]):
        job = jobs.get(str(task), "")
        stored = _stored_runs(directory / f"task-{task}.db", name) if count else None
        unreadable = stored if isinstance(stored, str) else None
        complete = stored is None or (unreadable is None and stored >= len(share))
        status_file = directory / f"task-{task}.status"
        output = directory / f"task-{task}.out"
        slurm_state = (queued or {}).get(job) or accounted.get(job, "")
        if unreadable is not None and slurm_state not in _WAITING | _RUNNING:
            state, detail = "failed", f"its database cannot be read ({unreadable}): move it aside, then --resume runs the task again"
        elif status_file.exists():  # written by the job script as the task ends (a resubmitted task's old one is removed)
            code = status_file.read_text().strip()
            state, detail = ("done", "") if code == "0" and complete else ("failed", f"exit status {code} (see {output})")
        elif slurm_state in _WAITING:
            state, detail = "pending", slurm_state
        elif slurm_state in _RUNNING:
            state, detail = "running", slurm_state
        elif slurm_state:  # ended in Slurm's accounting
            state = "done" if slurm_state == "COMPLETED" and complete else "failed"
            detail = slurm_state
        elif queued is None:
            state, detail = "unknown", "squeue cannot be asked: the task may still be queued or running"
        else:
            state, detail = "failed", f"ended without finishing (see {output})"
        out.append(
            {
                "task": task,
                "job": job,
                "state": state,
                "detail": detail,
                "runs": None if unreadable else stored,
                "expected": len(share),
                "unreadable": unreadable,
            }
        )
    return out


def resubmit(db: str, name: str, say: Callable[[str], None] = print) -> dict[str, Any]:
    """``--resume NAME`` of a campaign: resubmit its failed tasks (they keep the runs they stored)."""
    study, campaign, directory = _campaign_of(db, name)
    states = task_states(db, name, option="--resume")
    if any(t["state"] == "unknown" for t in states):
        raise UsageError(f"cannot tell which tasks of {name} have ended (squeue cannot be asked): nothing resubmitted; try again")
    unreadable = [t for t in states if t["state"] == "failed" and t["unreadable"]]
    if unreadable:  # resubmitted, the task would meet the same file and fail again
        listed = "; ".join(f"task {t['task']}: {t['unreadable']}" for t in unreadable)
        raise UsageError(
            f"{plural(len(unreadable), 'task')} of {name} cannot read {'its' if len(unreadable) == 1 else 'their'} database ({listed}): "
            f"move {'it' if len(unreadable) == 1 else 'them'} aside (the runs are then run again) and --resume again; nothing resubmitted"
        )
    failed = [t["task"] for t in states if t["state"] == "failed"]
    if not failed:
        return {"study": name, "resubmitted": [], "job": None}
    slurm = campaign["parameters"]["slurm"]
    for task in failed:
        (directory / f"task-{task}.status").unlink(missing_ok=True)
    job = sbatch([*slurm.get("sbatch_args", []), f"--array={','.join(map(str, failed))}", str(directory / JOB_SCRIPT)])
    campaign.setdefault("jobs", {}).update({str(t): f"{job}_{t}" for t in failed})
    _write_json(directory / CAMPAIGN, campaign)
    return {"study": name, "resubmitted": failed, "job": job}
