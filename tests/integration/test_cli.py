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
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import Agent, check, require_root, run, skip, wait_for  # noqa: E402

# The CLI's own deadline (5 s) is for people; where a test wants an answer it gives the
# agent as long as agentlib does: a sanitizer build on a starved 2-core VM can take longer.
ANSWER = ["--timeout", "150"]
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
            res = subprocess.run([agent.cli_bin, "--socket", agent.socket, *ANSWER, *args],
                                 stdout=full, stderr=subprocess.PIPE, text=True, timeout=180)
        check(res.returncode == 1 and "cannot write the output" in res.stderr,
              f"bpftel {' '.join(args)} > /dev/full: exit {res.returncode}, "
              f"{res.stderr.strip()}")


def fake_agent(path, answers):
    """A socket at path that answers each connection's request line with the next of
    answers (bytes), as any process could that a user points --socket at."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def serve():
        for ans in answers:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                f = conn.makefile("rb")
                f.readline()
                conn.sendall(ans + b"\n")
        srv.close()  # then no one answers: refused
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv


def cli_answered(agent, path, answers, *args, text=False):
    """The CLI's run against fake_agent(path, answers), with args; the socket gone after."""
    srv = fake_agent(path, answers)
    try:
        return subprocess.run([agent.cli_bin, "--socket", path, *args], capture_output=True,
                              text=text, timeout=60)
    finally:
        srv.close()
        os.unlink(path)


def check_hostile_answers(agent):
    """What an answer holds reaches the terminal escaped, whoever answered; a closed
    pipe is exit 1 and said, not death by SIGPIPE."""
    d = tempfile.mkdtemp(prefix="bpftel-fake-")
    try:
        path = os.path.join(d, "fake.sock")
        osc = b'{"ok": false, "error": "\\u001b]52;c;cHduZWQ=\\u0007 \\u001b[2J"}'
        res = cli_answered(agent, path, [osc], "stats")
        check(res.returncode == 1 and b"\x1b" not in res.stderr and b"\x07" not in res.stderr
              and b"\\x1B]52;c;cHduZWQ=\\x07" in res.stderr,
              f"an answer's error, a clipboard-writing OSC 52, shown escaped: {res.stderr!r}")
        mods = (b'{"ok": true, "modules": [{"name": "usm\\u001b[2J", "state": "running", '
                b'"budget": {"max_cpu_percent": 1.0, "cpu_percent": 2.0}, '
                b'"throttled": {"since": 0, "reason": "over \\u001b[2J budget", '
                b'"files": ["/x/\\u202elibssl", 7]}}]}')
        res = cli_answered(agent, path, [mods], "modules")
        check(b"\x1b" not in res.stdout and b"over \\x1B[2J budget" in res.stdout and
              b"shed: /x/\\xE2\\x80\\xAElibssl" in res.stdout and b"shed: ?\n" in res.stdout and
              b"(null)" not in res.stdout,
              f"bpftel modules: a throttle's reason and shed files escaped: {res.stdout!r}")
        # A throttle's start no calendar holds (year ~2.9e11): "?", not a crash.
        mods = (b'{"ok": true, "modules": [{"name": "usm", "state": "running", '
                b'"budget": {"max_cpu_percent": 1.0}, '
                b'"throttled": {"since": 9000000000000000000, "reason": "over budget"}}]}')
        res = cli_answered(agent, path, [mods], "modules")
        check(res.returncode == 0 and b"throttled since ?: over budget" in res.stdout,
              f"bpftel modules: a throttle's start out of range shown as ?: "
              f"rc {res.returncode}, {res.stdout!r}")
        # Not JSON: the parser's error quotes what it read, a raw right-to-left override.
        res = cli_answered(agent, path, [b'"\xe2\x80\xaegnp.exe'], "stats")
        check(res.returncode == 1 and b"\xe2\x80\xae" not in res.stderr and
              b"malformed answer" in res.stderr,
              f"a malformed answer's quote shown escaped: {res.stderr!r}")
        # --json: JSON's encoding leaves C1 controls (U+009B, a CSI to xterm) and bidi
        # overrides raw; the CLI escapes them as for a table.
        res = cli_answered(agent, path,
                           [b'{"ok": true, "modules": [{"name": "u\\u009b2J\\u202egpu"}]}'],
                           "modules", "--json")
        check(res.returncode == 0 and b"\xc2\x9b" not in res.stdout and
              b"\xe2\x80\xae" not in res.stdout and b"\\\\xC2\\\\x9B2J" in res.stdout,
              f"bpftel modules --json escapes a C1 control and a bidi override: {res.stdout!r}")
        res = cli_answered(agent, path, [b'{"ok": true, "agent": {}, "programs": []}',
                                         b'{"ok": true, "errors": []}'],
                           "top", "--json", text=True)
        check(res.returncode == 1 and "the second sample" in res.stderr,
              f"bpftel top --json says why it stopped: {res.stderr.strip()}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    r, w = os.pipe()
    os.close(r)
    res = subprocess.run([agent.cli_bin, "--socket", agent.socket, *ANSWER, "stats"], stdout=w,
                         stderr=subprocess.PIPE, text=True, timeout=180)
    os.close(w)
    check(res.returncode == 1 and "cannot write the output" in res.stderr,
          f"bpftel stats into a closed pipe: exit {res.returncode}, {res.stderr.strip()}")


def check_arguments(agent):
    """Options after the command work as before it; a wrong one says what is wrong and
    exits 2 (a usage error), not 1 (the agent's)."""
    def cli(*a):
        return subprocess.run([agent.cli_bin, *a], capture_output=True, text=True, timeout=180)
    res = cli("stats", "--socket", agent.socket, *ANSWER, "--json")
    check(res.returncode == 0 and "programs" in json.loads(res.stdout),
          "bpftel stats --socket S --json: the options after the command")
    res = cli("--socket", agent.socket, *ANSWER, "modules", f"--socket={agent.socket}")
    check(res.returncode == 0 and "usm" in res.stdout, "--socket=S after the command")
    res = cli("module", "-s", agent.socket, *ANSWER, "restart", "gpu", "--json")
    check(res.returncode == 0 and json.loads(res.stdout)["state"] == "running",
          "bpftel module -s S restart gpu --json: options between the arguments")
    res = cli("stats", "--socket", agent.socket, "--timeout", "30", "--json")
    check(res.returncode == 0 and "programs" in json.loads(res.stdout),
          "bpftel stats --timeout 30: the answer waited for up to 30 s")
    for args, want in ((("stats", "--frob"), "unrecognized option '--frob'"),
                       (("stats", "-s"), "option requires an argument"),
                       (("stats", "--timeout", "0"), "'0' is not a number of seconds"),
                       (("stats", "-t", "5s"), "'5s' is not a number of seconds"),
                       (("stats", "--timeout", "3601"), "from 1 to 3600"),
                       (("module", "restart"), "needs an action and a module"),
                       (("stats", "extra"), "unexpected argument 'extra'"),
                       (("module", "stop", b"\xff"), "the module name is not valid UTF-8")):
        res = cli("--socket", agent.socket, *args)
        check(res.returncode == 2 and want in res.stderr and res.stdout == "",
              f"bpftel {args}: exit {res.returncode}, {res.stderr.strip()!r}")


def check_busy(agent):
    """With every client slot taken (64, each freed 5 s after its accept if silent),
    another client is told why it is refused, not cut off: `bpftel stats` says so and
    exits 1. Tried until one call lands while the slots are held (a slow machine may
    reach its call only after they timed out)."""
    for _ in range(10):
        held = []
        try:
            for _ in range(64):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(agent.socket)
                held.append(s)
            res = agent.cli("stats", check=False)
        finally:
            for s in held:
                s.close()
        if res.returncode != 0:
            break
    check(res.returncode == 1 and "the agent serves 64 clients at once: try again" in res.stderr,
          f"a client past the 64th is told why: {res.stderr.strip()}")
    wait_for(lambda: agent.cli("stats", check=False).returncode == 0, 60,
             "the agent to take clients again")


def check_top(agent):
    session = f"bpftel-top-{os.getpid()}"
    cmd = f"{agent.cli_bin} --socket {agent.socket} {' '.join(ANSWER)} top"
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


def pane_readers(session):
    """(pane(fmt): a tmux format of the session's pane, screen(): its text)."""
    def pane(fmt):
        return subprocess.run(["tmux", "display-message", "-p", "-t", session, fmt],
                              capture_output=True, text=True).stdout.strip()

    def screen():
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                              capture_output=True, text=True).stdout
    return pane, screen


def check_top_interrupted(agent):
    """Ctrl-C ends bpftel top with the cursor shown again (it stayed hidden: the show
    sequence sat in stdio's buffer when SIGINT's default action ended the process)."""
    session = f"bpftel-top-int-{os.getpid()}"
    # A shell that outlives top (SIGINT ignored in it, caught in top), so that the
    # pane's cursor can be read after.
    cmd = (f"sh -c 'trap \"\" INT; {agent.cli_bin} --socket {agent.socket} "
           f"{' '.join(ANSWER)} top; "
           f"echo top-ended; read x'")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd],
                   check=True)
    pane, screen = pane_readers(session)
    try:
        wait_for(lambda: "PROGRAM" in screen() and pane("#{cursor_flag}") == "0", 60,
                 "bpftel top to draw, its cursor hidden")
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        wait_for(lambda: "top-ended" in screen(), 60, "bpftel top to end on Ctrl-C")
        flag = pane("#{cursor_flag}")
        check(flag == "1", f"after Ctrl-C the cursor is shown again (cursor_flag {flag})")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    check_top_quit_and_stopped(agent)


def check_top_quit_and_stopped(agent):
    """Ctrl-\\ (SIGQUIT) ends top with the cursor shown; Ctrl-Z gives the shell its
    terminal back, and after fg top has its own again: a bare q quits it."""
    session = f"bpftel-top-stop-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24",
                    # bash's "Stopped" is waited for: in English, whatever the locale
                    # the tests (or a tmux server already running) were given.
                    "env LC_ALL=C bash --norc --noprofile -i"], check=True)
    pane, screen = pane_readers(session)

    def keys(*k):
        subprocess.run(["tmux", "send-keys", "-t", session, *k], check=True)
    top = f"{agent.cli_bin} --socket {agent.socket} {' '.join(ANSWER)} top"
    try:
        keys("ulimit -c 0; PS1='$ '; clear", "Enter")
        keys(f"{top}; echo quit-ended", "Enter")
        wait_for(lambda: "PROGRAM" in screen() and pane("#{cursor_flag}") == "0", 60,
                 "bpftel top to draw, its cursor hidden")
        keys("C-\\")
        wait_for(lambda: "quit-ended" in screen(), 60, "bpftel top to end on Ctrl-\\")
        flag = pane("#{cursor_flag}")
        check(flag == "1", f"after Ctrl-\\ the cursor is shown again (cursor_flag {flag})")
        keys("clear", "Enter")
        wait_for(lambda: "quit-ended" not in screen(), 60, "the screen cleared")
        keys(top, "Enter")
        wait_for(lambda: "PROGRAM" in screen() and pane("#{cursor_flag}") == "0", 60,
                 "bpftel top to draw again")
        keys("C-z")
        wait_for(lambda: "Stopped" in screen(), 60, "the shell to say top stopped")
        flag = pane("#{cursor_flag}")
        check(flag == "1", f"stopped by Ctrl-Z, top shows the cursor again (cursor_flag {flag})")
        keys("fg", "Enter")
        wait_for(lambda: "PROGRAM" in screen() and pane("#{cursor_flag}") == "0", 60,
                 "bpftel top to draw after fg, its cursor hidden")
        keys("q")  # no Enter: top's terminal is raw again
        # (The shell ran the list's echo when top stopped: top's own exit clears its
        # screen and shows the cursor.)
        wait_for(lambda: "PROGRAM" not in screen() and pane("#{cursor_flag}") == "1", 60,
                 "a bare q to quit top after fg, the cursor shown")
        check(True, "after Ctrl-Z and fg a bare q quits top, the cursor shown")
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
        check_hostile_answers(agent)
        check_busy(agent)
        check_arguments(agent)
        check_top(agent)
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
    finally:
        agent.cleanup()
    print("test_cli: all checks passed")


if __name__ == "__main__":
    run(main)
