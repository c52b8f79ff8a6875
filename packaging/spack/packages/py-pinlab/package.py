# Spack recipe for pinlab, kept in pinlab's own repository (namespace "pinlab", see ../../repo.yaml).
#
# The Python dependencies below mirror [project].dependencies of pinlab's pyproject.toml, one
# depends_on per requirement with the same lower bound; tests/packaging/test_spack.py fails when the
# two drift apart, so change both together.

import spack

from spack.package import *

try:
    # Spack 1.x keeps the build-system base classes in its builtin package repository.
    from spack_repo.builtin.build_systems.python import PythonPackage
except ImportError:
    # Spack 0.x exports them from spack.package, imported above.
    pass

# Spack 1.x makes the compiler a build dependency (the virtual package "c") and gives a build only
# the compilers it depends on; Spack 0.x before the language virtuals would refuse the unknown name.
_COMPILERS_ARE_DEPENDENCIES = spack.spack_version_info >= (1, 0)


class PyPinlab(PythonPackage):
    """Find, apply and prove the best placement of a program's threads and memory on multicore and
    NUMA machines. Reads the machine with hwloc's lstopo at run time; numactl, likwid-pin and an MPI
    launcher are used when present."""

    homepage = "https://pypi.org/project/pinlab/"
    pypi = "pinlab/pinlab-0.2.0.tar.gz"

    license("MIT")

    # The sdist that `python -m build --sdist` writes; its checksum must be taken again from the
    # sdist actually published for each release.
    version("0.2.0", sha256="e48d65e8cb7ac959f05dd9bc5bb1d7d93ed66ebcd9fc2d2b814405ea5afd43ee")

    variant("numactl", default=True, description="numactl for the export checks and memory policies")
    variant("likwid", default=False, description="likwid-pin for the export checks and benchmarks")
    variant("mpi", default=False, description="an MPI launcher (mpirun) for runs placed rank by rank")

    # Build: scikit-build-core drives CMake, which compiles the native probes and preload library.
    if _COMPILERS_ARE_DEPENDENCIES:
        depends_on("c", type="build")
    depends_on("python@3.10:", type=("build", "run"))
    # +pyproject brings the packages scikit-build-core needs as a PEP 517 backend (older versions).
    depends_on("py-scikit-build-core@0.10:+pyproject", type="build")
    depends_on("py-setuptools-scm@8:", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("ninja", type="build")

    # Run: the Python requirements of pyproject.toml.
    depends_on("py-click@8.1:", type=("build", "run"))
    depends_on("py-rich@13:", type=("build", "run"))
    depends_on("py-matplotlib@3.7:", type=("build", "run"))
    depends_on("py-numpy@1.24:", type=("build", "run"))
    depends_on("py-scipy@1.10:", type=("build", "run"))
    depends_on("py-pandas@2.0:", type=("build", "run"))
    depends_on("py-jinja2@3.1:", type=("build", "run"))
    depends_on("py-psutil@5.9:", type=("build", "run"))
    depends_on("py-pymetis@2023.1:", type=("build", "run"))

    # Run: the programs pinlab starts. lstopo reads the topology (hwloc 2.x writes the XML read).
    depends_on("hwloc@2:", type="run")
    depends_on("numactl", type="run", when="+numactl")
    depends_on("likwid", type="run", when="+likwid")
    depends_on("mpi", type="run", when="+mpi")

    # Import check after install (spack install --test=root, or `spack test run`).
    import_modules = ["pinlab"]
