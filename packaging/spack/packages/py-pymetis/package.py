# Spack recipe for PyMetis, which pinlab's graph partitioning needs and Spack's builtin repository
# does not have (py-metis there is another project, a ctypes wrapper). `spack repo add` puts this
# repository before builtin, so this recipe would shadow a later builtin py-pymetis: drop it then.

import spack

from spack.package import *

try:
    # Spack 1.x keeps the build-system base classes in its builtin package repository.
    from spack_repo.builtin.build_systems.python import PythonPackage
except ImportError:
    # Spack 0.x exports them from spack.package, imported above.
    pass

# See py-pinlab: only Spack 1.x knows, and needs, compilers as build dependencies.
_COMPILERS_ARE_DEPENDENCIES = spack.spack_version_info >= (1, 0)


class PyPymetis(PythonPackage):
    """Python bindings (pybind11) for METIS, the graph partitioner; the METIS sources are shipped
    inside the package and compiled with it."""

    homepage = "https://github.com/inducer/pymetis"
    pypi = "pymetis/pymetis-2025.2.2.tar.gz"

    license("MIT AND Apache-2.0")

    version("2025.2.2", sha256="79c6d56c30c6f3df7cc755617cbadcfc252a175ce4e5a59982edad0f1ab71c99")
    # The last release built with setuptools; its sdist is spelt PyMetis on PyPI.
    version(
        "2023.1.1",
        sha256="dc065dbb782ee5b1816341488e68eda74ffe320ae1c9efd35ee5e5d6da119a3f",
        url="https://files.pythonhosted.org/packages/source/P/PyMetis/PyMetis-2023.1.1.tar.gz",
    )

    if _COMPILERS_ARE_DEPENDENCIES:
        depends_on("c", type="build")
        depends_on("cxx", type="build")

    depends_on("python@3.10:", type=("build", "run"), when="@2025:")
    depends_on("python@3.8:", type=("build", "run"))

    # 2025 releases: meson-python and pybind11 3.
    depends_on("py-meson-python", type="build", when="@2025:")
    depends_on("py-pybind11@3:", type="build", when="@2025:")
    depends_on("py-typing-extensions@4.5:", type=("build", "run"), when="@2025:")

    # 2023 releases: setuptools and any pybind11 from 2.5.
    depends_on("py-setuptools@42:", type="build", when="@:2024")
    depends_on("py-wheel@0.34.2:", type="build", when="@:2024")
    depends_on("py-pybind11@2.5:", type="build", when="@:2024")

    import_modules = ["pymetis"]
