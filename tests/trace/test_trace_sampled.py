"""The sampled tracing method: refused precisely without memory-sampling hardware; samples -> graph."""

from __future__ import annotations

import os
import sys

import pytest

from pinlab.errors import UsageError
from pinlab.native import native_path
from pinlab.trace import sampled
from pinlab.trace.common import TraceRequest

# A stand-in for perf on a machine with PEBS: `record -p PID` follows the program's threads in /proc
# until it ends and writes samples whose data addresses put consecutive threads (by tid, which is
# creation order) in pairs on their own pages; `script -i FILE` prints them back.
FAKE_PERF = r"""#!{python}
import os, sys, time
args = sys.argv[1:]
if args[0] == "script":
    sys.stdout.write(open(args[args.index("-i") + 1]).read())
    sys.exit(0)
out, pid = args[args.index("-o") + 1], int(args[args.index("-p") + 1])
seen = []
while os.path.exists(f"/proc/{{pid}}"):
    try:
        for tid in os.listdir(f"/proc/{{pid}}/task"):
            if int(tid) not in seen:
                seen.append(int(tid))
    except OSError:
        pass
    time.sleep(0.002)
with open(out, "w") as f:
    for rank, tid in enumerate(sorted(seen)):
        for k in range(12):
            f.write(f"{{pid:>7}}/{{tid:<7}} {{0x10000000 + (rank // 2) * 4096 + (k % 4) * 64:16x}}\n")
        f.write(f"{{pid}}/{{tid}} 0\n")  # a sample without a data address
    f.write(f"{{pid + 1}}/{{pid + 1}} 10000000\n")  # another process
"""


def test_this_machine_without_sampling_hardware_is_told_precisely(monkeypatch, tmp_path):
    monkeypatch.setattr(sampled, "PMU_ROOT", tmp_path)  # an empty sysfs: no PMU at all
    (tmp_path / "cpu" / "events").mkdir(parents=True)
    why = sampled.unavailable(TraceRequest(argv=["true"], threads=2))
    assert "cpu/events/mem-loads" in why and "ibs_op" in why and "--method pages" in why
    with pytest.raises(UsageError, match="memory-sampling hardware"):
        sampled.trace(TraceRequest(argv=["true"], threads=2))


def test_real_machine_answer_matches_its_sysfs():
    events, _ = sampled.memory_events()
    why = sampled.unavailable(TraceRequest(argv=["true"], threads=2))
    if not events:
        assert "memory-sampling hardware" in why
    root = sampled.PMU_ROOT
    has = (root / "cpu" / "events" / "mem-loads").exists() or (root / "cpu_core" / "events" / "mem-loads").exists() or (root / "ibs_op").exists()
    assert bool(events) == has


def test_events_found_for_pebs_hybrid_and_ibs(tmp_path):
    (tmp_path / "cpu_core" / "events").mkdir(parents=True)
    (tmp_path / "cpu_core" / "events" / "mem-loads").write_text("event=0xcd,umask=0x1\n")
    assert sampled.memory_events(tmp_path) == (["cpu_core/mem-loads,ldlat=30/Pu"], False)
    ibs = tmp_path / "amd"
    (ibs / "ibs_op").mkdir(parents=True)
    assert sampled.memory_events(ibs) == (["ibs_op//"], True)


def test_paranoid_setting_is_named_when_it_is_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(sampled.os, "geteuid", lambda: 1000)  # an ordinary user, whoever runs the tests
    (tmp_path / "ibs_op").mkdir()
    paranoid = tmp_path / "paranoid"
    paranoid.write_text("2\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "perf").write_text("#!/bin/sh\n")
    (fake / "perf").chmod(0o755)
    monkeypatch.setattr(sampled, "PMU_ROOT", tmp_path)
    monkeypatch.setattr(sampled, "PARANOID", paranoid)
    why = sampled.unavailable(TraceRequest(argv=["true"], threads=1, env={"PATH": f"{fake}:{os.environ['PATH']}"}))
    assert "perf_event_paranoid <= 0 (it is 2)" in why


def test_sample_parser_and_attribution_from_hand_written_perf_script():
    text = (
        "   100/100   7f0000000040\n"
        "   100/101   7f0000000078\n"  # same line as above (64-byte lines)
        "   100/101   7f0000000080\n"
        "   100/102   0\n"  # no data address
        "   999/999   7f0000000040\n"  # another process
        "   102   7f0000000080\n"  # tid only
        "garbage line\n"
    )
    samples = sampled.parse_samples(text)
    assert samples == [
        (100, 100, 0x7F0000000040),
        (100, 101, 0x7F0000000078),
        (100, 101, 0x7F0000000080),
        (999, 999, 0x7F0000000040),
        (None, 102, 0x7F0000000080),
    ]
    counts = sampled.attribute(samples, {100: 0, 101: 1, 102: 2}, pid=100)
    line = 0x7F0000000040 // 64
    assert counts == {0: {line: 1}, 1: {line: 1, line + 1: 1}, 2: {line + 1: 1}}


def test_fake_sampling_machine_builds_the_pairs_graph(monkeypatch, tmp_path, capfd):
    (tmp_path / "sys" / "cpu" / "events").mkdir(parents=True)
    (tmp_path / "sys" / "cpu" / "events" / "mem-loads").write_text("event=0xcd\n")
    paranoid = tmp_path / "paranoid"
    paranoid.write_text("-1\n")
    monkeypatch.setattr(sampled, "PMU_ROOT", tmp_path / "sys")
    monkeypatch.setattr(sampled, "PARANOID", paranoid)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    perf = bin_dir / "perf"
    perf.write_text(FAKE_PERF.format(python=sys.executable))
    perf.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    threads = 4
    pairs = str(native_path("pinlab-pairs"))
    result = sampled.trace(TraceRequest(argv=[pairs, "--groups", "2", "--reps", "3000"], threads=threads, env=env, options={"sample_period": 500}))
    assert result.exit_status == 0
    assert "Validation" in capfd.readouterr().out
    w = result.graph.weights
    # each thread: 12 samples, 3 on each of 4 lines of its pair's page; a pair's weight is the sum over
    # those lines of the smaller count (3 + 3 + 3 + 3 = 12), nothing across
    assert w[0][1] == w[2][3] == 12
    assert all(w[i][j] == 0 for i in range(threads) for j in range(threads) if i // 2 != j // 2)
    m = result.graph.measured
    assert m["method"] == "sampled" and m["samples"] == 48 and m["units_seen"] == 8 and m["sample_period"] == 500
    assert result.graph.granularity == "line" and result.graph.unit_bytes == 64
