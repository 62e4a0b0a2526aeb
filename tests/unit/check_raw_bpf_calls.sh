#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check_raw_bpf_calls.sh DIR...
# Fails if BPF code in DIR calls a map update/delete, probe_read, ringbuf or
# skb_load_bytes helper directly instead of through telemetry/telemetry.bpf.h.
# With --self-test, first proves it catches such a call.
set -u
pattern='(^|[^A-Za-z0-9_])bpf_(map_update_elem|map_delete_elem|probe_read[a-z_]*|ringbuf_[a-z_]+|skb_load_bytes[a-z_]*)[ \t]*\('

scan() {
	# Comments are not calls: drop // comments and lines inside /* */ blocks.
	for f in $(find "$@" -name '*.c' -o -name '*.h' | sort); do
		awk -v f="$f" '
			/\/\*/ { inc = 1 }
			{ line = $0; sub(/\/\/.*/, "", line) }
			!inc && line ~ /'"$pattern"'/ { printf "%s:%d: %s\n", f, NR, $0 }
			/\*\// { inc = 0 }
		' "$f"
	done
}

if [ "${1:-}" = --self-test ]; then
	shift
	tmp=$(mktemp -d)
	printf 'int f(void)\n{\n\treturn bpf_probe_read_user(0, 0, 0);\n}\n' >"$tmp/bad.bpf.c"
	printf '/* bpf_map_update_elem(&m, ...) in a comment */\n' >"$tmp/ok.h"
	found=$(scan "$tmp")
	rm -rf "$tmp"
	case "$found" in
	*bad.bpf.c:3:*) ;;
	*) echo "FAIL: self-test: a raw call was not caught"; exit 1 ;;
	esac
	case "$found" in
	*ok.h*) echo "FAIL: self-test: a comment was taken for a call"; exit 1 ;;
	esac
fi

found=$(scan "$@")
if [ -n "$found" ]; then
	echo "FAIL: raw BPF calls outside telemetry/telemetry.bpf.h (use the tlm_* wrappers):"
	echo "$found"
	exit 1
fi
echo "ok: no raw map update/delete, probe_read, ringbuf or skb_load_bytes calls in $*"
