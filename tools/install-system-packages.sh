#!/usr/bin/env bash
# Install the Debian packages pinlab needs, only those that are missing.
# As root: apt-get update + install. Otherwise: print the command to run and fail.
set -euo pipefail
packages=(
  hwloc-nox        # lstopo-no-graphics: the machine's topology
  numactl          # numactl: export checks, memory policies
  likwid           # likwid-pin: export checks, benchmarks
  libomp5-14       # LLVM OpenMP runtime: KMP_AFFINITY checks
  qemu-system-x86  # the emulated NUMA machine of tests/vm
  busybox-static   # its init
  cpio             # building its initramfs
  chromium         # a real browser: the tests render the HTML report
  python3-venv     # the system Python's venv: the test that installs the wheel as an unprivileged user
  strace           # system calls per thread: the preload library's per-thread cost (tests, bench)
  openmpi-bin      # mpirun: hybrid MPI + OpenMP runs placed rank by rank (tests/ranks)
  libopenmpi-dev   # mpicc, to build the tests' MPI program
  slurmctld        # a one-host Slurm cluster for the tests of the Slurm backend
  slurmd
  slurm-client     # sbatch, squeue, sacct, sinfo
  munge            # Slurm's authentication
  man-db           # man (and groff): the tests render the man pages and look them up as a user would
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "pinlab needs these Debian packages: ${missing[*]}" >&2
    echo "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The kernel and initramfs the NUMA VM boots (downloaded once, cached).
if [ -x tests/vm/numavm ]; then
  tests/vm/numavm --setup >/dev/null || echo "warning: could not prepare the NUMA VM; tests that need it will be skipped" >&2
fi
