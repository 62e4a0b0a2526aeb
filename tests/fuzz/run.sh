#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tests/fuzz/run.sh [SECONDS]
#
# Build the libFuzzer targets (clang, with ASan + UBSan) into build-fuzz/ and run each
# for SECONDS (default 60) from its seed corpus in tests/fuzz/corpus/<target> (fuzz_elf:
# from libraries built here, below). New
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
m="$root/user/manager"
build fuzz_elf "$root/tests/fuzz/fuzz_elf.c" "$m/elfsym.c" "$m/elfaddr.c" "$m/elfcheck.c" \
	"$m/prologue.c" "$root/user/common/escape.c" -lelf -lz -lcapstone

build fuzz_proctext "$root/tests/fuzz/fuzz_proctext.c" "$root/user/sharedlibs/mountinfo.c" \
	"$root/user/common/cgroup.c" "$root/user/common/proc.c"
build fuzz_demangle "$root/tests/fuzz/fuzz_demangle.c" "$root/user/modules/gpu/gpu_demangle.c" \
	-liberty

# Seeds for fuzz_elf built here, not kept in the tree: a small shared library with a
# versioned and a hidden symbol (ld's output), and the same stripped of .symtab.
seeds="$out/seed_elf"
mkdir -p "$seeds"
printf 'int SSL_write(void) { return 1; }\nint SSL_read(void) { return 2; }\n%s\n' \
	'int f_old(void) { return 3; } __asm__(".symver f_old, f@V1");' >"$out/seed_elf.c"
printf 'OPENSSL_3.0.0 { global: SSL_write; SSL_read; }; V1 { global: f; };\n' >"$out/seed_elf.map"
clang -shared -fPIC -O1 -Wl,--version-script="$out/seed_elf.map" -o "$seeds/lib.so" \
	"$out/seed_elf.c"
cp "$seeds/lib.so" "$seeds/lib-stripped.so"
strip "$seeds/lib-stripped.so"

status=0
for t in http path http2 config ctl goexe elf proctext demangle; do
	work=$(mktemp -d)
	log="$out/fuzz_$t.log"
	corpus="$root/tests/fuzz/corpus/$t"
	[ "$t" = elf ] && corpus="$seeds"
	if "$out/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$out/fuzz_$t-" "$work" "$corpus" >"$log" 2>&1; then
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
