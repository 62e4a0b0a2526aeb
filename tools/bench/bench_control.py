# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The agent's control plane under load, for bench.py: how long `stats` takes to
answer during a restart storm and during a sweep of idle libraries, how fast SIGTERM
ends the agent after 100 restarts (and whether any of its links outlive it), and what
a module restart costs with multi-uprobe links and with per-probe links.

Each needs root and a build with the tests (cuda_pattern and the stub libcudart)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

LIBSSL = "/lib/x86_64-linux-gnu/libssl.so.3"


def ask(sock_path, cmd, timeout=30):
    """One control-socket exchange, timed: (seconds, answer)."""
    t0 = time.monotonic()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    return time.monotonic() - t0, json.loads(buf)


class Sampler(threading.Thread):
    """`stats` every 10 ms until stopped: latencies in seconds."""

    def __init__(self, sock_path):
        super().__init__(daemon=True)
        self.sock_path, self.lat, self.done = sock_path, [], threading.Event()

    def run(self):
        while not self.done.is_set():
            self.lat.append(ask(self.sock_path, "stats")[0])
            self.done.wait(0.01)

    def finish(self):
        self.done.set()
        self.join()
        return sorted(self.lat)


def quantiles(lat):
    ms = [v * 1000 for v in lat]
    return ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.99))], ms[-1]


class Workloads:
    """Libraries in use, so that modules have uprobes to attach and detach: a python
    holding libssl (usm) and cuda_pattern holding the stub libcudart (gpu)."""

    def __init__(self, build):
        self.procs = [subprocess.Popen([sys.executable, "-c",
                                        "import ssl, sys; sys.stdin.read()"],
                                       stdin=subprocess.PIPE)]
        pattern = f"{build}/tests/cuda_pattern"
        stub = f"{build}/tests/stub-cuda/libcudart.so.13"
        if os.path.exists(pattern):
            # It waits on stdin before playing: it holds the library meanwhile.
            self.procs.append(subprocess.Popen([pattern, stub, "stub"], stdin=subprocess.PIPE,
                                               stdout=subprocess.DEVNULL))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def wait_attached(agent, modules, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        libs = agent.json("libs") or {"libs": []}
        got = {r.get("module") for r in libs["libs"] if r.get("attached")}
        if set(modules) <= got:
            return
        time.sleep(0.05)
    raise SystemExit(f"bench: {modules} never attached")


def storm(agent, clients, rounds):
    cmd = (f'for i in $(seq {rounds}); do "$0" --socket "$1" module restart "$2" >/dev/null '
           f'|| exit 1; done')
    procs = [subprocess.Popen(["sh", "-c", cmd, agent.cli, agent.sock,
                               "gpu" if i % 2 else "usm"]) for i in range(clients)]
    if any(p.wait() for p in procs):
        raise SystemExit("bench: a restart failed")


def sweep(agent, build, tmp, n=40):
    paths = []
    for i in range(n):
        d = os.path.join(tmp, f"sweep{i}")
        os.makedirs(d, exist_ok=True)
        paths.append(os.path.join(d, "libssl.so.3"))
        shutil.copy(LIBSSL, paths[-1])
    procs = [subprocess.Popen([sys.executable, "-c",
                               "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print(1, flush=True);"
                               " sys.stdin.read()", p], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE) for p in paths]
    for p in procs:
        p.stdout.readline()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = {r["path"] for r in agent.json("libs")["libs"] if r.get("attached")}
        if set(paths) <= rows:
            break
        time.sleep(0.05)
    sampler = Sampler(agent.sock)
    sampler.start()
    for p in procs:
        p.kill()
        p.wait()
    while time.monotonic() < deadline:
        libs = agent.json("libs")["libs"]
        stats = agent.json("stats")
        if not {r["path"] for r in libs} & set(paths) and not stats["agent"]["links_releasing"]:
            break
        time.sleep(0.05)
    return sampler.finish()


def control(args, a_build, b_build, tmp, reps, Agent, Row):
    """stats latency during a restart storm and during a sweep (B only)."""
    rows = []
    conf = os.path.join(tmp, "sweep.conf")
    with open(conf, "w") as f:
        f.write("uprobe_grace = 0\n")
    for what in ("storm", "sweep"):
        lat = []
        for _ in range(max(1, reps // 5)):
            ag = Agent(b_build, tmp, ["-c", conf])
            work = Workloads(b_build)
            try:
                wait_attached(ag, ["gpu", "usm"] if len(work.procs) > 1 else ["usm"])
                if what == "storm":
                    sampler = Sampler(ag.sock)
                    sampler.start()
                    storm(ag, 50, 10)
                    lat += sampler.finish()
                else:
                    lat += sweep(ag, b_build, tmp)
            finally:
                work.stop()
                ag.stop()
        p50, p99, mx = quantiles(sorted(lat))
        row = Row(f"stats_latency {what}", "ms p99", "-", "agent",
                  note=f"{len(lat)} answers: p50 {p50:.1f}, p99 {p99:.1f}, max {mx:.1f} ms; "
                       f"target p99 <= 100 ms: {'met' if p99 <= 100 else 'MISSED'}")
        row.b = [p99]
        rows.append(row)
    return rows


def kernel_links():
    out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True)
    return {o["id"] for o in json.loads(out.stdout or "[]")}


def sigterm(args, a_build, b_build, tmp, reps, Agent, Row):
    """100 restarts, then SIGTERM: seconds to exit; links of the agent 1 s after."""
    exits, left = [], []
    for _ in range(max(1, reps // 5)):
        base = kernel_links()
        ag = Agent(b_build, tmp)
        work = Workloads(b_build)
        try:
            wait_attached(ag, ["gpu", "usm"] if len(work.procs) > 1 else ["usm"])
            for i in range(100):
                subprocess.run([ag.cli, "--socket", ag.sock, "module", "restart",
                                "gpu" if i % 2 else "usm"], check=True, capture_output=True)
            t0 = time.monotonic()
            ag.proc.terminate()
            ag.proc.wait()
            exits.append(time.monotonic() - t0)
            time.sleep(1.0)  # the target: nothing of it left one second after it exits
            left.append(len(kernel_links() - base))
        finally:
            work.stop()
    row = Row("sigterm after 100 restarts", "s", "-", "agent",
              note=f"links left 1 s after exit: {max(left)}; target exit <= 2 s and 0 "
                   f"links: {'met' if max(exits) <= 2 and not max(left) else 'MISSED'}")
    row.b = exits
    return [row]


def restart_links(args, a_build, b_build, tmp, reps, Agent, Row):
    """`restart gpu` + `restart usm` with their libraries in use: per-probe links (A,
    the kernel without multi-uprobe links, by fault injection) and multi links (B)."""
    def once(env):
        ag = Agent(b_build, tmp, env=env)
        work = Workloads(b_build)
        times = []
        try:
            wait_attached(ag, ["gpu", "usm"] if len(work.procs) > 1 else ["usm"])
            for _ in range(reps):
                t0 = time.monotonic()
                for mod in ("gpu", "usm"):
                    subprocess.run([ag.cli, "--socket", ag.sock, "module", "restart", mod],
                                   check=True, capture_output=True)
                times.append((time.monotonic() - t0) * 1000)
        finally:
            work.stop()
            ag.stop()
        return times
    row = Row("restart, libraries in use", "ms", "per-probe links", "multi-uprobe links",
              note="gpu + usm restarted, each with a library attached; target <= 100 ms")
    row.a = once({"BPFTEL_FAULTS": "uprobe_multi=EOPNOTSUPP"})
    row.b = once(None)
    row.note += f": {'met' if sum(row.b) / len(row.b) <= 100 else 'MISSED'}"
    return [row]
