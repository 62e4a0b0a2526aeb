#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The uids of a range granted to a user (/etc/subuid) share that user's share.

With newuidmap installed, a user may run processes under each uid of its ranges (a
rootless container's user namespace maps them): each would hold a share of its own.
The agent reads the ranges (here from a file of the test's, BPFTEL_SUBUID, granting
nobody 200000-265535) and counts their uids as their user's (bpf/lib/fair_share.h).

Two uids of nobody's range start HTTP/2 sessions (prefaces on TLS sessions over memory,
kept), together past nobody's share (user_share_percent = 10: 819 of 8192): at most the
share is admitted between them, and the shares' holders name nobody (uid 65534) with
all of them, neither uid of the range. Then the file is rewritten without the range:
the agent reads it again (it looks every 10 s), and a third uid of it starts sessions
as a user of its own."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentlib import LIBSSL_PROBES, Agent, agent_args, check, run, wait_for  # noqa: E402
from test_usm_share import NOBODY, as_user, end_floods, flood, kill_all  # noqa: E402

PERCENT = 10
SHARE = 8192 * PERCENT // 100  # bpf/usm.h USM_H2_CONNS_MAX
FIRST, COUNT = 200000, 65536


def main():
    args = agent_args(tools=("setpriv",))
    tmp = tempfile.mkdtemp(prefix="bpftel-share-subuid-")
    subuid = os.path.join(tmp, "subuid")
    with open(subuid, "w") as f:
        f.write(f"# granted by the test\nnobody:{FIRST}:{COUNT}\n")
    conf = os.path.join(tmp, "bpftel.conf")
    with open(conf, "w") as f:
        f.write(f"metrics_addr = 127.0.0.1:0\nuser_share_percent = {PERCENT}\n")
    procs = []
    agent = Agent(args.agent, args.cli, ["-c", conf], env={"BPFTEL_SUBUID": subuid})
    try:
        wait_for(lambda: [r for r in agent.json("libs")["libs"]
                          if r["module"] == "usm" and r["lib"] == "libssl" and
                          r["attached"] >= LIBSSL_PROBES], 60, "the usm uprobes on libssl")
        ranges = agent.json("http")["shares"]["subuid"]
        check(ranges == {"path": subuid, "ranges": 1, "left_out": 0, "error": None},
              f"the test's range read: {ranges}")

        def flood_as(uid, n):
            """n starts kept by a process of uid: how many were refused."""
            return flood(agent, procs, n, as_user(uid))

        a = FIRST + 1
        b = FIRST + COUNT - 1
        n = SHARE // 2 + 100
        refused_a = flood_as(a, n)
        refused_b = flood_as(b, n)
        admitted = 2 * n - refused_a - refused_b
        print(f"uids {a} and {b}: {2 * n} starts, {admitted} admitted")
        check(refused_b > 0 and 0 < admitted <= SHARE,
              f"two uids of nobody's range within nobody's one share: {admitted} <= {SHARE}, "
              f"the second refused {refused_b}")
        holders = [{"kind": "user", "uid": NOBODY, "entries": admitted}]
        check(wait_for(lambda: agent.json("http")["shares"]["http2_sessions"]["holders"] ==
                       holders, 60, f"the shares to name nobody alone: {holders}"),
              "the shares name nobody with the range's sessions, neither uid of it")

        # Without the range, a uid of it is a user of its own.
        with open(subuid, "w") as f:
            f.write("# nothing granted\n")
        wait_for(lambda: agent.json("http")["shares"]["subuid"]["ranges"] == 0, 60,
                 "the agent to read the file again")
        c = FIRST + 2
        check(flood_as(c, 10) == 0, f"uid {c}, its own user now: 10 starts, none refused")
        check(wait_for(lambda: {"kind": "user", "uid": c, "entries": 10} in
                       agent.json("http")["shares"]["http2_sessions"]["holders"], 60,
                       f"uid {c} among the holders"),
              f"uid {c} holds its own 10")
        end_floods(procs)
    finally:
        kill_all(procs)
        agent.stop()
        agent.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    check(True, f"none of what the agent held remains: {agent.released()}")


if __name__ == "__main__":
    run(main)
