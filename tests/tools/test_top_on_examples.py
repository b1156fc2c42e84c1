#!/usr/bin/env python3
"""numaaff-top as a person uses it on the examples: in a tmux window, following `amr` (the AMR
phase change on the pool, next touch) and then `numa_test` (numaaff pool, exec policy) by
name while they run, exit and start again. On every captured screen the process's memory on
each node (PROC_MiB) must agree with the process's own numa_maps read just before and just
after the capture; the node's CPU use and the pool's tasks per second (amr) or busy workers (numa_test) must
show the work; an
exit must be shown as such, and a restart must be followed to the new process.

usage: test_top_on_examples.py NUMAAFF_TOP AMR NUMA_TEST
Prints 'N passed, N failed' and exits non-zero on any failure."""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

TOP, AMR, NUMA_TEST = sys.argv[1:4]
PAGE = os.sysconf("SC_PAGESIZE")
results = {"passed": 0, "failed": 0}


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    if not cond:
        print("FAILED:", what, flush=True)


def raw_mib(pid):
    """The process's resident memory per node from its numa_maps (N<node>=pages, in each
    mapping's page size), or None when it is gone."""
    per_node = {}
    try:
        with open(f"/proc/{pid}/numa_maps") as f:
            for line in f:
                size = PAGE
                m = re.search(r"kernelpagesize_kB=(\d+)", line)
                if m:
                    size = int(m.group(1)) * 1024
                for node, pages in re.findall(r"\bN(\d+)=(\d+)", line):
                    per_node[int(node)] = per_node.get(int(node), 0) + int(pages) * size
    except OSError:
        return None
    return {n: b / 2**20 for n, b in per_node.items()}


class Window:
    """numaaff-top in a tmux session of its own."""

    opened = 0

    def __init__(self, args):
        # A server of its own per window: on a shared server, a session closed by another test
        # (or the window before this one) can end the server while this one connects to it.
        Window.opened += 1
        self.s = f"numaaff-top-examples-{os.getpid()}-{Window.opened}"
        self.tmux = ["tmux", "-L", self.s]
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.s, "-x", "160", "-y", "30",
                        " ".join([TOP, *args])], check=True)

    def screen(self):
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.s], capture_output=True, text=True).stdout

    def alive(self):
        return subprocess.run([*self.tmux, "has-session", "-t", self.s], capture_output=True).returncode == 0

    def wait_for(self, predicate, seconds):
        deadline = time.time() + seconds
        text = self.screen()
        while not predicate(text) and time.time() < deadline:
            time.sleep(0.1)
            text = self.screen()
        return text

    def close(self):
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def rows(text):
    """{node: {column: value}} of the screen's node rows; KIND takes one to three words, so
    the columns are read from the right."""
    lines = text.splitlines()
    header = next((l.split() for l in lines if l.lstrip().startswith("NODE")), None)
    out = {}
    if header is None:
        return out
    for l in lines:
        w = l.split()
        if not w or not w[0].isdigit() or len(w) < len(header):
            continue
        right = header[2:]
        values = w[len(w) - len(right):]
        out[int(w[0])] = dict(zip(right, values))
    return out


def number(v):
    try:
        return float(v)
    except ValueError:
        return None


class RawHistory:
    """The process's numa_maps every 50 ms in a thread: numaaff-top's figure on a screen is
    from its own read, up to an interval before the capture, and numa_test's memory changes
    within one."""

    def __init__(self, pid):
        self.pid, self.samples, self.stop = pid, [], threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            m = raw_mib(self.pid)
            if m is None:
                return
            self.samples.append((time.time(), m))
            time.sleep(0.05)

    def range(self, node, since):
        seen = [m.get(node, 0.0) for t, m in list(self.samples) if t >= since]
        return (min(seen), max(seen)) if seen else None

    def close(self):
        self.stop.set()
        self.t.join()


INTERVAL = 0.5


def watch(window, program, args, name, pool_column):
    """Start PROGRAM, follow it on the screen until it ends; returns its pid."""
    p = subprocess.Popen([program, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    history = RawHistory(p.pid)
    text = window.wait_for(lambda t: f"pid {p.pid}" in t and rows(t), 10)
    check(f"pid {p.pid}" in text, f"{name}: the screen never showed pid {p.pid}:\n{text}")
    samples = agreed = worked = tasks_seen = 0
    while p.poll() is None and samples < 12:
        captured = time.time()
        text = window.screen()
        shown = rows(text)
        if p.poll() is not None or f"pid {p.pid}" not in text or not shown:
            break
        samples += 1
        ok = True
        for node, r in shown.items():
            mib = number(r.get("PROC_MiB", ""))
            # numaaff-top read numa_maps within its last two intervals before the capture:
            # its figure lies in what the process had then (1% or 1 MiB for rounding).
            seen = history.range(node, captured - 2 * INTERVAL - 0.2)
            if mib is None or seen is None or not (seen[0] * 0.99 - 1 <= mib <= seen[1] * 1.01 + 1):
                ok = False
                print(f"{name}: node {node}: PROC_MiB {r.get('PROC_MiB')} on screen, numa_maps {seen} MiB", flush=True)
        agreed += ok
        if any((number(r.get("CPU%", "")) or 0) > 0 for r in shown.values()):
            worked += 1
        if any((number(r.get(pool_column, "")) or 0) > 0 for r in shown.values()):
            tasks_seen += 1
        time.sleep(0.6)
    history.close()
    check(samples >= 3, f"{name}: only {samples} screens captured while it ran")
    check(agreed == samples, f"{name}: PROC_MiB agreed with numa_maps on {agreed} of {samples} screens")
    check(worked > 0, f"{name}: no node showed CPU use on {samples} screens")
    check(tasks_seen > 0, f"{name}: no node showed its pool's work ({pool_column} > 0) on {samples} screens")
    p.wait(timeout=120)
    check(p.returncode == 0, f"{name} exited {p.returncode}")
    text = window.wait_for(lambda t: "gone" in t or "waiting" in t, 5)
    check(("gone" in text or "waiting" in text) and window.alive(),
          f"{name}: after it exited numaaff-top should say so and keep running:\n{text}")
    return p.pid


if not shutil.which("tmux"):
    check(False, "tmux is not installed (scripts/setup.sh installs it)")
else:
    amr_args = ["--runtime", "pool", "--strategy", "next_touch", "--phases", "40", "--steps", "10"]
    w = Window(["--name", "amr", "--interval", str(INTERVAL)])
    try:
        # amr's steps are many short tasks (TASKS/s); numa_test's jobs are one long task each,
        # which keep the workers busy (BUSY%) and finish only at the end; 60 passes run for
        # several seconds, so that the screens span more than the first readings.
        first = watch(w, AMR, amr_args, "amr", "TASKS/s")
        # the same name again: numaaff-top follows the new process
        second = watch(w, AMR, amr_args, "amr, restarted", "TASKS/s")
        check(first != second, "the restarted amr has another pid")
        w.close()
        w = Window(["--name", "numa_test", "--interval", str(INTERVAL), "--sort", "pages"])
        watch(w, NUMA_TEST, ["--mode", "exec", "--passes", "60", "--mib", "16"], "numa_test", "BUSY%")
        subprocess.run([*w.tmux, "send-keys", "-t", w.s, "q"], check=True)
        deadline = time.time() + 3
        while w.alive() and time.time() < deadline:
            time.sleep(0.1)
        check(not w.alive(), "numaaff-top did not quit on 'q'")
    finally:
        w.close()

print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
