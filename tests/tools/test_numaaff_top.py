#!/usr/bin/env python3
"""numaaff-top as a person and a script use it: against a running numaaff process (top_target:
a block on a node and a pool running tasks), its JSON parsed by Python's json module and its
figures compared with raw queries (move_pages on the target's block from outside, the pool's
worker count); live in tmux (the screen captured, a resize, keys, the target exiting under
it); following a process by name across a restart; output to a pipe; a process that is not
numaaff's, one that is gone, a forged counter segment; bad usage.

usage: test_numaaff_top.py NUMAAFF_TOP TOP_TARGET
Prints 'N passed, N failed' and exits non-zero on any failure."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOP, TARGET = sys.argv[1], sys.argv[2]
PAGE = os.sysconf("SC_PAGESIZE")
results = {"passed": 0, "failed": 0}


def check(cond, what):
    if cond:
        results["passed"] += 1
    else:
        results["failed"] += 1
        print("FAILED:", what, flush=True)


def top(*args, timeout=30):
    return subprocess.run([TOP, *args], capture_output=True, text=True, timeout=timeout)


def top_json(*args):
    r = top("--once", "--json", "--interval", "0.5", *args)
    check(r.returncode == 0, f"numaaff-top {' '.join(args)} exit {r.returncode}: {r.stderr}")
    lines = r.stdout.strip().splitlines()
    check(len(lines) == 1, f"--once --json printed {len(lines)} lines")
    return json.loads(lines[0])


class Target:
    """top_target MIB NODE, until stop()."""

    def __init__(self, mib=8, node=None, program=TARGET):
        node = node if node is not None else online_nodes()[0]
        self.p = subprocess.Popen([program, str(mib), str(node)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        words = self.p.stdout.readline().split()
        assert words and words[0] == "ready", words
        self.addr, self.bytes, self.workers = int(words[1], 16), int(words[2]), int(words[3])
        self.pid, self.node = self.p.pid, node
        # its counters are published within 100 ms of its pool's start
        deadline = time.time() + 10
        while not os.path.exists(f"/dev/shm/numaaff-{self.pid}") and time.time() < deadline:
            time.sleep(0.02)

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)


def online_nodes():
    text = open("/sys/devices/system/node/online").read().strip()
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def raw_pages_per_node(pid, addr, nbytes):
    """move_pages(pid, ..., NULL, status): where each page of the block is, by the kernel."""
    numa = ctypes.CDLL("libnuma.so.1", use_errno=True)
    n = nbytes // PAGE
    pages = (ctypes.c_void_p * n)(*[addr + i * PAGE for i in range(n)])
    status = (ctypes.c_int * n)()
    numa.move_pages.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    if numa.move_pages(pid, n, pages, None, status, 0) != 0:
        return None, ctypes.get_errno()
    per = {}
    for s in status:
        per[s] = per.get(s, 0) + 1
    return per, 0


def node_meminfo(node):
    """/sys/devices/system/node/nodeN/meminfo: field -> bytes."""
    out = {}
    for line in open(f"/sys/devices/system/node/node{node}/meminfo"):
        words = line.split()  # "Node 0 MemFree: 123 kB"
        out[words[2].rstrip(":")] = int(words[3]) * (1024 if words[-1] == "kB" else 1)
    return out


def node_huge_pages(node):
    """(reserved, free) 2 MiB pages of the node from sysfs, or None without that pool."""
    d = f"/sys/devices/system/node/node{node}/hugepages/hugepages-2048kB"
    if not os.path.isdir(d):
        return None
    return tuple(int(open(os.path.join(d, f)).read()) for f in ("nr_hugepages", "free_hugepages"))


def kernel_migrated():
    for line in open("/proc/vmstat"):
        if line.startswith("numa_pages_migrated "):
            return int(line.split()[1])
    return None


def row(frame, node):
    return next(r for r in frame["nodes"] if r["node"] == node)


# ---- bad usage, help, version -------------------------------------------------------------
check(top("--help").returncode == 0 and "--pid" in top("--help").stdout, "--help")
check(top("--version").stdout.startswith("numaaff-top "), "--version")
for bad in (["--pid", "abc"], ["--pid", "0"], ["--pid"], ["--interval", "0"], ["--interval", "x"], ["--sort", "cpu"],
            ["--count", "-1"], ["--bogus"], ["--pid", "1", "--name", "x"]):
    r = top(*bad)
    check(r.returncode == 2 and "usage" in r.stderr, f"{bad}: exit {r.returncode}, {r.stderr!r}")

# ---- a numaaff process: JSON against raw queries --------------------------------------------
t = Target(mib=8)
try:
    # The kernel's figures, against the kernel's own files read just before and after a
    # sample: totals and reserved huge pages exactly; free memory and free huge pages between
    # the two reads (with 16 MiB of slack for free memory); migrations/s zero when the
    # kernel's count did not move. Tests running beside this one change free memory and huge
    # pages and migrate pages: a sample that another process disturbed is taken again, five
    # times at most, and the last one's differences are reported.
    def kernel_figure_errors():
        before = {n: (node_meminfo(n)["MemFree"], node_huge_pages(n)) for n in online_nodes()}
        migrated_before = kernel_migrated()
        frame = top_json("--pid", str(t.pid))
        migrated_after = kernel_migrated()
        errors = []
        for r in frame["nodes"]:
            n = r["node"]
            raw, huge = node_meminfo(n), node_huge_pages(n)
            if r["total_bytes"] != raw["MemTotal"]:
                errors.append(f"node {n}: total {r['total_bytes']} != sysfs {raw['MemTotal']}")
            lo, hi = min(before[n][0], raw["MemFree"]), max(before[n][0], raw["MemFree"])
            if not lo - (16 << 20) <= r["free_bytes"] <= hi + (16 << 20):
                errors.append(f"node {n}: free {r['free_bytes']} outside sysfs's {lo}..{hi} around the sample")
            if huge is not None and before[n][1] is not None:
                if r["huge_2mib_reserved"] != huge[0] or before[n][1][0] != huge[0]:
                    errors.append(f"node {n}: {r['huge_2mib_reserved']} huge pages reserved, sysfs {before[n][1][0]} then {huge[0]}")
                flo, fhi = sorted((before[n][1][1], huge[1]))
                if not flo <= r["huge_2mib_free"] <= fhi:
                    errors.append(f"node {n}: {r['huge_2mib_free']} huge pages free, sysfs {flo}..{fhi} around the sample")
        if migrated_before is not None and migrated_before == migrated_after and frame["kernel_numa_pages_migrated_per_s"] != 0:
            errors.append(f"kernel migrations/s {frame['kernel_numa_pages_migrated_per_s']} while /proc/vmstat's count stayed")
        return frame, errors

    for attempt in range(5):
        f, kernel_errors = kernel_figure_errors()
        if not kernel_errors:
            break
    check(not kernel_errors, "; ".join(kernel_errors))
    check(sorted(r["node"] for r in f["nodes"]) == online_nodes(), f"rows {[r['node'] for r in f['nodes']]}")
    check(f["pids"] == [t.pid] and f["status"] == "", f"pids {f['pids']} status {f['status']!r}")
    check(f"pid {t.pid}" in f["target"] and "top_target" in f["target"], f"target {f['target']!r}")
    check(sum(r["workers"] for r in f["nodes"]) == t.workers, f"workers {[r['workers'] for r in f['nodes']]} != {t.workers}")
    check(sum(r["tasks_per_s"] for r in f["nodes"]) > 100, f"tasks/s {[r['tasks_per_s'] for r in f['nodes']]}")
    for r in f["nodes"]:
        for k in ("cpu_percent", "busy_percent", "process_share_percent"):
            if r[k] is not None:
                check(0 <= r[k] <= 100.5, f"node {r['node']} {k} = {r[k]}")
        check(r["free_bytes"] is not None and 0 <= r["free_bytes"] <= r["total_bytes"], f"node {r['node']} free/total")
    # Another user's numaaff-top: the segment is 0600, so it sees the kernel's figures only
    # (and numa_maps of another user's process not at all), says so, and does not fail.
    if os.geteuid() == 0:
        import pwd
        nobody = pwd.getpwnam("nobody").pw_uid
        spot = tempfile.mkdtemp()  # a copy nobody can reach, wherever the build is
        os.chmod(spot, 0o755)
        top_copy = shutil.copy(TOP, os.path.join(spot, "numaaff-top"))
        os.chmod(top_copy, 0o755)
        r = subprocess.run([top_copy, "--once", "--json", "--interval", "0.3", "--pid", str(t.pid)], capture_output=True, text=True,
                           timeout=30, preexec_fn=lambda: (os.setgid(65534), os.setuid(nobody)))
        check(r.returncode == 0, f"as nobody: exit {r.returncode}: {r.stderr}")
        if r.returncode == 0:
            other = json.loads(r.stdout)
            check(other["pids"] == [] and "no numaaff counters" in other["status"], f"as nobody: {other['status']!r}")
            check(all(n["process_bytes"] is None for n in other["nodes"]), "as nobody, another user's memory was shown")
        shutil.rmtree(spot)
    per, err = raw_pages_per_node(t.pid, t.addr, t.bytes)
    if per is None:
        print(f"raw move_pages query refused (errno {err}, a sandbox): placement not compared")
    else:
        check(sum(per.values()) == t.bytes // PAGE, f"raw query {per}")
        for node, pages in per.items():
            if node >= 0:
                got = row(f, node)["process_bytes"]
                check(got >= pages * PAGE, f"node {node}: numaaff-top says {got} bytes, the block alone has {pages * PAGE} there")
        # the block is most of the process on its node
        check(row(f, t.node)["process_bytes"] >= t.bytes, f"node {t.node} holds the 8 MiB block")

    # ---- live in tmux: the screen, a resize, keys, the target exiting under it --------------
    if shutil.which("tmux"):
        s = f"numaaff-top-test-{os.getpid()}"
        # its own server: on the shared one, another test closing its last session can end the
        # server while this test connects to it
        tmux = ["tmux", "-L", s]
        subprocess.run([*tmux, "new-session", "-d", "-s", s, "-x", "150", "-y", "30",
                        f"{TOP} --pid {t.pid} --interval 0.5"], check=True)

        def screen():
            return subprocess.run([*tmux, "capture-pane", "-p", "-t", s], capture_output=True, text=True).stdout

        def alive():
            return subprocess.run([*tmux, "has-session", "-t", s], capture_output=True).returncode == 0

        try:
            time.sleep(2.0)
            text = screen()
            lines = text.splitlines()
            check(any(l.startswith("numaaff-top") and f"pid {t.pid}" in l for l in lines), f"no header on screen:\n{text}")
            header = next((l for l in lines if l.lstrip().startswith("NODE")), None)
            check(header is not None, f"no column header:\n{text}")
            if header is not None:
                cols = header.split()
                node_rows = [l.split() for l in lines if l.strip() and l.split()[0].isdigit()]
                check(sorted(int(r[0]) for r in node_rows) == online_nodes(), f"node rows on screen:\n{text}")
                mine = next(r for r in node_rows if int(r[0]) == t.node)
                # KIND may take two or three words; read the columns from the right
                proc_mib = float(mine[len(mine) - (len(cols) - cols.index("PROC_MiB"))])
                check(proc_mib >= t.bytes / 2**20, f"PROC_MiB {proc_mib} on the screen < the 8 MiB block:\n{text}")
            subprocess.run([*tmux, "resize-window", "-t", s, "-x", "70", "-y", "20"], check=True)
            time.sleep(1.0)
            text = screen()
            # The column header (130 characters) is cut at the window's width, not wrapped by
            # the terminal: a wrapped one would leave its right half on the next line.
            header = next((l for l in text.splitlines() if l.lstrip().startswith("NODE")), "")
            check(len(header.rstrip()) == 70, f"column header not cut at 70 columns:\n{text}")
            check("FREE_MiB" not in text and "HUGE2M" not in text, f"the header's right half was drawn:\n{text}")
            check(any(l.startswith("numaaff-top") for l in text.splitlines()), f"nothing drawn after the resize:\n{text}")
            subprocess.run([*tmux, "send-keys", "-t", s, "s"], check=True)
            time.sleep(0.7)
            check(alive(), "numaaff-top left on 's'")
            t.stop()
            time.sleep(1.5)
            text = screen()
            check("gone" in text and alive(), f"after the target exited:\n{text}")
            subprocess.run([*tmux, "send-keys", "-t", s, "q"], check=True)
            deadline = time.time() + 3
            while alive() and time.time() < deadline:
                time.sleep(0.1)
            check(not alive(), "numaaff-top did not quit on 'q'")
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
    else:
        check(False, "tmux is not installed (scripts/setup.sh installs it)")
finally:
    t.stop()

# ---- following a process by name across a restart; output to a pipe ------------------------
a = Target(mib=1)
follow = subprocess.Popen([TOP, "--name", "top_target", "--json", "--interval", "0.5", "--count", "8"],
                          stdout=subprocess.PIPE, text=True)
time.sleep(1.2)
a.stop()
b = Target(mib=1)
out, _ = follow.communicate(timeout=30)
b.stop()
seen = [tuple(json.loads(l)["pids"]) for l in out.splitlines()]
check(len(seen) == 8, f"--count 8 printed {len(seen)} samples")
check((a.pid,) in seen and (b.pid,) in seen and seen.index((a.pid,)) < seen.index((b.pid,)),
      f"--name did not follow the restart from {a.pid} to {b.pid}: {seen}")
c = Target(mib=1)
r = top("--pid", str(c.pid), "--interval", "0.3", "--count", "2")
c.stop()
check(r.returncode == 0 and "\x1b" not in r.stdout and r.stdout.count("NODE") == 2, f"to a pipe:\n{r.stdout!r}")

# ---- a command name with control characters reaches the terminal as plain text ------------
odd_dir = tempfile.mkdtemp()
odd = os.path.join(odd_dir, "t\x1b[2J\x07x")  # clears the screen and rings, if printed raw
os.symlink(os.path.abspath(TARGET), odd)
d = Target(mib=1, program=odd)
r = top("--pid", str(d.pid), "--interval", "0.3", "--count", "1")
d.stop()
shutil.rmtree(odd_dir)
check(r.returncode == 0 and "t?[2J?x" in r.stdout, f"the odd command name is not shown as text:\n{r.stdout!r}")
check("\x1b" not in r.stdout and "\x07" not in r.stdout, f"control characters reached the terminal:\n{r.stdout!r}")

# ---- not numaaff's, gone, forged -------------------------------------------------------------
sleeper = subprocess.Popen(["sleep", "60"])
try:
    f = top_json("--pid", str(sleeper.pid))
    check("no numaaff counters" in f["status"] and f["pids"] == [], f"a plain process: {f['status']!r}")
    check(all(r["process_bytes"] is not None for r in f["nodes"]), "a plain process's memory per node is still shown")
    path = f"/dev/shm/numaaff-{sleeper.pid}"
    for forged in (b"", b"NUMAAFFC" + b"\xff" * 200, os.urandom(4096)):
        with open(path, "wb") as fh:
            fh.write(forged)
        f = top_json("--pid", str(sleeper.pid))
        check("unreadable" in f["status"] and f["pids"] == [], f"forged segment of {len(forged)} bytes: {f['status']!r}")
    os.unlink(path)
finally:
    sleeper.kill()
    sleeper.wait()
f = top_json("--pid", str(sleeper.pid))
check("gone" in f["status"], f"a gone process: {f['status']!r}")

print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
