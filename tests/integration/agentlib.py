# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Helpers for integration tests: run the real agent, query it with the real CLI,
count the kernel's BPF objects. Each test is a plain script: exit 0 pass, 1 fail,
77 skip (ctest SKIP_RETURN_CODE)."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# The USM module's probe points on Debian's libssl.so.3: the entries of SSL_set_fd,
# SSL_free, SSL_get_error, SSL_write and SSL_write_ex, and the entry and return of
# ssl_read_internal, which SSL_read and SSL_read_ex both call: probed there once for
# the two, since it starts with an instruction the kernel emulates
# (user/manager/prologue.h). A libssl without that shape gets 9 (both reads' own
# entries and returns).
LIBSSL_PROBES = 7


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def require_root():
    if os.geteuid() != 0:
        skip("needs root to load BPF programs")
    if not shutil.which("bpftool"):
        skip("bpftool not installed")


def agent_args(tools=(), more=()):
    """The arguments every agent test takes (--agent, --cli, --python) and the required
    ones of more (e.g. "--pattern"), checked that it runs as root with the tools it
    drives installed (else skipped)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--python", default=sys.executable)
    for name in more:
        ap.add_argument(name, required=True)
    args = ap.parse_args()
    require_root()
    for tool in tools:
        if not shutil.which(tool):
            skip(f"{tool} is not installed (tools/dev.sh test installs it)")
    return args


def bpf_ids(kind):
    """Ids of every BPF object of a kind ('prog', 'link', 'map') in the kernel."""
    out = subprocess.run(["bpftool", "-j", kind, "list"], check=True,
                         capture_output=True, text=True).stdout
    return {o["id"] for o in json.loads(out or "[]")}


def held_bpf_ids(pid):
    """The BPF objects pid holds an fd of, by kind ('prog', 'map', 'link'), from its
    fdinfo (a link's names its program too). Only its own: what the rest of the host
    loads meanwhile is none of a test's business."""
    kinds = {"prog_id": "prog", "map_id": "map", "link_id": "link"}
    held = {kind: set() for kind in kinds.values()}
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        fds = []  # exited: it holds nothing (and released() says so)
    for fd in fds:
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                lines = f.read().splitlines()
        except OSError:
            continue  # closed meanwhile
        for line in lines:
            key, _, val = line.partition(":")
            if key in kinds:
                held[kinds[key]].add(int(val))
    return held


def vm_hwm_kib(pid):
    """pid's peak resident memory (VmHWM), KiB; 0 when unknown."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        val = pred()
        if val:
            return val
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Agent:
    def __init__(self, agent_bin, cli_bin, extra_args=(), env=None):
        self.dir = tempfile.mkdtemp(prefix="bpftel-it-")
        self.socket = os.path.join(self.dir, "bpftel.sock")
        self.cli_bin = cli_bin
        self.log_path = os.path.join(self.dir, "agent.log")
        self.log = open(self.log_path, "w")
        if not any(a in ("--metrics-addr", "--no-metrics", "-c") for a in extra_args):
            # A free port: tests never collide with a running agent's 9464.
            extra_args = ["--metrics-addr", "127.0.0.1:0", *extra_args]
        self.bpf_held = {"prog": set(), "map": set(), "link": set()}
        self.proc = subprocess.Popen([agent_bin, "--socket", self.socket, *extra_args],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        # Calibration, every BPF load and the start-up /proc scan come first (each of
        # that scan's opens may take up to BPFTEL_PROCFILE_TIMEOUT_MS): generous.
        wait_for(self._answers, 150, "the agent to answer on its socket")

    def _answers(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"agent exited with {self.proc.returncode}:\n{self.logs()}")
        return self.cli("stats", check=False).returncode == 0

    def cli(self, *args, check=True):
        # The agent's answer waited for 150 s, not the CLI's 5 (120 for `module`): a
        # loaded machine (a sanitizer's build, the tests' own load) may answer late,
        # and these tests check that it answers, not how soon (tools/bench times it).
        res = subprocess.run([self.cli_bin, "--socket", self.socket, "--timeout", "150",
                              *args], capture_output=True, text=True, timeout=180)
        if check and res.returncode != 0:
            dead = self.proc.poll()
            if dead is None and "Connection refused" in res.stderr:
                # Its socket closed: it is exiting (a sanitizer's report ends it so);
                # wait for that, to show its log.
                try:
                    dead = self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            raise AssertionError(f"bpftel {' '.join(args)} failed ({res.returncode}): "
                                 f"{res.stderr}" + ("" if dead is None else
                                 f"\nthe agent exited with {dead}; its log ends:\n"
                                 f"{self.logs()[-20000:]}"))
        return res

    def json(self, *args):
        return json.loads(self.cli(*args, "--json").stdout)

    def logs(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            # What it holds in the kernel as it is told to stop, for released().
            self.bpf_held = held_bpf_ids(self.proc.pid)
            self.proc.send_signal(sig)
            self.proc.wait(timeout=150)
        self.log.close()
        return self.proc.returncode

    def released(self, timeout=30):
        """Wait until none of the programs, maps and links the agent held when stop()
        was called is in the kernel (the kernel lets go of some a moment after the
        process exits: waited out, not longer). An agent that held none (it had exited
        before it was told to stop) fails this: there would be nothing to check."""
        if not self.bpf_held["prog"]:
            raise AssertionError("the agent held no BPF program when told to stop "
                                 f"(exit status {self.proc.returncode}):\n{self.logs()}")

        def gone():
            return not any(ids & bpf_ids(kind) for kind, ids in self.bpf_held.items())
        wait_for(gone, timeout, "the agent's programs, maps and links to leave the kernel")
        n = {kind: len(ids) for kind, ids in self.bpf_held.items()}
        return f"{n['prog']} programs, {n['map']} maps, {n['link']} links"

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def http_rows(agent, **match):
    """bpftel http's endpoint rows whose fields equal those given."""
    return [r for r in agent.json("http")["endpoints"]
            if all(r.get(k) == v for k, v in match.items())]


def http_count(agent, **match):
    """Requests counted in those rows."""
    return sum(r["count"] for r in http_rows(agent, **match))


def usm_emitted(agent):
    """The records USM's kernel side has emitted so far: HTTP/2's (one per call on a
    session, more for a call that fills one) but for those the ring buffer refused;
    h2c's: the segments the socket filter sent."""
    c = agent.json("http")["counters"]
    return (c["tls_http"] + c["packets_http"] + c["h2_records"] - c["h2_lost"]
            + c["h2c_packets"])


def usm_taken(agent):
    """The records USM's userspace has taken: processed, or dropped and counted."""
    loss = [x for x in agent.json("stats")["losses"] if x["module"] == "usm"][0]
    return loss["processed"] + loss["queue_full"] + loss["too_big"] + loss["parse"]


def usm_settle(agent, timeout=60, what="USM's userspace to take every record"):
    """Wait until USM's userspace has taken every record its kernel side had emitted
    when this was called: once a workload is done, its counts are then final. The
    target is read once: records emitted meanwhile (anyone's on the host) only move
    the taken count past it, never the target out of reach."""
    emitted = usm_emitted(agent)
    wait_for(lambda: usm_taken(agent) >= emitted, timeout, what)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)
    print(f"ok: {msg}")


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_cert(tmp):
    """A self-signed certificate and key for localhost in tmp: (cert, key)."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"], check=True,
                   capture_output=True)
    return cert, key


def start_http_server(python, root, cert=None, key=None):
    """http_server.py serving root on a free port (TLS with cert): (process, port)."""
    port = free_port()
    args = [python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http_server.py"),
            str(port), root]
    if cert:
        args += [cert, key]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if line[:1] != ["ready"]:
        proc.kill()
        raise AssertionError(f"http_server.py did not start: {line}")
    return proc, port


def run(main):
    """A test script's entry point: an AssertionError is a FAIL line and exit 1."""
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
