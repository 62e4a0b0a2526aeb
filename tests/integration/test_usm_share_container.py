#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A container's root is bounded like a user; the host's root is not.

Docker's and Kubernetes' containers without a user namespace run as uid 0, the host's
root by uid, but in a pid namespace and a cgroup of their own. Root in a pid namespace
other than the agent's holds one share per cgroup (bpf/lib/fair_share.h) of the kernel's
HTTP/2 session table (usm_h2_conns: 8192, a quarter each by default; 20 % here, set by
the configuration before the module loads).

The test makes two such "containers" (`unshare --pid --fork`, each moved into a cgroup
of its own on a cgroup2 mount of the test's) that each start their share and 64 more
HTTP/2 sessions (a preface written on a TLS session over memory, no peer needed) and
keep them: each has starts refused and counted (h2_over_share), at least the 64 over
its share, and each has starts admitted, the second too: their shares are apart. The
host's root starts as many, none refused. The shares' holders (bpftel http --json) are
the two containers, by their cgroup ids, each with what it was admitted. Nothing is
left in the kernel after the agent stops."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import LIBSSL_PROBES, Agent, agent_args, check, run, wait_for  # noqa: E402
from test_usm_share import FLOOD_BODY, end_floods, flood, kill_all  # noqa: E402

# Not the default (25): the share the agent sets before load, not the object's own.
PERCENT = 20
SHARE = 8192 * PERCENT // 100  # bpf/usm.h USM_H2_CONNS_MAX
OVER = 64

# argv[1]: a cgroup directory to move into first ("" for none), argv[2]: the starts.
CG_FLOOD_CODE = """import ssl, sys
if sys.argv[1]:
    with open(sys.argv[1] + "/cgroup.procs", "w") as f:
        f.write("0")
""" + FLOOD_BODY


def main():
    args = agent_args(tools=("unshare",))
    tmp = tempfile.mkdtemp(prefix="bpftel-share-ct-")
    mnt = os.path.join(tmp, "cgroup2")
    cgroups, procs = [], []
    mounted = False
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        f.write(f"metrics_addr = 127.0.0.1:0\nuser_share_percent = {PERCENT}\n")
    agent = Agent(args.agent, args.cli, ["-c", conf])
    try:
        wait_for(lambda: [r for r in agent.json("libs")["libs"]
                          if r["module"] == "usm" and r["lib"] == "libssl" and
                          r["attached"] >= LIBSSL_PROBES], 60, "the usm uprobes on libssl")
        os.mkdir(mnt)
        subprocess.run(["mount", "-t", "cgroup2", "none", mnt], check=True)
        mounted = True

        def flood_as(n, cgroup=None):
            """n starts kept by a new process: root in a new pid namespace, moved into
            cgroup, when cgroup is given; the host's root else. The starts refused."""
            prefix = ["unshare", "--pid", "--fork", "--kill-child"] if cgroup else []
            return flood(agent, procs, n, prefix, CG_FLOOD_CODE, [cgroup or ""])

        n = SHARE + OVER
        want = []
        for name in ("a", "b"):
            cgroups.append(os.path.join(mnt, f"bpftel-test-{os.getpid()}-{name}"))
            os.mkdir(cgroups[-1])
            refused = flood_as(n, cgroups[-1])
            print(f"container {name}: {n} starts, {refused} refused")
            # At least what passes its share; a sweep that corrects the count during
            # the flood may refuse some early, never admit more.
            check(OVER <= refused < n,
                  f"container {name}: refused past its share, and admitted some: "
                  f"{n - refused} admitted, {refused} refused")
            # Its owner: its cgroup id (the directory's inode), low 31 bits.
            want.append({"kind": "container", "entries": n - refused,
                         "cgroup_id": os.stat(cgroups[-1]).st_ino & 0x7fffffff})
        check(flood_as(n) == 0, f"the host's root: {n} starts, none refused")
        share = agent.json("http")["shares"]["http2_sessions"]["share"]
        check(share == SHARE, f"the share as configured: {share}")
        # The holders, once a correction (every 10 s) has counted the floods: the two
        # containers, each by its cgroup; not the host's root.
        key = lambda h: h.get("cgroup_id", -1)  # noqa: E731
        want.sort(key=key)
        check(wait_for(lambda: sorted(agent.json("http")["shares"]["http2_sessions"]
                                      ["holders"], key=key) == want, 60,
                       f"the shares to name the two containers: {want}"),
              "the shares name the two containers by their cgroups, not the host's root")
        end_floods(procs)
    finally:
        kill_all(procs)
        for cg in cgroups:
            # Its processes reaped; the kernel may hold the cgroup a moment longer.
            try:
                wait_for(lambda: not os.path.exists(cg) or _rmdir(cg), 30,
                         f"{cg} to be removed")
            except AssertionError as e:
                print(f"warning: {e}")
        if mounted:
            subprocess.run(["umount", mnt], check=False)
        agent.stop()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    check(True, f"none of what the agent held remains: {agent.released()}")


def _rmdir(path):
    try:
        os.rmdir(path)
        return True
    except OSError:
        return False


if __name__ == "__main__":
    run(main)
