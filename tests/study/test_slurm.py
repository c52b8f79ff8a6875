"""Studies on a Slurm cluster: the split into array tasks, submission, the tasks' own databases,
collection, status and resubmission; end to end on a real one-host Slurm cluster when one can be
started here (root, Debian's packages), and with a stand-in sbatch otherwise."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pandas
import pytest

from pinlab.errors import UsageError
from pinlab.report.data import node_summary
from pinlab.study.plan import Program, StudyPlan
from pinlab.study.slurm import SlurmOptions, filesystem_type, split_runs
from tests.conftest import PINLAB, run_pinlab
from tests.study import slurm_cluster

WORKLOAD = "primes:--limit 20000"


def plan(runs=4, warmup=1, **kw) -> StudyPlan:
    return StudyPlan(name="p", programs=[Program("primes", ["x"])], strategies=["none", "compact"], threads=[1], runs=runs, warmup=warmup, **kw)


def test_every_run_belongs_to_exactly_one_task_and_every_node_runs_every_configuration():
    p = plan(runs=5, warmup=2)
    shares = split_runs(p, 3, 2)
    measured = [(c, r) for share in shares for c, r, w in share if not w]
    assert sorted(measured) == sorted((c, r) for c in range(3) for r in range(5))
    for k, share in enumerate(shares):
        assert {c for c, r, w in share if not w} == {0, 1, 2}
        assert all(r % 2 == k for c, r, w in share if not w)
        assert share[:6] == [(c, k * 2 + w, True) for w in range(2) for c in range(3)]  # its own warm-ups first
    warmups = [(c, r) for share in shares for c, r, w in share if w]
    assert len(warmups) == len(set(warmups)) == 2 * 2 * 3


def test_more_nodes_than_runs_and_adaptive_studies_are_refused():
    with pytest.raises(UsageError, match="--nodes 5 is more than --runs 4"):
        split_runs(plan(), 2, 5)
    with pytest.raises(UsageError, match="a Slurm campaign needs a fixed --runs"):
        split_runs(plan(runs="auto"), 2, 1)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(nodes=0), "--nodes must be at least 1"),
        (dict(time="soon"), "--time 'soon' is not a Slurm time limit"),
        (dict(partition="a b"), "--partition 'a b' is not a partition name"),
        (dict(results="/nonexistent/dir"), "results directory '/nonexistent/dir' does not exist"),
    ],
)
def test_slurm_options_are_checked(tmp_path, options, message):
    with pytest.raises(UsageError, match=message):
        SlurmOptions(**{"results": str(tmp_path), **options}).validate()


@pytest.mark.parametrize("limit", ["30", "1:30:00", "2-12", "2-12:30:00", "UNLIMITED", "10:00"])
def test_slurm_time_limits(tmp_path, limit):
    SlurmOptions(results=str(tmp_path), time=limit).validate()


def test_filesystem_type_of_a_directory():
    assert filesystem_type(Path("/proc/self")) == "proc"
    assert filesystem_type(Path("/")) not in ("", "unknown")


def test_nodes_of_different_hardware_are_warned_about():
    frame = pandas.DataFrame({"node": ["a", "a", "b", "c"], "node_hardware": ["X, 64 cores", "X, 64 cores", "X, 64 cores", "Y, 128 cores"]})
    nodes, warning = node_summary(frame)
    assert [(n["node"], n["runs"]) for n in nodes] == [("a", 2), ("b", 1), ("c", 1)]
    assert warning.startswith("the runs come from 2 kinds of node: X, 64 cores (a, b); Y, 128 cores (c)")
    assert node_summary(frame[frame["node"] != "c"])[1] is None


def test_one_host_whose_memory_figure_moved_is_one_kind_of_node():
    frame = pandas.DataFrame({"node": ["a", "a", "a", "b"], "node_hardware": ["X, 8 GiB", "X, 8 GiB", "X, 9 GiB", "X, 8 GiB"]})
    assert node_summary(frame)[1] is None
    frame.loc[3, "node_hardware"] = "Y, 8 GiB"
    assert node_summary(frame)[1].startswith("the runs come from 2 kinds of node: X, 8 GiB (a); Y, 8 GiB (b)")


@pytest.mark.skipif(not Path("/sys/devices/system/memory/block_size_bytes").exists(), reason="no memory blocks in sysfs")
def test_a_nodes_hardware_line_counts_its_memory_blocks_not_its_memtotal():
    """MemTotal moves (a VM's balloon, the kernel's reservations); the memory blocks online do not."""
    from pinlab.study.machine import node_identity

    root = Path("/sys/devices/system/memory")
    online = sum((d / "state").read_text().strip() == "online" for d in root.glob("memory[0-9]*"))
    installed = online * int((root / "block_size_bytes").read_text(), 16)
    assert node_identity()["hardware"].endswith(f", {round(installed / 2**30)} GiB")


# ------------------------------------------------------------------ with a stand-in sbatch


def fake_slurm(tmp_path: Path) -> dict[str, str]:
    """An environment whose sbatch records its arguments and answers job ids 101, 102..., and
    whose squeue and sacct know nothing (as a cluster without accounting, once jobs ended)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "sbatch": f'#!/bin/sh\necho "$@" >> {tmp_path}/sbatch.log\nn=$(wc -l < {tmp_path}/sbatch.log)\necho $((100 + n))\n',
        "squeue": "#!/bin/sh\nexit 0\n",
        "sacct": "#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n",
    }
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def submit_args(db: Path, results: Path, *more: str) -> list[str]:
    return [
        "study",
        "--backend",
        "slurm",
        "--db",
        str(db),
        "--results",
        str(results),
        "--name",
        "camp",
        "-s",
        "none,compact",
        "-n",
        "1",
        "--runs",
        "4",
        "--warmup",
        "1",
        "--workload",
        WORKLOAD,
        *more,
    ]


def test_submit_collect_status_and_resume_with_a_stand_in_sbatch(tmp_path):
    env = fake_slurm(tmp_path)
    db, results = tmp_path / "main.db", tmp_path / "results"
    results.mkdir()
    result = run_pinlab(*submit_args(db, results, "--nodes", "2", "--partition", "batch", "--time", "10:00", "--sbatch-arg=--account=proj"), env=env)
    assert result.returncode == 0, result.stderr
    assert "12 runs in 2 array tasks (one whole node each), Slurm job 101" in result.stderr  # 2 configs x (4 runs + a warm-up per task)
    campaign_dir = results / "camp"
    sbatch_line = (tmp_path / "sbatch.log").read_text().split()
    assert sbatch_line == ["--parsable", "--account=proj", str(campaign_dir / "job.sh")]
    script = (campaign_dir / "job.sh").read_text()
    for line in (
        "#SBATCH --array=0-1",
        "#SBATCH --exclusive",
        "#SBATCH --nodes=1",
        "#SBATCH --partition=batch",
        "#SBATCH --time=10:00",
        f'#SBATCH --output="{campaign_dir}/task-%a.out"',
    ):
        assert line in script.splitlines()
    campaign = json.loads((campaign_dir / "campaign.json").read_text())
    assert campaign["jobs"] == {"0": "101_0", "1": "101_1"}
    # nothing ran yet: both tasks have ended without a result as far as Slurm's tools tell
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=env)
    assert status.returncode == 0 and status.stdout.splitlines()[0] == "camp: 2 tasks: 0 pending, 0 running, 0 done, 2 failed", status.stdout
    # a node runs task 0, as the job script would
    task = subprocess.run(["bash", str(campaign_dir / "job.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "0"}, capture_output=True, text=True)
    assert task.returncode == 0, task.stderr
    assert (campaign_dir / "task-0.status").read_text().strip() == "0"
    collected = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert collected.returncode == 0, collected.stderr
    assert "6 new runs collected" in collected.stderr and "6 of 12 runs in all" in collected.stderr
    assert "1 task stored nothing yet: 1" in collected.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 6
        assert conn.execute("SELECT finished_at FROM studies WHERE name = 'camp'").fetchone()[0] is None
    # a task file that is not a database (a node wrote garbage): named, the rest kept as it was
    (campaign_dir / "task-1.db").write_bytes(b"not a database")
    damaged = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert damaged.returncode == 0 and "task 1's database cannot be read, its runs are not collected" in damaged.stderr, damaged.stderr
    (campaign_dir / "task-1.db").unlink()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 6
    again = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert "0 new runs collected into" in again.stderr and "(6 already there" in again.stderr
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=env)
    assert "1 done, 1 failed" in status.stdout.splitlines()[0]
    # --resume resubmits the failed task only
    resumed = run_pinlab("study", "--resume", "camp", "--db", str(db), env=env)
    assert resumed.returncode == 0 and "resubmitted 1 task (1) as Slurm job 102" in resumed.stderr, resumed.stderr
    assert (tmp_path / "sbatch.log").read_text().splitlines()[1].split() == [
        "--parsable",
        "--account=proj",
        "--array=1",
        str(campaign_dir / "job.sh"),
    ]
    task = subprocess.run(["bash", str(campaign_dir / "job.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "1"}, capture_output=True, text=True)
    assert task.returncode == 0, task.stderr
    collected = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert "6 new runs collected" in collected.stderr and "12 of 12 runs in all" in collected.stderr
    assert not [line for line in collected.stderr.splitlines() if "warning" in line and not line.startswith("pinlab: warning: node ")]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs WHERE warmup = 0").fetchone()[0] == 8
        assert conn.execute("SELECT finished_at FROM studies WHERE name = 'camp'").fetchone()[0] is not None
        tasks_runs = sum(sqlite3.connect(campaign_dir / f"task-{k}.db").execute("SELECT count(*) FROM runs").fetchone()[0] for k in (0, 1))
        assert tasks_runs == 12
    report = run_pinlab("report", "camp", "--db", str(db), "--json")
    data = json.loads(report.stdout)
    assert len(data["runs"]) == 8 and [n["runs"] for n in data["nodes"]] == [8]
    node = data["nodes"][0]["node"]
    by_node = run_pinlab("report", "camp", "--db", str(db), "--by-node")
    assert by_node.returncode == 0, by_node.stderr
    rows = [line for line in by_node.stdout.splitlines() if f" {node} " in line and "primes x1" in line]
    assert len(rows) == 2 and all(line.split("│")[4].strip() == "4" for line in rows), by_node.stdout  # 4 runs of each configuration there


def test_each_tasks_node_warnings_are_collected_with_its_runs(tmp_path):
    """A task's checks of its node (ASLR, a VM, busy CPUs) and of its environment (here an
    OMP_NUM_THREADS that disagrees with the plans) are stored with its runs; --collect brings
    them into the study, each said of its node, once however often it is collected."""
    env = fake_slurm(tmp_path)
    db, results = tmp_path / "main.db", tmp_path / "results"
    results.mkdir()
    assert run_pinlab(*submit_args(db, results, "--nodes", "2"), env=env).returncode == 0
    campaign_dir = results / "camp"
    task = subprocess.run(
        ["bash", str(campaign_dir / "job.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "0", "OMP_NUM_THREADS": "3"}, capture_output=True, text=True
    )
    assert task.returncode == 0, task.stderr
    with sqlite3.connect(campaign_dir / "task-0.db") as conn:
        machine, stored = conn.execute("SELECT machine, warnings FROM studies").fetchone()
    host, task_warnings = json.loads(machine)["hostname"], json.loads(stored)
    # the task left its file whole, in rollback-journal mode, with no -wal/-shm beside it
    assert sorted(p.name for p in campaign_dir.glob("task-0.db*")) == ["task-0.db"]
    with sqlite3.connect(f"file:{campaign_dir / 'task-0.db'}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert any("OMP_NUM_THREADS" in w for w in task_warnings)
    collected = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert collected.returncode == 0, collected.stderr
    expected = [f"node {host}: {w}" for w in task_warnings]
    assert [line for line in collected.stderr.splitlines() if line.startswith("pinlab: warning: node ")] == [
        f"pinlab: warning: {w}" for w in expected
    ]
    report = json.loads(run_pinlab("report", "camp", "--db", str(db), "--json").stdout)
    assert [w for w in report["warnings"] if w.startswith("node ")] == expected
    again = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert "warning: node" not in again.stderr
    with sqlite3.connect(db) as conn:
        assert json.loads(conn.execute("SELECT warnings FROM studies WHERE name = 'camp'").fetchone()[0]) == expected


def test_a_task_whose_database_cannot_be_read_is_said_so_and_not_resubmitted_blindly(tmp_path):
    """Task 0 ended well (status 0), then its file was overwritten: --status says it cannot be read
    (not "exit status 0" with 0 runs), --resume refuses in one line and submits nothing, and the
    task itself, run on it, says what to do with a task's file (not "give another --db path")."""
    env = fake_slurm(tmp_path)
    db, results = tmp_path / "main.db", tmp_path / "results"
    results.mkdir()
    assert run_pinlab(*submit_args(db, results, "--nodes", "2"), env=env).returncode == 0
    campaign_dir = results / "camp"
    task = subprocess.run(["bash", str(campaign_dir / "job.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "0"}, capture_output=True, text=True)
    assert task.returncode == 0 and (campaign_dir / "task-0.status").read_text().strip() == "0", task.stderr
    (campaign_dir / "task-0.db").write_bytes(b"garbage from a node" * 10)
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=env)
    assert status.returncode == 0 and status.stdout.splitlines()[0] == "camp: 2 tasks: 0 pending, 0 running, 0 done, 2 failed", status.stdout
    line = status.stdout.splitlines()[2].split(None, 4)
    assert line[:4] == ["0", "101_0", "failed", "?/6"], status.stdout
    assert line[4] == (
        f"its database cannot be read ({campaign_dir / 'task-0.db'} is not a pinlab study database (not an SQLite file)): "
        "move it aside, then --resume runs the task again"
    )
    assert status.stdout.splitlines()[3].endswith(f"ended without finishing (see {campaign_dir / 'task-1.out'})")
    resumed = run_pinlab("study", "--resume", "camp", "--db", str(db), env=env)
    assert resumed.returncode == 2 and resumed.stderr.count("\n") == 1, resumed.stderr
    assert "1 task of camp cannot read its database (task 0: " in resumed.stderr and resumed.stderr.rstrip().endswith("nothing resubmitted")
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1
    again = subprocess.run(["bash", str(campaign_dir / "job.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "0"}, capture_output=True, text=True)
    assert again.returncode == 2 and "give another --db" not in again.stderr
    assert (
        f"task 0's database cannot be read ({campaign_dir / 'task-0.db'} is not a pinlab study database (not an SQLite file)): "
        f"move {campaign_dir / 'task-0.db'} aside (its runs are then run again) and resubmit the task with `pinlab study --resume camp --db {db}`"
        in again.stderr
    ), again.stderr
    (campaign_dir / "task-0.db").unlink()
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=env)
    assert status.stdout.splitlines()[2].endswith(f"exit status 2 (see {campaign_dir / 'task-0.out'})"), status.stdout


def test_sbatch_missing_or_failing_is_one_line_and_stores_nothing(tmp_path):
    db, results = tmp_path / "main.db", tmp_path / "results"
    results.mkdir()
    env = fake_slurm(tmp_path)
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n")
    failed = run_pinlab(*submit_args(db, results, "--partition", "nope"), env=env)
    # one line, though the results directory is on a local file system (told only of a campaign that stands)
    assert failed.returncode == 2 and failed.stderr.strip() == "pinlab: error: sbatch failed: sbatch: error: invalid partition specified: nope"
    assert not db.exists() and not (results / "camp").exists()  # nothing left: the same name can be submitted again
    quoted = tmp_path / 'say "hi"'
    quoted.mkdir()
    refused = run_pinlab(*submit_args(db, quoted), env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and "has a double quote" in refused.stderr, refused.stderr
    assert not db.exists() and list(quoted.iterdir()) == []
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 7\n")
    again = run_pinlab(*submit_args(db, results), env=env)
    assert again.returncode == 0 and "Slurm job 7" in again.stderr, again.stderr
    (tmp_path / "bin" / "sbatch").unlink()
    bare = {**env, "PATH": f"{tmp_path / 'bin'}:/nonexistent"}
    missing = subprocess.run([str(PINLAB), *submit_args(db, results), "--name", "camp2"], env=bare, capture_output=True, text=True)
    assert missing.returncode == 2 and "sbatch not found" in missing.stderr, missing.stderr
    # told first, before the other checks: here a results directory that does not exist
    fresh = tmp_path / "fresh.db"
    first = subprocess.run([str(PINLAB), *submit_args(fresh, tmp_path / "nowhere")], env=bare, capture_output=True, text=True)
    assert first.returncode == 2 and first.stderr.startswith("pinlab: error: sbatch not found") and not fresh.exists(), first.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--collect", "nope"], "no study named 'nope'"),
        (["--status", "local"], "study local in"),
        (["--collect", "a", "--status", "b"], "give one of --collect NAME, --status NAME and --resume NAME"),
        (["--collect", ""], "pinlab: error: --collect needs the campaign's name: pinlab study --collect NAME --db FILE"),
        (["--status", " "], "pinlab: error: --status needs the campaign's name: pinlab study --status NAME --db FILE"),
        (["--status", "local"], "study local in {db} ran here, not on Slurm: --status is for a Slurm campaign's tasks (see pinlab report local)"),
        (
            ["--status", "local", "-s", "compact", "--nodes", "2"],
            "--status acts on a stored campaign with its own settings: leave --strategies, --nodes out",
        ),
        (["--nodes", "2", "--workload", WORKLOAD], "--results, --nodes, --partition, --time and --sbatch-arg are for --backend slurm"),
        (["--backend", "slurm", "--name", "x", "--workload", WORKLOAD], "--backend slurm: give the thread counts with -n"),
    ],
)
def test_campaign_commands_refuse_bad_input(tmp_path, args, message):
    db = tmp_path / "main.db"
    made = run_pinlab(
        "study", "--db", str(db), "--name", "local", "-s", "none", "-n", "1", "--runs", "1", "--warmup", "0", "--workload", WORKLOAD, "-q"
    )
    assert made.returncode == 0, made.stderr
    result = run_pinlab("study", "--db", str(db), *args)
    assert result.returncode == 2 and message.format(db=db) in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


# ------------------------------------------------------------------ on a real Slurm cluster


def test_a_study_runs_through_slurm_and_is_collected_into_one_report(slurm, tmp_path):
    cluster = slurm
    db, results = tmp_path / "main.db", tmp_path / "shared results"  # a blank in the path: sbatch must get it whole
    results.mkdir()
    submitted = run_pinlab(*submit_args(db, results, "--nodes", "2", "--time", "5"), env=cluster.env)
    assert submitted.returncode == 0, submitted.stderr
    assert slurm_cluster.wait_idle(cluster), "the campaign's jobs did not end within 3 minutes"
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=cluster.env)
    assert status.stdout.splitlines()[0] == "camp: 2 tasks: 0 pending, 0 running, 2 done, 0 failed", (
        status.stdout,
        *(p.read_text() for p in (results / "camp").glob("task-*.out")),
    )
    collected = run_pinlab("study", "--collect", "camp", "--db", str(db), env=cluster.env)
    assert collected.returncode == 0 and "12 new runs collected" in collected.stderr, collected.stderr
    report = json.loads(run_pinlab("report", "camp", "--db", str(db), "--json").stdout)
    assert len(report["runs"]) == 8 and all(r["status"] == "ok" for r in report["runs"])
    assert [n["node"] for n in report["nodes"]] == [cluster.node]
    local = tmp_path / "local.db"
    made = run_pinlab(
        "study", "--db", str(local), "--name", "camp", "-s", "none,compact", "-n", "1", "--runs", "4", "--warmup", "1", "--workload", WORKLOAD, "-q"
    )
    assert made.returncode == 0, made.stderr
    same = json.loads(run_pinlab("report", "camp", "--db", str(local), "--json").stdout)
    assert [r["config"] for r in same["stats"]] == [r["config"] for r in report["stats"]]  # the same report as a local study


def test_tasks_slurm_still_runs_are_never_taken_for_failed(tmp_path):
    """squeue failing (a busy controller) makes states unknown and --resume refuses; sacct's
    RUNNING and PENDING are running and pending; --collect leaves such tasks' files alone."""
    env = fake_slurm(tmp_path)
    db, results = tmp_path / "main.db", tmp_path / "results"
    results.mkdir()
    assert run_pinlab(*submit_args(db, results, "--nodes", "2"), env=env).returncode == 0
    bin_dir = tmp_path / "bin"
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'squeue: error: Socket timed out on send/recv operation' >&2\nexit 1\n")
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=env)
    assert status.stdout.splitlines()[0] == "camp: 2 tasks: 0 pending, 0 running, 0 done, 0 failed", status.stdout
    assert status.stdout.count("unknown") == 2
    resumed = run_pinlab("study", "--resume", "camp", "--db", str(db), env=env)
    assert resumed.returncode == 2 and "cannot tell which tasks of camp have ended" in resumed.stderr
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1  # nothing resubmitted
    (bin_dir / "sacct").write_text("#!/bin/sh\nprintf '101_0|RUNNING\\n101_1|PENDING\\n'\n")
    status = run_pinlab("study", "--status", "camp", "--db", str(db), env=env)
    assert status.stdout.splitlines()[0] == "camp: 2 tasks: 1 pending, 1 running, 0 done, 0 failed", status.stdout
    collected = run_pinlab("study", "--collect", "camp", "--db", str(db), env=env)
    assert "2 tasks still queued or running, not read yet: 0, 1" in collected.stderr, collected.stderr


def test_a_cancelled_task_says_so_and_its_resubmission_keeps_the_first_output(slurm, tmp_path):
    """scancel of a task mid-run: its task-K.out says it was stopped, how many runs it stored and
    how to resubmit it on Slurm (no traceback, no local --resume advice); the resubmitted task
    adds its output to the same file, so the first attempt's end stays readable."""
    import time

    cluster = slurm
    db, results = tmp_path / "main.db", tmp_path / "results"
    results.mkdir()
    submitted = run_pinlab(
        "study",
        "--backend",
        "slurm",
        "--db",
        str(db),
        "--results",
        str(results),
        "--name",
        "slow",
        "-s",
        "none",
        "-n",
        "1",
        "--runs",
        "6",
        "--warmup",
        "0",
        "--time",
        "5",
        "--",
        "sleep",
        "1.5",
        env=cluster.env,
    )
    assert submitted.returncode == 0, submitted.stderr
    campaign_dir = results / "slow"
    job = json.loads((campaign_dir / "campaign.json").read_text())["jobs"]["0"]
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline and not stored:  # cancelled once it has stored a run: the trigger is the store, not a clock
        time.sleep(0.3)
        if (campaign_dir / "task-0.db").exists():
            try:
                with sqlite3.connect(f"file:{campaign_dir / 'task-0.db'}?mode=ro", uri=True) as conn:
                    stored = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            except sqlite3.Error:
                pass
    assert stored, "task 0 stored no run within 2 minutes"
    subprocess.run(["scancel", job], env=cluster.env, check=True)
    assert slurm_cluster.wait_idle(cluster), "the cancelled task did not end"
    first = (campaign_dir / "task-0.out").read_text()
    assert "Traceback" not in first and "continue with --resume" not in first, first
    assert "pinlab: task 0 of study slow stopped by signal 15 (scancel, its time limit or its node going down); " in first, first
    assert f"of its 6 stored: resubmit it with `pinlab study --resume slow --db {db}` (it keeps them and does the rest)" in first
    status = run_pinlab("study", "--status", "slow", "--db", str(db), env=cluster.env)
    assert status.stdout.splitlines()[0] == "slow: 1 tasks: 0 pending, 0 running, 0 done, 1 failed", status.stdout
    resumed = run_pinlab("study", "--resume", "slow", "--db", str(db), env=cluster.env)
    assert resumed.returncode == 0 and "resubmitted 1 task (0)" in resumed.stderr, resumed.stderr
    assert slurm_cluster.wait_idle(cluster), "the resubmitted task did not end"
    both = (campaign_dir / "task-0.out").read_text()
    assert both.startswith(first) and "pinlab: task 0 of study slow: 6 runs stored in" in both[len(first) :], both
    assert both.count("pinlab: task 0, Slurm job ") == 2
    collected = run_pinlab("study", "--collect", "slow", "--db", str(db), env=cluster.env)
    assert collected.returncode == 0 and "6 of 6 runs in all" in collected.stderr, collected.stderr
