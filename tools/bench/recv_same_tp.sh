#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# USM's recvfrom program (tls_recv_fd = on) and an empty one (tools/tp_floor --recvfrom)
# on the same tracepoint, both attached, BPF run stats on: ns per run of each over 4 s of
# tools/recv_loop, in both orders (the first program a tracepoint runs pays its cold
# caches). BENCHMARKS.md, recv_loop. Run as root from the repository, after a build.
#
#   tools/bench/recv_same_tp.sh [BUILD] [REPLICATES]
set -e
build=${1:-build}
reps=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'run_stats = always\ntls_recv_fd = on\nmetrics_addr = 127.0.0.1:0\n' > "$tmp/conf"

cost() { # name prefix, before json, after json
	python3 -c '
import json, sys
b = {p["name"]: p for p in json.loads(sys.argv[2])}
a = {p["name"]: p for p in json.loads(sys.argv[3])}
k = [n for n in a if n.startswith(sys.argv[1])][0]
runs = a[k]["run_cnt"] - b.get(k, {}).get("run_cnt", 0)
ns = a[k]["run_time_ns"] - b.get(k, {}).get("run_time_ns", 0)
print(f"{k} {ns / max(runs, 1):.1f} ns/run ({runs} runs)")' "$@"
}

for r in $(seq "$reps"); do
	for order in floor_first agent_first; do
		exec 8< <(sleep 60)
		if [ $order = floor_first ]; then
			"$build/tools/tp_floor" --recvfrom <&8 > "$tmp/fl" & fl=$!
			until grep -q ready "$tmp/fl"; do sleep 0.1; done
		fi
		"$build/user/bpftel-agent" -c "$tmp/conf" -q --socket "$tmp/sock" > /dev/null 2>&1 &
		ag=$!
		until "$build/tools/bpftel" --socket "$tmp/sock" modules > /dev/null 2>&1; do
			sleep 0.1
		done
		if [ $order = agent_first ]; then
			"$build/tools/tp_floor" --recvfrom <&8 > "$tmp/fl" & fl=$!
			until grep -q ready "$tmp/fl"; do sleep 0.1; done
		fi
		before=$(bpftool -j prog show)
		"$build/tools/recv_loop" -d 4 > /dev/null
		after=$(bpftool -j prog show)
		echo "$r $order: $(cost usm_tls_recv "$before" "$after"); $(cost floor_enter_rec "$before" "$after")"
		kill -INT $ag
		wait $ag || true
		exec 8<&-
		wait $fl || true
		rm -f "$tmp/fl"
	done
done
