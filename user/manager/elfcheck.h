/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Checks of a possibly hostile ELF file before libelf reads anything by its sizes; used by
 * the symbol resolver (elfsym.c), whose header documents the caps and error codes.
 *
 * API:
 *
 *	#define BPFTEL_ELFCK_NO_SYMBOLS 1u
 *	#define BPFTEL_ELFCK_NAMES_PREAD 2u
 *
 *	int bpftel_elfck__begin(struct bpftel_elfck *ck, int fd);
 *		fstat fd (a regular file, not empty, at most BPFTEL_ELF_MAX_FILE_BYTES), read
 *		the ELF header with our own pread (counts and header tables inside the file and
 *		under their caps), then elf_begin(ELF_C_READ) and check that libelf read the same
 *		header (the file may change meanwhile). Then find the first .dynsym, .symtab,
 *		.gnu.version and .gnu.version_d and check every section header of what may be
 *		read whole: inside the file, under BPFTEL_ELF_MAX_TABLE_BYTES, symbol entry size,
 *		a linked string table. .gnu.version and .gnu.version_d are kept only as the pair
 *		of .dynsym. The section names' table, if any, must lie inside the file and
 *		under BPFTEL_ELF_MAX_SHSTRTAB_BYTES (-E2BIG). No section data is read.
 *		Returns 0, or a negative errno with a one-line reason in ck->msg. elf_version()
 *		must have been called. Call bpftel_elfck__end() in either case.
 *
 *	int bpftel_elfck__begin_flags(struct bpftel_elfck *ck, int fd, unsigned int flags);
 *		The same; BPFTEL_ELFCK_NO_SYMBOLS for a reader of no symbol table (goexe.c,
 *		which reads .gopclntab): their sections are found, their sizes not checked
 *		(a large Go program's .symtab may pass the caps and is never read).
 *		BPFTEL_ELFCK_NAMES_PREAD for a reader that reads the symbol tables' names one
 *		at a time with bpftel_elfck_pread(), never a whole string table (elfaddr.c):
 *		those string tables must lie inside the file, at any size (PyTorch's
 *		libtorch_cuda.so has 63 MiB of .symtab names); the version tables are
 *		dropped (not read, not checked).
 *
 *	void bpftel_elfck__end(struct bpftel_elfck *ck);
 *		elf_end(): every section's data read through ck->elf is freed.
 *
 *	ssize_t bpftel_elfck_pread(int fd, void *buf, size_t len, uint64_t off);
 *		pread until len bytes or the end of the file (EINTR retried): the count
 *		read, or a negative errno. For readers of other sections (goexe.c).
 */
#ifndef BPFTEL_MANAGER_ELFCHECK_H
#define BPFTEL_MANAGER_ELFCHECK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <gelf.h>

/* Section names: a real table is a few hundred bytes. */
#define BPFTEL_ELF_MAX_SHSTRTAB_BYTES (64u << 10)

/* A section that may be read whole: its index (0: absent) and libelf's copy of its header. */
struct bpftel_elfck_table {
	size_t ndx;
	GElf_Shdr sh;
};

struct bpftel_elfck {
	Elf *elf;
	uint64_t fsize;
	size_t shnum, phnum;
	size_t symsz; /* one symbol, for this file's class */
	struct bpftel_elfck_table dynsym, symtab, versym, verdef;
	char msg[200];
};

#define BPFTEL_ELFCK_NO_SYMBOLS 1u
#define BPFTEL_ELFCK_NAMES_PREAD 2u

int bpftel_elfck__begin(struct bpftel_elfck *ck, int fd);
int bpftel_elfck__begin_flags(struct bpftel_elfck *ck, int fd, unsigned int flags);
void bpftel_elfck__end(struct bpftel_elfck *ck);
ssize_t bpftel_elfck_pread(int fd, void *buf, size_t len, uint64_t off);

#endif /* BPFTEL_MANAGER_ELFCHECK_H */
