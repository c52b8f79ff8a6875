"""Next touch at its limits on this machine (tests/memory/touch_check.c): a kernel refusing every
move, and a process a few mappings short of vm.max_map_count. The same program shows on several
nodes, in tests/vm/test_vm_memory_nodes.py, where the pages went (and next touch after fork)."""

import errno
import shutil
import subprocess

import pytest

from tests.conftest import PINLAB
from tests.memory import mem_expect

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(scope="module")
def touch_check(tmp_path_factory):
    return mem_expect.build(str(PINLAB), tmp_path_factory.mktemp("touch") / "touch_check", mem_expect.SOURCE.with_name("touch_check.c"))


def run(program, case):
    done = subprocess.run([str(program), case], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [result] = mem_expect.parse(done.stdout)
    return result


def test_the_statistics_name_the_errno_of_the_moves_the_kernel_refused(touch_check):
    result = run(touch_check, "refused")
    assert result["same"] and result["pending"] == 0, result
    assert (result["moved"], result["failed"], result["errno"]) == (0, 4, errno.EPERM), result


def test_page_granularity_at_the_mapping_limit_falls_back_to_the_region_and_says_so(touch_check):
    result = run(touch_check, "maplimit")
    if result["split"] < 0:
        pytest.skip("vm.max_map_count is above what the test can use up (70000 mappings)")
    assert result["arm_rc"] == 0 and result["same"] and result["pending"] == 0, result
    assert result["fallback_regions"] == 1 and 0 < result["fallback_pages"] < result["pages"], result
    assert result["moved"] + result["failed"] == result["pages"], "every page touched is counted, moved or refused"
    assert mem_expect.pages(result["where"]) == {result["toucher_node"]: result["pages"]}, result


def test_a_region_attached_to_a_thread_that_exited_is_attached_to_none(touch_check):
    assert run(touch_check, "attached-exited") == {"case": "attached-exited", "rc": 0, "tid": 0, "mine": 0}
