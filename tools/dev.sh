#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The two README commands, for a Debian 12 machine, as root:
#
#   tools/dev.sh run [AGENT OPTIONS]   install missing packages, build, install the binaries
#                                      to /usr/local, run bpftel-agent in the foreground
#   tools/dev.sh test                  install missing packages, build, run every test, then
#                                      build with ASan+UBSan and run every test again, then
#                                      the threaded parts' tests under ThreadSanitizer, then each
#                                      libFuzzer target for BPFTEL_FUZZ_SECONDS (60)
#
# Builds are incremental (build/, build-asan/, build-tsan/). With CI=true or BPFTEL_REQUIRE_BPF=1 a
# skipped test is a failure: CI runs as root, where every BPF test must run.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

# Debian packages, with why each is here (see README "Dependencies").
build_pkgs="cmake make gcc clang llvm pkg-config libbpf-dev libelf-dev zlib1g-dev libiberty-dev \
libjansson-dev libmicrohttpd-dev libnghttp2-dev libcapstone-dev bpftool"
test_pkgs="libcmocka-dev python3 curl openssl gnutls-bin prometheus tmux libclang-rt-14-dev \
libbpf-tools bpftrace nghttp2-server nghttp2-client python3-h2 golang-go libgnutls28-dev \
btrfs-progs binutils iptables"

die() {
	echo "dev.sh: $*" >&2
	exit 1
}

install_missing() {
	missing=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	[ "$(id -u)" -eq 0 ] || die "missing packages:$missing (run as root to install them)"
	echo "dev.sh: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
		die "apt-get install failed for:$missing"
}

# Configure (every time: options given now win over a cache an earlier command left, so
# `run` then `test` builds the tests) and build.
build() { # build DIR [CMAKE ARGS]
	dir=$1
	shift
	cmake -S "$root" -B "$root/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
	cmake --build "$root/$dir" -j "$jobs" -- --no-print-directory
}

run_ctest() { # run_ctest DIR [CTEST ARGS]
	dir=$1
	shift
	log="$root/$dir/ctest.log"
	status=0
	ctest --test-dir "$root/$dir" --output-on-failure "$@" 2>&1 | tee "$log" || status=1
	grep -q "tests passed" "$log" || status=1
	if grep -q "tests failed out of" "$log" && ! grep -q " 0 tests failed out of" "$log"; then
		status=1
	fi
	if grep -q '\*\*\*Skipped' "$log"; then
		if [ "${CI:-}" = true ] || [ "${BPFTEL_REQUIRE_BPF:-0}" = 1 ]; then
			echo "dev.sh: tests were skipped; CI requires every BPF test to run:" >&2
			grep '\*\*\*Skipped' "$log" >&2
			status=1
		else
			echo "dev.sh: note: some tests were skipped (no BPF privileges?)" >&2
		fi
	fi
	return $status
}

# How each production object's programs were run (tests/bpf/prog_common.h): the lines
# the test_bpf_prog_* tests print, read back from ctest's log of every test's output.
print_program_coverage() { # print_program_coverage DIR
	echo "dev.sh: production programs, each through its own entry:"
	grep -hE '^[a-z_]+\.bpf\.o: ' "$root/$1/Testing/Temporary/LastTest.log" ||
		echo "dev.sh: no coverage lines: the test_bpf_prog_* tests did not run"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
run)
	install_missing $build_pkgs
	# A first build skips the tests (their packages may be missing); a tree that `test`
	# configured keeps them, so neither command undoes the other.
	if [ -f "$root/build/CMakeCache.txt" ]; then
		build build
	else
		build build -DBPFTEL_TESTS=OFF
	fi
	cmake --install "$root/build" --prefix /usr/local >/dev/null
	echo "dev.sh: installed bpftel-agent and bpftel to /usr/local; starting the agent"
	exec /usr/local/sbin/bpftel-agent "$@"
	;;
test)
	install_missing $build_pkgs $test_pkgs
	build build -DBPFTEL_TESTS=ON
	run_ctest build
	print_program_coverage build
	echo "dev.sh: === again with AddressSanitizer + UndefinedBehaviorSanitizer ==="
	build build-asan -DBPFTEL_TESTS=ON -DBPFTEL_SANITIZE=ON
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_ctest build-asan
	echo "dev.sh: === the threaded parts' tests again with ThreadSanitizer ==="
	build build-tsan -DBPFTEL_TESTS=ON -DBPFTEL_TSAN=ON
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		run_ctest build-tsan -R 'test_bpf_manager|events|test_unit_ctl|test_unit_lifecycle|test_bpf_uprobe_registry|test_integration_responsive|test_bpf_telemetry$|test_unit_usm_endpoints|test_unit_usm_h2_sessions|test_unit_usm_metrics|test_unit_uprobe_watch|test_unit_deadline_call|test_unit_open_waits|test_unit_runstats|test_integration_hostile|test_integration_slow_report|test_integration_usm_nat|test_integration_usm$|test_integration_usm_share|test_integration_gpu_share|test_integration_agent'
	echo "dev.sh: === fuzz targets (libFuzzer), ${BPFTEL_FUZZ_SECONDS:-60} s each ==="
	sh "$root/tests/fuzz/run.sh" "${BPFTEL_FUZZ_SECONDS:-60}"
	echo "dev.sh: all tests passed (plain, ASan+UBSan, TSan builds, fuzz targets)"
	;;
*)
	echo "usage: tools/dev.sh run [AGENT OPTIONS] | tools/dev.sh test" >&2
	exit 2
	;;
esac
