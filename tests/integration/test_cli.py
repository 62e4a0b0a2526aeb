#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, CLI: every command's --json is one JSON document (python3 -m json.tool
accepts it) whose key fields match the live agent; every command has --help; and
`bpftel top` runs in an 80x24 tmux terminal, shows the modules' rows, and quits on q."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, check, require_root, run, skip, wait_for  # noqa: E402

COMMANDS = ["stats", "modules", "probes", "libs", "errors", "gpu", "http", "top"]


def check_json(agent):
    docs = {}
    for cmd in COMMANDS:
        raw = agent.cli(cmd, "--json").stdout
        tool = subprocess.run([sys.executable, "-m", "json.tool"], input=raw,
                              capture_output=True, text=True)
        check(tool.returncode == 0, f"bpftel {cmd} --json | python3 -m json.tool")
        docs[cmd] = json.loads(raw)
    mods = {m["name"]: m for m in docs["modules"]["modules"]}
    check(set(mods) == {"sharedlibs", "gpu", "usm"} and
          all(m["state"] == "running" for m in mods.values()),
          f"modules: {[(n, m['state']) for n, m in mods.items()]}")
    check(docs["stats"]["agent"]["pid"] == agent.proc.pid,
          f"stats: agent pid {docs['stats']['agent']['pid']} is the agent's")
    ours = {p["component"] for p in docs["stats"]["programs"]}
    check(ours == {"sharedlibs", "gpu", "usm"}, f"stats: programs of {sorted(ours)}")
    check({p["module"] for p in docs["probes"]["probes"]} >= {"sharedlibs", "gpu"},
          "probes: the watcher's and gpu's probes")
    check(docs["gpu"]["state"] == "running" and docs["http"]["state"] == "running" and
          isinstance(docs["libs"]["libs"], list) and isinstance(docs["errors"]["errors"], list),
          "gpu and http report a running module; libs and errors are lists")
    top_mods = {m["module"] for m in docs["top"]["modules"]}
    check(top_mods == set(mods) and docs["top"]["interval_s"] > 0.5,
          f"top --json: one sample of {sorted(top_mods)} over {docs['top']['interval_s']:.2f} s")
    cost = docs["top"]["agent"]
    maps = sum(m["memory_bytes"] or 0 for m in docs["stats"]["maps"])
    check(cost["cpu_percent"] is not None and 0 <= cost["cpu_percent"] <= 100 * os.cpu_count() and
          cost["rss_bytes"] > 0 and cost["maps_memory_bytes"] > 0 and
          docs["stats"]["agent"]["rss_bytes"] > 0 and docs["stats"]["agent"]["cpu_seconds"] > 0 and
          maps > 0,
          f"top --json: the agent's own cost {cost}; stats: cpu_seconds "
          f"{docs['stats']['agent']['cpu_seconds']}, rss_bytes "
          f"{docs['stats']['agent']['rss_bytes']}, maps {maps} bytes")
    for cmd in COMMANDS + ["module"]:
        res = subprocess.run([agent.cli_bin, cmd, "--help"], capture_output=True, text=True)
        check(res.returncode == 0 and "Usage: bpftel" in res.stdout, f"bpftel {cmd} --help")
    maddr = docs["stats"]["agent"]["metrics_addr"]
    table = agent.cli("stats").stdout
    check(maddr.startswith("127.0.0.1:") and not maddr.endswith(":0") and
          f"metrics at http://{maddr}/metrics" in table.split("\n")[0],
          f"bpftel stats shows the metrics address the agent bound (port 0 asked): {maddr}")
    # Output that cannot be written is a failure a script sees, not exit 0 and nothing.
    for args in (["stats"], ["stats", "--json"], ["top", "--json"]):
        with open("/dev/full", "w") as full:
            res = subprocess.run([agent.cli_bin, "--socket", agent.socket, *args],
                                 stdout=full, stderr=subprocess.PIPE, text=True)
        check(res.returncode == 1 and "cannot write the output" in res.stderr,
              f"bpftel {' '.join(args)} > /dev/full: exit {res.returncode}, "
              f"{res.stderr.strip()}")


def check_top(agent):
    session = f"bpftel-top-{os.getpid()}"
    cmd = f"{agent.cli_bin} --socket {agent.socket} top"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd],
                   check=True)
    try:
        def screen():
            out = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                 capture_output=True, text=True).stdout
            return out if "PROGRAM" in out and "usm" in out else None
        text = wait_for(screen, 60, "bpftel top to draw")
        lines = text.rstrip("\n").split("\n")
        rows = {ln.split()[0] for ln in lines if ln.split()}
        check({"sharedlibs", "gpu", "usm"} <= rows and
              ("shlib_exit_openat" in text or "shlib_fexit_open" in text),
              "bpftel top shows module rows and program rows (the watcher's openat "
              "program: the exit tracepoint's, or the fexit where the kernel takes it)")
        check(re.search(r"^agent: CPU [0-9.]+ % of one CPU, RSS [0-9.]+ MiB; maps [0-9.]+ MiB",
                        text, re.M) is not None and lines[0].startswith("bpftel top - agent"),
              "bpftel top shows the agent's own CPU, RSS and maps' kernel memory, its title "
              "still on the first line")
        check(len(lines) <= 24 and all(len(ln) <= 80 for ln in lines),
              f"fits 80x24: {len(lines)} lines, widest {max(len(ln) for ln in lines)}")
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        wait_for(lambda: subprocess.run(["tmux", "has-session", "-t", session],
                                        capture_output=True).returncode != 0, 60,
                 "bpftel top to quit on q")
        check(True, "q quits bpftel top")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    check_top_interrupted(agent)


def check_top_interrupted(agent):
    """Ctrl-C ends bpftel top with the cursor shown again (it stayed hidden: the show
    sequence sat in stdio's buffer when SIGINT's default action ended the process)."""
    session = f"bpftel-top-int-{os.getpid()}"
    # A shell that outlives top (SIGINT ignored in it, caught in top), so that the
    # pane's cursor can be read after.
    cmd = (f"sh -c 'trap \"\" INT; {agent.cli_bin} --socket {agent.socket} top; "
           f"echo top-ended; read x'")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd],
                   check=True)

    def pane(fmt):
        return subprocess.run(["tmux", "display-message", "-p", "-t", session, fmt],
                              capture_output=True, text=True).stdout.strip()

    def screen():
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                              capture_output=True, text=True).stdout
    try:
        wait_for(lambda: "PROGRAM" in screen() and pane("#{cursor_flag}") == "0", 60,
                 "bpftel top to draw, its cursor hidden")
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        wait_for(lambda: "top-ended" in screen(), 60, "bpftel top to end on Ctrl-C")
        flag = pane("#{cursor_flag}")
        check(flag == "1", f"after Ctrl-C the cursor is shown again (cursor_flag {flag})")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    args = ap.parse_args()
    require_root()
    if not shutil.which("tmux"):
        skip("tmux is not installed (tools/dev.sh test installs it)")
    agent = Agent(args.agent, args.cli)
    try:
        check_json(agent)
        check_top(agent)
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
    finally:
        agent.cleanup()
    print("test_cli: all checks passed")


if __name__ == "__main__":
    run(main)
