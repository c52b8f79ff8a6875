"""GPUs found in hwloc's I/O objects, and ranks placed next to them (machines built in gpu_machines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.ranks.gpus import find_gpus, select_gpus
from pinlab.ranks.split import split_node
from pinlab.topology import load_topology
from tests.conftest import run_pinlab, with_allowed
from tests.ranks.gpu_machines import add_gpus, synthetic_xml, write

TWO_SOCKETS = "pack:2 [numa] l3:2 core:4 pu:2"  # 2 x (1 NUMA node, 2 L3 x 4 cores), 32 PUs
FOUR_NVIDIA = [
    ("nvidia", 0, "0000:04:00.0"),
    ("nvidia", 0, "0000:05:00.0"),
    ("nvidia", 1, "0000:84:00.0"),
    ("nvidia", 1, "0000:85:00.0"),
    ("display", -1, "0000:02:00.0"),
]


@pytest.fixture
def four_gpus(tmp_path):
    return write(tmp_path, "four-gpus", add_gpus(synthetic_xml(TWO_SOCKETS), FOUR_NVIDIA))


def test_gpus_their_stacks_and_their_locality(four_gpus):
    topo = load_topology(four_gpus)
    gpus = find_gpus(topo)
    assert [g.name for g in gpus] == ["cuda0", "cuda1", "cuda2", "cuda3"]  # the BMC's display device is not a GPU
    assert [g.busid for g in gpus] == ["0000:04:00.0", "0000:05:00.0", "0000:84:00.0", "0000:85:00.0"]
    assert gpus[0].indexes == {"CUDA": 0, "NVML": 0, "OpenCL": 0} and gpus[3].indexes["OpenCL"] == 3
    packages = topo.packages
    assert [g.cpus for g in gpus] == [packages[0].cpus] * 2 + [packages[1].cpus] * 2
    assert [g.nodes for g in gpus] == [{0}, {0}, {1}, {1}] and {g.vendor for g in gpus} == {"NVIDIA"}


@pytest.mark.parametrize(
    "ranks, gpus, cpus_of",
    [
        (1, [[0, 1, 2, 3]], ["all"]),  # fewer ranks than GPUs: all of them, and the whole node
        (2, [[0, 1], [2, 3]], ["p0", "p1"]),
        (4, [[0], [1], [2], [3]], ["l3-0", "l3-1", "l3-2", "l3-3"]),
        (8, [[0], [0], [1], [1], [2], [2], [3], [3]], None),  # more ranks than GPUs: each shared by two neighbours
    ],
)
def test_ranks_get_the_gpus_next_to_their_cpus(four_gpus, ranks, gpus, cpus_of):
    topo = load_topology(four_gpus)
    found = find_gpus(topo)
    split = split_node(topo, ranks, found)
    assert [[found.index(g) for g in d.gpus] for d in split.domains] == gpus
    for d in split.domains:
        assert all(d.cpus <= g.cpus or g.cpus <= d.cpus for g in d.gpus)  # its CPUs are its GPUs' local ones
        assert d.env == {"CUDA_VISIBLE_DEVICES": ",".join(str(g.indexes["CUDA"]) for g in d.gpus)}
    named = {
        "all": topo.allowed_cpus,
        "p0": topo.packages[0].cpus,
        "p1": topo.packages[1].cpus,
        **{f"l3-{i}": l3.cpus for i, l3 in enumerate(topo.objects("L3"))},
    }
    if cpus_of:
        assert [d.cpus for d in split.domains] == [named[n] for n in cpus_of]
    assert not split.unused


def test_gpus_on_some_numa_nodes_only_leave_the_others_unused(tmp_path):
    xml = add_gpus(synthetic_xml("pack:4 [numa] core:4 pu:1"), [("amd", 0, "0000:c1:00.0"), ("amd", 2, "0000:41:00.0")])
    topo = load_topology(write(tmp_path, "two-of-four", xml))
    gpus = find_gpus(topo)
    assert [g.name for g in gpus] == ["rsmi0", "rsmi1"] and [min(g.cpus) for g in gpus] == [0, 8]
    split = split_node(topo, 4, gpus)
    p = topo.packages
    assert [d.cpus for d in split.domains] == [frozenset({0, 1}), frozenset({2, 3}), frozenset({8, 9}), frozenset({10, 11})]
    assert [d.env for d in split.domains] == [{"ROCR_VISIBLE_DEVICES": "0"}] * 2 + [{"ROCR_VISIBLE_DEVICES": "1"}] * 2
    assert split.unused == p[1].cpus | p[3].cpus
    assert split.notes == ["CPUs 4-7,12-15 are local to no GPU: no rank runs there"]


def test_level_zero_and_plain_pci_gpus(tmp_path):
    xml = add_gpus(synthetic_xml(TWO_SOCKETS), [("intel", 0, "0000:3a:00.0"), ("intel", 1, "0000:9a:00.0")])
    topo = load_topology(write(tmp_path, "intel", xml))
    split = split_node(topo, 2, find_gpus(topo))
    assert [d.env for d in split.domains] == [{"ZE_AFFINITY_MASK": "0"}, {"ZE_AFFINITY_MASK": "1"}]
    # hwloc without the CUDA/NVML plugins: NVIDIA 3D controllers, numbered in PCI order (NVML's)
    xml = add_gpus(
        synthetic_xml(TWO_SOCKETS), [("nvidia-bare", 1, "0000:85:00.0"), ("nvidia-bare", 0, "0000:04:00.0"), ("display", -1, "0000:02:00.0")]
    )
    topo = load_topology(write(tmp_path, "bare", xml))
    gpus = find_gpus(topo)
    assert [(g.name, g.busid) for g in gpus] == [("nvml0", "0000:04:00.0"), ("nvml1", "0000:85:00.0")]
    split = split_node(topo, 2, gpus)
    assert [d.env for d in split.domains] == [{"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(i)} for i in (0, 1)]


def test_a_gpu_of_the_whole_machine_is_local_to_every_cpu(tmp_path):
    xml = add_gpus(synthetic_xml(TWO_SOCKETS), [("nvidia", 0, "0000:04:00.0")], under="Machine")
    topo = load_topology(write(tmp_path, "machine-gpu", xml))
    (gpu,) = find_gpus(topo)
    assert gpu.cpus == topo.allowed_cpus
    split = split_node(topo, 2, [gpu])
    assert [d.gpus for d in split.domains] == [[gpu], [gpu]] and [d.cpus for d in split.domains] == [p.cpus for p in topo.packages]


def test_gpus_whose_cpus_are_not_allowed_take_no_rank(four_gpus):
    topo = with_allowed(load_topology(four_gpus), range(16))  # package 0 only
    split = split_node(topo, 2, find_gpus(topo))
    assert [[g.name for g in d.gpus] for d in split.domains] == [["cuda0"], ["cuda1"]]
    assert frozenset().union(*(d.cpus for d in split.domains)) == frozenset(range(16))


def test_selecting_gpus_by_name_number_or_bus(four_gpus):
    gpus = find_gpus(load_topology(four_gpus))
    assert [g.name for g in select_gpus(gpus, "cuda2,1,0000:04:00.0,nvml3", "m")] == ["cuda2", "cuda1", "cuda0", "cuda3"]
    assert select_gpus(gpus, "all", "m") == gpus
    with pytest.raises(UsageError, match=r"--gpus cuda4: m has no GPU 'cuda4' \(GPUs: cuda0 \(0000:04:00.0\)"):
        select_gpus(gpus, "cuda4", "m")


def test_place_ranks_gpus_table_json_and_errors(four_gpus, tmp_path):
    result = run_pinlab("place", "--ranks", "2", "--gpus", "-t", four_gpus)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{four_gpus}: 2 local ranks, 4 GPUs: cuda0 (0000:04:00.0, near CPUs 0-15)")
    assert lines[2].split()[-2:] == ["cuda0,cuda1", "CUDA_VISIBLE_DEVICES=0,1"]
    data = json.loads(run_pinlab("place", "--ranks", "2", "--gpus", "cuda1,cuda3", "-t", four_gpus, "-f", "json").stdout)
    assert [d["gpus"] for d in data["domains"]] == [["cuda1"], ["cuda3"]]
    bad = run_pinlab("place", "--ranks", "2", "--gpus", "cuda9", "-t", four_gpus)
    assert bad.returncode == 2 and "has no GPU 'cuda9'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    plain = write(tmp_path, "plain", synthetic_xml(TWO_SOCKETS))
    none = run_pinlab("place", "--ranks", "2", "--gpus", "-t", plain)
    assert none.returncode == 0 and "hwloc shows no GPU" in none.stderr and "package 1" in none.stdout
    bad = run_pinlab("place", "--ranks", "2", "--gpus", "cuda0", "-t", plain)
    assert bad.returncode == 2 and "has no GPU 'cuda0' (GPUs: none)" in bad.stderr


def test_the_picture_draws_each_rank_and_names_each_gpu_where_it_attaches(four_gpus, tmp_path):
    svg = tmp_path / "ranks.svg"
    result = run_pinlab("place", "--ranks", "3", "--gpus", "-t", four_gpus, "-s", "compact", "-n", "2", "--picture", str(svg))
    assert result.returncode == 0, result.stderr
    text = svg.read_text()
    texts = [t.split(">", 1)[1].split("<", 1)[0] for t in text.split("<text")[1:]]
    assert "3 local ranks on" in " ".join(texts) and "next to 4 GPUs" in " ".join(texts)
    # the GPUs are named in their package's label; every PU of a domain says its rank
    assert any("Package P#1" in t and "GPU cuda2 (84:00.0)" in t and "GPU cuda3 (85:00.0)" in t for t in texts), texts
    assert texts.count("r0") + texts.count("r0:0") + texts.count("r0:1") == 8
    assert "r2:0" in texts and "r2:1" in texts and "rank 2: CPUs 16-31, cuda2,cuda3" in texts
    bad = run_pinlab("place", "--ranks", "2", "-t", four_gpus, "--picture", str(tmp_path / "x.gif"))
    assert bad.returncode == 2 and "must end in .svg or .png" in bad.stderr


@pytest.mark.parametrize("gpus_per_package, ranks", [((1, 1, 5), 3), ((3, 1), 7), ((1, 1, 5), 12)])
def test_ranks_are_shared_among_unequal_gpu_domains_within_their_room(tmp_path, gpus_per_package, ranks):
    """Every GPU domain gets at least one rank and never more than its CPUs; the rest go where
    the GPUs are (regressions: a domain left with no rank, and a fitting count refused)."""
    gpus = [("nvidia", p, f"0000:{16 * p + i:02x}:00.0") for p, n in enumerate(gpus_per_package) for i in range(n)]
    xml = add_gpus(synthetic_xml(f"pack:{len(gpus_per_package)} [numa] core:4 pu:1"), gpus)
    topo = load_topology(write(tmp_path, "unequal", xml))
    split = split_node(topo, ranks, find_gpus(topo))
    per_package = [sum(1 for d in split.domains if d.cpus <= p.cpus) for p in topo.packages]
    assert sum(per_package) == ranks and all(1 <= n <= 4 for n in per_package), per_package
    heaviest = max(range(len(gpus_per_package)), key=lambda i: gpus_per_package[i])
    assert per_package[heaviest] == max(per_package)


def test_a_job_already_narrowed_to_some_gpus_keeps_naming_physical_ones(four_gpus):
    """Under CUDA_VISIBLE_DEVICES=5,7 hwloc's cuda0 and cuda1 are physical GPUs 5 and 7: the
    ranks' variables say so; NVML's and ROCm SMI's numbers are physical already."""
    from pinlab.ranks.gpus import visible_devices

    gpus = find_gpus(load_topology(four_gpus))
    assert visible_devices(gpus[1:2], {"CUDA_VISIBLE_DEVICES": "5,7"}) == {"CUDA_VISIBLE_DEVICES": "7"}
    assert visible_devices(gpus[:2], {"CUDA_VISIBLE_DEVICES": ""}) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert visible_devices(gpus[:2]) == {"CUDA_VISIBLE_DEVICES": "0,1"}


DATA = Path(__file__).with_name("data")


def test_a_servers_onboard_vga_is_not_a_gpu():
    """hwloc's IBM x3950 M2 has only an ATI ES1000 (an AMD VGA controller, 1002:515e): no GPU, and
    --gpus all splits the whole node by its CPUs, with no ROCm variable."""
    topo = load_topology(str(DATA / "96em64t-4n4d3ca2co-pci.xml"))
    assert find_gpus(topo) == []
    result = run_pinlab("place", "-t", str(DATA / "96em64t-4n4d3ca2co-pci.xml"), "--ranks", "2", "--gpus", "all", "--format", "json")
    assert result.returncode == 0, result.stderr
    split = json.loads(result.stdout)
    assert split["gpus"] == [] and split["unused_cpus"] == ""
    assert [len(parse_cpulist(d["cpus"])) for d in split["domains"]] == [48, 48]
    assert all(d["env"] == {} for d in split["domains"])
    assert "hwloc shows no GPU" in result.stderr


def test_mirage004s_teslas_are_its_gpus_and_its_onboard_vga_is_not():
    topo = load_topology(str(DATA / "24em64t-2n6c2t-pci.xml"))
    gpus = find_gpus(topo)
    assert [(g.name, g.busid) for g in gpus] == [("nvml0", "0000:06:00.0"), ("nvml1", "0000:11:00.0"), ("nvml2", "0000:14:00.0")]
    split = split_node(topo, 2, gpus)
    assert [d.cpus for d in split.domains] == [p.cpus for p in topo.packages]
    assert [d.env for d in split.domains] == [
        {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,2"},
    ]


def test_nvidia_gpus_named_by_cuda_beside_some_it_does_not_name_are_numbered_in_pci_order(tmp_path):
    """hwloc's CUDA plugin saw one GPU (the others hidden from it) and it had no NVML plugin:
    cuda0 at bus 04, two bare NVIDIA 3D controllers at 84 and 85. The ranks' variables name
    them in PCI order (NVML's numbers): 0, 1 and 2, each GPU once."""
    xml = add_gpus(
        synthetic_xml(TWO_SOCKETS), [("nvidia-cuda", 0, "0000:04:00.0"), ("nvidia-bare", 1, "0000:84:00.0"), ("nvidia-bare", 1, "0000:85:00.0")]
    )
    topo = load_topology(write(tmp_path, "cuda-and-bare", xml))
    gpus = find_gpus(topo)
    assert [g.indexes.get("NVML") for g in gpus] == [0, 1, 2]
    assert [d.env for d in split_node(topo, 2, gpus).domains] == [
        {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,2"},
    ]
    assert split_node(topo, 1, gpus).domains[0].env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,1,2"}
    result = run_pinlab("place", "-t", write(tmp_path, "cuda-and-bare", xml), "--ranks", "1", "--gpus", "all")
    assert result.returncode == 0 and "CUDA_VISIBLE_DEVICES=0,1,2" in result.stdout, result.stderr


@pytest.mark.parametrize(
    "text, word, gpu",
    [
        ("cuda0,cuda0", "cuda0", "cuda0 (0000:04:00.0)"),
        ("cuda1,0000:05:00.0", "0000:05:00.0", "cuda1 (0000:05:00.0)"),
        ("nvml2,2", "2", "cuda2 (0000:84:00.0)"),
    ],
)
def test_a_gpu_named_twice_is_refused(four_gpus, text, word, gpu):
    result = run_pinlab("place", "--ranks", "2", "--gpus", text, "-t", four_gpus)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"pinlab: error: --gpus {text}: {word} names {gpu} a second time; name each GPU once"


def test_cpus_away_from_the_chosen_gpus_are_said_to_be_so(four_gpus):
    """--gpus cuda0,cuda1 (both on package 0): package 1's CPUs are near cuda2 and cuda3, which
    were not chosen; the notice says that, not that they are near no GPU."""
    result = run_pinlab("place", "--ranks", "2", "--gpus", "cuda0,cuda1", "-t", four_gpus)
    assert result.returncode == 0, result.stderr
    assert "pinlab: notice: CPUs 16-31 are local to none of the chosen GPUs (cuda0,cuda1): no rank runs there" in result.stderr
    every = run_pinlab("place", "--ranks", "2", "--gpus", "all", "-t", four_gpus)
    assert every.returncode == 0 and "local to" not in every.stderr
