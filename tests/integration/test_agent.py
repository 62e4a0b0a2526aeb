#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end: the real agent sees a real python3 load libssl, the CLI reports it as a
table and as JSON, SIGTERM leaves no program or link behind, and the CLI fails clearly
once the agent is gone."""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import agent_args, Agent, bpf_ids, check, held_bpf_ids, run, wait_for  # noqa: E402


def check_traps(stats):
    """The calibration at start, and each uprobe program's overhead with its trap."""
    tc = stats["agent"]["trap_cost"]
    check(tc["known"] and tc["uprobe_ns"] > 0 and tc["uretprobe_ns"] > 0 and
          tc["calls"] > 0 and tc["link"] in ("multi", "perf_event"),
          f"uprobe traps calibrated at start: {tc['uprobe_ns']:.0f} ns at entry, "
          f"{tc['uretprobe_ns']:.0f} ns with a return ({tc['calls']} calls each, "
          f"{tc['took_ms']:.0f} ms, {tc['link']} links)")
    progs = {(p["component"], p["name"]): p for p in stats["programs"]}
    kinds = {k: p["trap"] for k, p in progs.items() if p["trap"]}
    check(kinds == {("gpu", "gpu_uprobe"): "uprobe", ("gpu", "gpu_uretprobe"): "uretprobe",
                    ("usm", "usm_tls_uprobe"): "uprobe",
                    ("usm", "usm_tls_uretprobe"): "uretprobe",
                    ("usm", "usm_go_uprobe"): "uprobe"},
          f"the registry's uprobe programs, by how it attaches them: {kinds}")
    for p in progs.values():
        trap = p["trap_cost_ns"] or 0
        want = p["run_time_ns"] / 1e9 + p["run_cnt"] * trap / 1e9
        if abs(p["overhead_seconds"] - want) > 1e-6 + want * 1e-6:
            raise AssertionError(f"{p['name']}: overhead {p['overhead_seconds']} != {want}")
    # An entry program's trap is the emulated one where every entry point it has is on
    # an instruction the kernel emulates, the single-stepped one (the larger) where none
    # is, and for a mixed one the two weighted by the calls on each kind's files: the
    # host's own TLS traffic decides where in between, so only the range is checked.
    emulated = tc.get("uprobe_emulated_ns")
    for p in progs.values():
        insn = p.get("trap_entry_instructions")
        if p["trap"] != "uprobe":
            check(insn is None, f"{p['name']}: no entry instructions ({insn})")
            continue
        check(insn in (None, "emulated", "single-stepped", "mixed"),
              f"{p['name']}: entry instructions {insn}")
        want = emulated if insn == "emulated" and emulated else tc["uprobe_ns"]
        low = emulated if insn == "mixed" and emulated else want
        check(low - 0.01 < p["trap_cost_ns"] < want + 0.01,
              f"{p['name']}: entry points {insn or 'none yet'}, charged {p['trap_cost_ns']:.0f} "
              f"ns a run (calibrated: {tc['uprobe_ns']:.0f} stepped, "
              f"{emulated or 0:.0f} emulated)")
    ret = progs[("gpu", "gpu_uretprobe")]
    # (the JSON has 9 significant digits)
    check(ret["trap_paired"] and
          abs(ret["trap_cost_ns"] - max(tc["pair_ns"] - tc["uprobe_ns"], 0)) < 0.01,
          "overhead_seconds = run time + runs x trap cost; a return probe next to an entry "
          "probe costs what it adds to it (pair - uprobe)")


def stopped_while_starting(args):
    """SIGTERM once the trap cost is calibrated, as the modules load and attach: the
    start is cancelled (no waiting for it to end), exit 0, and nothing the agent held
    while starting stays in the kernel."""
    d = tempfile.mkdtemp(prefix="bpftel-start-")
    log_path = os.path.join(d, "agent.log")
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen([args.agent, "--socket", os.path.join(d, "s.sock"),
                                     "--no-metrics"], stdout=log, stderr=subprocess.STDOUT)
        held = {"prog": set(), "map": set(), "link": set()}

        def calibrated():
            for kind, ids in held_bpf_ids(proc.pid).items():
                held[kind] |= ids
            with open(log_path) as f:
                return "uprobe trap cost" in f.read() or proc.poll() is not None
        wait_for(calibrated, 60, "the agent to calibrate its trap cost")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
        with open(log_path) as f:
            text = f.read()
        cancelled = "Terminated while starting: stopping" in text
        check(rc == 0 and (cancelled or "running (version" in text),
              f"SIGTERM while starting: exit {rc}, "
              f"{'the start cancelled' if cancelled else 'after the start (it was done)'}")
        # The kernel lets go of some a moment after the process exits (its maps are
        # freed from a work queue): waited out, as Agent.released() does.
        wait_for(lambda: not any(ids & bpf_ids(kind) for kind, ids in held.items()), 60,
                 "what the agent held while starting to leave the kernel")
        check(True, f"nothing held while starting remains: {len(held['prog'])} programs, "
                    f"{len(held['map'])} maps, {len(held['link'])} links")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def second_agent(args, agent):
    """A second agent on the same socket is refused before it loads anything (its lock,
    beside the socket, is the running one's): exit 1, told why, no trap cost calibrated
    nor any module started; the running agent goes on answering."""
    log_path = os.path.join(agent.dir, "second.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([args.agent, "--socket", agent.socket, "--no-metrics"],
                                stdout=log, stderr=subprocess.STDOUT)
    rc = proc.wait(timeout=120)
    with open(log_path) as f:
        text = f.read()
    check(rc == 1 and "another bpftel-agent is running" in text and
          "uprobe trap cost" not in text and "running (version" not in text,
          f"a second agent on the socket: exit {rc}, refused before loading anything: "
          f"{text.strip()!r}")
    check(agent.cli("stats", check=False).returncode == 0,
          "the running agent still answers on its socket")


def main():
    args = agent_args()

    # Started under systemd's soft limit of open files (1024; 256 here): the agent
    # raises it to the hard one, since a local user can make it probe 1024 files.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        agent = Agent(args.agent, args.cli)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        with open(f"/proc/{agent.proc.pid}/limits") as f:
            lim = next(line.split()[3:5] for line in f if line.startswith("Max open files"))
        check(lim == [str(hard), str(hard)],
              f"the agent raised its open files limit from 256 to the hard limit: {lim}")
        stats = agent.json("stats")
        ours = {p["id"] for p in stats["programs"]}
        attach = {p["attach"] for p in stats["programs"]}
        check(len(ours) >= 3 and ours <= bpf_ids("prog"),
              f"stats lists {len(ours)} attached programs, all in the kernel: {sorted(ours)}")
        check(("tracepoint:syscalls/sys_exit_openat" in attach or
               "fexit:do_sys_openat2" in attach) and
              not any(a.startswith("tracepoint:syscalls/sys_enter") for a in attach),
              "one program per open, at its exit: sys_exit_openat (or the fexit on "
              "do_sys_openat2, where the kernel takes it) attached, and by default no "
              "sys_enter (tls_recv_fd = off)")
        check(agent.json("http")["tls_recv_fd"] is False,
              "bpftel http --json: tls_recv_fd false by default")
        check(len(held_bpf_ids(agent.proc.pid)["link"]) >= 2, "the agent holds BPF links")

        probes = agent.json("probes")["probes"]
        check(all(sum(c["result"] == "attached" for c in p["candidates"]) == int(p["attached"])
                  for p in probes), "each attached probe has exactly one attached candidate")
        check(all(c["errno"] > 0 and c["reason"] for p in probes for c in p["candidates"]
                  if c["result"] == "rejected"), "every rejected candidate has an errno and reason")
        openat = next(p for p in probes if p["probe"] == "openat")
        got = [(c["attach"], c["result"], c.get("errno_name")) for c in openat["candidates"]]
        if got[0][1] == "rejected":
            check(got[1:] == [("tracepoint:syscalls/sys_exit_openat", "attached", None)],
                  f"openat fell back fexit -> tracepoint: {got}")
            others = [p for p in probes if p["probe"] in ("open", "openat2")]
            check(len(others) == 2 and all(p["attached"] and "covered_by" not in p
                                           for p in others),
                  "without the fexit, the open and openat2 exit tracepoints attach too")
            table = agent.cli("probes").stdout
            check(f"rejected: {got[0][2]}" in table,
                  f"bpftel probes shows the rejected fexit with its errno ({got[0][2]})")
        else:
            check(all(p.get("covered_by") == "openat" for p in probes
                      if p["probe"] in ("open", "openat2")),
                  "with the fexit, the open and openat2 tracepoints are covered, not attached")
        mods = agent.json("modules")["modules"]
        check([(m["name"], m["state"], m["subscribers"]) for m in mods] ==
              [("sharedlibs", "running", 3), ("gpu", "running", 0), ("usm", "running", 0)],
              f"modules: the watcher (subscribed by the agent's inventory, gpu and usm), "
              f"gpu, usm: {[(m['name'], m['state'], m['subscribers']) for m in mods]}")

        second_agent(args, agent)

        py = subprocess.run([args.python, "-c", "import ssl, os; print(os.getpid())"],
                            check=True, capture_output=True, text=True)
        pid = int(py.stdout.strip())

        def detected():
            libs = agent.json("stats")["libraries"]
            return [l for l in libs if l["pid"] == pid and l["lib"] in ("libssl", "libcrypto")]
        found = wait_for(detected, 60, f"a libssl/libcrypto detection for pid {pid}")
        check(all(l["libset"] == "crypto" and l["path"].endswith((".so.3", ".so"))
                  for l in found), f"pid {pid} detected: {[l['path'] for l in found]}")

        table = agent.cli("stats").stdout
        check("Uprobe traps:" in table and "OVERHEAD S" in table and "Run stats: sampled" in table,
              "bpftel stats shows the run stats mode, the trap costs and an overhead column")
        check(any(line.split()[:1] == [str(pid)] and "libssl" in line
                  for line in table.splitlines()) or
              any(line.split()[:1] == [str(pid)] and "libcrypto" in line
                  for line in table.splitlines()),
              "the stats table has a row for that pid")

        def watcher_prog():
            stats = agent.json("stats")
            prog = next(p for p in stats["programs"]
                        if p["name"] in ("shlib_exit_openat", "shlib_fexit_open"))
            return (stats, prog) if prog["run_cnt"] > 0 else None
        # Sampled by default: the counts move when a window closes (one a cycle).
        stats, prog = wait_for(watcher_prog, 30, "an estimate of the watcher's runs")
        check(stats["agent"]["run_stats"] == "sampled" and prog["sampled"] is True and
              0 < prog["sampled_fraction"] <= 1 and prog["avg_ns"] > 0,
              f"per-program runs and ns/run, estimated from sampled windows: "
              f"~{prog['run_cnt']} runs, {prog['avg_ns']:.0f} ns avg, "
              f"{prog['cpu_percent']:.4f} % CPU, measured over "
              f"{100 * prog['sampled_fraction']:.0f} % of its life")
        check_traps(stats)
        occ = {(m["module"], m["map"]): m for m in stats["maps"]}
        check(occ[("sharedlibs", "shlib_config")]["capacity"] == 1 and
              occ[("sharedlibs", "shlib_config")]["entries"] is not None,
              "map occupancy reported for the watcher's maps")
        losses = {l["module"]: l for l in stats["losses"]}
        check(set(losses["sharedlibs"]) == {"module", "processed", "kernel", "queue_full",
                                            "too_big", "parse"} and
              losses["sharedlibs"]["processed"] >= stats["events"]["received"],
              f"event loss by stage: {losses['sharedlibs']}")
        errs = agent.json("errors")
        check(isinstance(errs["errors"], list) and
              all(e["count"] > 0 and e["module"] in ("sharedlibs", "gpu", "usm")
                  for e in errs["errors"]),
              f"bpftel errors --json: {len(errs['errors'])} non-zero counters, "
              f"all attributed to a module")

        sleeper = subprocess.Popen([args.python, "-c", "import ssl, time; time.sleep(3600)"])
        try:
            def tracked():
                return [l for l in agent.json("libs")["libs"]
                        if l["lib"] == "libssl" and sleeper.pid in l["pids"]]
            rows = wait_for(tracked, 60, f"bpftel libs to list libssl for pid {sleeper.pid}")
            check(rows[0]["processes"] >= 1, f"bpftel libs: {rows[0]['path']} in use by "
                  f"{rows[0]['processes']} process(es)")
        finally:
            sleeper.kill()
            sleeper.wait()
        wait_for(lambda: not tracked(), 60, "the sweep to forget the exited process")
        check(True, "the sweep forgot the exited process")

        raw = agent.cli("stats", "--json").stdout
        tool = subprocess.run([sys.executable, "-m", "json.tool"], input=raw,
                              capture_output=True, text=True)
        check(tool.returncode == 0, "bpftel stats --json | python3 -m json.tool succeeds")
        events = agent.json("stats")["events"]
        check(events["received"] >= 1 and events["lost"] == 0,
              f"events received {events['received']}, lost {events['lost']}")

        rc = agent.stop()
        check(rc == 0, f"agent exited 0 after SIGTERM (log:\n{agent.logs()})")
        check(ours <= agent.bpf_held["prog"], "the agent held every program stats listed")
        check(True, f"none of what the agent held remains: {agent.released()}")
        check(not os.path.exists(agent.socket), "control socket removed")

        res = agent.cli("stats", check=False)
        lines = res.stderr.strip().splitlines()
        check(res.returncode == 1 and len(lines) == 1 and "no agent is running" in lines[0],
              f"stats without an agent: exit {res.returncode}, {lines}")
    finally:
        agent.cleanup()

    stopped_while_starting(args)

    # --no-run-stats: the watcher still works, run counts are reported as off. And in a
    # container where bpffs cannot be mounted (here /sys/fs/bpf does not exist, under a
    # read-only /sys/fs; elsewhere a profile refuses the mount): the agent pins nothing,
    # it warns and runs.
    tmp = tempfile.mkdtemp(prefix="bpftel-nobpffs-")
    wrapper = os.path.join(tmp, "agent")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec unshare -m --propagation private sh -c "
                "'mount -t tmpfs -o ro none /sys/fs && exec \"$0\" \"$@\"' "
                f"{args.agent} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    agent = Agent(wrapper, args.cli, ["--no-run-stats"])
    try:
        py = subprocess.run([args.python, "-c", "import ssl, os; print(os.getpid())"],
                            check=True, capture_output=True, text=True)
        pid = int(py.stdout.strip())
        wait_for(lambda: any(l["pid"] == pid for l in agent.json("stats")["libraries"]), 60,
                 f"a detection for pid {pid} with --no-run-stats")
        stats = agent.json("stats")
        check(stats["agent"]["run_stats"] == "off" and
              not stats["agent"]["run_stats_detail"]["stats_on"],
              "--no-run-stats: stats reports run_stats off, detections still arrive")
        url = f"http://{stats['agent']['metrics_addr']}/metrics"
        with urllib.request.urlopen(url, timeout=120) as r:
            text = r.read().decode()
        check('bpftel_run_stats_mode{mode="off",error=""} 1' in text and
              "\nbpftel_run_stats_on 0\n" in text and "none with run_stats = off" in text,
              "--no-run-stats: /metrics says run stats are off, and the run families' HELP "
              "that they count nothing")
        check("cannot mount bpf at /sys/fs/bpf" in agent.logs() and
              "going on" in agent.logs(),
              "no /sys/fs/bpf to mount bpffs at: the agent warned and runs")
        check(agent.stop() == 0, "agent with --no-run-stats exited 0")
    finally:
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_agent: all checks passed")


if __name__ == "__main__":
    run(main)
