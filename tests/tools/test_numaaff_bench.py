#!/usr/bin/env python3
"""numaaff-bench --quick as a user with a real machine runs it (here on this host's topology):
the table, the JSON (parsed by Python) of the shape the README documents, the closing summary
of ratios (read by benchmarks/report.py's parser, figure for figure the JSON's), the PNG plot,
and bad usage. Figures are not judged here (--quick is too short for them); their shape is.

usage: test_numaaff_bench.py NUMAAFF_BENCH [BASELINE...]   (the runtimes the build measures beside numaaff)
Prints 'N passed, N failed' and exits non-zero on any failure."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import report  # noqa: E402  (benchmarks/report.py: the reader of every benchmark's ratio lines)

BENCH = sys.argv[1]
EXPECTED_BASELINES = sys.argv[2:]
results = {"passed": 0, "failed": 0}


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    if not cond:
        print("FAILED:", what, flush=True)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "bench.json")
    r = subprocess.run([BENCH, "--quick", "--json", out, "--plot", tmp], capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    for heading in ("latency, ns per dependent load", "bandwidth, read", "bandwidth, write", "bandwidth, copy", "move_pages",
                    "next touch", "thread pool"):
        check(heading in r.stdout, f"no '{heading}' in the table")
    d = json.load(open(out))
    check(d["format"] == 1 and d["quick"] is True and isinstance(d["virtual"], bool), f"header {list(d)}")
    check(("virtual machine" in r.stdout) == d["virtual"], "the table and the JSON disagree on whether this is a VM")
    nodes = [n["node"] for n in d["topology"]["nodes"]]
    cpu_nodes = [n["node"] for n in d["topology"]["nodes"] if n["cpus"] > 0]
    check(len(nodes) >= 1 and all(len(n["distances"]) == len(nodes) for n in d["topology"]["nodes"]), "distance rows")
    check(len(d["latency_ns"]) == len(cpu_nodes) and all(len(row) == len(nodes) for row in d["latency_ns"]), "latency matrix shape")
    check(all(v > 0 for row in d["latency_ns"] for v in row), "a latency that is not positive")
    for kind in ("read", "write", "copy"):
        cells = [b for b in d["bandwidth"] if b["kind"] == kind]
        check(len(cells) == len(cpu_nodes) * len(nodes), f"{kind}: {len(cells)} cells")
        for c in cells:
            check(c["gbs"] > 0 and c["saturating_threads"] in [x["threads"] for x in c["by_threads"]] and
                  max(x["gbs"] for x in c["by_threads"]) == c["gbs"], f"{kind} cell {c}")
    check([b["batch"] for b in d["move_pages"]["batches"]] == [1, 16, 256], f"move_pages batches {d['move_pages']}")
    # a sandbox that denies move_pages (tests/numa_sandbox) gets no figure, and says why
    check(all((b["pages_per_s"] or 0) > 0 or "refused" in b for b in d["move_pages"]["batches"]), "move_pages throughput")
    check([t["chunk_pages"] for t in d["next_touch"]] == [1, 16, 128], "next-touch chunk sizes")
    check(all(t["numaaff_us_per_page"] > 0 and t["minimal_us_per_page"] > 0 for t in d["next_touch"]), "next-touch costs")
    check(d["kernel"] == " ".join([os.uname().sysname, os.uname().release, os.uname().machine]), f"kernel {d['kernel']!r}")
    check(sorted(d["baselines"]) == sorted(EXPECTED_BASELINES), f"baselines {d['baselines']} != {EXPECTED_BASELINES}")
    runtimes = {(p["what"], p["runtime"]) for p in d["pool"]}
    check(all(p["ns"] > 0 for p in d["pool"]), f"a pool figure that is not positive: {d['pool']}")
    two_cpus = os.cpu_count() > 1 and len(os.sched_getaffinity(0)) > 1
    for runtime in ["numaaff"] + EXPECTED_BASELINES:
        rows = ["spawn (per task)", "fork-join over all workers"]
        rows += ["submit round trip"] if runtime != "OpenMP" else []
        rows += ["steal latency (first thief)"] if two_cpus else []
        for what in rows:
            check((what, runtime) in runtimes, f"no '{what}' row for {runtime}: {sorted(runtimes)}")
    # The closing summary, read as benchmarks/report.py reads it (its own parser): a line per
    # next-touch chunk and per pool figure and baseline, the same figures as the JSON's.
    context, ratios = report.parse(r.stdout)
    check(context is not None and "placement effective: " in context, f"summary context {context!r}")
    by_label = {x["label"]: x for x in ratios}
    for t in d["next_touch"]:
        x = by_label.get(f"next touch, chunk {t['chunk_pages']} pages: numaaff / the minimal mechanism")
        check(x is not None and x["unit"] == "x" and x["op"] == "<=" and x["target"] == "1.10" and
              abs(float(x["value"]) - t["numaaff_us_per_page"] / t["minimal_us_per_page"]) < 0.006 and
              x["verdict"] == ("met" if float(x["value"]) <= 1.1 else "MISSED"), f"next-touch summary line {x} for {t}")
    ns = {(p["what"], p["runtime"]): p["ns"] for p in d["pool"]}
    pairs = [(what, b) for (what, b) in ns if b != "numaaff" and (what, "numaaff") in ns]
    check(len(pairs) > 0 or not EXPECTED_BASELINES, f"no pool figure with a baseline: {sorted(ns)}")
    for what, baseline in pairs:
        x = by_label.get(f"{what}: ns, numaaff (target: {baseline}'s)")
        check(x is not None and x["unit"] == "ns" and abs(float(x["value"]) - ns[(what, "numaaff")]) <= 0.5 and
              abs(float(x["target"]) - ns[(what, baseline)]) <= 0.5, f"pool summary line {x} for {what} against {baseline}")
    check(len(ratios) == len(d["next_touch"]) + len(pairs), f"summary lines {[x['label'] for x in ratios]}")
    png = os.path.join(tmp, "numaaff-bench.png")
    check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "no PNG plot")

check(subprocess.run([BENCH, "--version"], capture_output=True, text=True).stdout.startswith("numaaff-bench "), "--version")
check(subprocess.run([BENCH, "--help"], capture_output=True).returncode == 0, "--help")
for bad in (["--json"], ["--bogus"], ["--plot", ""]):
    r = subprocess.run([BENCH, *bad], capture_output=True, text=True)
    check(r.returncode == 2 and "usage" in r.stderr, f"{bad}: exit {r.returncode}")

print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
