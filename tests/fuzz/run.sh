#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tests/fuzz/run.sh [SECONDS]
#
# Build the libFuzzer targets (clang, with ASan + UBSan) into build-fuzz/ and run each
# for SECONDS (default 60) from its seed corpus in tests/fuzz/corpus/<target>. New
# inputs go to a scratch directory, not into the repository. A crash, leak or
# sanitizer report fails the run and leaves the input in build-fuzz/.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
out="$root/build-fuzz"
mkdir -p "$out"
cflags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
-I$root -I$root/bpf"

build() { # build NAME SOURCES... [-lLIB]
	name=$1
	shift
	# shellcheck disable=SC2086
	clang $cflags -o "$out/$name" "$@"
}

build fuzz_http "$root/tests/fuzz/fuzz_http.c" "$root/user/modules/usm/http.c"
build fuzz_path "$root/tests/fuzz/fuzz_path.c" "$root/user/modules/usm/http.c"
h2="$root/user/modules/usm"
build fuzz_http2 "$root/tests/fuzz/fuzz_http2.c" "$h2/http2_conn.c" "$h2/http2_block.c" \
	"$h2/http2_streams.c" "$h2/http2_first.c" "$h2/http2_mem.c" "$h2/http.c" -lnghttp2
build fuzz_config "$root/tests/fuzz/fuzz_config.c" "$root/user/agent/config.c" \
	"$root/user/agent/netaddr.c" "$root/user/sharedlibs/names.c"
build fuzz_ctl "$root/tests/fuzz/fuzz_ctl.c" "$root/user/common/ctl.c" \
	"$root/user/common/escape.c" -ljansson
build fuzz_goexe "$root/tests/fuzz/fuzz_goexe.c" "$root/user/manager/gopclntab.c" \
	"$root/user/manager/goret.c" "$root/user/manager/tailread.c" -lcapstone

status=0
for t in http path http2 config ctl goexe; do
	work=$(mktemp -d)
	log="$out/fuzz_$t.log"
	if "$out/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$out/fuzz_$t-" "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "fuzz_$t: $runs runs in ${secs}s, no crash"
	else
		echo "fuzz_$t: FAILED (log: $log)" >&2
		tail -30 "$log" >&2
		status=1
	fi
	rm -rf "$work"
done
exit $status
