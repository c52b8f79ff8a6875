"""The study database: one SQLite file (WAL) that keeps every run as soon as it finishes.

The schema, the pragmas and why they are set are described in ``docs/store.md``. The rules the
code keeps:

* A file is written only once it is known to be pinlab's (or empty): it is first inspected
  through a read-only connection, and a text file, another program's SQLite database or a
  database of a newer schema is refused with :class:`~pinlab.errors.UsageError`, untouched.
* Every write is one short ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction; :meth:`Store.add_run`
  commits one run, so a kill right after it returns loses nothing, and a kill during it leaves
  the database as it was before (SQLite's atomic commit).
* Errors the user can act on (disk full, database locked, file not writable) become one-line
  ``UsageError`` messages that say the runs stored so far are intact and how to continue.

Only the standard library is used (no ORM, no pandas). The columns of a run and the encoding of
their values are in :mod:`pinlab.study.columns`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from pinlab.errors import UsageError
from pinlab.study.columns import (
    CONFIG_KEYS,
    FRAME_COLUMNS,
    INT_FIELDS,
    JSON_FIELDS,
    REAL_FIELDS,
    RUN_COLUMNS,
    RUN_FIELDS,
    RUN_STATUSES,
    canonical_json,
    integer_value,
    loads_json,
    real_value,
    text_value,
)
from pinlab.version import __version__

#: ``PRAGMA application_id`` of every pinlab study database: the bytes "PNLB".
APPLICATION_ID = 0x504E4C42
#: ``PRAGMA user_version``; raised whenever the tables change (see docs/store.md, "Versions").
SCHEMA_VERSION = 1
#: How long a write waits for another connection's write to finish before giving up.
BUSY_TIMEOUT_S = 30.0

_SQLITE_HEADER = b"SQLite format 3\x00"
_TABLES = ("meta", "studies", "configs", "runs")

_SCHEMA = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE studies (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE CHECK (name <> ''),
        parameters TEXT NOT NULL,
        seed INTEGER,
        created_at REAL NOT NULL,
        finished_at REAL,
        machine TEXT NOT NULL,
        tool_version TEXT NOT NULL,
        warnings TEXT NOT NULL DEFAULT '[]'
    )""",
    """CREATE TABLE configs (
        id INTEGER PRIMARY KEY,
        study_id INTEGER NOT NULL REFERENCES studies(id),
        position INTEGER NOT NULL CHECK (position >= 0),
        program TEXT NOT NULL,
        argv TEXT NOT NULL DEFAULT '[]',
        threads INTEGER NOT NULL CHECK (threads >= 1),
        placement TEXT,
        mem TEXT,
        corun TEXT,
        extra TEXT NOT NULL DEFAULT '{}',
        UNIQUE (study_id, position)
    )""",
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        config_id INTEGER NOT NULL REFERENCES configs(id),
        run_index INTEGER NOT NULL CHECK (run_index >= 0),
        warmup INTEGER NOT NULL CHECK (warmup IN (0, 1)),
        status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'timeout')),
        stored_at REAL NOT NULL,
        started_at REAL,
        wall_seconds REAL,
        user_seconds REAL,
        system_seconds REAL,
        metric REAL,
        exit_status INTEGER,
        signal INTEGER,
        migrations INTEGER,
        voluntary_context_switches INTEGER,
        involuntary_context_switches INTEGER,
        max_rss_kib INTEGER,
        placement_cpus TEXT,
        record TEXT,
        stderr_tail TEXT,
        UNIQUE (config_id, run_index, warmup)
    )""",
)


@dataclass(frozen=True)
class Study:
    """One study as stored; ``parameters``, ``machine`` and ``warnings`` are decoded JSON."""

    id: int
    name: str
    parameters: dict[str, Any]
    seed: int | None
    created_at: float
    finished_at: float | None
    machine: dict[str, Any]
    tool_version: str
    warnings: list[str]

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


class DuplicateRun(UsageError):
    """A run with this (configuration, index, warmup) is already stored; the stored one is kept."""


def _error_name(error: sqlite3.Error) -> str:
    """SQLITE_FULL, SQLITE_BUSY, ... (from the error code on Python 3.11+, else from the message)."""
    name = getattr(error, "sqlite_errorname", None)
    if name:
        return name.split("_")[0] + "_" + name.split("_")[1] if name.count("_") > 1 else name
    text = str(error).lower()
    for needle, code in (
        ("disk is full", "SQLITE_FULL"),
        ("locked", "SQLITE_BUSY"),
        ("disk i/o", "SQLITE_IOERR"),
        ("readonly", "SQLITE_READONLY"),
        ("read-only", "SQLITE_READONLY"),
        ("malformed", "SQLITE_CORRUPT"),
        ("not a database", "SQLITE_NOTADB"),
        ("unable to open", "SQLITE_CANTOPEN"),
    ):
        if needle in text:
            return code
    return "SQLITE_ERROR"


def _uri(path: Path, mode: str, immutable: bool = False) -> str:
    return f"file:{urllib.parse.quote(str(path))}?mode={mode}" + ("&immutable=1" if immutable else "")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- the store


def damaged(path: str | os.PathLike, error: object) -> UsageError:
    """The one message for a damaged database: which file, and how to get back what it holds."""
    path = os.fspath(path)
    return UsageError(
        f"the study database {path} is damaged ({error}); nothing was written to it: recover what it holds with "
        f"`sqlite3 {path} .recover | sqlite3 recovered.db` and use --db recovered.db"
    )


def leave_in_rollback_journal(path: str | os.PathLike) -> None:
    """Switch the database at ``path`` from write-ahead logging to a rollback journal, when no
    one else has it open: the log is written back into the file and the ``-wal``/``-shm`` files
    go. A file left on a network file system for other machines to read (a Slurm task's) is
    then one plain file, with no shared-memory index that their clients do not share."""
    conn = sqlite3.connect(_uri(Path(os.path.abspath(os.fspath(path))), "rw"), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("PRAGMA journal_mode = DELETE").fetchone()
    finally:
        conn.close()


@contextmanager
def damaged_database(path: str | os.PathLike) -> Iterator[None]:
    """Turn SQLite's "malformed"/"not a database" errors met while reading ``path`` into :func:`damaged`."""
    try:
        yield
    except sqlite3.DatabaseError as error:
        if _error_name(error) in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
            raise damaged(path, error) from None
        raise


class Store:
    """A pinlab study database; open it with :meth:`Store.open` (also a context manager)."""

    def __init__(self, path: Path, connection: sqlite3.Connection, readonly: bool):
        self.path = path
        self._conn = connection
        self.readonly = readonly
        self._in_snapshot = False

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: str | os.PathLike, create: bool = True, readonly: bool = False) -> "Store":
        """Open (or, with ``create``, make) the study database at ``path``.

        Raises :class:`UsageError` (and writes nothing) when the file is not SQLite, is another
        program's database, has a newer schema, is missing (``create=False``) or cannot be
        created. ``readonly`` opens for reading only (reports; a study may be writing meanwhile).
        """
        path = Path(os.path.abspath(os.fspath(path)))
        if not path.parent.is_dir():
            raise UsageError(f"cannot create the study database {path}: directory {path.parent} does not exist; create it or choose another path")
        if path.is_dir():
            raise UsageError(f"{path} is a directory, not a study database: give a file path such as {path / 'study.db'}")
        exists = path.exists()
        kind = cls._inspect_file(path) if exists else "new"
        if kind == "new" and (readonly or not create):
            if exists:
                raise UsageError(f"{path} is an empty database, not a pinlab study database: run a study into it first")
            raise UsageError(f"no study database at {path}: check the path, or run `pinlab study` to create one")
        if readonly:
            conn = cls._connect(path, "ro")
            return cls(path, conn, readonly=True)
        conn = cls._connect(path, "rwc" if create else "rw")
        store = cls(path, conn, readonly=False)
        try:
            store._set_up(fresh=(kind == "new"))
        except BaseException:
            conn.close()  # an empty file may be left: it is adopted by the next open (never deleted: not ours to judge)
            raise
        return store

    @staticmethod
    def _connect(path: Path, mode: str) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(_uri(path, mode), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as error:
            raise UsageError(f"cannot open the study database {path}: {error}; check the path and its permissions") from None
        return conn

    @staticmethod
    def _inspect_file(path: Path) -> str:
        """'new' (empty, ours to initialise) or 'pinlab'; anything else raises UsageError. Reads only."""
        try:
            with open(path, "rb") as file:
                head = file.read(100)
        except OSError as error:
            raise UsageError(f"cannot read {path}: {error.strerror}; check its permissions") from None
        if not head:
            return "new"  # a zero-length file holds nothing that could be damaged (SQLite sees an empty database)
        if not head.startswith(_SQLITE_HEADER) or len(head) < 100:
            if head.startswith(_SQLITE_HEADER):
                raise damaged(path, "its header is cut short")
            raise UsageError(f"{path} is not a pinlab study database (not an SQLite file): give another --db path; the file was not changed")
        # Without a -wal or -journal file the main file holds everything: read it as immutable, so that
        # not even the -shm/-wal side files are created next to a file that may not be ours.
        side = any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-journal"))
        try:
            conn = sqlite3.connect(_uri(path, "ro", immutable=not side), uri=True, timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as error:
            raise UsageError(f"cannot read {path}: {error}; check the path and its permissions") from None
        try:
            kind = Store._classify(conn, path)
            if kind == "pinlab":
                Store._check_intact(conn, path)  # through this read-only connection: nothing written, not even -wal/-shm
            return kind
        except sqlite3.DatabaseError as error:
            if _error_name(error) in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
                raise damaged(path, error) from None
            raise UsageError(f"cannot read {path} ({error}): is another program using it? the file was not changed") from None
        finally:
            conn.close()

    @staticmethod
    def _classify(conn: sqlite3.Connection, path: Path) -> str:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
        if app_id == 0 and version == 0 and not names:
            return "new"
        if app_id != APPLICATION_ID:
            raise UsageError(
                f"{path} is an SQLite database of another program, not a pinlab study database: give another --db path; the file was not changed"
            )
        if version > SCHEMA_VERSION:
            made_by = ""
            if "meta" in names:
                row = conn.execute("SELECT value FROM meta WHERE key = 'created_by'").fetchone()
                made_by = f" (written by pinlab {row[0]})" if row else ""
            raise UsageError(
                f"{path} has study schema {version}{made_by}, newer than this pinlab reads ({SCHEMA_VERSION}): upgrade pinlab to read it; the file was not changed"
            )
        missing = [table for table in _TABLES if table not in names]
        schema = conn.execute("SELECT value FROM meta WHERE key = 'pinlab_schema'").fetchone() if "meta" in names else None
        if version < 1 or missing or schema is None or schema[0] != str(version):
            raise UsageError(
                f"{path} carries pinlab's mark but not its schema (version {version}, missing {', '.join(missing) or 'meta entries'}): it is damaged or not pinlab's; give another --db path"
            )
        return "pinlab"

    @staticmethod
    def _check_intact(conn: sqlite3.Connection, path: Path) -> None:
        """Refuse a damaged database before anything reads or writes it (``PRAGMA quick_check``:
        every page and b-tree of the file, in time linear in its size; see docs/store.md)."""
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as error:
            if _error_name(error) in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                raise UsageError(f"cannot read {path} ({error}): is another program using it? the file was not changed") from None
            raise damaged(path, error) from None
        problems = [row[0] for row in rows if row[0] != "ok"]
        if problems:
            raise damaged(path, f"{len(problems)} problem(s), first: {problems[0]}")

    def _set_up(self, fresh: bool) -> None:
        conn = self._conn
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            # FULL: in WAL mode every commit (one per run) is fsynced, so a stored run survives a power
            # cut or kernel crash too, not only a kill of pinlab (NORMAL would only guarantee the latter).
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.OperationalError as error:
            raise self._usage_error(error, "opening the study database", None) from None
        if str(mode).lower() != "wal":
            raise UsageError(f"cannot use write-ahead logging for {self.path} (journal mode stays {mode}): put the database on a local file system")
        if not fresh:
            return
        with self._write("creating the study database", None):
            # Checked again under the write lock: another process may have created it meanwhile.
            if self._classify(conn, self.path) == "pinlab":
                return
            for statement in _SCHEMA:
                conn.execute(statement)

            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("pinlab_schema", str(SCHEMA_VERSION)), ("created_by", __version__), ("created_at", _now_iso())],
            )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ---------------------------------------------------------------- transactions

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection (for tests and read-only SQL; write through the methods)."""
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            if self._conn.in_transaction:
                self._conn.rollback()
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self, doing: str, study_name: str | None) -> Iterator[sqlite3.Connection]:
        """One short write transaction; rolled back on any exception (Ctrl-C included)."""
        if self.readonly:
            raise UsageError(f"{self.path} is open read-only: cannot store anything")
        if self._in_snapshot:
            raise RuntimeError("cannot write inside Store.snapshot()")
        conn = self._conn
        if conn.in_transaction:  # left open by an interrupted caller: nothing of it was committed
            conn.rollback()
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            self._rollback()
            raise self._usage_error(error, doing, study_name) from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite has already rolled back (it does so itself after SQLITE_FULL and I/O errors)

    def _usage_error(self, error: sqlite3.Error, doing: str, study_name: str | None) -> Exception:
        code = _error_name(error)
        if study_name is not None:
            after = f"the runs stored so far are intact; `pinlab study --resume {study_name}` continues"
        else:
            after = "nothing already stored is damaged; run the command again"
        if code == "SQLITE_FULL":
            return UsageError(f"disk full while {doing} in {self.path}: free space; {after}")
        if code == "SQLITE_IOERR":
            return UsageError(f"could not write {self.path} while {doing} ({error}: disk full, removed or failing?): fix the disk; {after}")
        if code in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            return UsageError(
                f"{self.path} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s while {doing}: is another pinlab study writing to it? wait for it; {after}"
            )
        if code in ("SQLITE_READONLY", "SQLITE_CANTOPEN"):
            return UsageError(f"cannot write {self.path} while {doing} ({error}): check the permissions of the file and its directory; {after}")
        if code in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
            return damaged(self.path, error)
        return error

    @contextmanager
    def snapshot(self) -> Iterator["Store"]:
        """Read several things from one consistent snapshot while another process writes (WAL)."""
        if self._in_snapshot:
            yield self
            return
        self._conn.execute("BEGIN")
        self._conn.execute("SELECT count(*) FROM meta").fetchone()  # the snapshot starts at the first read
        self._in_snapshot = True
        try:
            yield self
        finally:
            self._in_snapshot = False
            self._rollback()

    # ---------------------------------------------------------------- studies and configurations

    def create_study(
        self,
        name: str,
        parameters: dict[str, Any],
        configs: list[dict[str, Any]],
        seed: int | None,
        machine: dict[str, Any],
        tool_version: str,
        warnings: Iterable[str] = (),
        new: bool = False,
    ) -> Study:
        """Store a new study and its configurations (in ``configs`` order) in one transaction.

        A study of that name with the same parameters, configurations and seed is returned as it
        is (this is how a resumed study finds itself); with different ones it is a UsageError.
        With ``new=True`` any study of that name is refused, checked under the write lock, so of
        two studies started at once with one name exactly one is created.
        """
        name = text_value(name, "study name", nullable=False)
        if not name.strip():
            raise UsageError("the study name is empty: give a name with --name")
        if not isinstance(parameters, dict):
            raise TypeError("parameters must be a dict")
        params_json = canonical_json(parameters)
        rows = [self._config_row(config, position) for position, config in enumerate(configs)]
        seed = integer_value(seed, "seed")
        machine_json = canonical_json(machine)
        warnings_json = canonical_json([text_value(w, "warning", nullable=False) for w in warnings])
        tool_version = text_value(tool_version, "tool_version", nullable=False)
        with self._write(f"creating study {name}", None) as conn:
            existing = conn.execute("SELECT id, parameters, seed FROM studies WHERE name = ?", (name,)).fetchone()
            if existing is not None and new:
                raise UsageError(f"a study named {name} already exists in {self.path}: choose another --name, or continue it with --resume {name}")
            if existing is None:
                study_id = conn.execute(
                    "INSERT INTO studies (name, parameters, seed, created_at, machine, tool_version, warnings) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, params_json, seed, time.time(), machine_json, tool_version, warnings_json),
                ).lastrowid
                conn.executemany(
                    "INSERT INTO configs (study_id, position, program, argv, threads, placement, mem, corun, extra)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(study_id, *row) for row in rows],
                )
            else:
                study_id = existing[0]
                stored = [
                    tuple(row)
                    for row in conn.execute(
                        "SELECT position, program, argv, threads, placement, mem, corun, extra FROM configs WHERE study_id = ? ORDER BY position",
                        (study_id,),
                    )
                ]
                differs = []
                if existing[1] != params_json:
                    old = json.loads(existing[1])
                    keys = sorted(
                        k
                        for k in set(old) | set(parameters)
                        if canonical_json(old.get(k)) != canonical_json(parameters.get(k)) or (k in old) != (k in parameters)
                    )
                    differs.append("parameters " + ", ".join(map(str, keys)))
                if existing[2] != seed:
                    differs.append(f"seed {existing[2]} vs {seed}")
                if stored != [tuple(row) for row in rows]:
                    differs.append(f"configurations ({len(stored)} stored, {len(rows)} given)")
                if differs:
                    raise UsageError(
                        f"study {name} already exists with other parameters ({'; '.join(differs)}): choose another --name or --resume {name}"
                    )
        return self.study_by_id(study_id)

    @staticmethod
    def _config_row(config: dict[str, Any], position: int) -> tuple:
        if not isinstance(config, dict):
            raise TypeError(f"configuration {position} must be a dict, not {type(config).__name__}")
        unknown = sorted(set(config) - set(CONFIG_KEYS))
        if unknown:
            raise TypeError(f"configuration {position} has unknown keys {unknown} (known: {', '.join(CONFIG_KEYS)}; put others in 'extra')")
        argv = config.get("argv") or []
        if isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv):
            raise TypeError(f"configuration {position}: argv must be a list of strings")
        threads = integer_value(config.get("threads"), f"configuration {position} threads")
        if threads is None or threads < 1:
            raise ValueError(f"configuration {position}: threads must be at least 1, not {threads}")
        extra = config.get("extra") or {}
        if not isinstance(extra, dict):
            raise TypeError(f"configuration {position}: extra must be a dict")
        return (
            position,
            text_value(config.get("program"), f"configuration {position} program", nullable=False),
            canonical_json(list(argv)),
            threads,
            text_value(config.get("placement"), "placement"),
            text_value(config.get("mem"), "mem"),
            text_value(config.get("corun"), "corun"),
            canonical_json(extra),
        )

    _STUDY_SQL = "SELECT id, name, parameters, seed, created_at, finished_at, machine, tool_version, warnings FROM studies"

    @staticmethod
    def _study(row: tuple | None) -> Study | None:
        if row is None:
            return None
        return Study(
            id=row[0],
            name=row[1],
            parameters=json.loads(row[2]),
            seed=row[3],
            created_at=row[4],
            finished_at=row[5],
            machine=json.loads(row[6]),
            tool_version=row[7],
            warnings=json.loads(row[8]),
        )

    def study(self, name: str, must_exist: bool = False) -> Study | None:
        """The study called ``name``; None if there is none (UsageError with ``must_exist``)."""
        found = self._study(self._conn.execute(self._STUDY_SQL + " WHERE name = ?", (name,)).fetchone())
        if found is None and must_exist:
            names = [s.name for s in self.studies()]
            known = f"studies there: {', '.join(names)}" if names else "it holds no study yet"
            raise UsageError(f"no study named {name} in {self.path} ({known}): check the name or the --db path")
        return found

    def study_by_id(self, study_id: int) -> Study:
        found = self._study(self._conn.execute(self._STUDY_SQL + " WHERE id = ?", (study_id,)).fetchone())
        if found is None:
            raise ValueError(f"no study with id {study_id} in {self.path}")
        return found

    def studies(self) -> list[Study]:
        return [self._study(row) for row in self._conn.execute(self._STUDY_SQL + " ORDER BY id")]

    def configs(self, study_id: int) -> list[dict[str, Any]]:
        """The study's configurations in order, as dicts: id, study_id, position and the keys given."""
        rows = self._conn.execute(
            "SELECT id, study_id, position, program, argv, threads, placement, mem, corun, extra FROM configs WHERE study_id = ? ORDER BY position",
            (study_id,),
        ).fetchall()
        return [
            {
                "id": r[0],
                "study_id": r[1],
                "position": r[2],
                "program": r[3],
                "argv": json.loads(r[4]),
                "threads": r[5],
                "placement": r[6],
                "mem": r[7],
                "corun": r[8],
                "extra": json.loads(r[9]),
            }
            for r in rows
        ]

    def add_warnings(self, study_id: int, warnings: Iterable[str]) -> list[str]:
        """Add to the study's warnings those not there yet (a resumed session may find new ones);
        returns the study's warnings. Nothing is written when there is nothing new."""
        study = self.study_by_id(study_id)
        new = [text_value(w, "warning", nullable=False) for w in warnings]
        new = [w for i, w in enumerate(new) if w not in study.warnings and w not in new[:i]]
        if not new:
            return study.warnings
        with self._write(f"adding warnings to study {study.name}", study.name) as conn:
            stored = json.loads(conn.execute("SELECT warnings FROM studies WHERE id = ?", (study_id,)).fetchone()[0])
            merged = stored + [w for w in new if w not in stored]
            conn.execute("UPDATE studies SET warnings = ? WHERE id = ?", (canonical_json(merged), study_id))
        return merged

    def finish(self, study_id: int) -> float:
        """Mark the study finished (now); returns the time stored. A resumed study is marked again."""
        study = self.study_by_id(study_id)
        now = time.time()
        with self._write(f"finishing study {study.name}", study.name) as conn:
            conn.execute("UPDATE studies SET finished_at = ? WHERE id = ?", (now, study_id))
        return now

    # ---------------------------------------------------------------- runs

    def add_run(self, config_id: int, run_index: int, warmup: bool = False, **fields: Any) -> int:
        """Store one run in its own committed transaction; returns its id.

        ``fields``: ``status`` ('ok', 'failed' or 'timeout', required) and any of
        :data:`RUN_FIELDS`. A run already stored with the same (config, index, warmup) raises
        :class:`DuplicateRun` and the stored one is left as it was.
        """
        unknown = sorted(set(fields) - set(RUN_FIELDS))
        if unknown:
            raise TypeError(f"unknown run fields {unknown} (known: {', '.join(RUN_FIELDS)})")
        status = fields.get("status")
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")
        run_index = integer_value(run_index, "run_index")
        if run_index is None or run_index < 0:
            raise ValueError(f"run_index must be 0 or more, not {run_index}")
        if not isinstance(warmup, bool):
            raise TypeError("warmup must be True or False")
        values: dict[str, Any] = {"status": status}
        for name in REAL_FIELDS:
            values[name] = real_value(fields.get(name), name)
        for name in INT_FIELDS:
            values[name] = integer_value(fields.get(name), name)
        cpus = fields.get("placement_cpus")
        values["placement_cpus"] = None if cpus is None else canonical_json([integer_value(c, "placement_cpus") for c in cpus])
        record = fields.get("record")
        values["record"] = None if record is None else canonical_json(record)
        values["stderr_tail"] = text_value(fields.get("stderr_tail"), "stderr_tail")

        found = self._conn.execute(
            "SELECT s.name, c.position FROM configs c JOIN studies s ON s.id = c.study_id WHERE c.id = ?", (config_id,)
        ).fetchone()
        if found is None:
            raise ValueError(f"no configuration with id {config_id} in {self.path}")
        study_name, position = found
        what = f"{'warm-up ' if warmup else ''}run {run_index} of configuration {position} (study {study_name})"
        columns = ("config_id", "run_index", "warmup", "stored_at", *RUN_FIELDS)
        row = (config_id, run_index, int(warmup), time.time(), *(values[name] for name in RUN_FIELDS))
        with self._write(f"storing {what}", study_name) as conn:
            try:
                cursor = conn.execute(f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", row)
            except sqlite3.IntegrityError as error:
                if "UNIQUE" in str(error):
                    raise DuplicateRun(
                        f"{what} is already stored in {self.path}; it was kept unchanged: is another `pinlab study --resume {study_name}` running?"
                    ) from None
                raise
            return cursor.lastrowid

    def completed(self, study_id: int, warmup: bool = False) -> dict[int, int]:
        """config id -> number of measured runs stored (any status), for every configuration of the study.

        With ``warmup=True``, the warm-up runs instead. The next run index of a configuration is its count.
        """
        rows = self._conn.execute(
            "SELECT c.id, count(r.id) FROM configs c LEFT JOIN runs r ON r.config_id = c.id AND r.warmup = ?"
            " WHERE c.study_id = ? GROUP BY c.id ORDER BY c.position",
            (int(warmup), study_id),
        )
        return {config_id: count for config_id, count in rows}

    @staticmethod
    def _run(row: tuple) -> dict[str, Any]:
        run = dict(zip(RUN_COLUMNS, row))
        run["warmup"] = bool(run["warmup"])
        for name in JSON_FIELDS:
            run[name] = loads_json(run[name])
        return run

    def _runs(self, where: str, args: tuple, warmup: bool | None) -> list[dict[str, Any]]:
        if warmup is not None:
            where += " AND r.warmup = ?"
            args += (int(warmup),)
        sql = f"SELECT {', '.join('r.' + c for c in RUN_COLUMNS)} FROM runs r JOIN configs c ON c.id = r.config_id WHERE {where} ORDER BY r.id"
        return [self._run(row) for row in self._conn.execute(sql, args)]

    def runs(self, study_id: int, warmup: bool | None = None) -> list[dict[str, Any]]:
        """The study's runs in the order they were stored, as dicts (JSON columns decoded).

        ``warmup``: None for all runs, False for measured runs only, True for warm-ups only.
        """
        return self._runs("c.study_id = ?", (study_id,), warmup)

    def failures(self, study_id: int) -> list[dict[str, Any]]:
        """The study's failed and timed-out runs (warm-ups included), in the order they were stored."""
        return self._runs("c.study_id = ? AND r.status <> 'ok'", (study_id,), None)

    def run_rows(self, study_name: str, warmup: bool | None = None, record: bool = False) -> list[dict[str, Any]]:
        """Flat rows (configuration columns + run columns, :data:`FRAME_COLUMNS`), one per run, from one query.

        Ready for ``pandas.DataFrame(rows)`` (see :func:`dataframe`). The full ``record`` is left out
        unless asked for (it can be large).
        """
        study = self.study(study_name, must_exist=True)
        run_columns = [c for c in RUN_FIELDS if c != "record" or record]
        sql = (
            "SELECT s.name, c.id, c.position, c.program, c.argv, c.threads, c.placement, c.mem, c.corun, c.extra,"
            f" r.id, r.run_index, r.warmup, r.stored_at, {', '.join('r.' + c for c in run_columns)}"
            " FROM runs r JOIN configs c ON c.id = r.config_id JOIN studies s ON s.id = c.study_id"
            " WHERE s.id = ?"
        )
        args: tuple = (study.id,)
        if warmup is not None:
            sql += " AND r.warmup = ?"
            args += (int(warmup),)
        names = [c for c in FRAME_COLUMNS if c != "record" or record]
        rows = []
        for values in self._conn.execute(sql + " ORDER BY r.id", args):
            row = dict(zip(names, values))
            row["warmup"] = bool(row["warmup"])
            for name in ("argv", "extra", "placement_cpus", "record"):
                if name in row:
                    row[name] = loads_json(row[name])
            rows.append(row)
        return rows

    def meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM meta"))


__all__ = [
    "damaged",
    "damaged_database",
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "Store",
    "Study",
    "DuplicateRun",
]
