#!/usr/bin/env python3
"""numaaff-run --report as a user runs it: the per-node summary at the end of a numaaff program
(top_target running exactly 5000 tasks with a 2 MiB block on the first node, too short for any
sample: its final counts come from the image it published at exit), a run of 1.5 s sampled
five times a second with its block on its node, the time series as JSON parsed by Python (every
counter of the format, the steal matrix and the refusals, consistent with each other and with
the program), the plot drawn as a PNG; a command that is not numaaff's and its exit status; bad
usage.

usage: test_run_report.py NUMAAFF_RUN TOP_TARGET NUMAAFF_REPORT_PLOT
Prints 'N passed, N failed' and exits non-zero on any failure."""
import json
import os
import subprocess
import sys
import tempfile
import time

RUN, TARGET, PLOT = sys.argv[1:4]
results = {"passed": 0, "failed": 0}


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    if not cond:
        print("FAILED:", what, flush=True)


def online_nodes():
    out = []
    for part in open("/sys/devices/system/node/online").read().strip().split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


with tempfile.TemporaryDirectory() as tmp:
    report = os.path.join(tmp, "run.json")
    first = online_nodes()[0]
    r = subprocess.run([RUN, f"--report={report}", "--", TARGET, "2", str(first), "5000"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check("numaaff-run: report of pid" in r.stderr and "exit status 0" in r.stderr, f"no summary:\n{r.stderr}")
    # The node rows: up to the footnote (the steal matrix after it has rows of numbers too).
    summary = r.stderr.split("  (tasks stolen_in")[0]
    rows = [l.split() for l in summary.splitlines() if l.strip() and l.split()[0].isdigit()]
    check(sorted(int(x[0]) for x in rows) == online_nodes(), f"summary rows:\n{r.stderr}")
    check(sum(int(x[1]) for x in rows) == 5000, f"the summary's tasks are not the program's 5000:\n{r.stderr}")
    d = json.load(open(report))
    check(d["format"] == 1 and d["exit_status"] == 0 and d["numaaff"] is True, f"report header {d}")
    final = {n["node"]: n for n in d["final"]["nodes"]}
    check(sorted(final) == online_nodes(), f"final nodes {sorted(final)}")
    check(sum(n["tasks_run"] for n in final.values()) == 5000, "final tasks_run (the image published at exit)")
    check("idle%" in r.stderr, f"no idle share in the summary:\n{r.stderr}")
    node_keys = {"node", "workers", "tasks_run", "stolen_local", "stolen_in", "stolen_out", "queued", "sleeps", "worker_ns",
                 "idle_ns", "next_touch_faults", "next_touch_chunks", "next_touch_pages_moved", "next_touch_pages_already_there",
                 "next_touch_pages_failed", "pages_moved", "move_pages_not_moved", "pages_not_moved", "heap_bound_bytes",
                 "heap_preferred_bytes", "heap_bytes", "heap_node_bytes", "heap_local_bytes", "heap_interleave_bytes",
                 "heap_fastest_bytes", "heap_capacity_bytes", "process_bytes"}
    kind_keys = ["heap_node_bytes", "heap_local_bytes", "heap_interleave_bytes", "heap_fastest_bytes", "heap_capacity_bytes"]
    refusal_keys = {"policies_skipped", "mappings_unbound", "pages_unmoved", "threads_unpinned", "weighted_fallbacks",
                    "huge_page_fallbacks"}
    for s in d["samples"] + [d["final"]]:
        for n in s["nodes"]:
            check(set(n) == node_keys and all(type(v) is int and v >= 0 for v in n.values()), f"a node's counters: {n}")
        check(set(s["refusals"]) == refusal_keys, f"refusals: {s['refusals']}")
        check(len(s["steals"]) == len(s["nodes"]) and all(len(row) == len(s["nodes"]) for row in s["steals"]), f"steals {s['steals']}")
    f = d["final"]
    nodes = f["nodes"]
    # At the exit every pool is gone and its totals retired: the parts agree exactly.
    check(f["pools"] == 0 and f["workers"] == 0 and all(n["workers"] == 0 for n in nodes), f"pools at the exit: {f['pools']}, {f['workers']}")
    check(sum(n["worker_ns"] for n in nodes) > 0 and all(n["idle_ns"] <= n["worker_ns"] for n in nodes),
          f"worker and idle time: {[(n['worker_ns'], n['idle_ns']) for n in nodes]}")
    check(all(sum(f["steals"][t]) == nodes[t]["stolen_in"] for t in range(len(nodes))), f"steal matrix rows against stolen_in: {f['steals']}")
    check(all(sum(row[v] for row in f["steals"]) == nodes[v]["stolen_out"] for v in range(len(nodes))),
          f"steal matrix columns against stolen_out: {f['steals']}")
    check(all(n["pages_not_moved"] == n["move_pages_not_moved"] + n["next_touch_pages_failed"] and
              n["heap_bytes"] == n["heap_bound_bytes"] + n["heap_preferred_bytes"] == sum(n[k] for k in kind_keys)
              for n in nodes), "the sums of the parts")

    # A run of 1.5 s: samples five times a second, the block seen on its node, drawn as a PNG.
    p = subprocess.Popen([RUN, f"--report={report}", "--", TARGET, "2", str(first)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = p.stdout.readline().split()
    check(ready[:1] == ["ready"], "the long run did not start")
    workers = int(ready[3]) if len(ready) == 4 else -1
    time.sleep(1.5)
    p.stdin.close()
    err = p.stderr.read()
    p.wait(timeout=60)
    check(p.returncode == 0, f"long run: exit {p.returncode}: {err}")
    d = json.load(open(report))
    check(len(d["samples"]) >= 5, f"{len(d['samples'])} samples in 1.5 s")
    # A sample from the middle of the run, when the block and the pool are surely there (the
    # first may come before the program starts them, the last after it ends them).
    live = d["samples"][len(d["samples"]) // 2] if d["samples"] else {"nodes": []}
    mid_memory = live["nodes"]
    check(any(n["node"] == first and n["process_bytes"] >= 2 << 20 for n in mid_memory), f"the 2 MiB block on node {first}: {mid_memory}")
    # The block is the heap's, bound to its node.
    check(any(n["node"] == first and n["heap_bound_bytes"] >= 2 << 20 for n in mid_memory), f"the heap's 2 MiB on node {first}: {mid_memory}")
    check(live.get("pools") == 1 and live.get("workers") == workers == sum(n["workers"] for n in live.get("nodes", [])),
          f"a live pool of {workers} workers: {live.get('pools')} pools, {live.get('workers')} workers")
    check(sum(n["tasks_run"] for n in d["final"]["nodes"]) >= sum(n["tasks_run"] for n in d["samples"][-1]["nodes"]) > 0,
          "the final counts are below the last sample's")
    times = [s["t"] for s in d["samples"]]
    check(times == sorted(times) and all(t >= 0 for t in times), f"sample times {times}")

    png = os.path.join(tmp, "run.png")
    p = subprocess.run([PLOT, report, png], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and os.path.exists(png), f"plot: exit {p.returncode} {p.stderr}")
    if os.path.exists(png):
        head = open(png, "rb").read(8)
        check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 2000, f"not a PNG of a plot: {head!r}, {os.path.getsize(png)} bytes")
        if os.environ.get("NUMAAFF_KEEP_PLOT"):
            import shutil
            shutil.copy(png, os.environ["NUMAAFF_KEEP_PLOT"])
    # A report from elsewhere whose command would run in gnuplot's backquotes
    pwned = os.path.join(tmp, "pwned")
    hostile = dict(d, command=f"`touch {pwned}`\"; system 'touch {pwned}'")
    hostile_file = os.path.join(tmp, "hostile.json")
    json.dump(hostile, open(hostile_file, "w"))
    p = subprocess.run([PLOT, hostile_file, png], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and not os.path.exists(pwned), f"a report's command ran in gnuplot: {p.stderr}")
    # ... or whose node numbers would: they name files and go into the gnuplot script
    bad_node = json.loads(json.dumps(d))
    for sample in bad_node["samples"] + [bad_node["final"]]:
        sample["nodes"][0]["node"] = f"0.dat' with lines; system 'touch {pwned}'; plot '/dev/null"
    json.dump(bad_node, open(hostile_file, "w"))
    p = subprocess.run([PLOT, hostile_file, png], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "not a number" in p.stderr and not os.path.exists(pwned), f"a hostile node number: {p.returncode} {p.stderr}")
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write('{"format": 7}')
    check(subprocess.run([PLOT, bad, png], capture_output=True).returncode != 0, "a report of another format is drawn")

    # a command that is not numaaff's: its status comes through, the summary says why it is empty
    r = subprocess.run([RUN, "--report", "--", "sh", "-c", "exit 3"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 3 and "no numaaff counters" in r.stderr, f"plain command: exit {r.returncode}, {r.stderr}")
    r = subprocess.run([RUN, "--report", "--", "/nonexistent/program"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 127, f"a missing command: exit {r.returncode}")

for bad in (["--report=", "--", "true"], ["--report", "--show"]):
    r = subprocess.run([RUN, *bad], capture_output=True, text=True)
    check(r.returncode == 2 and "usage" in r.stderr, f"{bad}: exit {r.returncode}, {r.stderr!r}")

print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
