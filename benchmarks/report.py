#!/usr/bin/env python3
"""report.py: run numaaff's benchmarks and write their current figures into benchmarks/README.md.

Every benchmark binary prints the machine it ran on and a `ratios (same run):` block, one line
per speed target (`label  value  target  met|MISSED`). This script runs each benchmark of the
list below the given number of times, with every variant (an allocator preloaded in place of
malloc, say), and replaces the text between the README's markers

    <!-- report NAME: begin -->  ...  <!-- report NAME: end -->

with the machine, the date and commit, the host's load before the runs, the exact commands and
one table: each target's ratio in every run, per variant, and how many runs met it. The prose
around the markers (what a benchmark measures, why a target is missed) is written by hand;
the figures are only ever this script's, so the README holds current figures, not a history.

    benchmarks/report.py --build build/gcc-17            # all benchmarks, 3 runs each (quiet host!)
    benchmarks/report.py --build build/gcc-17 --only bench_allocator --runs 5
    benchmarks/report.py --build build/gcc-17 --smoke --output /tmp/README.md   # CI: shape only

A section whose benchmark printed no ratio, or a marker missing from the README, fails the run
(exit 1): the README would otherwise keep stale figures silently.
"""

import argparse
import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIR = "/usr/lib/x86_64-linux-gnu"

# The allocators the heap by kind is measured against (Debian's packages, see scripts/setup.sh).
ALLOCATORS = [
    ("glibc", None),
    ("mimalloc", LIBDIR + "/libmimalloc.so.2"),
    ("jemalloc", LIBDIR + "/libjemalloc.so.2"),
    ("tcmalloc", LIBDIR + "/libtcmalloc_minimal.so.4"),
]

# The 4-node guest most sections run in: 1 vCPU per node, kernel 6.12.
GUEST = ["--nodes", "4", "--cpus-per-node", "1", "--kernel", "6.12", "--timeout", "1500"]

REPS = ["--benchmark_repetitions=5", "--benchmark_enable_random_interleaving=true",
        "--benchmark_report_aggregates_only=true"]

# name: the README marker and the binary in <build>/benchmarks (or binary: its name there, or
# path: a program elsewhere in the build that prints its ratios as the benchmarks do, started
# by launcher, a command such as mpirun, where one is given; or script: a program of the
# repository itself; optional: a section whose program a build may lack (MPI, LAPACKE) or whose
# launcher is not installed is skipped, and says so); args: the measured command's arguments;
# variants: (column, environment[, more arguments]) tuples, each run as its own command; vm: the
# guest (tests/vm/numaaff-vm's options) the program is run in; guests: a program that boots
# guests itself (both run only with --vm or --only); smoke: the arguments of CI's quick run (tiny
# times, a filter), which checks the shape, not the figures.
# bench_allocator's figures are a few hundred nanoseconds, and this host has phases of seconds in
# which every process runs 1.5-2x slower: 20 repetitions of 0.05 s, interleaved, sample them
# finely enough that a phase moves the median of neither side (5 of 0.2 s: a phase over 3 of
# one benchmark's 5 did, 6 cells of 36 in one report).
FINE_REPS = ["--benchmark_min_time=0.05", "--benchmark_repetitions=20", "--benchmark_enable_random_interleaving=true",
             "--benchmark_report_aggregates_only=true"]

SECTIONS = [
    {
        "name": "bench_allocator",
        "args": ["--benchmark_filter=bm_malloc|bm_kind|resident|handoff|realloc|large"] + FINE_REPS,
        "variants": [(name, {"LD_PRELOAD": lib} if lib else {}) for name, lib in ALLOCATORS],
        "smoke": ["--benchmark_filter=(bm_malloc|bm_kind_local)/64/", "--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_node_resource",
        "binary": "bench_allocator",
        "args": ["--benchmark_filter=bm_malloc|bm_node|bm_numa_alloc", "--benchmark_min_time=0.2"] + REPS,
        "smoke": ["--benchmark_filter=(bm_malloc|bm_node_resource)/64/", "--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_dataflow",
        "args": ["--benchmark_repetitions=3", "--benchmark_enable_random_interleaving=true",
                 "--benchmark_report_aggregates_only=true"],
        "smoke": ["--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_thread_pool",
        "args": REPS,
        "smoke": ["--benchmark_min_time=0.01"],
    },
    # What publishing the live counters costs the spawn path: the same task benchmarks with the
    # counters published (the default) and with NUMAAFF_COUNTERS=off (still counted, never
    # copied out), each column against oneTBB in its own process.
    {
        "name": "bench_counters",
        "binary": "bench_thread_pool",
        "args": ["--benchmark_filter=tasks|fib"] + REPS,
        "variants": [("published", {"NUMAAFF_COUNTERS": "on"}), ("NUMAAFF_COUNTERS=off", {"NUMAAFF_COUNTERS": "off"})],
        "smoke": ["--benchmark_filter=tasks/(numaaff|tbb)_task_group/", "--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_memory",
        "args": ["--benchmark_min_time=0.3"] + REPS,
        "smoke": ["--benchmark_filter=16384", "--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_next_touch",
        "args": ["--benchmark_filter=^bm_((next_touch|minimal_next_touch|reprotect|raw_move_pages)/(1|16|256)"
                 "|naive_per_page/(1|16))/process_time",
                 "--benchmark_min_time=0.2", "--benchmark_repetitions=15",
                 "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true"],
        "smoke": ["--benchmark_filter=/1/", "--benchmark_min_time=0.01"],
    },
    # In the 4-node guest (TCG: placements real, timings emulated), with --vm.
    {
        "name": "bench_thread_pool-vm",
        "binary": "bench_thread_pool",
        "vm": GUEST,
        "args": ["--benchmark_filter=tasks|fib|fork_join/", "--benchmark_repetitions=3",
                 "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true"],
        "smoke": ["--benchmark_filter=fork_join/numaaff", "--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_memory-vm",
        "binary": "bench_memory",
        "vm": GUEST,
        "args": ["--benchmark_filter=move", "--benchmark_min_time=0.3", "--benchmark_repetitions=3",
                 "--benchmark_report_aggregates_only=true"],
        "smoke": ["--benchmark_filter=move.*/4096/", "--benchmark_min_time=0.01"],
    },
    {
        "name": "bench_next_touch-vm",
        "binary": "bench_next_touch",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--kernel", "6.12", "--timeout", "1800"],
        "args": ["--benchmark_filter=^bm_(naive_per_page|next_touch|minimal_next_touch|next_touch_adaptive|raw_move_pages"
                 "|mbind_move)/(1|16)/", "--benchmark_min_time=0.05", "--benchmark_repetitions=3",
                 "--benchmark_report_aggregates_only=true"],
        "smoke": ["--benchmark_filter=^bm_(next_touch|minimal_next_touch)/1/", "--benchmark_min_time=0.01"],
    },
    # The 2003 schedbench numa_test (examples/numa_test): jobs that stay on their node with
    # their pages, the pool's modes against the kernel's scheduler, and that scheduler again
    # with automatic NUMA balancing on.
    {
        "name": "numa_test-vm",
        "path": "examples/numa_test",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--timeout", "1500"],
        "args": ["--mib", "8", "--passes", "4"],
        "smoke": ["--mib", "1", "--passes", "1", "--jobs-per-node", "2"],
    },
    {
        "name": "numa_test-balancing-vm",
        "path": "examples/numa_test",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--numa-balancing", "on", "--timeout", "1500"],
        "args": ["--mode", "thread", "--mib", "8", "--passes", "4"],
        "smoke": ["--mode", "thread", "--mib", "1", "--passes", "1", "--jobs-per-node", "2"],
    },
    # The 2012 automatic NUMA balancing tests (benchmarks/numa01_02.cpp), as run_experiments.sh
    # runs them: numa02 on 4 nodes x 1 CPU, numa01 on 2 nodes x 2 CPUs; placement, and pass times
    # as references (emulated).
    {
        "name": "numa02-vm",
        "path": "benchmarks/numa01_02",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--timeout", "1500"],
        "args": ["--test", "numa02", "--mib", "64", "--passes", "150"],
        "smoke": ["--test", "numa02", "--mib", "8", "--passes", "3"],
    },
    {
        "name": "numa01-vm",
        "path": "benchmarks/numa01_02",
        "vm": ["--nodes", "2", "--cpus-per-node", "2", "--timeout", "1500"],
        "args": ["--test", "numa01", "--mib", "64", "--passes", "150"],
        "smoke": ["--test", "numa01", "--mib", "8", "--passes", "3"],
    },
    # The AMR phase changes (examples/amr), as run_experiments.sh runs them: every strategy in
    # both runtimes, the lowest share of block pages on their owner's node at the end of a
    # phase change.
    {
        "name": "amr-vm",
        "path": "examples/amr",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--timeout", "1500"],
        "args": ["--blocks", "16", "--cells", "64", "--steps", "5", "--phases", "6"],
        "smoke": ["--blocks", "4", "--cells", "32", "--steps", "2", "--phases", "2"],
    },
    # The AMR phase changes with transparent huge pages off and on (pool, 8 x 8 blocks): where
    # each strategy ends, and what its phase changes cost against move_to's.
    {
        "name": "amr-thp-vm",
        "path": "examples/amr",
        "vm": GUEST,
        "args": ["--blocks", "8", "--cells", "64", "--steps", "3", "--phases", "4", "--runtime", "pool"],
        "variants": [("THP off", {}, ["--thp", "off"]), ("THP on", {}, ["--thp", "on"])],
        "smoke": ["--blocks", "4", "--cells", "32", "--steps", "2", "--phases", "3", "--runtime", "pool"],
    },
    # Plain next touch with no owner-touch loop (the first toucher is whoever reads a halo edge
    # first), by chunk: one array per chunk, a number of pages, the default, adaptive claims.
    {
        "name": "amr-chunk-vm",
        "path": "examples/amr",
        "vm": GUEST,
        "args": ["--blocks", "8", "--cells", "64", "--steps", "3", "--phases", "4", "--runtime", "pool", "--thp", "off",
                 "--no-owner-touch", "--strategy", "next_touch"],
        "variants": [(chunk, {}, ["--nt-chunk", chunk]) for chunk in ("array", "4", "8", "16", "32", "64", "default", "adaptive")],
        "smoke": ["--blocks", "4", "--cells", "32", "--steps", "2", "--phases", "2", "--runtime", "pool",
                  "--no-owner-touch", "--strategy", "next_touch"],
    },
    # The data-following loop, with the pool's default distance stealing and without cross-node
    # helping (NUMAAFF_STEAL=local; OpenMP's column is the same program either way).
    {
        "name": "follow_data-vm",
        "path": "examples/amr",
        "vm": GUEST,
        "args": ["--blocks", "16", "--cells", "64", "--steps", "5", "--phases", "6", "--strategy", "follow_data", "--check"],
        "variants": [("distance stealing", {}), ("NUMAAFF_STEAL=local", {"NUMAAFF_STEAL": "local"})],
        "smoke": ["--blocks", "4", "--cells", "32", "--steps", "2", "--phases", "2", "--strategy", "follow_data"],
    },
    # Data-affine scheduling against the alternatives (tests/numa/test_tbb_numa.cpp): tasks and
    # loops on their data's node, from sched_getcpu and raw page queries.
    {
        "name": "test_tbb_numa-vm",
        "path": "tests/test_tbb_numa",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--kernel", "6.12", "--env", "NUMAAFF_TEST_REQUIRE_NODES=4",
               "--timeout", "1500"],
        "args": ["--gtest_filter=*DataAffineSchedulingAgainstTheAlternatives"],
        "smoke": ["--gtest_filter=*DataAffineSchedulingAgainstTheAlternatives"],
    },
    # The MPI bridge's one cost, at start-up: two ranks on the host (Open MPI, shared memory).
    {
        "name": "mpi_layout",
        "path": "examples/mpi_layout",
        "launcher": ["mpirun", "--oversubscribe", "-np", "2"],
        "optional": True,
        "variants": [("", {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})],
        "args": ["--repeat", "1000"],
        "smoke": ["--repeat", "10"],
    },
    # The tiled Cholesky example with real BLAS/LAPACK kernels, both versions checked against
    # LAPACKE_dpotrf on the whole matrix.
    {
        "name": "cholesky",
        "path": "examples/cholesky",
        "optional": True,
        "args": ["--n", "2048", "--tile", "256", "--repeat", "3", "--check"],
        "smoke": ["--n", "256", "--tile", "64", "--repeat", "1", "--check"],
    },
    {
        "name": "cholesky-vm",
        "path": "examples/cholesky",
        "optional": True,
        "vm": GUEST,
        "args": ["--n", "1024", "--tile", "128", "--repeat", "2", "--check"],
        "smoke": ["--n", "256", "--tile", "64", "--repeat", "1", "--check"],
    },
    # The machine report users run: its summary of numaaff against the minimal next-touch
    # mechanism, oneTBB and OpenMP (the matrices it prints first are the machine's, not numaaff's).
    {
        "name": "numaaff-bench",
        "path": "tools/numaaff-bench",
        "args": [],
        "smoke": ["--quick"],
    },
    # The chunk-size sweep behind next touch's default (16 MiB there and back, real migrations).
    {
        "name": "bench_next_touch_chunk-vm",
        "binary": "bench_next_touch",
        "vm": ["--nodes", "4", "--cpus-per-node", "1", "--kernel", "6.12", "--timeout", "1800"],
        "args": ["--benchmark_filter=^bm_next_touch_chunk/16/", "--benchmark_min_time=0.05", "--benchmark_repetitions=3",
                 "--benchmark_report_aggregates_only=true"],
        "smoke": ["--benchmark_filter=^bm_next_touch_chunk/16/(1|128)/", "--benchmark_min_time=0.01"],
    },
    # The rig itself: what booting one guest costs (tests/vm/startup-time boots them).
    {
        "name": "vm-startup",
        "script": "tests/vm/startup-time",
        "guests": True,
        "args": [],
        "smoke": ["--boots", "1"],
    },
    {
        "name": "numaaff-bench-vm",
        "path": "tools/numaaff-bench",
        "vm": GUEST,
        "args": ["--quick"],
        "smoke": ["--quick"],
    },
    {
        "name": "bench_io_guard",
        "args": ["--benchmark_min_time=0.2"] + REPS,
        "variants": [("", {"LD_PRELOAD": "{build}/libnumaaff_ioguard.so"})],
        "smoke": ["--benchmark_min_time=0.01"],
    },
]

RATIO = re.compile(r"^\s+(?P<label>.*?)\s+(?P<value>-?[0-9.]+)(?P<unit>x|ns|ms|%)\s+target (?P<op>>=|<=) "
                   r"(?P<target>[0-9.]+)(?:x|ns|ms|%)\s+(?P<verdict>met|MISSED)\s*$")
CONTEXT = re.compile(r"^numaaff benchmark on (.*)$")


# A benchmark names the malloc it ran against (a variant's preloaded one) in its labels: in a
# table whose columns are the variants, the row is the same target whatever the column.
MALLOC_NAME = re.compile(r"malloc of \S+?\.so(\.\d+)*|glibc malloc")


def parse(output):
    """The context line and the ratios, in the order printed, of one benchmark's output. Each
    ratio's key is its label, the malloc's name made generic, and how often that label came
    before in this output: a label such as "the same, process CPU time" follows several rows."""
    context, ratios, in_block, seen = None, [], False, {}
    for line in output.splitlines():
        m = CONTEXT.match(line)
        if m:
            context = m.group(1)
        if line.startswith("ratios (same run):"):
            in_block = True
            continue
        if in_block:
            m = RATIO.match(line)
            if m:
                r = m.groupdict()
                r["label"] = MALLOC_NAME.sub("malloc", r["label"])
                seen[r["label"]] = seen.get(r["label"], 0) + 1
                r["key"] = (r["label"], seen[r["label"]])
                ratios.append(r)
    return context, ratios


def machine():
    """The CPU model, the CPU count and whether the kernel says it runs under a hypervisor."""
    model, hypervisor = "unknown CPU", False
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and " hypervisor" in line:
                hypervisor = True
    return f"{model}, {os.cpu_count()} CPUs" + (", virtual machine" if hypervisor else "")


def load():
    with open("/proc/loadavg", encoding="utf-8") as f:
        return " ".join(f.read().split()[:3])


def busiest_other_process():
    """The process other than this run using the most CPU now: the quiet-host check's evidence."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,pcpu,comm", "--sort=-pcpu", "--no-headers"],
                         capture_output=True, text=True, check=False).stdout
    me = {str(os.getpid()), str(os.getppid())}
    for line in out.splitlines():
        pid, ppid, pcpu, comm = (line.split(None, 3) + ["", "", "", ""])[:4]
        if pid not in me and ppid not in me and comm != "ps":
            return f"{comm} at {pcpu}% CPU"
    return "none"


def commit():
    """HEAD, and whether the tracked files differ from it: figures of a tree that was never
    committed must not be credited to a commit."""
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    d = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                       check=False)
    return (r.stdout.strip() or "unknown") + (" with uncommitted changes" if d.stdout.strip() else "")


def command_line(env, argv, build):
    # The build's files and the repository's own scripts (the guest's launcher) as a user's
    # checkout names them.
    shown = [os.path.relpath(a, ROOT) if a.startswith(build) or a.startswith(ROOT + os.sep) else a for a in argv]
    prefix = " ".join(f"{k}={os.path.relpath(v, ROOT) if v.startswith(build) else v}" for k, v in env.items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(a) for a in shown)


def run_section(section, build, runs, smoke, keep):
    """Runs every variant `runs` times; returns (commands, contexts, {variant: [ratios per run]}),
    or None for an optional section that cannot run here. Each run's output is written to
    `keep` (a directory), so that a run whose ratio stands out can be read whole afterwards."""
    binary = (os.path.join(ROOT, section["script"]) if "script" in section else
              os.path.join(build, section.get("path", os.path.join("benchmarks", section.get("binary", section["name"])))))
    launcher = section.get("launcher", [])
    missing = (f"{binary} is not built" if not os.access(binary, os.X_OK)
               else f"{launcher[0]} is not installed" if launcher and shutil.which(launcher[0]) is None else None)
    if missing and section.get("optional"):
        print(f"report.py: {section['name']} skipped, its block left as it was: {missing}", flush=True)
        return None
    if missing:
        raise SystemExit(f"report.py: {missing}")
    # A program that is not a Google Benchmark binary (path, script) takes no benchmark flags.
    google = "path" not in section and "script" not in section
    args = (section["smoke"] + (["--benchmark_color=false"] if google else [])) if smoke else section["args"]
    variants = [tuple(v) + ((),) * (3 - len(v)) for v in section.get("variants", [("", {})])]
    commands, contexts, results = [], set(), {name: [] for name, _, _ in variants}
    for run in range(runs):
        for name, extra, more in variants:
            env_extra = {k: v.format(build=build) for k, v in extra.items()}
            argv = launcher + [binary] + args + list(more)
            if "vm" in section:  # the binary is copied into the guest and run by name there
                argv = ([os.path.join(ROOT, "tests", "vm", "numaaff-vm")] + section["vm"] + ["--add", binary]
                        + [a for k, v in env_extra.items() for a in ("--env", f"{k}={v}")] + ["--", os.path.basename(binary)]
                        + args + list(more))
                env_extra = {}
            if len(commands) < len(variants):
                commands.append(command_line(env_extra, argv, build))
            p = subprocess.run(argv, env={**os.environ, **env_extra}, capture_output=True, text=True, check=False)
            kept = re.sub(r"[^A-Za-z0-9=._-]+", "_", f"{section['name']}{'-' + name if name else ''}-run{run + 1}.txt")
            with open(os.path.join(keep, kept), "w", encoding="utf-8") as f:
                f.write(p.stdout + p.stderr)
            if p.returncode != 0:
                sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
                raise SystemExit(f"report.py: {section['name']} {name} exited with {p.returncode}")
            context, ratios = parse(p.stdout)
            if not ratios:
                sys.stderr.write(p.stdout[-4000:])
                raise SystemExit(f"report.py: {section['name']} {name} printed no ratio")
            contexts.add(context or "unknown machine")
            results[name].append(ratios)
    return commands, sorted(contexts), results


def cell(values, unit, baselines=None):
    """Every run's figure, in the order they ran: the spread is part of the figure. A cost
    whose target is the baseline's own cost in that run shows both: "numaaff's vs the baseline's"."""
    fmt = {"ns": "{:.0f} ns", "ms": "{:.0f} ms", "%": "{:.0f}%"}.get(unit, "{:.2f}x")
    if baselines:
        return ", ".join(f"{fmt.format(v)} vs {fmt.format(b)}" for v, b in zip(values, baselines))
    return ", ".join(fmt.format(v) for v in values)


def render(section, commands, contexts, results, runs, before):
    variants = [v[0] for v in section.get("variants", [("", {})])]
    keys, targets, seen_targets = [], {}, {}
    for name in variants:
        for ratios in results[name]:
            for r in ratios:
                if r["key"] not in targets:
                    keys.append(r["key"])
                    targets[r["key"]] = f"{r['op']} {r['target']}{' ' if r['unit'] in ('ms', 'ns') else ''}{r['unit']}"
                seen_targets.setdefault(r["key"], set()).add(r["target"])
    # A target that moves from run to run is the baseline's figure in that run (a cost per task
    # against oneTBB's): the cells show it beside numaaff's.
    moving = {k for k, t in seen_targets.items() if len(t) > 1 or "(target: " in k[0]}
    for k in moving:
        targets[k] = f"{targets[k].split()[0]} the baseline's"
    lines = [
        f"Generated by `benchmarks/report.py` on {datetime.date.today().isoformat()}, commit {commit()}: "
        f"{runs} run(s) of each command below, one after the other.",
        "",
        f"- machine: {machine()}; {'; '.join(contexts)}",
        f"- before the runs: load average {before['load']}; busiest other process: {before['busiest']}",
        "- command" + ("s" if len(commands) > 1 else "") + ":",
        "",
        "```",
    ]
    lines += commands
    lines += ["```", ""]
    multi = len(variants) > 1
    header = ["target"] + ([f"{v} (runs)" for v in variants] if multi else ["ratio (runs)"]) + ["met"]
    lines.append("| " + " | ".join(["ratio, same run"] + header) + " |")
    lines.append("|" + "---|" * (len(header) + 1))
    for key in keys:
        cells, met, total = [], 0, 0
        for name in variants:
            values, baselines, unit = [], [], "x"
            for ratios in results[name]:
                for r in ratios:
                    if r["key"] == key:
                        values.append(float(r["value"]))
                        baselines.append(float(r["target"]))
                        unit = r["unit"]
                        total += 1
                        met += r["verdict"] == "met"
            cells.append(cell(values, unit, baselines if key in moving else None) if values else "-")
        lines.append("| " + " | ".join([key[0].replace("|", "\\|"), targets[key]] + cells + [f"{met} of {total}"]) + " |")
    return "\n".join(lines) + "\n"


def replace_block(text, name, body):
    begin, end = f"<!-- report {name}: begin -->", f"<!-- report {name}: end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"report.py: the README has no '{begin}' ... '{end}' pair")
    return text[: i + len(begin)] + "\n" + body + text[j:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "gcc-17"), help="a build with -DNUMAAFF_BUILD_BENCHMARKS=ON")
    ap.add_argument("--runs", type=int, default=3, help="runs of each command (default 3)")
    ap.add_argument("--only", action="append", default=[], help="this section only (repeatable)")
    ap.add_argument("--readme", default=os.path.join(ROOT, "benchmarks", "README.md"))
    ap.add_argument("--output", help="write here instead of over --readme")
    ap.add_argument("--smoke", action="store_true", help="tiny runs: checks that every section renders (CI)")
    ap.add_argument("--vm", action="store_true", help="also the sections run in the emulated 4-node guest (slow)")
    ap.add_argument("--keep", help="where each run's whole output is written (default: <build>/report-output)")
    opts = ap.parse_args()
    if opts.runs < 1:
        ap.error("--runs must be at least 1")
    build = os.path.abspath(opts.build)
    keep = os.path.abspath(opts.keep or os.path.join(build, "report-output"))
    os.makedirs(keep, exist_ok=True)
    known = {s["name"] for s in SECTIONS}
    for name in opts.only:
        if name not in known:
            ap.error(f"--only {name}: not one of {', '.join(sorted(known))}")
    with open(opts.readme, encoding="utf-8") as f:
        text = f.read()
    for section in SECTIONS:
        if opts.only and section["name"] not in opts.only:
            continue
        if ("vm" in section or section.get("guests")) and not (opts.vm or section["name"] in opts.only):
            continue
        before = {"load": load(), "busiest": busiest_other_process()}
        print(f"report.py: {section['name']} ({opts.runs} run(s); load {before['load']})", flush=True)
        ran = run_section(section, build, opts.runs, opts.smoke, keep)
        if ran is None:
            continue
        commands, contexts, results = ran
        text = replace_block(text, section["name"], render(section, commands, contexts, results, opts.runs, before))
    with open(opts.output or opts.readme, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"report.py: wrote {opts.output or opts.readme}")


if __name__ == "__main__":
    main()
