#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""End to end, operator surface: the agent's /metrics passes `promtool check metrics`
(before and after real HTTPS traffic gives it HTTP series); a real Prometheus server on
loopback scrapes it (up{job="bpftel"} == 1, bpftel_ebpf_program_runs_total series);
garbage, oversized and half-open requests on the metrics port and on the control
socket leave the agent serving; `bpftel module start|stop|restart` drives modules."""
import json
import os
from collections import Counter
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import (agent_args, LIBSSL_PROBES, Agent, check, free_port, held_bpf_ids,  # noqa: E402
                      make_cert, run,
                      start_http_server, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))


def get(url, timeout=120):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def promtool_check(text):
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True)
    return res.returncode, (res.stdout + res.stderr).strip()


def check_metrics_text(url, want):
    status, ctype, text = get(url)
    check(status == 200 and ctype.startswith("text/plain; version=0.0.4"),
          f"GET {url}: {status} {ctype}")
    rc, out = promtool_check(text)
    check(rc == 0, f"promtool check metrics: rc {rc} {out[:300]!r}")
    for family in want:
        check(f"# TYPE {family} " in text, f"family {family} has HELP and TYPE")
    return text


def samples(text, family):
    """family's samples in an exposition: {labels text: value}."""
    out = {}
    for line in text.splitlines():
        if line.startswith(family + " ") or line.startswith(family + "{"):
            series, _, value = line.rpartition(" ")
            out[series[len(family):]] = float(value)
    return out


def memlocks(pid):
    """The memlock of each map pid holds an fd of: {map id: bytes}."""
    charged = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        if "map_id" in info and "memlock" in info:
            charged[int(info["map_id"])] = int(info["memlock"])
    return charged


def check_process_families(agent, url):
    """The agent's own process, as /proc shows it around one scrape; its maps' kernel
    memory, as their fdinfo charges it."""
    pid = agent.proc.pid
    ticks = os.sysconf("SC_CLK_TCK")

    def stat():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / ticks, int(fields[19]) / ticks

    with open("/proc/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    cpu0, start = stat()
    charged0 = memlocks(pid)
    fds0 = len(os.listdir(f"/proc/{pid}/fd"))
    text = check_metrics_text(url, ["process_cpu_seconds_total", "process_open_fds",
                                    "bpftel_ebpf_map_memory_bytes"])
    fds1 = len(os.listdir(f"/proc/{pid}/fd"))
    cpu1, _ = stat()
    got = {f: samples(text, f)[""] for f in ("process_cpu_seconds_total",
                                              "process_resident_memory_bytes",
                                              "process_start_time_seconds",
                                              "process_open_fds", "process_max_fds")}
    with open(f"/proc/{pid}/limits") as f:
        max_fds = next(int(line.split()[3]) for line in f if line.startswith("Max open files"))
    # Its fds move while it serves: the scrape's own connection, the watcher's opens of
    # other processes' files (at most 64 held by its deadline threads at once).
    check(cpu0 <= got["process_cpu_seconds_total"] <= cpu1 and
          abs(got["process_start_time_seconds"] - (btime + start)) <= 1 and
          got["process_resident_memory_bytes"] > 0 and got["process_max_fds"] == max_fds and
          min(fds0, fds1) - 64 <= got["process_open_fds"] <= max(fds0, fds1) + 64,
          f"process_* as /proc says: {got} (cpu {cpu0:.2f}..{cpu1:.2f} s, started "
          f"{btime + start:.0f}, {fds0} and {fds1} fds around the scrape, limit {max_fds})")
    # Every map fd the agent holds charges its memlock; the family names each map once
    # (internal maps, .bss and the like, aside). A map not preallocated charges what it
    # holds, which may move around the scrape: those that held still are compared.
    mem = samples(text, "bpftel_ebpf_map_memory_bytes")
    charged1 = memlocks(pid)
    names = {m["id"]: m.get("name", "") for m in json.loads(subprocess.run(
        ["bpftool", "-j", "map", "list"], capture_output=True, text=True, check=True).stdout)}
    # (Not listed: internal maps, named with a dot, and telemetry's own tlm_lost.)
    still = Counter(v for i, v in charged0.items() if charged1.get(i) == v and
                    "." not in names.get(i, ".") and names.get(i) != "tlm_lost")
    check(len(mem) >= 20 and all(v > 0 for v in mem.values()) and
          len(mem) <= len(charged1) and sum(still.values()) >= 20 and
          not still - Counter(mem.values()),
          f"bpftel_ebpf_map_memory_bytes: {len(mem)} maps, {sum(mem.values()) / 2**20:.1f} MiB, "
          f"the memlock the agent's map fds show ({sum(charged1.values()) / 2**20:.1f} MiB over "
          f"{len(charged1)} maps, internal ones included)")


def abuse_metrics_port(host, port):
    """Garbage, an oversized request and a half-open connection."""
    half = socket.create_connection((host, port))  # sends nothing, stays open
    with socket.create_connection((host, port)) as s:
        s.sendall(b"\x00\x01\x02 garbage \xff\r\n\r\n")
        s.settimeout(5)
        try:
            s.recv(4096)
        except OSError:
            pass
    with socket.create_connection((host, port)) as s:
        s.settimeout(5)
        try:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
            s.recv(4096)
        except OSError:
            pass  # the server may cut us off: that is the point
    return half


# One user's connections to /metrics, told by the parent over stdin: "hold" opens 8 and
# keeps them alive as a slow client does, a request's header begun and a byte of it sent
# on each every second (the server ends one idle for 10 s); "ninth" opens one more and
# says whether the server ended it ("eof") or not within 60 s; "give" closes one held;
# "scrape" scrapes on a new one (its status line).
HOLDER = r"""
import socket, sys, threading, time
host, port = sys.argv[1], int(sys.argv[2])
held = []
lock = threading.Lock()


def trickle():
    while True:
        time.sleep(1)
        with lock:
            for s in held:
                try:
                    s.sendall(b"a")
                except OSError:
                    pass


for line in sys.stdin:
    cmd = line.strip()
    if cmd == "hold":
        with lock:
            held = [socket.create_connection((host, port)) for _ in range(8)]
            for s in held:
                s.sendall(b"GET / HTTP/1.1\r\nX-Slow: ")
        threading.Thread(target=trickle, daemon=True).start()
        print("held", flush=True)
    elif cmd == "ninth":
        s = socket.create_connection((host, port))
        s.settimeout(60)
        try:
            print("eof" if s.recv(1) == b"" else "data", flush=True)
        except (socket.timeout, ConnectionResetError) as e:
            print(type(e).__name__, flush=True)
        s.close()
    elif cmd == "give":
        with lock:
            held.pop().close()
        print("given", flush=True)
    elif cmd == "scrape":
        s = socket.create_connection((host, port))
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        s.settimeout(60)
        print(s.makefile("rb").readline().decode().strip(), flush=True)
        s.close()
    else:
        break
"""


def held_by_one_user(args, host, port, url):
    """A user holding connections to /metrics open holds 8 of the 32 at most: its next is
    ended at once, and counted; root scrapes meanwhile; one given back makes room."""
    def refused():
        return samples(get(url)[2], "bpftel_metrics_connections_refused_total")[""]

    def others_open():
        """Connections open but the scrape's own."""
        return samples(get(url)[2], "bpftel_metrics_connections")[""] - 1

    def ask(cmd):
        holder.stdin.write(cmd + "\n")
        holder.stdin.flush()
        return holder.stdout.readline().strip()

    before = refused()
    # Debian's python (a test package): one under /root is not nobody's to run.
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else args.python
    holder = subprocess.Popen([python, "-c", HOLDER, host, str(port)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              preexec_fn=lambda: (os.setgroups([]), os.setgid(65534),
                                                  os.setuid(65534)))
    try:
        check(ask("hold") == "held", "user 65534 holds 8 connections to /metrics")
        wait_for(lambda: others_open() == 8, 60, "the endpoint to count them open")
        got = ask("ninth")
        check(got == "eof" and refused() == before + 1,
              f"its ninth is ended at once ({got}), counted: "
              f"bpftel_metrics_connections_refused_total {before} -> {refused()}")
        status, _, _ = get(url)
        check(status == 200 and others_open() == 8,
              "root scrapes while user 65534 holds its share: 8 others open")
        check(ask("give") == "given", "user 65534 closes one")
        wait_for(lambda: others_open() == 7, 60, "the endpoint to see it closed")
        got = ask("scrape")
        check(got.startswith("HTTP/1.") and " 200 " in got + " " and refused() == before + 1,
              f"one given back, its new connection is served: {got!r}, none refused more")
    finally:
        try:
            ask("quit")
        except (BrokenPipeError, OSError):
            pass
        holder.kill()
        holder.wait()


def abuse_control_socket(path):
    half = socket.socket(socket.AF_UNIX)
    half.connect(path)  # sends nothing
    for payload in (b"\x00\xffnot json\n", b"{" * 10000 + b"\n", b"x" * (1 << 20)):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            s.settimeout(5)
            try:
                s.sendall(payload)
                s.recv(4096)
            except OSError:
                pass
    return half


def run_prometheus(tmp, target):
    port = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        # A scrape may take seconds of a sanitizer-built agent on a busy VM: 15 s each,
        # so that the 120 s waits below still see several.
        f.write("global:\n  scrape_interval: 15s\n  scrape_timeout: 15s\n"
                "scrape_configs:\n  - job_name: bpftel\n    static_configs:\n"
                f"      - targets: ['{target}']\n")
    proc = subprocess.Popen(["prometheus", f"--config.file={cfg}",
                             f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}"


def query(base, q):
    try:
        _, _, body = get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": q}), 5)
    except (urllib.error.URLError, OSError):
        return []
    doc = json.loads(body)
    return doc["data"]["result"] if doc.get("status") == "success" else []


def check_modules_cli(agent):
    res = agent.cli("module", "restart", "gpu")
    check(res.stdout.strip().startswith("module gpu: running (restarts 1)"),
          f"bpftel module restart gpu: {res.stdout.strip()}")
    res = agent.cli("module", "stop", "usm")
    check("module usm: closed" in res.stdout, f"bpftel module stop usm: {res.stdout.strip()}")
    mods = {m["name"]: m["state"] for m in agent.json("modules")["modules"]}
    check(mods["usm"] == "closed" and mods["gpu"] == "running" and
          mods["sharedlibs"] == "running", f"the others still run: {mods}")
    res = agent.cli("module", "start", "usm", "--json")
    doc = json.loads(res.stdout)
    check(doc["state"] == "running" and doc["restarts"] == 1, f"started again: {doc}")
    res = agent.cli("module", "stop", "sharedlibs", check=False)
    check(res.returncode == 1 and "shared component" in res.stderr,
          f"stopping the shared watcher is refused: {res.stderr.strip()}")
    res = agent.cli("module", "stop", "nosuch", check=False)
    check(res.returncode == 1 and "no module 'nosuch'" in res.stderr,
          f"an unknown module: {res.stderr.strip()}")
    res = agent.cli("module", "pause", "gpu", check=False)
    check(res.returncode == 2 and "unknown action" in res.stderr,
          f"an unknown action is a usage error: {res.stderr.strip()}")


def errors_lost(agent, url):
    """Errors the telemetry maps had no room for are exported too: 7 put in the agent's
    tlm_lost, its helper-errors slot (bpftool writes it on every possible CPU: summed, 7
    a CPU), show in bpftel_ebpf_errors_lost_total, as in `bpftel errors --json`."""
    held = held_bpf_ids(agent.proc.pid)["map"]
    maps = json.loads(subprocess.run(["bpftool", "-j", "map", "list"], capture_output=True,
                                     text=True, check=True).stdout)
    ids = [m["id"] for m in maps if m["id"] in held and m.get("name") == "tlm_lost"]
    check(len(ids) == 1, f"the agent holds one tlm_lost map: {ids}")
    with open("/sys/devices/system/cpu/possible") as f:
        cpus = sum(int(r.split("-")[-1]) - int(r.split("-")[0]) + 1
                   for r in f.read().strip().split(","))
    subprocess.run(["bpftool", "map", "update", "id", str(ids[0]), "key", "1", "0", "0", "0",
                    "value", "7", "0", "0", "0", "0", "0", "0", "0"], check=True,
                   capture_output=True)
    text = get(url)[2]
    lost = agent.json("errors")["telemetry_lost"]
    check(f'bpftel_ebpf_errors_lost_total{{table="helper_errors"}} {7 * cpus}' in text and
          'bpftel_ebpf_errors_lost_total{table="map_errors"} 0' in text and
          lost == {"map_errors": 0, "helper_errors": 7 * cpus},
          f"errors lost for want of room in the telemetry maps are exported: {lost}")


def main():
    args = agent_args(("promtool", "prometheus", "curl", "openssl"))

    tmp = tempfile.mkdtemp(prefix="bpftel-metrics-")
    agent = Agent(args.agent, args.cli)
    procs = []
    try:
        addr = agent.json("stats")["agent"]["metrics_addr"]
        host, port = addr.rsplit(":", 1)
        url = f"http://{addr}/metrics"
        text = check_metrics_text(url, ["bpftel_build_info", "bpftel_module_up",
                                        "bpftel_ebpf_program_runs_total",
                                        "bpftel_ebpf_program_overhead_seconds_total",
                                        "bpftel_run_stats_sampled_fraction",
                                        "bpftel_uprobe_trap_seconds",
                                        "bpftel_events_lost_total",
                                        "bpftel_http_server_request_duration_seconds",
                                        "bpftel_http_client_request_duration_seconds",
                                        "bpftel_http_overflow_requests_total"])
        check("estimated from sampled" in text and
              'bpftel_run_stats_mode{mode="sampled",error=""} 1' in text and
              'bpftel_ebpf_program_overhead_seconds_total{module="gpu",program="gpu_uretprobe"}'
              in text and all(f'bpftel_uprobe_trap_seconds{{kind="{k}"}}' in text
                              for k in ("uprobe", "uretprobe", "pair")),
              "sampled run counts say they are estimates; uprobe programs' overhead and the "
              "calibrated trap costs are exported")
        check_process_families(agent, url)
        errors_lost(agent, url)
        check('bpftel_module_up{module="usm"} 1' in text and
              'bpftel_events_lost_total{module="sharedlibs",stage="kernel"} 0' in text,
              "known label sets start at 0; modules up")

        # HTTPS traffic gives HTTP series: still valid exposition.
        cert, key = make_cert(tmp)
        os.makedirs(os.path.join(tmp, "www", "items"))
        with open(os.path.join(tmp, "www", "items", "1"), "w") as f:
            f.write("x\n")
        srv, hport = start_http_server(args.python, os.path.join(tmp, "www"), cert, key)
        procs.append(srv)
        wait_for(lambda: any(r["module"] == "usm" and r["lib"] == "libssl" and
                             r["attached"] >= LIBSSL_PROBES
                             for r in agent.json("libs")["libs"]), 60,
                 "usm uprobes on libssl")
        subprocess.run(["curl", "-sk", "-o", "/dev/null", f"https://127.0.0.1:{hport}/items/1"],
                       check=True)
        series = ('bpftel_http_server_request_duration_seconds_count{http_request_method="GET",'
                  'http_route="/items/*",http_response_status_code="200",'
                  'network_protocol_version="1.1"} 1')
        wait_for(lambda: series in get(url)[2], 60,
                 "the request in bpftel_http_server_request_duration_seconds")
        check_metrics_text(url, ["bpftel_http_server_request_duration_seconds",
                                 "bpftel_http_client_request_duration_seconds"])

        # The scrapes above are plaintext HTTP the socket filter sees: this process's end
        # is a client row like any other's; the agent's own end is only counted.
        # (No scrape while waiting: the CLI asks over the control socket.)
        def scrape_seen():
            c = agent.json("http")
            mine = [r for r in c["endpoints"] if r["path"] == "/metrics" and
                    r["pid"] == os.getpid() and r["side"] == "client"]
            return (mine, c) if mine and \
                c["counters"]["own_exchanges"] >= mine[0]["count"] else None
        mine, c = wait_for(scrape_seen, 60, "the scrapes: this process's client row, and "
                           "the agent's end of each counted")
        agents = [r for r in c["endpoints"] if r["pid"] == agent.proc.pid]
        check(not agents, f"the agent's end of {mine[0]['count']} scrapes is no row, "
                          f"{c['counters']['own_exchanges']} own exchanges counted")
        own = [ln for ln in get(url)[2].splitlines()
               if ln.startswith("bpftel_http_own_exchanges_total ")]
        check(own and int(own[0].split()[1]) >= 1, f"/metrics: {own}")

        held_by_one_user(args, host, int(port), url)
        half_m = abuse_metrics_port(host, int(port))
        half_c = abuse_control_socket(agent.socket)
        status, _, _ = get(url)
        check(status == 200 and agent.cli("stats").returncode == 0,
              "after garbage, a 1 MiB header and half-open connections on both the metrics "
              "port and the control socket, both still answer")
        half_m.close()
        half_c.close()
        for path, code in (("/nope", 404), ("/", 200)):
            try:
                got = get(f"http://{addr}{path}")[0]
            except urllib.error.HTTPError as e:
                got = e.code
            check(got == code, f"GET {path}: {got}")
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"),
                                   timeout=30)
            got = 200
        except urllib.error.HTTPError as e:
            got = e.code
        check(got == 405, f"POST /metrics: {got}")

        prom, base = run_prometheus(tmp, addr)
        procs.append(prom)
        up = wait_for(lambda: [r for r in query(base, 'up{job="bpftel"}')
                               if r["value"][1] == "1"], 120, "Prometheus to scrape the agent")
        check(len(up) == 1, f"real Prometheus: up{{job=\"bpftel\"}} == 1 ({up[0]['metric']})")
        runs = wait_for(lambda: query(base, "bpftel_ebpf_program_runs_total"), 120,
                        "bpftel_ebpf_program_runs_total in Prometheus")
        check(len(runs) >= 1, f"Prometheus has {len(runs)} bpftel_ebpf_program_runs_total "
              f"series, e.g. {runs[0]['metric'].get('program')}")

        check_modules_cli(agent)
        check(agent.stop() == 0, "agent exited 0 after SIGTERM")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_metrics: all checks passed")


if __name__ == "__main__":
    run(main)
