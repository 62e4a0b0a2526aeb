#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# check_raw_bpf_calls.sh [--self-test] DIR...
# Fails if BPF code in DIR calls a map update/delete, probe_read, ringbuf or
# skb_load_bytes helper directly instead of through telemetry/telemetry.bpf.h.
#
# Each file is parsed, not grepped line by line: comments (block comments over any
# number of lines, // comments, a backslash-newline continuing either) and the insides
# of string and character literals are blanked first, keeping every newline, so a
# comment marker inside a string hides nothing and a call in a comment or a string is
# no call. Then the whole file is searched at once: the name and its '(' may be on
# different lines, with backslash-newlines between them (a macro body). Not caught: a
# name built by token pasting (bpf_##x), which no file here does.
# With --self-test, first plants violations and non-violations and checks each verdict.
set -u
names='map_update_elem|map_delete_elem|probe_read[a-z_]*|ringbuf_[a-z_]+|skb_load_bytes[a-z_]*'

# scan_file FILE: "FILE:LINE: text" for each raw call.
scan_file() {
	awk -v f="$1" -v names="$names" '
	{ src = src $0 "\n"; line[NR] = $0 }
	END {
		# Blank comments and literal contents. st: 0 code, 1 block comment,
		# 2 line comment, 3 string, 4 character literal.
		n = length(src); st = 0; k = 0
		for (i = 1; i <= n; i++) {
			c = substr(src, i, 1); d = substr(src, i + 1, 1)
			if (c == "\\" && d == "\n") { # a continuation: space, the newline kept
				out[++k] = " "; out[++k] = "\n"; i++; continue
			}
			if (c == "\n") {
				out[++k] = "\n"
				if (st == 2) st = 0
				continue
			}
			if (st == 0) {
				if (c == "/" && d == "*") { st = 1; out[++k] = "  "; i++; continue }
				if (c == "/" && d == "/") { st = 2; out[++k] = "  "; i++; continue }
				if (c == "\"") st = 3
				else if (c == "\047") st = 4
				out[++k] = c
			} else if (st == 1) {
				if (c == "*" && d == "/") { st = 0; out[++k] = "  "; i++; continue }
				out[++k] = " "
			} else if (st == 2) {
				out[++k] = " "
			} else { # inside a literal: escapes skip their next character
				q = st == 3 ? "\"" : "\047"
				if (c == "\\") { out[++k] = "  "; i++; continue }
				if (c == q) { st = 0; out[++k] = c; continue }
				out[++k] = " "
			}
		}
		code = ""
		for (i = 1; i <= k; i++)
			code = code out[i]
		# The whole text at once: the name, then blanks and newlines, then "(".
		re = "bpf_(" names ")[ \t\n]*\\("
		pos = 0
		while (match(code, re)) {
			at = pos + RSTART
			pos = at + RLENGTH - 1
			prev = at > 1 ? substr(src, at - 1, 1) : ""
			if (prev !~ /[A-Za-z0-9_]/) {
				before = substr(src, 1, at - 1)
				ln = 1 + gsub(/\n/, "\n", before)
				printf "%s:%d: %s\n", f, ln, line[ln]
			}
			code = substr(code, RSTART + RLENGTH)
		}
	}' "$1"
}

scan() {
	# A file that cannot be parsed is a failure too, never a pass.
	find "$@" \( -name '*.c' -o -name '*.h' \) -type f | sort | while read -r f; do
		scan_file "$f" || echo "$f: cannot be parsed"
	done
}

# plant NAME: stdin into $tmp/NAME
plant() {
	cat >"$tmp/$1"
}

self_test() {
	tmp=$(mktemp -d)
	# Violations: each must be reported at FILE:LINE.
	plant bad_after_comment.c <<-'EOF'
	int f(void)
	{
		return /* why */ bpf_map_update_elem(&m, &k, &v, 0);
	}
	EOF
	plant bad_after_block.c <<-'EOF'
	/* a comment
	 * over lines */ long r = bpf_probe_read_user(buf, 8, p);
	EOF
	plant bad_split_paren.c <<-'EOF'
	int g(void)
	{
		return bpf_ringbuf_output
			(&rb, d, 8, 0);
	}
	EOF
	plant bad_in_macro.h <<-'EOF'
	#define RAW_DELETE(m, k) \
		bpf_map_delete_elem \
			(&m, k)
	EOF
	plant bad_after_line_comment.c <<-'EOF'
	// the next line is code
	int h(void) { return bpf_skb_load_bytes(skb, 0, b, 4); }
	EOF
	plant bad_after_string.c <<-'EOF'
	const char *s = "/* not a comment"; long x = bpf_map_update_elem(&m, &k, &v, 0);
	EOF
	plant bad_after_char.c <<-'EOF'
	char q = '"'; long y = bpf_probe_read_kernel_str(b, 8, p);
	EOF
	# Non-violations: none may be reported.
	plant ok_block.c <<-'EOF'
	/* bpf_map_update_elem(&m, &k, &v, 0) in a comment */
	/*
	 * over lines: bpf_skb_load_bytes (skb, 0, b, 4);
	 */
	EOF
	plant ok_line.c <<-'EOF'
	int i; // bpf_probe_read_user(b, 8, p);
	// a comment continued \
	bpf_map_delete_elem(&m, &k);
	EOF
	plant ok_string.c <<-'EOF'
	const char *a = "bpf_ringbuf_output(";
	const char *b = "escaped \" bpf_map_update_elem(&m) \\";
	char c = '\''; /* bpf_probe_read_user( */
	EOF
	plant ok_names.c <<-'EOF'
	long a = tlm_map_update(m, &k, &v, 0) + my_bpf_map_update_elem(&m);
	long b = bpf_map_lookup_elem(&m, &k) != 0;
	EOF
	found=$(scan "$tmp")
	status=0
	for want in bad_after_comment.c:3 bad_after_block.c:2 bad_split_paren.c:3 \
		bad_in_macro.h:2 bad_after_line_comment.c:2 bad_after_string.c:1 \
		bad_after_char.c:1; do
		case "$found" in
		*"/$want: "*) echo "ok: self-test: caught $want" ;;
		*) echo "FAIL: self-test: the raw call at $want was not caught"; status=1 ;;
		esac
	done
	for ok in ok_block.c ok_line.c ok_string.c ok_names.c; do
		case "$found" in
		*"/$ok:"*) echo "FAIL: self-test: $ok reported:"; echo "$found"; status=1 ;;
		*) echo "ok: self-test: nothing reported in $ok" ;;
		esac
	done
	n=$(printf '%s\n' "$found" | grep -c .)
	if [ "$n" -ne 7 ]; then
		echo "FAIL: self-test: $n reports for 7 planted calls:"; echo "$found"; status=1
	fi
	rm -rf "$tmp"
	return $status
}

if [ "${1:-}" = --self-test ]; then
	shift
	self_test || exit 1
fi

found=$(scan "$@")
if [ -n "$found" ]; then
	echo "FAIL: raw BPF calls outside telemetry/telemetry.bpf.h (use the tlm_* wrappers):"
	echo "$found"
	exit 1
fi
echo "ok: no raw map update/delete, probe_read, ringbuf or skb_load_bytes calls in $*"
