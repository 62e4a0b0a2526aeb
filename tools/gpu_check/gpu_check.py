#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The GPU module against a real GPU: run on a machine with one (tools/gpu_check/run.sh),
never in CI. The agent runs; real_cuda plays a known pattern on the real runtime and
driver, and a PyTorch matmul runs under its own profiler. Each figure bpftel reports is
printed next to what the program itself says (its pattern, or CUPTI's kernel names and
the caching allocator's bytes): "ok" where they agree, "DIFF" where not. Exit 1 on any
DIFF. Outputs (JSON rows, `bpftel gpu`, /metrics' GPU families, the agent's log) go to
--out."""
import argparse
import json
import os
import subprocess
import sys
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "integration"))
from agentlib import Agent, wait_for  # noqa: E402
from test_gpu import NPROBES, NPROBES_DRIVER, gpu_row, lib_rows  # noqa: E402
sys.path.insert(0, here)
import census  # noqa: E402

diffs = []


def report(ok, what):
    print(f"{'ok' if ok else 'DIFF'}: {what}", flush=True)
    if not ok:
        diffs.append(what)


class Program:
    """A checked program: prints "loaded PID ...", waits for a line, plays, prints "ready"
    and what it expects, waits for a line, frees, prints "done"."""

    def __init__(self, argv, env=None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.loaded = self.proc.stdout.readline().split()
        if self.loaded[:1] != ["loaded"]:
            raise AssertionError(f"{argv[0]} did not start: {self.loaded}")
        self.pid = int(self.loaded[1])

    def step(self, until):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        out = []
        for line in self.proc.stdout:
            if line.split()[:1] == [until]:
                return out, line
            out.append(line.rstrip("\n"))
        raise AssertionError(f"pid {self.pid} exited before '{until}': {out}")

    def finish(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def wait_probed(agent, pid, lib):
    """The gpu module's row for pid's LIB once every uprobe was tried on it."""
    n = NPROBES if lib == "libcudart" else NPROBES_DRIVER
    r = wait_for(lambda: [r for r in lib_rows(agent, pid) if r["lib"] == lib and
                          r["attached"] + r["failed"] + r["folded_points"] +
                          r["skipped_optional"] == n], 60,
                 f"the gpu uprobes on pid {pid}'s {lib}")[0]
    print(f"{lib}: {r['path']}: {r['attached']} uprobes attached, {r['failed']} failed "
          f"{r.get('failures') or ''}, {r['folded_points']} folded {r['folded'] or ''}, "
          f"{r['skipped_optional']} optional not in the file",
          flush=True)
    return r


def save(out, name, text):
    with open(os.path.join(out, name), "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def dims(v):
    return "x".join(str(x) for x in v)


def check_real_cuda(agent, args):
    prog = Program([os.path.join(args.bin, "real_cuda"),
                    os.path.join(args.bin, "drv_axpy.cubin")])
    wait_probed(agent, prog.pid, "libcudart")
    wait_probed(agent, prog.pid, "libcuda")
    out, _ = prog.step("ready")
    expect = {}
    kernels = []
    calls = {}
    for line in out:
        w = line.split()
        if w[:2] == ["expect", "kernel"]:
            *name, launches, grid, block = w[2:]
            kernels.append((" ".join(name), int(launches), grid, block))
        elif w[:2] == ["expect", "calls"]:
            calls[w[2]] = int(w[3])
        elif w[:1] == ["expect"]:
            expect[w[1]] = int(w[2])
    row = wait_for(lambda: gpu_row(agent, prog.pid), 30, f"a gpu row for {prog.pid}")
    save(args.out, "real_cuda.json", json.dumps(row, indent=1))
    save(args.out, "gpu.txt", agent.cli("gpu").stdout)
    print("real_cuda calls:", {k: v for k, v in row["calls"].items() if v},
          "failed:", {k: v for k, v in row["failed"].items() if v},
          "driver_calls_inside_runtime:", row["driver_calls_inside_runtime"],
          "calls_untracked:", row["calls_untracked"], flush=True)
    named = {k["name"]: k for k in row["kernels"]}
    for name, launches, grid, block in kernels:
        k = named.get(name)
        got = f"{k['launches']} launches {dims(k['grid'])} {dims(k['block'])}" if k \
            else f"not among {sorted(str(n) for n in named)}"
        report(k is not None and k["launches"] == launches and
               dims(k["grid"]) == grid and dims(k["block"]) == block,
               f"kernel {name}: {launches} launches {grid} {block}; bpftel: {got}")
    report(row["launches"] == sum(k[1] for k in kernels),
           f"launches {sum(k[1] for k in kernels)}; bpftel: {row['launches']}")
    report(row["graph_launches"] == expect["graph_launches"],
           f"graph launches {expect['graph_launches']}; bpftel: {row['graph_launches']}")
    for fn, n in calls.items():
        report(row["calls"].get(fn) == n, f"{fn} calls {n}; bpftel: {row['calls'].get(fn)}")
    kinds = row["memory"]["kinds"]
    for kind in ("device", "managed", "pinned_host", "async"):
        want, got = expect[f"{kind}_bytes"], kinds[kind]["outstanding_bytes"]
        report(want == got, f"{kind} outstanding {want} B; bpftel: {got} B "
               f"({kinds[kind]['allocs']} allocs, peak {kinds[kind]['peak_bytes']} B)")
    for kind in ("htod", "dtoh"):
        want, got = expect[f"{kind[0]}2{kind[-1]}_bytes"], row["memcpy_bytes"][kind]
        report(want == got, f"memcpy {kind} {want} B; bpftel: {got} B")
    errs = {(e["function"], e["error"]): e for e in row["errors"]}
    for fn, key in (("cudaSetDevice", "cudaSetDevice_error"),
                    ("cudaMalloc", "cudaMalloc_error")):
        e = errs.get((fn, expect[key]))
        report(e is not None and e["count"] == 1,
               f"{fn} error {expect[key]} once; bpftel: "
               f"{[(f, c, v['name'], v['count']) for (f, c), v in errs.items()]}")
    devs = {d["device"]: d for d in row["devices"]}
    report("0" in devs and devs["0"]["launches"] == row["launches"],
           f"every launch on device 0; bpftel devices: {row['devices']}")

    prog.step("done")
    row = gpu_row(agent, prog.pid)
    save(args.out, "real_cuda.json", json.dumps(row, indent=1))
    for kind in ("device", "managed", "pinned_host", "async"):
        k = row["memory"]["kinds"][kind]
        report(k["outstanding_bytes"] == 0 and k["frees"] == k["allocs"],
               f"{kind} after the frees: bpftel: {k['outstanding_bytes']} B outstanding, "
               f"{k['allocs']} allocs, {k['frees']} frees")
    prog.finish()
    wait_for(lambda: gpu_row(agent, prog.pid) is None, 60, "real_cuda's row dropped")
    report(True, "real_cuda's row dropped after it exited")


def compare_census(row, hits, sizes):
    """bpftel's calls against the kernel's own uprobe events on the same functions."""
    for (lib, fn), n in sorted(hits.items()):
        print(f"  census {n:6d}  {lib} {fn}"
              f"{'  sizes ' + str(sum(sizes.get((lib, fn), []))) if (lib, fn) in sizes else ''}",
              flush=True)
    by_fn = {}
    for (lib, fn), n in hits.items():
        by_fn[fn] = by_fn.get(fn, 0) + n
    runtime = {fn: n for fn, n in row["calls"].items() if fn.startswith("cuda")}
    for fn, n in sorted(runtime.items()):
        report(by_fn.get(fn, 0) == n, f"{fn}: census {by_fn.get(fn, 0)}; bpftel {n}")
    driver = sum(n for fn, n in row["calls"].items() if fn.startswith("cu") and
                 not fn.startswith("cuda"))
    seen = sum(by_fn.get(fn, 0) for fn in row["calls"] if not fn.startswith("cuda"))
    report(seen == driver + row["driver_calls_inside_runtime"],
           f"driver calls to probed functions: census {seen}; bpftel {driver} + "
           f"{row['driver_calls_inside_runtime']} inside runtime calls")
    for fn, n in sorted(by_fn.items()):
        if "Launch" in fn and fn not in row["calls"]:
            report(False, f"{fn}: census {n} calls; bpftel does not probe it")


def check_torch(agent, args):
    prog = Program([args.python, os.path.join(here, "torch_matmul.py")])
    rt = wait_probed(agent, prog.pid, "libcudart")
    cu = wait_probed(agent, prog.pid, "libcuda")
    cen = census.Census([rt["path"], cu["path"]])
    print(f"census: {len(cen.events)} uprobe events", flush=True)
    try:
        _, _ = prog.step("ready")
        told = json.loads(prog.proc.stdout.readline())
        hits, sizes = cen.read()
    finally:
        cen.stop()
    row = wait_for(lambda: gpu_row(agent, prog.pid), 30, f"a gpu row for {prog.pid}")
    compare_census(row, hits, sizes)
    save(args.out, "torch.json", json.dumps({"bpftel": row, "torch": told, "census": [
        [lib, fn, n, sizes.get((lib, fn))] for (lib, fn), n in hits.items()]}, indent=1))
    save(args.out, "gpu.txt", agent.cli("gpu").stdout)
    print("torch calls:", {k: v for k, v in row["calls"].items() if v},
          "failed:", {k: v for k, v in row["failed"].items() if v},
          "driver_calls_inside_runtime:", row["driver_calls_inside_runtime"],
          "calls_untracked:", row["calls_untracked"], flush=True)
    cupti = dict(told["kernels"])
    print(f"CUPTI: {sum(cupti.values())} kernel runs of {len(cupti)} kernels; bpftel: "
          f"{row['launches']} launches of {row['kernels_total']} kernels", flush=True)
    for name, n in told["kernels"]:
        print(f"  CUPTI {n:5d}  {name}", flush=True)
    for k in row["kernels"]:
        # bpftel cuts a name at 255 bytes: the CUPTI name it begins.
        full = [n for n in cupti if k["name"] and (n == k["name"] or (
            len(k["name"].encode()) >= 255 and n.startswith(k["name"])))]
        got = sum(cupti[n] for n in full)
        report(full and got == k["launches"],
               f"bpftel kernel {k['name']} ({k['api']}): {k['launches']} launches; "
               f"CUPTI: {got if full else 'no such name'}")
    # Runtime kernels are named by their host stubs' symbols, local ones: in .symtab.
    with open(f"/proc/{prog.pid}/maps") as f:
        torch_libs = sorted({ln.split()[-1] for ln in f if "libtorch_cuda" in ln})
    for path in torch_libs:
        entries, names = census.symtab_size(path)
        print(f"{path}: {os.path.getsize(path)} B, {entries} .symtab entries, "
              f"{names} B of names", flush=True)
    report(row["launches"] == sum(cupti.values()),
           f"launches: CUPTI {sum(cupti.values())}; bpftel {row['launches']}")
    # The runtime's cudaMalloc allocates with the driver's cuMemAlloc_v2: the census of
    # the latter is every device allocation of the process, its caching allocator's
    # and the libraries' own (cuBLAS, CUPTI), each once.
    dev = row["memory"]["kinds"]["device"]
    by_fn = {}
    for (lib, fn), v in sizes.items():
        by_fn[fn] = by_fn.get(fn, 0) + sum(v)
    report(told["reserved_bytes"] == by_fn.get("cudaMalloc", 0),
           f"PyTorch's allocator reserved {told['reserved_bytes']} B; census of cudaMalloc "
           f"{by_fn.get('cudaMalloc', 0)} B")
    report(dev["alloc_bytes"] == by_fn.get("cuMemAlloc_v2", 0),
           f"device bytes allocated: census of cuMemAlloc_v2 {by_fn.get('cuMemAlloc_v2', 0)} "
           f"B; bpftel {dev['alloc_bytes']} B in {dev['allocs']} allocs "
           f"({dev['outstanding_bytes']} B outstanding)")
    _, line = prog.step("done")
    after = json.loads(line.split(None, 1)[1])["reserved_bytes"]
    row = gpu_row(agent, prog.pid)
    save(args.out, "torch.json", json.dumps({"bpftel_after_empty_cache": row}, indent=1))
    dev = row["memory"]["kinds"]["device"]
    freed = told["reserved_bytes"] - after
    report(dev["freed_bytes"] == freed,
           f"empty_cache gave back {freed} B; bpftel freed {dev['freed_bytes']} B "
           f"({dev['outstanding_bytes']} B outstanding)")
    prog.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--bin", required=True, help="where real_cuda and drv_axpy.cubin are")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    agent = Agent(args.agent, args.cli, ["-v"])
    try:
        wait_for(lambda: agent.json("modules")["modules"], 30, "modules")
        print(agent.cli("modules").stdout, flush=True)
        for check in (check_real_cuda, None if args.no_torch else check_torch):
            if not check:
                continue
            try:
                check(agent, args)
            except AssertionError as e:
                report(False, f"{check.__name__}: {e}")
        addr = agent.json("stats")["agent"]["metrics_addr"]
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=30) as r:
            save(args.out, "metrics.txt", "".join(
                line + "\n" for line in r.read().decode().splitlines()
                if line.startswith(("bpftel_gpu", "bpftel_ebpf_program"))))
        save(args.out, "libs.txt", agent.cli("libs").stdout + agent.cli("stats").stdout)
        save(args.out, "errors.txt", agent.cli("errors").stdout)
    finally:
        rc = agent.stop()
        save(args.out, "agent.log", agent.logs())
        agent.cleanup()
    print(f"agent exited {rc}; {len(diffs)} DIFF", flush=True)
    sys.exit(1 if diffs else 0)


main()
