#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, configuration: a malformed file (unknown key, bad value, bad line) makes
the agent exit 2 naming the file and line; a missing -c file too; a valid one is
applied (modules, run stats, inventory libsets); SIGHUP with a broken file keeps the
agent running on the old configuration and logs why; SIGHUP with a good one applies
what changed (a module started, metrics moved, run stats back on)."""
import argparse
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, check, require_root, run, wait_for  # noqa: E402


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def usm_failed_at_reload(args, conf):
    """An agent started with gpu, whose reload asking for usm too failed to start it
    (its load fails once: injected)."""
    write(conf, "modules = gpu\nlibsets = crypto\nmetrics_addr = off\n")
    agent = Agent(args.agent, args.cli, ["-c", conf], env={"BPFTEL_FAULTS": "usm.load=ENOMEM*1"})
    try:
        write(conf, "modules = gpu, usm\nlibsets = crypto\nmetrics_addr = off\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "module 'usm' not running" in agent.logs(), 60,
                 "usm's start to fail at the reload")
    except BaseException:
        agent.cleanup()
        raise
    return agent


def modules(agent):
    return {m["name"]: m["state"] for m in agent.json("modules")["modules"]}


def budget(agent):
    """The gpu module's max_cpu_percent as `bpftel modules` shows it (None: none)."""
    m = next(m for m in agent.json("modules")["modules"] if m["name"] == "gpu")
    return m["budget"] and m["budget"]["max_cpu_percent"]


def runs(agent):
    return {p["id"]: p["run_cnt"] for p in agent.json("stats")["programs"]}


def check_mode_switch(agent, conf, port):
    """always -> sampled on SIGHUP: no count goes down, and windows are counted."""
    before = runs(agent)
    write(conf, f"modules = gpu, usm\nrun_stats = sampled\nrun_stats_duty = 1/2\n"
                f"metrics_addr = 127.0.0.1:{port}\nlibsets = crypto, gpu\n")
    agent.proc.send_signal(signal.SIGHUP)
    detail = wait_for(lambda: (lambda d: d if d["mode"] == "sampled" and d["windows"] >= 2
                               else None)(agent.json("stats")["agent"]["run_stats_detail"]),
                      30, "two sampled windows after SIGHUP")
    check(detail["on_s"] == 1 and detail["period_s"] == 2,
          f"run_stats_duty = 1/2 applied: {detail}")
    after = runs(agent)
    down = {i: (before[i], after[i]) for i in before if i in after and after[i] < before[i]}
    check(not down and set(before) <= set(after),
          f"always -> sampled: no run count went down ({len(before)} programs)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    args = ap.parse_args()
    require_root()
    tmp = tempfile.mkdtemp(prefix="bpftel-config-")
    conf = os.path.join(tmp, "bpftel.conf")
    try:
        for text, line, what in (("workers = 2\ncolour = blue\n", 2, "unknown key 'colour'"),
                                 ("# ok\nrun_stats = maybe\n", 2, "run_stats: 'maybe'"),
                                 ("\n\n\nthis is not a setting\n", 4, "expected 'key = value'"),
                                 (f"metrics_addr = {'h' * 124}:9464\n", 1,
                                  "metrics_addr: 129 bytes, longer than 127")):
            write(conf, text)
            res = subprocess.run([args.agent, "-c", conf, "--socket",
                                  os.path.join(tmp, "s.sock")], capture_output=True,
                                 text=True, timeout=30)
            check(res.returncode == 2 and f"{conf}:{line}: {what}" in res.stderr,
                  f"exit {res.returncode}: {res.stderr.strip()}")
        res = subprocess.run([args.agent, "-c", os.path.join(tmp, "none.conf")],
                             capture_output=True, text=True, timeout=30)
        check(res.returncode == 2 and "none.conf: No such file" in res.stderr,
              f"a missing -c file: exit {res.returncode}: {res.stderr.strip()}")

        # A --socket that could never be bound: said at once (exit 2), before any module
        # loads and attaches host-wide.
        for sock in ("relative.sock", "/tmp/" + "a" * 200 + ".sock"):
            res = subprocess.run([args.agent, "--no-metrics", "--socket", sock],
                                 capture_output=True, text=True, timeout=30)
            check(res.returncode == 2 and "is not an absolute path shorter than 108 bytes"
                  in res.stderr and "uprobe trap" not in res.stderr and
                  "module" not in res.stderr,
                  f"--socket {sock[:20]}...: exit {res.returncode}: {res.stderr.strip()[:160]}")

        # The same address on the command line: refused whole, not cut to a port "94".
        res = subprocess.run([args.agent, "--metrics-addr", f"{'h' * 124}:9464", "--socket",
                              os.path.join(tmp, "m.sock")], capture_output=True, text=True,
                             timeout=30)
        check(res.returncode == 2 and "--metrics-addr: 129 bytes, longer than 127" in res.stderr,
              f"a long --metrics-addr: exit {res.returncode}: {res.stderr.strip()}")

        # A metrics address the agent cannot serve: it exits, with what bind() said.
        # TEST-NET-1 is no address of this host; a port in use is another agent's.
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        try:
            for addr, want in (("192.0.2.1:9464", os.strerror(errno.EADDRNOTAVAIL)),
                               (f"127.0.0.1:{busy.getsockname()[1]}",
                                os.strerror(errno.EADDRINUSE) + " (another agent?")):
                res = subprocess.run([args.agent, "--metrics-addr", addr, "--socket",
                                      os.path.join(tmp, "m.sock")], capture_output=True,
                                     text=True, timeout=60)
                line = [ln for ln in res.stderr.splitlines() if "cannot serve metrics" in ln]
                check(res.returncode != 0 and line and f"{addr}: {want}" in line[0] and
                      (want.endswith("?") or "another agent" not in line[0]),
                      f"metrics on {addr}: exit {res.returncode}: {line}")
        finally:
            busy.close()

        # No module runs, only the inventory: the agent is the watcher's one subscriber.
        # New libsets on SIGHUP replace its mask in place; the watcher is not stopped
        # and started again (opens in between would be missed).
        write(conf, "modules = none\nlibsets = crypto\nmetrics_addr = 127.0.0.1:0\n")
        agent = Agent(args.agent, args.cli, ["-c", conf])
        try:
            def watcher():
                return next(m for m in agent.json("modules")["modules"]
                            if m["name"] == "sharedlibs")
            before = watcher()
            check(before["state"] == "running" and before["subscribers"] == 1,
                  f"the watcher runs for the inventory alone: {before}")
            write(conf, "modules = none\nlibsets = crypto, gpu\nmetrics_addr = 127.0.0.1:0\n")
            agent.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "SIGHUP: applying" in agent.logs(), 60, "the reload queued")
            # Lifecycle jobs run in order: this one's answer comes after the reload.
            agent.cli("module", "stop", "gpu", check=False)
            after = watcher()
            check(after["state"] == "running" and after["restarts"] == before["restarts"],
                  f"libsets changed in place: restarts {before['restarts']} -> "
                  f"{after['restarts']}, {after['state']}")
            check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        finally:
            agent.cleanup()

        # A module a reload could not start (its load failed once) is started by the
        # next SIGHUP with the same file: what failed is not recorded as applied.
        agent = usm_failed_at_reload(args, conf)
        try:
            check(modules(agent)["usm"] != "running", f"usm after the failed start: "
                                                      f"{modules(agent)['usm']}")
            agent.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: modules(agent)["usm"] == "running", 60,
                     "the same file's next SIGHUP to start usm")
            check(True, "a module whose start failed at a reload is started by the next")
            check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        finally:
            agent.cleanup()

        # ...unless the operator took it in hand since: started, then stopped with the
        # CLI, it stays stopped through the next SIGHUP, as any module stopped so does.
        agent = usm_failed_at_reload(args, conf)
        try:
            agent.cli("module", "start", "usm")
            agent.cli("module", "stop", "usm")
            applied = agent.logs().count("SIGHUP: applying configuration")
            agent.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: agent.logs().count("SIGHUP: applying configuration") > applied, 60,
                     "the agent to take the SIGHUP")
            # Queued behind the reload on the same thread: answered once it is applied.
            agent.cli("module", "restart", "gpu")
            check(modules(agent)["usm"] == "closed",
                  f"usm, stopped by the operator, after a SIGHUP: {modules(agent)['usm']}")
            check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        finally:
            agent.cleanup()

        # A restart whose stop reports an error (a stop hook's: injected) still starts
        # the module: the stop completed; `bpftel modules` keeps what it reported.
        write(conf, "modules = usm\nlibsets = crypto\nmetrics_addr = off\n")
        agent = Agent(args.agent, args.cli, ["-c", conf], env={"BPFTEL_FAULTS": "usm.stop=EIO*1"})
        try:
            res = agent.cli("module", "restart", "usm", check=False)
            mods = {m["name"]: m for m in agent.json("modules")["modules"]}
            check(res.returncode == 0 and "usm: running" in res.stdout and
                  "its stop reported an error: Input/output error" in res.stdout and
                  mods["usm"]["state"] == "running" and
                  mods["usm"]["stop_errors"] == ["Input/output error"],
                  f"a restart whose stop failed runs the module again: {res.stdout.strip()!r}, "
                  f"stop_errors {mods['usm']['stop_errors']}")
            check("usm: its last stop reported: Input/output error" in agent.cli("modules").stdout,
                  "bpftel modules says what the last stop reported")
            agent.cli("module", "restart", "usm")
            mods = {m["name"]: m for m in agent.json("modules")["modules"]}
            check(mods["usm"]["state"] == "running" and mods["usm"]["stop_errors"] == [],
                  "the next stop, clean, clears it")
            check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        finally:
            agent.cleanup()

        # A budget measured over windows of 60 s: what `bpftel modules` says of it is
        # the configuration's, not the last window's (the first is a minute away).
        write(conf, "modules = gpu\nrun_stats = off\nlibsets = crypto\n"
                    "metrics_addr = 127.0.0.1:0\nmax_cpu_percent = gpu:5\nmax_cpu_window = 60\n")
        agent = Agent(args.agent, args.cli, ["-c", conf])
        try:
            mods = modules(agent)
            stats = agent.json("stats")
            check(mods["gpu"] == "running" and mods["usm"] == "closed" and
                  stats["agent"]["run_stats"] == "off",
                  f"applied at start: modules {mods}, run_stats {stats['agent']['run_stats']}")
            check(budget(agent) == 5, f"gpu's budget shown at start: {budget(agent)} %")
            old_addr = stats["agent"]["metrics_addr"]

            write(conf, "modules = gpu, usm\nworkers = lots\n")
            agent.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "keeping the running configuration" in agent.logs(), 60,
                     "the agent to log the refused reload")
            line = [ln for ln in agent.logs().splitlines() if "keeping" in ln][0]
            check(f"{conf}:2: workers: 'lots'" in line, f"logged: {line.strip()}")
            check(agent.proc.poll() is None and modules(agent)["usm"] == "closed",
                  "still running, on the old configuration")

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            write(conf, f"modules = gpu, usm\nrun_stats = on\nmetrics_addr = 127.0.0.1:{port}\n"
                        "libsets = crypto, gpu\nmax_cpu_percent = gpu:7\nmax_cpu_window = 60\n"
                        "workers = 2\n")
            agent.proc.send_signal(signal.SIGHUP)
            # The reload starts the modules first, the endpoint and the rest after:
            # waited for all, a reading between the two is not the reloaded one yet.
            wait_for(lambda: modules(agent)["usm"] == "running" and
                     agent.json("stats")["agent"]["metrics_addr"] == f"127.0.0.1:{port}" and
                     agent.json("stats")["agent"]["run_stats"] == "always", 60,
                     "usm started, metrics moved and run stats always after SIGHUP")
            check("workers = 2 runs each module's records out of order" in agent.logs() and
                  "the usm module needs workers = 1" in agent.logs(),
                  "workers = 2 warned of: records out of order, usm needs 1")
            check(budget(agent) == 7,
                  f"gpu's budget as reloaded, before a window measured it: {budget(agent)} %")
            stats = agent.json("stats")
            check(stats["agent"]["run_stats"] == "always" and
                  stats["agent"]["run_stats_detail"]["stats_on"],
                  "run stats on again after SIGHUP (on: always)")
            new_addr = stats["agent"]["metrics_addr"]
            check(new_addr == f"127.0.0.1:{port}", f"metrics moved to {new_addr}")
            with urllib.request.urlopen(f"http://{new_addr}/metrics", timeout=120) as r:
                check(r.status == 200, f"metrics moved {old_addr} -> {new_addr} and answer")
            # Another host on the same port: the old endpoint makes way for the new one.
            write(conf, f"modules = gpu, usm\nrun_stats = on\nmetrics_addr = 0.0.0.0:{port}\n"
                        "libsets = crypto, gpu\nmax_cpu_percent = gpu:7\nmax_cpu_window = 60\n")
            agent.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: agent.json("stats")["agent"]["metrics_addr"] == f"0.0.0.0:{port}",
                     60, f"metrics on 0.0.0.0:{port} after SIGHUP")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120) as r:
                check(r.status == 200, f"metrics moved to 0.0.0.0:{port} and answer")
            check_mode_switch(agent, conf, port)
            check(agent.stop() == 0, "agent exited 0 after SIGTERM")
        finally:
            agent.cleanup()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_config: all checks passed")


if __name__ == "__main__":
    run(main)
