"""pinlab as a user without root installs it: `make dist`'s wheel, installed by an unprivileged
account into its own venv (and with ``pip install --user``) outside the checkout, which that
account cannot read; then each main command is run and checked for its effect (the CPUs threads
ran on, the runs stored, the graph's planted groups), not only its exit status.

The account's dependencies come from a wheelhouse that root fills from its own pip index and
cache, so the account installs offline (``--no-index``), as on a cluster's compute node.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pinlab.placement import strategies
from pinlab.topology.sources import load_topology
from tests.packaging.requirements import RELEASE
from tests.packaging.spack_recipe import recipe_text, versions

ROOT = Path(__file__).resolve().parents[2]
# One account per test run: two runs on one machine (a shared CI host) must not end each other's
# processes when one tears its account down (pkill -u).
USER = f"pinlab-t{os.getpid()}"
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creating an unprivileged account needs root (make test runs as root)"),
    pytest.mark.skipif(shutil.which("useradd") is None, reason="useradd is missing"),
    pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no Python outside root's home for the account to use"),
    pytest.mark.skipif(not (ROOT / "Makefile").is_file(), reason="runs from a checkout (it builds the wheel)"),
]


def _run(argv, **kw):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 900), **kw)
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """``make dist``: the sdist and the manylinux wheel auditwheel made of the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    _run(["make", "-C", str(ROOT), "dist", f"DIST={out}"])
    wheels = list(out.glob("pinlab-*-py3-none-manylinux_*_x86_64.whl")) or list(out.glob("pinlab-*.whl"))
    sdists = list(out.glob("pinlab-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return wheels[0], sdists[0]


def test_a_release_s_sdist_is_the_one_the_recipes_name(dist):
    """At a release tag the sdist is reproducible, so its checksum is the recipes' (Spack's, and
    EasyBuild's, which tests/packaging holds equal)."""
    _, sdist = dist
    if sdist.name != f"pinlab-{RELEASE}.tar.gz":
        pytest.skip(f"{sdist.name} is a development build, not release {RELEASE}: the recipes name the release's sdist")
    assert hashlib.sha256(sdist.read_bytes()).hexdigest() == versions(recipe_text("py-pinlab"))[RELEASE], "refresh the recipes' checksum"


class Account:
    """An unprivileged account, its home, and a way to run shell lines as it with the checkout hidden."""

    def __init__(self, name: str) -> None:
        self.created = subprocess.run(["id", name], capture_output=True).returncode != 0
        if self.created:
            _run(["useradd", "--create-home", "--shell", "/bin/bash", name])
        self.pw = pwd.getpwnam(name)
        self.home = Path(self.pw.pw_dir)
        self.work = self.home / f"work-{os.getpid()}"
        self.work.mkdir()
        os.chown(self.work, self.pw.pw_uid, self.pw.pw_gid)
        # The checkout is hidden from the account: a private mount namespace with an empty tmpfs
        # over it where the kernel allows one, else no permission for others while the test runs.
        self.namespace = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0
        self.mode = ROOT.stat().st_mode
        if not self.namespace:
            ROOT.chmod(0o700)

    def sh(self, line: str, *, timeout: float = 600, check: bool = True, extra_path: str = "") -> subprocess.CompletedProcess:
        venv_bin = self.home / "venv" / "bin"
        env = f"env -i HOME={self.home} USER={USER} LANG=C.UTF-8 PATH={extra_path}{venv_bin}:/usr/local/bin:/usr/bin:/bin"
        as_user = f"cd {self.work} && exec setpriv --reuid={self.pw.pw_uid} --regid={self.pw.pw_gid} --init-groups {env} bash -c {shlex.quote(line)}"
        argv = ["sh", "-c", f"mount -t tmpfs -o size=1m,mode=0 pinlab-hidden {ROOT} && {as_user}"]
        if self.namespace:
            argv = ["unshare", "--mount", "--propagation", "private", *argv]
        else:
            argv = ["sh", "-c", as_user]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, (line, done.returncode, done.stdout[-3000:], done.stderr[-3000:])
        return done

    def remove(self) -> None:
        if not self.namespace:
            ROOT.chmod(self.mode & 0o7777)
        subprocess.run(["pkill", "-KILL", "-u", USER], capture_output=True)
        if self.created:
            subprocess.run(["userdel", "--remove", USER], capture_output=True)
        else:
            shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture(scope="module")
def account(dist):
    wheel, _ = dist
    user = Account(USER)
    try:
        house = user.work / "wheelhouse"
        house.mkdir()
        version = subprocess.run(
            [SYSTEM_PYTHON, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"], capture_output=True, text=True
        ).stdout.strip()
        # root's pip (its index and cache) fetches what the account will install offline
        _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", version, "-d", str(house), str(wheel), "pip"])
        shutil.copy(wheel, house)
        for path in [house, *house.iterdir()]:
            os.chown(path, user.pw.pw_uid, user.pw.pw_gid)
        hidden = user.sh(f"test -r {ROOT}/pyproject.toml || test -r {ROOT}/.venv/bin/python && echo readable || echo hidden")
        assert hidden.stdout.strip() == "hidden", "the account can read the checkout"
        assert user.sh("id -u").stdout.strip() != "0"
        user.sh(
            f"{SYSTEM_PYTHON} -m venv ~/venv && ~/venv/bin/pip install -q --no-index --find-links wheelhouse wheelhouse/{wheel.name}", timeout=900
        )
        yield user, wheel
    finally:
        user.remove()


def _json(user, line):
    return json.loads(user.sh(line).stdout)


def test_the_wheel_holds_every_native_part_and_its_version(account):
    user, wheel = account
    version = wheel.name.split("-")[1]
    assert user.sh("pinlab --version").stdout.strip() == f"pinlab, version {version}"
    where = user.sh("python -c 'import pinlab.native as n; print(n.NATIVE_DIR)'").stdout.strip()
    assert where.startswith(str(user.home / "venv")), where
    listed = set(user.sh(f"ls {where} {where}/include").stdout.split())
    for part in (
        "libpinlab-preload.so",
        "pinlab-exec",
        "libpinlab-mem.so",
        "libpinlab-heartbeat.so",
        "libpinlab-pagetrace.so",
        "libpinlab-trace.so",
        "pinlab-probe",
        "pinlab-stream",
        "pinlab-primes",
        "pinlab-pairs",
        "pinlab_mem.h",
        "pinlab_heartbeat.h",
    ):
        assert part in listed, (part, sorted(listed))
    assert str(ROOT) not in user.sh("pinlab cflags").stdout
    for line in ("pinlab ldflags", "pinlab workload path primes", "pinlab workload heartbeat-header"):
        shown = user.sh(line).stdout
        assert str(user.home / "venv") in shown and str(ROOT) not in shown, (line, shown)


def test_topology_and_place_are_this_machine_s(account):
    user, _ = account
    here = load_topology("this")
    assert _json(user, "pinlab topology -f json")["summary"] == here.summary()
    n = min(2, len(os.sched_getaffinity(0)))
    placed = _json(user, f"pinlab place -s scatter -n {n} -f json")
    assert placed["cpus"] == strategies.scatter(here, n)


def test_run_pins_each_thread_and_records_it(account):
    user, wheel = account
    here = load_topology("this")
    n = min(2, len(os.sched_getaffinity(0)))
    user.sh(f"pinlab run -s compact -n {n} --record run.json -- $(pinlab workload path primes) --limit 300000 > out.txt")
    record = json.loads((user.work / "run.json").read_text())
    assert record["exit_status"] == 0 and record["pinlab_version"] == wheel.name.split("-")[1]
    planned = strategies.compact(here, n)
    workers = [t for t in record["threads"] if t["slot"] is not None]
    assert len(workers) >= n, record["threads"]
    for t in workers:
        assert t["planned_cpu"] == planned[t["slot"]] and t["pinned_as_planned"], t
        # the main thread starts on the plan's CPUs (for runtimes sizing their pools from the
        # mask) and is narrowed to its own as it creates the first thread; the others start there
        assert (t["narrowed_to"] if t["role"] == "main" else t["cpu_at_start"]) == t["planned_cpu"], t


def test_a_short_study_is_stored_and_reported_as_html(account):
    user, _ = account
    user.sh("pinlab study --db s.db --name u -s none,compact -n 1 --runs 2 -w 'primes:--limit 100000' > study.txt", timeout=900)
    with sqlite3.connect(user.work / "s.db") as conn:
        runs = conn.execute("SELECT r.config_id, r.status FROM runs r WHERE r.warmup = 0").fetchall()
        configs = conn.execute("SELECT COUNT(*) FROM configs").fetchone()[0]
    assert configs == 2 and len(runs) == 4 and {status for _, status in runs} == {"ok"}, runs
    assert sorted(Counter(config for config, _ in runs).values()) == [2, 2], runs
    user.sh("pinlab report u --db s.db --html report > report.txt")
    page = (user.work / "report" / "index.html").read_text()
    assert "compact" in page and "primes" in page


def test_autopin_chooses_a_candidate_and_logs_it(account):
    user, _ = account
    cpus = sorted(os.sched_getaffinity(0))
    candidates = f"{cpus[0]};{cpus[-1]}"
    user.sh(
        f"pinlab autopin -n 1 -C '{candidates}' -i 0.2 -W 0.1 -T 0.5 --log a.jsonl -q -- $(pinlab workload path primes) --limit 20M > autopin.txt",
        timeout=900,
    )
    events = [json.loads(line) for line in (user.work / "a.jsonl").read_text().splitlines()]
    choices = [e for e in events if e["event"] == "choice"]
    assert choices and tuple(choices[0]["cpus"]) in {(cpus[0],), (cpus[-1],)}, events[-3:]
    assert events[-1]["event"] == "summary"


def test_ps_and_memmap_see_a_running_program(account):
    user, _ = account
    shown = user.sh(
        "$(pinlab workload path primes) --threads 2 --limit 400000000 > /dev/null & pid=$!; sleep 1;"
        " pinlab ps --json $pid > ps.json; pinlab memmap --json $pid > memmap.json; kill $pid; wait $pid; echo $pid"
    )
    pid = int(shown.stdout.split()[-1])
    ps = json.loads((user.work / "ps.json").read_text().splitlines()[0])
    assert ps["pid"] == pid and len(ps["threads"]) >= 2, ps
    allowed = os.sched_getaffinity(0)
    assert all(t["cpu"] in allowed and set(t["mask"]) <= allowed for t in ps["threads"]), ps["threads"]
    look = json.loads((user.work / "memmap.json").read_text().splitlines()[0])
    assert look["pid"] == pid and sum(look["bytes_per_node"].values()) == look["resident"] > 0, look


def test_trace_finds_the_planted_pairs(account):
    user, _ = account
    user.sh("pinlab trace -n 4 --method pages --no-baseline -q -o g.json -- $(pinlab workload path pairs) --reps 6000 > trace.txt", timeout=900)
    graph = json.loads((user.work / "g.json").read_text())
    w = graph["weights"]
    assert graph["threads"] == 4
    assert min(w[0][1], w[2][3]) > max(w[0][2], w[0][3], w[1][2], w[1][3]), w


def test_man_pages_come_with_the_wheel(account):
    user, _ = account
    page = user.sh("man -w pinlab-run").stdout.strip()
    assert page == str(user.home / "venv" / "share" / "man" / "man1" / "pinlab-run.1"), page
    shown = user.sh("MANWIDTH=100 man pinlab-run | col -b").stdout
    assert "pinlab-run" in shown and "--record" in shown, shown[:1000]


def test_pip_install_user_works_too(account):
    user, wheel = account
    pip = next(p.name for p in (user.work / "wheelhouse").glob("pip-*.whl"))
    # a Python whose distribution marks it externally managed (Debian's) needs the override a user would give
    user.sh(
        f"{SYSTEM_PYTHON} wheelhouse/{pip}/pip install -q --user --break-system-packages --no-index --find-links wheelhouse wheelhouse/{wheel.name}",
        timeout=900,
    )
    local = user.home / ".local" / "bin"
    shown = user.sh(f"{local}/pinlab --version && {local}/pinlab topology -f json", extra_path="")
    assert shown.stdout.startswith(f"pinlab, version {wheel.name.split('-')[1]}"), shown.stdout[:200]
    assert re.search(r'"cores": \d+', shown.stdout)
