#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Regenerate vmlinux/<arch>/vmlinux.h from a kernel with BTF.
#   tools/gen-vmlinux.sh [BTF_FILE] [ARCH]
# BTF_FILE defaults to the running kernel's /sys/kernel/btf/vmlinux; ARCH to this
# machine's, spelled as the kernel's arch/ directory (x86, arm64, ...). CO-RE makes one
# header good for every kernel of that arch, so regenerate only for new types.
set -eu
btf=${1:-/sys/kernel/btf/vmlinux}
arch=${2:-$(uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' -e 's/ppc64le/powerpc/' \
	-e 's/s390x/s390/' -e 's/riscv64/riscv/')}
root=$(cd "$(dirname "$0")/.." && pwd)
[ -r "$btf" ] || { echo "gen-vmlinux: cannot read BTF file $btf" >&2; exit 1; }
mkdir -p "$root/vmlinux/$arch"
bpftool btf dump file "$btf" format c >"$root/vmlinux/$arch/vmlinux.h.tmp"
mv "$root/vmlinux/$arch/vmlinux.h.tmp" "$root/vmlinux/$arch/vmlinux.h"
echo "wrote vmlinux/$arch/vmlinux.h from $btf"
