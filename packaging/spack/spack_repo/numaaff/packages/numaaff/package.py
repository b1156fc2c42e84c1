# numaaff's Spack recipe, in the layout of Spack's package repository (spack-packages):
#   spack repo add <numaaff>/packaging/spack/spack_repo/numaaff && spack install numaaff +mpi
# or, from a checkout: spack develop --path <numaaff> numaaff@main && spack install
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class Numaaff(CMakePackage):
    """Header-only C++ NUMA runtime: node-affine thread pools with homenode and node
    policies, NUMA allocators and memory kinds (with a drop-in hbwmalloc), range policies
    with batched migration, next-touch migration and dataflow tasks placed by their data;
    a C API with a Fortran module, an MPI bridge, and the tools numaaff-run, numaaff-top
    and numaaff-bench."""

    homepage = "https://github.com/numaaff/numaaff"
    git = "https://github.com/numaaff/numaaff.git"

    license("MIT")

    version("main", branch="main")

    variant("c", default=True, description="Build the C API library (numaaff.h, hbwmalloc.h)")
    variant("shared", default=True, when="+c", description="Build the C API as a shared library")
    variant("fortran", default=True, when="+c", description="Build the Fortran modules over the C API")
    variant("mpi", default=False, description="Provide the mpi component (numaaff/mpi.hpp, numaaff::mpi)")
    variant("tbb", default=True, description="Use oneTBB: the baseline of numaaff-bench")
    variant("openmp", default=True, description="Use OpenMP: numaaff-bench's baseline, Fortran module numaaff_omp")
    variant("tools", default=True, description="Build numaaff-run, numaaff-top and numaaff-bench")

    depends_on("cxx", type="build")
    depends_on("c", type="build", when="+c")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("cmake@3.21:", type="build")

    # The headers call hwloc and libnuma: consumers link them too.
    depends_on("hwloc@2:")
    depends_on("numactl")
    depends_on("mpi", when="+mpi")
    depends_on("tbb", when="+tbb")
    # numaaff-report-plot draws with gnuplot and reads its input with python.
    depends_on("gnuplot", type="run", when="+tools")
    depends_on("python@3:", type="run", when="+tools")

    depends_on("googletest@1.12:", type="test")

    conflicts("platform=darwin", msg="numaaff uses Linux's NUMA system calls")
    conflicts("platform=windows", msg="numaaff uses Linux's NUMA system calls")

    def cmake_args(self):
        spec = self.spec
        return [
            self.define("NUMAAFF_BUILD_TESTS", self.run_tests),
            self.define("NUMAAFF_BUILD_EXAMPLES", False),
            self.define("NUMAAFF_BUILD_BENCHMARKS", False),
            # A compiler newer than the project's CI may warn where it did not.
            self.define("NUMAAFF_WERROR", False),
            self.define_from_variant("NUMAAFF_BUILD_C_API", "c"),
            self.define_from_variant("NUMAAFF_C_SHARED", "shared"),
            self.define_from_variant("NUMAAFF_FORTRAN", "fortran"),
            self.define_from_variant("NUMAAFF_BUILD_TOOLS", "tools"),
            self.define_from_variant("NUMAAFF_MPI", "mpi"),
            self.define("CMAKE_DISABLE_FIND_PACKAGE_TBB", spec.satisfies("~tbb")),
            self.define("CMAKE_DISABLE_FIND_PACKAGE_OpenMP", spec.satisfies("~openmp")),
        ]
