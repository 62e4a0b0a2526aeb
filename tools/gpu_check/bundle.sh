#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tools/gpu_check/bundle.sh [DIR]: put the agent and the CLI built in build/, with the
# shared libraries they need besides glibc's, in DIR (default .gpucheck, which .gitignore
# names; copy it with the repository), so that they run on a machine with a
# GPU whose image has none of our build packages. bin/ holds wrappers that set
# LD_LIBRARY_PATH for our binaries alone: the CUDA programs keep their own libraries.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.gpucheck}
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/real" "$dir/lib"
for exe in "$root/build/user/bpftel-agent" "$root/build/tools/bpftel"; do
	[ -x "$exe" ] || { echo "bundle.sh: $exe is not built" >&2; exit 1; }
	cp "$exe" "$dir/real/"
	ldd "$exe" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
		case "$(basename "$lib")" in
		libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) ;;
		*) cp -L "$lib" "$dir/lib/" ;;
		esac
	done
	name=$(basename "$exe")
	cat >"$dir/bin/$name" <<WRAP
#!/bin/sh
d=\$(dirname "\$(readlink -f "\$0")")/..
LD_LIBRARY_PATH=\$d/lib exec "\$d/real/$name" "\$@"
WRAP
	chmod +x "$dir/bin/$name"
done
du -sh "$dir"
