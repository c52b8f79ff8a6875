"""The study database keeps every run, refuses files that are not its own, and survives kills and full disks.

Every test works on real SQLite files under tmp_path; the kill tests run a writer in a child process.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pinlab.errors import UsageError
from pinlab.study.columns import RUN_FIELDS, canonical_json, dataframe, fields_from_record
from pinlab.study.store import APPLICATION_ID, SCHEMA_VERSION, DuplicateRun, Store
from pinlab.version import __version__

PARAMS = {"repeats": 5, "warmups": 1, "strategies": ["compact", "scatter"], "timeout_s": 60.0, "nested": {"b": 1, "a": [1.5, None]}}
CONFIGS = [
    {
        "program": "/usr/bin/stream",
        "argv": ["--size", "20M"],
        "threads": 4,
        "placement": "compact",
        "mem": "local",
        "corun": None,
        "extra": {"label": "s4c"},
    },
    {
        "program": "/usr/bin/stream",
        "argv": ["--size", "20M"],
        "threads": 4,
        "placement": "scatter",
        "mem": "interleave",
        "corun": "stream:2",
        "extra": {},
    },
    {"program": "sleep", "threads": 1, "placement": None},
]
MACHINE = {"cpu_model": "Test CPU @ 2.0GHz", "kernel": "6.1.0", "governor": "performance", "topology": {"cores": 8, "nodes": 2}}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def new_store(tmp_path: Path, name: str = "study.db") -> Store:
    return Store.open(tmp_path / name)


def new_study(store: Store, name: str = "s1", **changes):
    args = dict(parameters=PARAMS, configs=CONFIGS, seed=42, machine=MACHINE, tool_version="0.1.0", warnings=["governor is powersave"])
    args.update(changes)
    return store.create_study(name, **args)


def full_run(position: int, index: int, big: int = 0) -> dict:
    """Every run field, derived from (configuration position, index) so a reader can check a stored run."""
    return {
        "status": ("ok", "failed", "timeout")[index % 3],
        "started_at": 1_700_000_000.0 + index + position / 10,
        "wall_seconds": 1.25 + index / 3,
        "user_seconds": 0.1 * index,
        "system_seconds": 1e-300 * (index + 1),
        "metric": 12345.678 + index if index % 3 == 0 else None,
        "exit_status": 0 if index % 3 == 0 else 1,
        "signal": 9 if index % 3 == 2 else None,
        "migrations": index * 7,
        "voluntary_context_switches": 2**40 + index,
        "involuntary_context_switches": index,
        "max_rss_kib": 123456,
        "placement_cpus": [0, 2, 4, position],
        "record": {
            "pinlab_run": 1,
            "argv": ["x", "ü", "\udcff"],
            "wall_seconds": 1.25 + index / 3,
            "index": index,
            "threads": [{"tid": t, "sample_cpus": list(range(10))} for t in range(3)],
            "pad": "x" * big,
        },
        "stderr_tail": f"error at run {index}\nlast line é ✓ \x00 end",
    }


def assert_run_equals(stored: dict, given: dict) -> None:
    for name in RUN_FIELDS:
        value = given.get(name)
        if name == "record" and value is not None:
            value = json.loads(canonical_json(value))  # a lone surrogate survives; tuples come back as lists
        assert stored[name] == value, name


# --------------------------------------------------------------------------- layout and round trip


def test_round_trip_of_every_field(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store, name="étude ✓")
    assert study.name == "étude ✓" and study.parameters == PARAMS and study.seed == 42
    assert study.machine == MACHINE and study.tool_version == "0.1.0" and study.warnings == ["governor is powersave"]
    assert study.finished_at is None and abs(study.created_at - time.time()) < 60
    configs = store.configs(study.id)
    assert [c["position"] for c in configs] == [0, 1, 2]
    for given, stored in zip(CONFIGS, configs):
        expected = {"argv": [], "mem": None, "corun": None, "extra": {}, **given}
        assert {k: stored[k] for k in expected} == expected
    given = {}
    for config in configs:
        for index in range(3):
            given[(config["id"], index)] = full_run(config["position"], index)
            store.add_run(config["id"], index, False, **given[(config["id"], index)])
    warm = full_run(9, 0)
    store.add_run(configs[0]["id"], 0, True, **warm)

    def check(store: Store) -> None:
        runs = store.runs(study.id, warmup=False)
        assert len(runs) == 9
        for run in runs:
            assert_run_equals(run, given[(run["config_id"], run["run_index"])])
            assert run["warmup"] is False
        (warm_run,) = store.runs(study.id, warmup=True)
        assert warm_run["warmup"] is True and warm_run["run_index"] == 0
        assert_run_equals(warm_run, warm)
        # The bytes stored are the canonical JSON of what was given, and the columns have their SQL types.
        raw = store.connection.execute(
            "SELECT record, placement_cpus, typeof(wall_seconds), typeof(max_rss_kib),"
            " typeof(metric), stderr_tail FROM runs WHERE config_id = ? AND run_index = 0"
            " AND warmup = 0",
            (configs[0]["id"],),
        ).fetchone()
        first = given[(configs[0]["id"], 0)]
        assert raw == (canonical_json(first["record"]), "[0,2,4,0]", "real", "integer", "real", first["stderr_tail"])
        row = store.connection.execute("SELECT parameters, machine FROM studies").fetchone()
        assert row == (canonical_json(PARAMS), canonical_json(MACHINE))
        assert row[0] == json.dumps(PARAMS, sort_keys=True, separators=(",", ":"))
        frame = store.run_rows("étude ✓", record=True)
        assert len(frame) == 10
        for row in frame:
            if not row["warmup"]:
                assert_run_equals(row, given[(row["config_id"], row["run_index"])])
            config = configs[row["position"]]
            assert (row["study"], row["program"], row["argv"], row["threads"], row["placement"], row["mem"], row["corun"], row["extra"]) == (
                "étude ✓",
                config["program"],
                config["argv"],
                config["threads"],
                config["placement"],
                config["mem"],
                config["corun"],
                config["extra"],
            )
        assert "record" not in store.run_rows("étude ✓")[0]

    check(store)
    store.close()
    with Store.open(tmp_path / "study.db", create=False) as again:
        check(again)
        assert again.study("étude ✓") == study and again.studies() == [study]
    with Store.open(tmp_path / "study.db", readonly=True) as reader:
        check(reader)


def test_numbers_are_normalised_not_lost(tmp_path):
    numpy = pytest.importorskip("numpy")
    store = new_store(tmp_path)
    study = new_study(store)
    config = store.configs(study.id)[0]["id"]
    store.add_run(
        config,
        0,
        status="ok",
        wall_seconds=numpy.float64(2.5),
        max_rss_kib=numpy.int64(77),
        metric=float("nan"),
        migrations=3.0,
        placement_cpus=numpy.array([3, 1]),
        record={"v": numpy.float32(0.5), "cpus": {2, 1}},
    )
    (run,) = store.runs(study.id)
    assert run["wall_seconds"] == 2.5 and run["max_rss_kib"] == 77 and run["migrations"] == 3
    assert run["metric"] is None  # SQLite stores NaN as NULL (documented)
    assert run["placement_cpus"] == [3, 1] and run["record"] == {"v": 0.5, "cpus": [1, 2]}


def test_database_settings_and_wal_files_while_open(tmp_path):
    path = tmp_path / "study.db"
    store = Store.open(path)
    new_study(store)
    conn = store.connection
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 1
    assert store.meta()["pinlab_schema"] == "1" and store.meta()["created_by"] == __version__ and "created_at" in store.meta()
    assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    store.close()
    assert not Path(f"{path}-wal").exists()  # checkpointed into the main file at the last close
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_an_empty_file_is_adopted(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    with Store.open(path) as store:
        assert new_study(store).name == "s1"
    with Store.open(path, create=False) as store:
        assert [s.name for s in store.studies()] == ["s1"]


# --------------------------------------------------------------------------- files that are not ours


def _text_file(path):
    path.write_text("name,value\nfoo,1\n")


def _random_bytes(path):
    path.write_bytes(os.urandom(8192))


def _fake_header(path):
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))


def _other_sqlite(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.commit()
    conn.close()


def _other_application(path):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE studies (id INTEGER)")
    conn.commit()
    conn.close()


def _newer_pinlab(path):
    with Store.open(path) as store:
        new_study(store)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


def _mark_without_tables(path):
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()


FOREIGN = {
    "text file": (_text_file, "not an SQLite file"),
    "random bytes": (_random_bytes, "not an SQLite file"),
    "SQLite header then garbage": (_fake_header, "is damaged"),
    "another program's SQLite database": (_other_sqlite, "SQLite database of another program"),
    "another application id": (_other_application, "SQLite database of another program"),
    "pinlab database of schema 99": (
        _newer_pinlab,
        f"has study schema 99 (written by pinlab {__version__}), newer than this pinlab reads (1): upgrade pinlab",
    ),
    "pinlab mark without pinlab tables": (_mark_without_tables, "carries pinlab's mark but not its schema"),
}


@pytest.mark.parametrize("mode", ["create", "existing", "readonly"])
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_foreign_file_is_refused_and_left_byte_for_byte(tmp_path, kind, mode):
    make, message = FOREIGN[kind]
    path = tmp_path / "data.db"
    make(path)
    before, files_before = sha(path), sorted(os.listdir(tmp_path))
    with pytest.raises(UsageError) as caught:
        Store.open(path, create=(mode == "create"), readonly=(mode == "readonly"))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and caught.value.exit_status == 2
    assert sha(path) == before
    assert sorted(os.listdir(tmp_path)) == files_before  # no -wal, -shm or -journal left next to it


def test_missing_places_are_refused(tmp_path):
    with pytest.raises(UsageError, match="directory .* does not exist"):
        Store.open(tmp_path / "no" / "such" / "study.db")
    with pytest.raises(UsageError, match="no study database at"):
        Store.open(tmp_path / "absent.db", create=False)
    with pytest.raises(UsageError, match="no study database at"):
        Store.open(tmp_path / "absent.db", readonly=True)
    assert not (tmp_path / "absent.db").exists()
    with pytest.raises(UsageError, match="is a directory"):
        Store.open(tmp_path)


def test_readonly_store_refuses_writes(tmp_path):
    with new_store(tmp_path) as store:
        study = new_study(store)
    with Store.open(tmp_path / "study.db", readonly=True) as reader:
        with pytest.raises(UsageError, match="read-only"):
            reader.add_run(reader.configs(study.id)[0]["id"], 0, status="ok")
        with pytest.raises(UsageError, match="read-only"):
            new_study(reader, name="s2")


# --------------------------------------------------------------------------- studies


def test_same_study_again_is_returned_other_parameters_refused(tmp_path):
    store = new_store(tmp_path)
    first = new_study(store)
    config = store.configs(first.id)[0]["id"]
    store.add_run(config, 0, **full_run(0, 0))
    # Same parameters (key order and tuples do not matter), same configurations, same seed: the same study.
    again = new_study(
        store,
        parameters=dict(reversed(list({**PARAMS, "strategies": ("compact", "scatter")}.items()))),
        machine={"other": "machine"},
        tool_version="0.2.0",
    )
    assert again == first
    assert len(store.configs(first.id)) == 3 and store.completed(first.id)[config] == 1
    content = store.connection.execute("SELECT * FROM studies").fetchall(), store.connection.execute("SELECT * FROM configs").fetchall()
    changes = {
        "parameters": {"parameters": {**PARAMS, "repeats": 6}},
        "seed": {"seed": 43},
        "configurations": {"configs": CONFIGS[:2]},
    }
    for what, change in changes.items():
        with pytest.raises(UsageError) as caught:
            new_study(store, **change)
        text = str(caught.value)
        assert text.startswith("study s1 already exists with other parameters (") and what in text
        assert text.endswith(": choose another --name or --resume s1")
    changed_config = [dict(CONFIGS[0], threads=8), *CONFIGS[1:]]
    with pytest.raises(UsageError, match="configurations"):
        new_study(store, configs=changed_config)
    assert (store.connection.execute("SELECT * FROM studies").fetchall(), store.connection.execute("SELECT * FROM configs").fetchall()) == content
    other = new_study(store, name="s2", parameters={**PARAMS, "repeats": 6})
    assert other.id != first.id and [s.name for s in store.studies()] == ["s1", "s2"]


def test_study_lookup_and_finish(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store)
    assert store.study("nope") is None
    with pytest.raises(UsageError, match=r"no study named nope in .* \(studies there: s1\)"):
        store.study("nope", must_exist=True)
    with pytest.raises(UsageError, match="no study named nope"):
        store.run_rows("nope")
    finished = store.finish(study.id)
    assert store.study("s1").finished_at == finished and store.study("s1").finished


def test_bad_configurations_are_programming_errors(tmp_path):
    store = new_store(tmp_path)
    with pytest.raises(TypeError, match="unknown keys"):
        new_study(store, configs=[{"program": "x", "threads": 1, "colour": "red"}])
    with pytest.raises(ValueError, match="threads must be at least 1"):
        new_study(store, configs=[{"program": "x", "threads": 0}])
    with pytest.raises(TypeError, match="argv must be a list of strings"):
        new_study(store, configs=[{"program": "x", "threads": 1, "argv": "-n 3"}])
    assert store.studies() == []  # nothing half-stored


# --------------------------------------------------------------------------- runs


def test_duplicate_run_is_refused_and_the_first_kept(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store)
    config = store.configs(study.id)[0]["id"]
    first = full_run(0, 0)
    store.add_run(config, 0, **first)
    with pytest.raises(DuplicateRun) as caught:
        store.add_run(config, 0, **full_run(0, 1))
    assert isinstance(caught.value, UsageError) and caught.value.exit_status == 2
    assert "run 0 of configuration 0 (study s1) is already stored" in str(caught.value)
    (run,) = store.runs(study.id)
    assert_run_equals(run, first)
    assert not store.connection.in_transaction
    store.add_run(config, 0, warmup=True, status="ok")  # a warm-up has its own numbering
    store.add_run(config, 1, **full_run(0, 1))  # and the store goes on
    assert len(store.runs(study.id)) == 3


def test_bad_runs_are_refused_before_anything_is_written(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store)
    config = store.configs(study.id)[0]["id"]
    with pytest.raises(ValueError, match="status"):
        store.add_run(config, 0, status="crashed")
    with pytest.raises(TypeError, match="unknown run fields"):
        store.add_run(config, 0, status="ok", wall=1.0)
    with pytest.raises(ValueError, match="run_index"):
        store.add_run(config, -1, status="ok")
    with pytest.raises(ValueError, match="no configuration with id 999"):
        store.add_run(999, 0, status="ok")
    with pytest.raises(TypeError, match="wall_seconds must be a number"):
        store.add_run(config, 0, status="ok", wall_seconds="fast")
    assert store.runs(study.id) == []


def test_completed_and_failures(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store)
    a, b, c = (config["id"] for config in store.configs(study.id))
    assert store.completed(study.id) == {a: 0, b: 0, c: 0}
    store.add_run(a, 0, warmup=True, status="ok")
    for index, status in enumerate(["ok", "failed", "timeout", "ok"]):
        store.add_run(a, index, status=status, stderr_tail=f"tail {index}" if status != "ok" else None)
    store.add_run(b, 0, status="ok")
    store.add_run(b, 0, warmup=True, status="failed", stderr_tail="warm-up failed")
    assert store.completed(study.id) == {a: 4, b: 1, c: 0}
    assert store.completed(study.id, warmup=True) == {a: 1, b: 1, c: 0}
    failures = store.failures(study.id)
    assert [(f["config_id"], f["run_index"], f["warmup"], f["status"], f["stderr_tail"]) for f in failures] == [
        (a, 1, False, "failed", "tail 1"),
        (a, 2, False, "timeout", "tail 2"),
        (b, 0, True, "failed", "warm-up failed"),
    ]
    other = new_study(store, name="s2", seed=1)
    assert set(store.completed(other.id).values()) == {0} and store.failures(other.id) == []


def test_fields_from_a_run_record_and_dataframe(tmp_path):
    from pinlab.launch.record import RunRecord, ThreadRecord

    record = RunRecord(
        argv=["prog", "-n"],
        plan={"cpus": [0, 2]},
        options={},
        started_at=1700000000.5,
        wall_seconds=2.0,
        user_seconds=3.5,
        system_seconds=0.25,
        max_rss_kib=4096,
        voluntary_context_switches=10,
        involuntary_context_switches=2,
        exit_status=0,
        threads=[ThreadRecord(tid=5, pid=5, sample_times=[0.0, 0.1], sample_cpus=[0, 2])],
    ).to_json()
    store = new_store(tmp_path)
    study = new_study(store)
    config = store.configs(study.id)[0]["id"]
    fields = fields_from_record(record)
    store.add_run(config, 0, status="ok", metric=99.5, **fields)
    (run,) = store.runs(study.id)
    assert run["record"] == record and run["placement_cpus"] == [0, 2] and run["migrations"] == 1
    assert (run["wall_seconds"], run["user_seconds"], run["max_rss_kib"], run["metric"]) == (2.0, 3.5, 4096, 99.5)
    frame = dataframe(store.run_rows("s1"))
    assert list(frame["metric"]) == [99.5] and list(frame["placement"]) == ["compact"] and "record" not in frame
    assert list(dataframe([]).columns)[:3] == ["study", "config_id", "position"]


# --------------------------------------------------------------------------- kills, Ctrl-C, full disks


CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[3])
    from pinlab.study.store import Store
    from test_store import CONFIGS, MACHINE, PARAMS, full_run
    store = Store.open(sys.argv[1])
    study = store.create_study("killed", PARAMS, CONFIGS, 42, MACHINE, "0.1.0")
    configs = store.configs(study.id)
    mode = sys.argv[2]
    try:
        while True:
            done = store.completed(study.id)
            config = min(configs, key=lambda c: (done[c["id"]], c["position"]))
            index = done[config["id"]]
            store.add_run(config["id"], index, False, **full_run(config["position"], index, big=30000))
            print(config["id"], index, flush=True)
    except KeyboardInterrupt:
        if mode == "catch":
            store.finish(study.id)  # the store is still usable after an interrupted add_run
            store.close()
            print("interrupted", flush=True)
            sys.exit(130)
        raise
""")


def _start_writer(db: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), mode, str(Path(__file__).parent)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for_runs(child: subprocess.Popen, count: int) -> list[tuple[int, int]]:
    seen = []
    while len(seen) < count:
        line = child.stdout.readline()
        assert line, f"writer ended early: {child.stderr.read()}"
        config_id, index = map(int, line.split())
        seen.append((config_id, index))
    return seen


def _check_consistent(db: Path, acknowledged: list[tuple[int, int]]) -> dict[int, int]:
    """integrity_check ok; every run complete and equal to what was written; indexes 0..k-1 per configuration."""
    with Store.open(db, create=False) as store:
        assert store.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert store.connection.execute("PRAGMA foreign_key_check").fetchall() == []
        study = store.study("killed", must_exist=True)
        positions = {c["id"]: c["position"] for c in store.configs(study.id)}
        indexes: dict[int, list[int]] = {c: [] for c in positions}
        for run in store.runs(study.id):
            indexes[run["config_id"]].append(run["run_index"])
            assert_run_equals(run, full_run(positions[run["config_id"]], run["run_index"], big=30000))
        for config_id, found in indexes.items():
            assert sorted(found) == list(range(len(found)))
        for config_id, index in acknowledged:  # every run whose add_run returned is there
            assert index in indexes[config_id]
        assert store.completed(study.id) == {c: len(found) for c, found in indexes.items()}
        return store.completed(study.id)


def test_kill_9_leaves_a_consistent_database_and_resume_goes_on(tmp_path):
    db = tmp_path / "study.db"
    total = 0
    for _ in range(3):  # kill, resume, kill, resume, ...: never a duplicate, never a gap
        child = _start_writer(db, "uncaught")
        acknowledged = _wait_for_runs(child, 15)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        child.stdout.close(), child.stderr.close()
        counts = _check_consistent(db, acknowledged)
        assert sum(counts.values()) >= total + 15
        total = sum(counts.values())


@pytest.mark.parametrize("mode", ["catch", "uncaught"])
def test_ctrl_c_leaves_a_consistent_database(tmp_path, mode):
    db = tmp_path / "study.db"
    child = _start_writer(db, mode)
    acknowledged = _wait_for_runs(child, 20)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    acknowledged += [tuple(map(int, line.split())) for line in out.splitlines() if line[0].isdigit()]
    if mode == "catch":
        assert child.returncode == 130 and out.endswith("interrupted\n"), err
    else:
        # An uncaught KeyboardInterrupt ends Python by SIGINT (status 130 in a shell).
        assert child.returncode in (1, -signal.SIGINT) and "KeyboardInterrupt" in err
    counts = _check_consistent(db, acknowledged)
    assert sum(counts.values()) >= 20
    with Store.open(db) as store:
        assert store.study("killed").finished == (mode == "catch")


def test_an_interrupt_inside_a_write_rolls_it_back_and_the_store_goes_on(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store)
    config = store.configs(study.id)[0]["id"]
    store.add_run(config, 0, **full_run(0, 0))
    with pytest.raises(KeyboardInterrupt):
        with store._write("storing a run", "s1") as conn:  # Ctrl-C between the INSERT and the COMMIT
            conn.execute("INSERT INTO runs (config_id, run_index, warmup, status, stored_at) VALUES (?, 1, 0, 'ok', 0)", (config,))
            raise KeyboardInterrupt
    assert not store.connection.in_transaction
    assert [r["run_index"] for r in store.runs(study.id)] == [0]
    store.add_run(config, 1, **full_run(0, 1))
    store.finish(study.id)
    store.close()
    with Store.open(tmp_path / "study.db") as again:
        assert again.completed(study.id)[config] == 2 and again.study("s1").finished


def test_disk_full_is_a_usage_error_and_earlier_runs_are_intact(tmp_path):
    store = new_store(tmp_path)
    study = new_study(store)
    config = store.configs(study.id)[0]["id"]
    pages = store.connection.execute("PRAGMA page_count").fetchone()[0]
    store.connection.execute(f"PRAGMA max_page_count = {pages + 40}")  # about 160 KiB more, then SQLITE_FULL
    stored = []
    with pytest.raises(UsageError) as caught:
        for index in range(1000):
            store.add_run(config, index, **full_run(0, index, big=20000))
            stored.append(index)
    text = str(caught.value)
    assert text.startswith(f"disk full while storing run {len(stored)} of configuration 0 (study s1) in {tmp_path / 'study.db'}")
    assert text.endswith("free space; the runs stored so far are intact; `pinlab study --resume s1` continues")
    assert caught.value.exit_status == 2 and "\n" not in text
    assert 2 <= len(stored) < 1000 and not store.connection.in_transaction
    runs = store.runs(study.id)
    assert [r["run_index"] for r in runs] == stored
    for run in runs:
        assert_run_equals(run, full_run(0, run["run_index"], big=20000))
    assert store.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Space is back: the run that did not fit is stored under the same index, nothing repeated.
    store.connection.execute("PRAGMA max_page_count = 1073741823")
    store.add_run(config, len(stored), **full_run(0, len(stored), big=20000))
    store.close()
    with Store.open(tmp_path / "study.db") as again:
        assert again.completed(study.id)[config] == len(stored) + 1


FILE_LIMIT_CHILD = textwrap.dedent("""
    import resource, signal, sys
    sys.path.insert(0, sys.argv[2])
    from pinlab.errors import UsageError
    from pinlab.study.store import Store
    from test_store import CONFIGS, MACHINE, PARAMS, full_run
    store = Store.open(sys.argv[1])
    study = store.create_study("s1", PARAMS, CONFIGS, 42, MACHINE, "0.1.0")
    config = store.configs(study.id)[0]["id"]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG / a short write
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    index = 0
    try:
        while True:
            store.add_run(config, index, **full_run(0, index, big=20000))
            index += 1
    except UsageError as error:
        print(index)
        print(error)
""")


def test_a_write_that_the_file_system_refuses_is_a_usage_error(tmp_path):
    db = tmp_path / "study.db"
    result = subprocess.run(
        [sys.executable, "-c", FILE_LIMIT_CHILD, str(db), str(Path(__file__).parent)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    count, message = result.stdout.splitlines()
    assert int(count) >= 2
    assert message.startswith(("disk full while storing run", "could not write")), message
    assert message.endswith("`pinlab study --resume s1` continues")
    with Store.open(db, create=False) as store:
        assert store.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        runs = store.runs(store.study("s1").id)
        assert [r["run_index"] for r in runs] == list(range(int(count)))
        for run in runs:
            assert_run_equals(run, full_run(0, run["run_index"], big=20000))


# --------------------------------------------------------------------------- readers while a study writes


def test_reader_sees_a_consistent_snapshot_while_writing(tmp_path):
    db = tmp_path / "study.db"
    writer = Store.open(db)
    study = new_study(writer)
    config = writer.configs(study.id)[0]["id"]
    for index in range(3):
        writer.add_run(config, index, **full_run(0, index))
    reader = Store.open(db, readonly=True)
    with reader.snapshot():
        assert len(reader.runs(study.id)) == 3
        started = time.monotonic()
        for index in range(3, 6):  # the writer is not blocked by the open read transaction
            writer.add_run(config, index, **full_run(0, index))
        assert time.monotonic() - started < 5
        assert len(reader.runs(study.id)) == 3 and reader.completed(study.id)[config] == 3
    assert len(reader.runs(study.id)) == 6
    reader.close()
    writer.close()


def test_reader_in_another_process_never_sees_a_partial_state(tmp_path):
    db = tmp_path / "study.db"
    child = _start_writer(db, "uncaught")
    try:
        _wait_for_runs(child, 1)
        reader = Store.open(db, readonly=True)
        study = reader.study("killed", must_exist=True)
        positions = {c["id"]: c["position"] for c in reader.configs(study.id)}
        seen = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            with reader.snapshot():
                runs = reader.runs(study.id)
                done = reader.completed(study.id)
                frame = reader.run_rows("killed")
            assert len(runs) == len(frame) == sum(done.values()) >= seen
            for config_id, count in done.items():
                assert sorted(r["run_index"] for r in runs if r["config_id"] == config_id) == list(range(count))
            for run in runs[-3:]:
                assert_run_equals(run, full_run(positions[run["config_id"]], run["run_index"], big=30000))
            seen = len(runs)
        reader.close()
        assert seen > 1
    finally:
        child.kill()
        child.communicate(timeout=30)
