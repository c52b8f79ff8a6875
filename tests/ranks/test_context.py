"""The local rank and local rank count, read from each launcher's environment."""

from __future__ import annotations

import pytest

from pinlab.errors import UsageError
from pinlab.ranks.context import detect, parse_rank, slurm_tasks_on_node


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8"},
            (1, 4, 5, 8, "Open MPI"),
        ),
        ({"MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2", "PMI_RANK": "2", "PMI_SIZE": "4"}, (0, 2, 2, 4, "MPICH")),
        ({"MV2_COMM_WORLD_LOCAL_RANK": "3", "MV2_COMM_WORLD_LOCAL_SIZE": "4"}, (3, 4, None, None, "MVAPICH")),
        ({"PMI_LOCAL_RANK": "2", "PMI_LOCAL_SIZE": "3", "PMI_RANK": "7"}, (2, 3, 7, None, "PMI")),
        (
            {"SLURM_LOCALID": "2", "SLURM_NODEID": "2", "SLURM_STEP_TASKS_PER_NODE": "4(x2),3", "SLURM_PROCID": "10", "SLURM_STEP_NUM_TASKS": "11"},
            (2, 3, 10, 11, "Slurm"),
        ),
        # under srun with Open MPI both are set: the MPI library's own variables win
        (
            {"SLURM_LOCALID": "0", "SLURM_STEP_TASKS_PER_NODE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
            (1, 2, None, None, "Open MPI"),
        ),
    ],
)
def test_each_launcher_is_read(env, expected):
    ctx = detect(env)
    assert (ctx.local_rank, ctx.local_size, ctx.rank, ctx.size) == expected[:4]
    assert ctx.source.startswith(expected[4])


def test_outside_any_launcher_there_is_no_rank_context():
    assert detect({"PATH": "/bin", "OMP_NUM_THREADS": "4"}) is None
    # a Slurm batch script (seen on the test cluster): SLURM_LOCALID and the job's tasks per
    # node, but no step layout: one process, not a rank
    assert detect({"SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_TASKS_PER_NODE": "2"}) is None
    assert parse_rank("auto", {}) is None and parse_rank("off", {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}) is None


@pytest.mark.parametrize("layout, node, tasks", [("4", 0, 4), ("4(x2),3", 1, 4), ("4(x2),3", 2, 3), ("1,2(x3),5", 4, 5)])
def test_slurm_layouts(layout, node, tasks):
    assert slurm_tasks_on_node(layout, node) == tasks


@pytest.mark.parametrize(
    "env, message",
    [
        (
            {"OMPI_COMM_WORLD_LOCAL_RANK": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
            "local rank 4 is not below the local rank count 4; the launcher's environment is inconsistent",
        ),
        (
            {"OMPI_COMM_WORLD_LOCAL_RANK": "-1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
            "local rank -1 is negative; the launcher's environment is inconsistent",
        ),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "x", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, "OMPI_COMM_WORLD_LOCAL_RANK='x' is not a number"),
        ({"MPI_LOCALRANKID": "0"}, "MPI_LOCALRANKID is set but not MPI_LOCALNRANKS"),
        ({"SLURM_LOCALID": "0", "SLURM_NODEID": "3", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}, "node 3 is not in the layout '2(x2)'"),
        ({"SLURM_LOCALID": "0", "SLURM_STEP_TASKS_PER_NODE": "two"}, "cannot read the tasks per node 'two'"),
        ({"PMI_LOCAL_RANK": "0", "PMI_LOCAL_SIZE": "0"}, "0 local ranks; there must be at least one"),
    ],
)
def test_inconsistent_contexts_are_refused_in_one_line(env, message):
    with pytest.raises(UsageError, match="rank context from") as raised:
        detect(env)
    assert message in str(raised.value)


@pytest.mark.parametrize("text, expected", [("0/1", (0, 1)), ("3/4", (3, 4)), (" 1/2 ", (1, 2))])
def test_rank_given_by_hand(text, expected):
    ctx = parse_rank(text, {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"})
    assert (ctx.local_rank, ctx.local_size, ctx.source) == (*expected, "--rank")


@pytest.mark.parametrize("text", ["1", "1/", "a/b", "-1/2", "2/2"])
def test_bad_rank_options(text):
    with pytest.raises(UsageError):
        parse_rank(text, {})
