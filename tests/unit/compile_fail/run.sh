#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# compile_fail/run.sh CC SOURCE_ROOT FILE PATTERN
# FILE must compile with -DCONTROL and must fail without it, with PATTERN in the error.
set -u
cc=$1 root=$2 file=$3 pattern=$4
flags="-std=gnu11 -Wall -Wextra -Werror -fsyntax-only -I$root"
if ! out=$("$cc" $flags -DCONTROL "$file" 2>&1); then
	echo "FAIL: control variant of $file does not compile:"
	echo "$out"
	exit 1
fi
if out=$("$cc" $flags "$file" 2>&1); then
	echo "FAIL: $file compiled, but a hook of the wrong type must not"
	exit 1
fi
if ! echo "$out" | grep -q "$pattern"; then
	echo "FAIL: $file failed for another reason than '$pattern':"
	echo "$out"
	exit 1
fi
echo "ok: $file is rejected: $(echo "$out" | grep -m1 "$pattern")"
