#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""One user's CUDA processes cannot take the GPU module's tables from the others'.

The real agent, its gpu module on the stub libcudart.so.13 the tests build, with
user_share_percent = 1: an owner but root holds at most 40 of the 4096 process rows and
163 of the 16384 tracked allocations (and of the 16384 threads' states). Root's
process makes 2 allocations; then nobody
starts 40 processes of 5 allocations each, all kept alive: each has its row, the first
163 allocations are tracked and the other 37 refused (allocs_over_cap, the shares'
refusals). Nobody's 41st process gets no row, and its 5 calls are counted as refused;
root's next process is not held back. Half of nobody's processes run under uids of a
range /etc/subuid grants nobody (here a file of the test's, BPFTEL_SUBUID): they are
nobody's, its one share. Root in a pid namespace of its own (a container's root,
`unshare --pid --fork`) is bounded like a user, its 41st process refused too. The
shares name nobody as the holder (JSON,
bpftel gpu, /metrics) once recounted. 10 of nobody's processes end: their rows go with
them, the recount gives their places back, and nobody's next process gets a row. After
`bpftel module restart gpu` the rows and nobody's count are kept: 9 more processes fill
its share, the next is refused. With user_share_percent = 100 on SIGHUP, there is no
bound. Nothing is left in the kernel
after the agent stops."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, agent_args, check, run, wait_for  # noqa: E402
from test_gpu import probe_points  # noqa: E402

NOBODY = 65534
RANGE = 300000                          # the first uid of the range granted to nobody
PERCENT = 1
PROCS_SHARE = 4096 * PERCENT // 100     # bpf/gpu.h GPU_MAX_PROCS
ALLOCS_SHARE = 16384 * PERCENT // 100   # GPU_MAX_ALLOCS
THREADS = 8192 + 8192                   # GPU_THREAD_SLOTS + GPU_MAX_THREADS
INFLIGHT = 8192                         # GPU_MAX_INFLIGHT
PER_PROC = 5                            # nobody's allocations per process
NPROBES = probe_points("GPU_TEST_CUDART_POINTS")
# A container's root: a pid namespace of its own; its init killed with unshare.
CONTAINER = ["unshare", "--pid", "--fork", "--kill-child"]


def as_user(uid):
    """The command prefix that runs a process as uid (real and effective), no groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def read_line(proc, timeout=120):
    """proc's next line of output, waited for at most timeout seconds (a child that hangs
    fails the test with a message, not at ctest's timeout)."""
    got = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        raise AssertionError(f"no line from pid {proc.pid} in {timeout} s")
    return got[0].strip()


class Malloc:
    """cuda_pattern STUB malloc N (as prefix's user): loaded, then N cudaMalloc of 4 KiB
    on "go", none freed, kept until finish(). Appended to procs first, so that a
    failure leaves nothing running."""

    def __init__(self, agent, pattern, stub, n, procs, prefix=()):
        self.proc = subprocess.Popen([*prefix, pattern, stub, "malloc", str(n)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd="/")
        procs.append(self)
        line = read_line(self.proc).split()
        if line[:1] != ["loaded"]:
            raise AssertionError(f"cuda_pattern did not load {stub}: {line}")
        self.pid = int(line[1])
        # The uprobes are the file's, every process that maps it probed (bpftel libs
        # lists a file's first 8 processes).
        wait_for(lambda: [r for r in agent.json("libs")["libs"]
                          if r["module"] == "gpu" and r["lib"] == "libcudart" and
                          r["attached"] + r["folded_points"] == NPROBES], 60,
                 f"the gpu module's uprobes on the stub pid {self.pid} maps")
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        out = read_line(self.proc)
        check(out == f"malloc {n} failed 0" and read_line(self.proc) == "done",
              f"pid {self.pid}: {n} allocations made: {out}")

    def finish(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def rows(agent):
    return {p["pid"]: p for p in agent.json("gpu")["processes"]}


def shares(agent):
    return agent.json("gpu")["shares"]


def holders_are(agent, table, entries):
    """The shares of table once a recount names nobody alone, holding entries."""
    t = shares(agent)[table]
    return t if t["holders"] == [{"kind": "user", "uid": NOBODY, "entries": entries}] else None


def scrape(agent):
    addr = agent.json("stats")["agent"]["metrics_addr"]
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=120) as r:
        return r.read().decode()


def sample(text, family, table):
    m = re.search(r"^" + family + r'\{table="' + table + r'"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def write_config(path, percent):
    with open(path, "w") as f:
        f.write(f"metrics_addr = 127.0.0.1:0\nmodules = gpu\nuser_share_percent = {percent}\n")


def main():
    args = agent_args(tools=("setpriv", "unshare"), more=("--pattern", "--stub"))
    tmp = tempfile.mkdtemp(prefix="bpftel-gpu-share-")
    conf = os.path.join(tmp, "bpftel.conf")
    write_config(conf, PERCENT)
    subuid = os.path.join(tmp, "subuid")
    with open(subuid, "w") as f:
        f.write(f"nobody:{RANGE}:65536\n")
    agent = Agent(args.agent, args.cli, ["-c", conf], env={"BPFTEL_SUBUID": subuid})
    procs = []
    try:
        def start(n, uid=NOBODY, prefix=()):
            return Malloc(agent, args.pattern, args.stub, n, procs,
                          as_user(uid) if uid else prefix)

        root = start(2, 0)
        check(shares(agent)["subuid"] == {"path": subuid, "ranges": 1, "left_out": 0,
                                          "error": None}, "the gpu module read the range")
        nobodys = [start(PER_PROC, NOBODY if i % 2 else RANGE + i)
                   for i in range(PROCS_SHARE)]
        refused = start(PER_PROC, RANGE + 65535)
        now = rows(agent)
        check(now[root.pid]["memory"]["allocs_over_cap"] == 0,
              "root's allocations all tracked")
        check(all(p.pid in now for p in nobodys), f"nobody's {PROCS_SHARE} processes have rows")
        check(refused.pid not in now, "nobody's next process has none")
        over = sum(now[p.pid]["memory"]["allocs_over_cap"] for p in nobodys)
        made = PROCS_SHARE * PER_PROC
        check(over == made - ALLOCS_SHARE,
              f"nobody's allocations: {ALLOCS_SHARE} of {made} tracked, {over} over the cap")
        sh = shares(agent)
        check(sh["processes"]["refused"] == PER_PROC and
              sh["allocations"]["refused"] == made - ALLOCS_SHARE and
              sh["processes"]["share"] == PROCS_SHARE and
              sh["allocations"]["share"] == ALLOCS_SHARE and
              sh["processes"]["entries"] == 4096 and
              agent.json("gpu")["user_share_percent"] == PERCENT,
              f"the refusals (the refused process's {PER_PROC} calls, the untracked "
              f"allocations) and the shares: {sh}")
        other = start(1, 0)
        check(other.pid in rows(agent), "root's next process is not held back")
        wait_for(lambda: holders_are(agent, "processes", PROCS_SHARE) and
                 holders_are(agent, "allocations", ALLOCS_SHARE), 60,
                 "the recount to name nobody holding its shares")
        # And who was refused the most: nobody (read at a recount after the refusals).
        wait_for(lambda: (lambda sh: sh["processes"]["refused_by"] ==
                          [{"kind": "user", "uid": NOBODY, "refused": PER_PROC}] and
                          sh["allocations"]["refused_by"] ==
                          [{"kind": "user", "uid": NOBODY, "refused": made - ALLOCS_SHARE}]
                          and sh["threads"]["refused_by"] == [])(shares(agent)), 60,
                 "the recount to name nobody refused its processes' calls and allocations")
        # Each process's one thread has its state, the refused one's too: nobody's 41.
        wait_for(lambda: holders_are(agent, "threads", PROCS_SHARE + 1), 60,
                 f"the recount to name nobody holding {PROCS_SHARE + 1} threads' state")
        sh = shares(agent)
        check(sh["threads"]["entries"] == THREADS and
              sh["threads"]["share"] == THREADS * PERCENT // 100 and
              sh["threads"]["refused"] == 0 and
              sh["calls_in_flight"]["entries"] == INFLIGHT and
              sh["calls_in_flight"]["share"] == INFLIGHT * PERCENT // 100 and
              sh["calls_in_flight"]["holders"] == [] and
              sh["calls_in_flight"]["refused"] == 0,
              f"the threads' state and the calls in flight (none now): {sh}")
        text = agent.cli("gpu").stdout
        check(f"processes (share {PROCS_SHARE} of 4096): uid {NOBODY} {PROCS_SHARE}" in text and
              f"allocations (share {ALLOCS_SHARE} of 16384): uid {NOBODY} {ALLOCS_SHARE}"
              in text, "bpftel gpu names the holder")
        check(f"Refused the most since the module started: processes: uid {NOBODY} "
              f"{PER_PROC}; allocations: uid {NOBODY} {made - ALLOCS_SHARE}\n" in text,
              "bpftel gpu names who was refused the most")
        check(f"Refused over a user's share (user_share_percent = {PERCENT}): processes "
              f"{PER_PROC}, allocations {made - ALLOCS_SHARE}" in text,
              "bpftel gpu shows the refusals")
        said = [ln for ln in agent.logs().splitlines() if "holds its share of the" in ln]
        check(len(said) == 2 and
              f"gpu: uid {NOBODY} holds its share of the CUDA processes' rows, "
              f"{PROCS_SHARE} of 4096" in said[0] + said[1] and
              f"gpu: uid {NOBODY} holds its share of the tracked allocations, "
              f"{ALLOCS_SHARE} of 16384" in said[0] + said[1] and
              "raise user_share_percent" in said[0],
              f"the log says once a table who holds its whole share: {said}")
        text = scrape(agent)
        check(sample(text, "bpftel_gpu_user_share_refused_total", "processes") == PER_PROC and
              sample(text, "bpftel_gpu_user_share_refused_total", "allocations") ==
              made - ALLOCS_SHARE and
              sample(text, "bpftel_gpu_user_share_entries", "processes") == PROCS_SHARE and
              sample(text, "bpftel_gpu_user_share_top_holder_entries", "processes") ==
              PROCS_SHARE, "/metrics: the refusals, the share and its top holder")

        # A container's root: its processes in the test's cgroup, one owner.
        ct = [start(1, 0, CONTAINER) for _ in range(PROCS_SHARE)]
        refused_ct = start(1, 0, CONTAINER)
        check(shares(agent)["processes"]["refused"] == PER_PROC + 1,
              "a container's root's 41st process is refused its row, its call counted")
        wait_for(lambda: [h for h in shares(agent)["processes"]["holders"]
                          if h["kind"] == "container" and h["entries"] == PROCS_SHARE], 60,
                 f"the recount to name a container's root holding {PROCS_SHARE} rows")
        for p in ct + [refused_ct]:
            p.finish()

        # 10 of nobody's processes end: the sweep drops their rows, the recount gives
        # their places back.
        for p in nobodys[:10]:
            p.finish()
        wait_for(lambda: holders_are(agent, "processes", PROCS_SHARE - 10) and
                 holders_are(agent, "threads", PROCS_SHARE + 1 - 10), 60,
                 "the recount to give back the rows and threads of nobody's processes gone")
        check(holders_are(agent, "allocations", ALLOCS_SHARE - sum(
            min(PER_PROC, max(0, ALLOCS_SHARE - i * PER_PROC)) for i in range(10))),
            "and their allocations")
        again = start(PER_PROC)
        check(again.pid in rows(agent), "nobody's next process has a row again")

        # A restart keeps the rows and nobody's count of them: 9 more processes fill
        # its share again, a 10th is refused (not a second share).
        agent.cli("module", "restart", "gpu")
        fill = [start(1) for _ in range(9)]
        over_again = start(PER_PROC)
        now = rows(agent)
        check(all(p.pid in now for p in nobodys[10:] + [again] + fill) and
              over_again.pid not in now,
              f"after `bpftel module restart gpu` nobody's {PROCS_SHARE - 9} rows are kept, "
              f"9 more fill its share, the next is refused")

        # No bound from SIGHUP on: nobody's next processes have rows.
        write_config(conf, 100)
        agent.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: agent.json("gpu")["user_share_percent"] == 100, 30,
                 "user_share_percent = 100 applied")
        check(shares(agent)["processes"]["share"] is None, "no share: null")
        more = [start(1) for _ in range(11)]
        now = rows(agent)
        check(all(p.pid in now for p in more), "nobody's 11 next processes have rows")
        check(shares(agent)["processes"]["refused"] == 2 * PER_PROC + 1, "and none was refused")
    finally:
        for p in procs:
            if p.proc.stdin and not p.proc.stdin.closed:
                p.proc.stdin.close()
            p.proc.kill()
            p.proc.wait()
        agent.stop()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    check(True, f"none of what the agent held remains: {agent.released()}")
    print("test_gpu_share: all checks passed")


if __name__ == "__main__":
    run(main)
