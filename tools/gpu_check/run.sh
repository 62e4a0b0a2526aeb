#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tools/gpu_check/run.sh [BUNDLE [OUT [gpu_check.py OPTIONS]]]: on a machine with a GPU, as root, from the
# repository's root: say what the kernel offers BPF, build real_cuda with the machine's
# nvcc, and run gpu_check.py with the agent from BUNDLE (tools/gpu_check/bundle.sh,
# default .gpucheck). OUT (default $OUT, else /tmp/gpu_check) gets its outputs.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${1:-$root/.gpucheck}
[ $# -gt 0 ] && shift
out=${1:-${OUT:-/tmp/gpu_check}}
[ $# -gt 0 ] && shift
bin=/tmp/gpu_check_bin
mkdir -p "$out" "$bin"

echo "== the machine"
uname -r
nvidia-smi -L 2>&1 | head -4
ls -la /sys/kernel/btf/vmlinux 2>&1
for fs in tracefs:/sys/kernel/tracing debugfs:/sys/kernel/debug bpf:/sys/fs/bpf; do
	mountpoint -q "${fs#*:}" || mount -t "${fs%%:*}" none "${fs#*:}" 2>&1
	mountpoint "${fs#*:}" 2>&1
done
cat /proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/unprivileged_bpf_disabled 2>&1
ls /sys/bus/event_source/devices/ 2>&1 | tr '\n' ' '
echo

echo "== real_cuda, built with this machine's nvcc"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda=$(dirname "$(dirname "$nvcc")")
"$nvcc" --version | tail -2
"$nvcc" -arch=sm_90 -cudart shared -o "$bin/real_cuda" "$root/tools/gpu_check/real_cuda.cu" \
	-L"$cuda/lib64/stubs" -lcuda &&
	"$nvcc" -arch=sm_90 -cubin -o "$bin/drv_axpy.cubin" "$root/tools/gpu_check/drv_axpy.cu" ||
	exit 1
ldd "$bin/real_cuda" | grep -E 'cuda'

echo "== the check"
python3 "$root/tools/gpu_check/gpu_check.py" --agent "$bundle/bin/bpftel-agent" \
	--cli "$bundle/bin/bpftel" --bin "$bin" --out "$out" "$@"
