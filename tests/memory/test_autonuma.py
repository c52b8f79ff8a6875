"""The AutoNUMA baseline: ``-s autonuma`` runs unpinned with the kernel's NUMA balancing on, and puts it back.

The switch itself is tested on a file standing in for /proc/sys/kernel/numa_balancing (every
case: off -> on -> off, already on, a kernel without it, a setting that cannot be written); the
real setting through ``pinlab run`` and a study where this kernel has it and pinlab may write it
(root), else those tests skip saying why. The emulated NUMA machine repeats it on a 2-node kernel
(tests/vm/test_vm_memory.py).
"""

import json
import os

import pytest

from pinlab.memory.autonuma import MEANING, SETTING, balancing, current, holders_file
from tests.conftest import run_pinlab


def test_switched_on_for_the_block_and_put_back(tmp_path):
    setting = tmp_path / "numa_balancing"
    setting.write_text("0\n")
    with balancing(True, setting) as state:
        assert setting.read_text() == "1"
        assert state == {"value": "1", "was": "0", "set_by_pinlab": True, "wanted": True, "means": MEANING["1"]}
    assert setting.read_text() == "0"


def test_put_back_even_when_the_block_fails(tmp_path):
    setting = tmp_path / "numa_balancing"
    setting.write_text("0")
    with pytest.raises(RuntimeError):
        with balancing(True, setting):
            raise RuntimeError("the run failed")
    assert setting.read_text() == "0"


@pytest.mark.parametrize(
    "before, wanted, written", [("1", True, False), ("3", True, False), ("0", False, False), ("1", False, True), ("1", None, False)]
)
def test_nothing_is_written_when_the_setting_is_already_as_wanted(tmp_path, before, wanted, written):
    setting = tmp_path / "numa_balancing"
    setting.write_text(before)
    with balancing(wanted, setting) as state:
        assert state["set_by_pinlab"] is written and "why" not in state
        assert state["was"] == before
    assert setting.read_text() == before


def test_memory_tiering_alone_is_not_balancing_it_is_kept_and_the_balancing_added(tmp_path):
    setting = tmp_path / "numa_balancing"
    setting.write_text("2")
    with balancing(True, setting) as state:
        assert setting.read_text() == "3", "mode 2 is memory tiering only: the balancing between nodes is off"
        assert state["was"] == "2" and state["value"] == "3" and state["set_by_pinlab"]
        assert state["means"].startswith("on, with memory tiering")
    assert setting.read_text() == "2"
    with balancing(None, setting) as state:
        assert state["means"].startswith("memory tiering only") and "no balancing between ordinary nodes" in state["means"]


HOLD = r"""
import sys, time
from pathlib import Path
from pinlab.memory.autonuma import balancing
setting, go, hold = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
with balancing(True, setting) as state:
    print(state["value"], state["was"], state["set_by_pinlab"], flush=True)
    go.touch()
    seen = [setting.read_text()]
    while hold > 0 and not Path(str(go) + ".end").exists():
        seen.append(setting.read_text())
        time.sleep(0.01)
    seen.append(setting.read_text())
    print(" ".join(sorted(set(seen))), flush=True)
"""


def _holder(tmp_path, name, hold):
    import subprocess
    import sys

    go = tmp_path / name
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "numa_balancing"), str(go), str(hold)], stdout=subprocess.PIPE, text=True)
    for _ in range(3000):
        if go.exists() or process.poll() is not None:
            break
        import time

        time.sleep(0.01)
    return process, go


def test_overlapping_runs_share_the_setting_and_the_last_to_end_puts_it_back(tmp_path):
    setting = tmp_path / "numa_balancing"
    setting.write_text("0")
    first, first_go = _holder(tmp_path, "a", 1)
    second, second_go = _holder(tmp_path, "b", 1)
    (tmp_path / "a.end").touch()  # the first run ends while the second still runs
    assert first.communicate(timeout=60)[0].splitlines()[:2] == ["1 0 True", "1"]
    assert setting.read_text() == "1", "the first run to end left the setting to the one still running"
    (tmp_path / "b.end").touch()
    assert second.communicate(timeout=60)[0].splitlines()[:2] == ["1 0 True", "1"], "the second run saw the balancing on throughout"
    assert setting.read_text() == "0" and not holders_file(setting).exists()


def test_a_run_killed_holding_the_setting_leaves_it_to_the_next_run_to_put_back(tmp_path):
    import signal

    setting = tmp_path / "numa_balancing"
    setting.write_text("0")
    killed, _ = _holder(tmp_path, "a", 1)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    assert setting.read_text() == "1"
    with balancing(True, setting) as state:
        assert state["was"] == "0" and state["set_by_pinlab"] is True
    assert setting.read_text() == "0" and not holders_file(setting).exists()


def test_a_run_wanting_the_opposite_of_a_running_one_changes_nothing_and_says_why(tmp_path):
    setting = tmp_path / "numa_balancing"
    setting.write_text("0")
    holder, _ = _holder(tmp_path, "a", 1)
    with balancing(False, setting) as state:
        assert setting.read_text() == "1" and not state["set_by_pinlab"]
        assert f"another pinlab run (PID {holder.pid}) holds it at 1" in state["why"]
    (tmp_path / "a.end").touch()
    holder.communicate(timeout=60)
    assert setting.read_text() == "0"


def test_a_kernel_without_balancing_or_a_setting_pinlab_may_not_write_says_why(tmp_path, monkeypatch):
    with balancing(True, tmp_path / "absent") as state:
        assert state["value"] is None and "no automatic NUMA balancing" in state["why"]
    setting = tmp_path / "numa_balancing"
    setting.write_text("0")

    def refused(self, *args, **kwargs):  # what a user who is not root meets (root may write any file)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(setting), "write_text", refused)
    with balancing(True, setting) as state:
        assert not state["set_by_pinlab"] and state["value"] == "0"
        assert "cannot write" in state["why"] and "Permission denied" in state["why"] and "sysctl kernel.numa_balancing=1" in state["why"]


def _writable_setting() -> str | None:
    if current() is None:
        return "this kernel has no automatic NUMA balancing"
    if not os.access(SETTING, os.W_OK):
        return "pinlab may not write kernel.numa_balancing here (not root)"
    return None


needs_setting = pytest.mark.skipif(_writable_setting() is not None, reason=str(_writable_setting()))


@needs_setting
def test_pinlab_run_autonuma_runs_with_balancing_on_and_records_it(tmp_path):
    before = current()
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-q", "-s", "autonuma", "-n", "1", "--record", str(record), "--", "cat", str(SETTING))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() != "0", "the program saw the balancing off"
    assert current() == before, "the setting was not put back"
    ran = json.loads(record.read_text())
    assert ran["numa_balancing"]["value"] == result.stdout.strip() and ran["numa_balancing"]["was"] == before
    assert ran["plan"]["strategy"] == "autonuma" and ran["plan"]["cpus"] is None
    plain = run_pinlab("run", "-q", "-s", "none", "-n", "1", "--record", str(record), "--", "cat", str(SETTING))
    assert plain.stdout.strip() == before and json.loads(record.read_text())["numa_balancing"]["set_by_pinlab"] is False


@needs_setting
def test_a_study_compares_autonuma_with_pinning_and_records_each_runs_setting(tmp_path):
    db = tmp_path / "s.db"
    before = current()
    result = run_pinlab(
        "study",
        "--db",
        str(db),
        "--name",
        "auto",
        "-s",
        "none,autonuma,compact",
        "-n",
        "1",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--",
        "cat",
        str(SETTING),
    )
    assert result.returncode == 0, result.stderr
    assert current() == before
    import sqlite3

    rows = sqlite3.connect(db).execute("SELECT c.placement, r.record FROM runs r JOIN configs c ON c.id = r.config_id").fetchall()
    seen = {}
    for placement, record in rows:
        state = json.loads(record)["numa_balancing"]
        seen.setdefault(placement, set()).add((state["value"], state["set_by_pinlab"]))
    assert seen["autonuma"] == ({("1", True)} if before == "0" else {(before, False)})
    assert seen["none"] == seen["compact"] == {(before, False)}


def test_autopin_refuses_autonuma_as_a_candidate():
    result = run_pinlab("autopin", "--strategies", "compact,autonuma", "-n", "1", "--", "true")
    assert result.returncode == 2 and "strategy autonuma leaves the threads to the OS" in result.stderr
