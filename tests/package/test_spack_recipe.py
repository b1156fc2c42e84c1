#!/usr/bin/env python3
"""test_spack_recipe.py SOURCE CMAKE WORK: numaaff's Spack recipe loads, and its variants map to
the project's CMake options.

CI cannot run Spack (Spack is not a Debian package, and its solver needs clingo's Python module,
which Debian 12 does not package), so the recipe is loaded here against a stand-in of the parts
of Spack's package API it uses, written from Spack's documentation. (Spack 1.1.0 itself, with
spack-packages v2025.11.0, clingo 5.8.0 built from source and Debian's libraries as externals,
was run on the recipe once by hand: `spack info`, `spack audit packages`, `spack spec` of
`numaaff` and `numaaff +mpi ~tbb`, and `spack install` of both from a checkout with
`spack develop` passed, and a pkg-config consumer built against the installed prefix.) The
stand-in: the directives record what they are given, `define` and `define_from_variant`
turn values into -DNAME:BOOL=ON|OFF as Spack's CMakePackage does, and a conditional variant
whose condition does not hold is absent from the spec (define_from_variant gives ""). Then:
- every variant, dependency and conflict is what the project needs (hwloc 2, numactl, MPI,
  oneTBB; the C and Fortran compilers only with +c and +fortran);
- for every combination of the variants, each -D the recipe passes names an option() of the
  project or a CMake variable, with the value the variant gives;
- CMake configures the project with the arguments of three combinations, and the build tree
  has what they ask for: the C and Fortran components' targets, the tools, oneTBB looked for
  or not.
"""
import itertools
import os
import re
import subprocess
import sys
import types

SOURCE, CMAKE, WORK = sys.argv[1:4]
RECIPE = os.path.join(SOURCE, "packaging/spack/spack_repo/numaaff/packages/numaaff/package.py")

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


# ---- the stand-in of Spack's package API -------------------------------------------------
recorded = {"version": [], "variant": [], "depends_on": [], "conflicts": [], "license": []}


def directive(kind):
    def record(*args, **kwargs):
        recorded[kind].append((args, kwargs))
    return record


class Variant:
    def __init__(self, value):
        self.value = value


class Spec:
    """A concrete spec: the variants whose condition holds, with their values."""

    def __init__(self, values):
        self.variants = {name: Variant(v) for name, v in values.items()}

    def satisfies(self, constraint):
        for token in re.findall(r"[+~][a-z_]+", constraint):
            name, wanted = token[1:], token[0] == "+"
            if name not in self.variants or self.variants[name].value != wanted:
                return False
        return True


def define(name, value):
    if isinstance(value, bool):
        return f"-D{name}:BOOL={'ON' if value else 'OFF'}"
    return f"-D{name}:STRING={value}"


class CMakePackage:
    name = "numaaff"

    def __init__(self, spec, run_tests=False):
        self.spec = spec
        self.run_tests = run_tests

    @staticmethod
    def define(name, value):
        return define(name, value)

    def has_variant(self, variant):
        return any(args[0] == variant for args, _ in recorded["variant"])

    def define_from_variant(self, name, variant=None):
        variant = variant or name.lower()
        if not self.has_variant(variant):
            raise KeyError(f'"{variant}" is not a variant of "{self.name}"')
        if variant not in self.spec.variants:
            return ""
        return define(name, self.spec.variants[variant].value)


spack_package = types.ModuleType("spack.package")
for kind in recorded:
    setattr(spack_package, kind, directive(kind))
spack_package.__all__ = list(recorded)
cmake_module = types.ModuleType("spack_repo.builtin.build_systems.cmake")
cmake_module.CMakePackage = CMakePackage
for name in ("spack", "spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["spack.package"] = spack_package
sys.modules["spack_repo.builtin.build_systems.cmake"] = cmake_module

namespace = {}
with open(RECIPE) as f:
    exec(compile(f.read(), RECIPE, "exec"), namespace)
Numaaff = namespace.get("Numaaff")
check(Numaaff is not None and issubclass(Numaaff, CMakePackage), "the recipe defines class Numaaff(CMakePackage)")

# ---- what the recipe declares --------------------------------------------------------------
variants = {args[0]: kwargs for args, kwargs in recorded["variant"]}
check(set(variants) == {"c", "shared", "fortran", "mpi", "tbb", "openmp", "tools"},
      f"variants c shared fortran mpi tbb openmp tools, got {sorted(variants)}")
for name, kwargs in variants.items():
    check(isinstance(kwargs.get("default"), bool) and kwargs.get("description"),
          f"variant {name} has a boolean default and a description")
check(variants.get("shared", {}).get("when") == "+c", "variant shared only with +c")
check(variants.get("fortran", {}).get("when") == "+c", "variant fortran only with +c")
depends = [(args[0], kwargs.get("when"), kwargs.get("type")) for args, kwargs in recorded["depends_on"]]
for spec, when in (("hwloc@2:", None), ("numactl", None), ("mpi", "+mpi"), ("tbb", "+tbb"),
                   ("c", "+c"), ("fortran", "+fortran"), ("cxx", None)):
    check(any(d[0] == spec and d[1] == when for d in depends), f"depends_on({spec!r}, when={when!r})")
check(any(d[0].startswith("cmake@3.21") and d[2] == "build" for d in depends), "a build dependency on cmake@3.21:")
check(any("darwin" in args[0] for args, _ in recorded["conflicts"]), "a conflict with macOS")
check(recorded["license"] and recorded["license"][0][0][0] == "MIT", "license('MIT'), as LICENSE says")

# ---- every combination of the variants -----------------------------------------------------
with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
    options = set(re.findall(r"^option\((NUMAAFF_[A-Z_0-9]+)", f.read(), re.M))
mapping = {"c": "NUMAAFF_BUILD_C_API", "shared": "NUMAAFF_C_SHARED", "fortran": "NUMAAFF_FORTRAN",
           "tools": "NUMAAFF_BUILD_TOOLS", "mpi": "NUMAAFF_MPI"}
disabled_finds = {"tbb": "CMAKE_DISABLE_FIND_PACKAGE_TBB", "openmp": "CMAKE_DISABLE_FIND_PACKAGE_OpenMP"}


def concretize(values):
    """The spec of a combination: conditional variants dropped where ~c."""
    return Spec({k: v for k, v in values.items() if variants[k].get("when") in (None, "+c") and
                 (variants[k].get("when") is None or values["c"])})


def args_of(values, run_tests=False):
    args = [a for a in Numaaff(concretize(values), run_tests).cmake_args() if a]
    return dict(re.fullmatch(r"-D([A-Za-z_0-9]+):(?:BOOL|STRING)=(.*)", a).groups() for a in args)


names = sorted(variants)
combinations = [dict(zip(names, bits)) for bits in itertools.product((False, True), repeat=len(names))]
for values in combinations:
    got = args_of(values)
    for name in got:
        check(name in options or name.startswith("CMAKE_"), f"{name} is neither an option() of the project nor a CMake variable")
    for variant, option in mapping.items():
        present = variants[variant].get("when") is None or values["c"]
        if present:
            check(got.get(option) == ("ON" if values[variant] else "OFF"), f"{values}: {option} follows +{variant}")
        else:
            check(option not in got, f"{values}: {option} not passed without +c")
    for variant, option in disabled_finds.items():
        check(got.get(option) == ("OFF" if values[variant] else "ON"), f"{values}: {option} is the opposite of +{variant}")
    check(got.get("NUMAAFF_BUILD_TESTS") == "OFF" and got.get("NUMAAFF_WERROR") == "OFF",
          f"{values}: no tests unless asked, warnings not errors")
check(args_of(combinations[-1], run_tests=True).get("NUMAAFF_BUILD_TESTS") == "ON", "spack install --test builds the tests")

# ---- CMake takes them: three combinations configured -------------------------------------
defaults = {name: kwargs["default"] for name, kwargs in variants.items()}
cases = {
    "default": defaults,
    "no_c_no_tools_no_tbb": dict(defaults, c=False, tools=False, tbb=False, openmp=False),
    "static_c_without_fortran": dict(defaults, shared=False, fortran=False),
}
for case, values in cases.items():
    build = os.path.join(WORK, case)
    cmd = [CMAKE, "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release"] + \
          [f"-D{k}={v}" for k, v in args_of(values).items()]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        failures.append(f"{case}: cmake failed:\n{run.stdout[-3000:]}")
        continue
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        cache = f.read()
    has = lambda f: os.path.exists(os.path.join(build, f))
    check(has("numaaff-cTargets.cmake") == values["c"], f"{case}: the c component's targets exist iff +c")
    fortran = values["c"] and values["fortran"] and re.search(r"^CMAKE_Fortran_COMPILER:\w+=/", cache, re.M) is not None
    check(has("numaaff-fortranTargets.cmake") == fortran, f"{case}: the fortran component's targets exist iff +fortran")
    check(has("tools/Makefile") == values["tools"], f"{case}: the tools are built iff +tools")
    tbb_found = re.search(r"^TBB_DIR:PATH=(?!.*NOTFOUND).+$", cache, re.M) is not None
    if not values["tbb"]:
        check(not tbb_found, f"{case}: oneTBB looked for with ~tbb")
    if values["c"]:
        static = re.search(r"add_library\(numaaff::c STATIC", open(os.path.join(build, "numaaff-cTargets.cmake")).read())
        check(bool(static) == (not values["shared"]), f"{case}: the C library is static iff ~shared")

for f in failures:
    print("FAIL:", f)
print(f"{len(combinations)} combinations of {len(names)} variants, {len(cases)} configured: "
      f"{'all as the project needs' if not failures else str(len(failures)) + ' failure(s)'}")
sys.exit(1 if failures else 0)
