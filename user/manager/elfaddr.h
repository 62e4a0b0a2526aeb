/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The other direction of elfsym.h: file offsets (of code a process runs, found through
 * its /proc/<pid>/maps) to the names of the functions that hold them. Used to name the
 * kernels a CUDA program launches by their host functions.
 *
 * API:
 *
 *	int bpftel_elf_symbolize_fd(int fd, const char *label, struct bpftel_elf_addr_req *reqs,
 *				    size_t n, char *err, size_t errlen);
 *		For each reqs[i].offset, the defined function (STT_FUNC / STT_GNU_IFUNC) of
 *		.dynsym or .symtab whose [start, start + size) holds it (start: its st_value as a
 *		file offset, through the PT_LOAD holding it), into reqs[i].name without any
 *		"@version" ("" when none does). A symbol that starts exactly there wins over one
 *		that only covers it, a global over a local. Returns 0, or a negative errno for
 *		the whole call with a one-line reason in err, as elfsym.h says.
 *
 * The file is checked by elfcheck.c first (every cap of elfsym.h holds here too, but
 * for the symbol tables' string tables), and read one symbol table at a time, each in
 * its own libelf handle. Names are not read with their table: only each request's
 * chosen symbol's, with pread, under BPFTEL_ELF_NAME_MAX bytes, so that a string
 * table may be of any size inside the file (PyTorch's libtorch_cuda.so has 63 MiB of
 * .symtab names: over the 16 MiB cap of a table read whole).
 */
#ifndef BPFTEL_MANAGER_ELFADDR_H
#define BPFTEL_MANAGER_ELFADDR_H

#include <stddef.h>

/* A mangled name is demangled whole or not at all, so it is kept whole before it is
 * demangled (PyTorch's host stubs' names run past 255 bytes), up to 1 KiB: libiberty's
 * demangler declines longer names (its recursion limit: 2 components a byte, at most
 * 2048), which are shown mangled, cut. */
#define BPFTEL_ELF_NAME_MAX 1024

struct bpftel_elf_addr_req {
	long offset;			/* in */
	char name[BPFTEL_ELF_NAME_MAX]; /* out, truncated */
};

int bpftel_elf_symbolize_fd(int fd, const char *label, struct bpftel_elf_addr_req *reqs, size_t n,
			    char *err, size_t errlen);

#endif /* BPFTEL_MANAGER_ELFADDR_H */
