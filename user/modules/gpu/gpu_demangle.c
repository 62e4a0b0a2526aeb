// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel names demangled with libiberty's cplus_demangle_v3_callback, GNU's Itanium C++
 * ABI demangler (binutils', gdb's and perf's), the one libstdc++'s __cxa_demangle wraps.
 *
 * Why the callback and not __cxa_demangle: a mangled name's back-references may each
 * repeat all that came before them, so what a name demangles to can grow exponentially
 * with its length. A 251-byte name of 31 nested B<S_, S_> (tests/gpu/cuda_pattern.c's
 * crafted kernel) demangles to ~7 GB; __cxa_demangle builds all of it on the heap
 * before returning, for minutes, and any process can give its kernel host stub such a
 * name. The callback variant keeps its state on the stack (never malloc), prints in
 * pieces, and we stop it with longjmp as soon as out is full: the work is bounded by
 * the size of out, and the result is what snprintf would have cut the whole to.
 */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <libiberty/demangle.h>

#include "gpu_demangle.h"
#include "user/manager/elfaddr.h"

struct demangled {
	char *out;
	size_t size, len; /* out[len] is its NUL; len < size */
	jmp_buf full;
};

static void demangled_put(const char *s, size_t n, void *arg)
{
	struct demangled *d = arg;
	size_t room = d->size - 1 - d->len, k = n < room ? n : room;

	memcpy(d->out + d->len, s, k);
	d->len += k;
	d->out[d->len] = '\0';
	if (n >= room) /* out is full: the rest would be cut anyway */
		longjmp(d->full, 1);
}

void bpftel_gpu_demangle(const char *in, char *out, size_t size)
{
	struct demangled d = {.out = out, .size = size};

	if (!size)
		return;
	out[0] = '\0';
	if (!strncmp(in, "_Z", 2) && strnlen(in, BPFTEL_ELF_NAME_MAX) < BPFTEL_ELF_NAME_MAX) {
		if (setjmp(d.full))
			return;
		if (cplus_demangle_v3_callback(in, DMGL_PARAMS | DMGL_TYPES, demangled_put, &d))
			return;
	}
	/* Not a C++ name, or not one that demangles (what was printed of it is dropped). */
	snprintf(out, size, "%s", in);
}
