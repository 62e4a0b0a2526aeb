/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ELF symbol resolver for attaching uprobes by symbol name (libelf based).
 *
 * API:
 *
 *	int bpftel_elf_resolve(const char *path, struct bpftel_elf_sym_req *reqs, size_t n,
 *			       char *err, size_t errlen);
 *		Resolve n symbols of the ELF file at path with one open and one parse.
 *		Returns 0 when the file could be parsed; each reqs[i].offset then holds its own
 *		result: a file offset >= 0, or -ENOENT when that symbol is absent or undefined.
 *		Otherwise returns a negative errno for the whole call, and every reqs[i].offset
 *		is set to that same value:
 *		  -EINVAL	bad arguments (NULL path or reqs, n == 0, a NULL or empty name,
 *				an empty base or version such as "@V", "f@" or "f@@"),
 *		  -ENAMETOOLONG	path of PATH_MAX bytes or more,
 *		  -ENOENT, -EACCES, ...	from open(2),
 *		  -EISDIR	path is a directory,
 *		  -ENOEXEC	not a regular file, not ELF, empty, truncated or malformed, or an
 *				ELF type other than ET_DYN / ET_EXEC,
 *		  -ENOMEM	out of memory.
 *
 *	long bpftel_elf_sym_offset(const char *path, const char *name, char *err, size_t errlen);
 *		One symbol: the file offset >= 0, or a negative errno as above (-ENOENT also
 *		when the file parses but the symbol is absent).
 *
 *	On failure err (when not NULL and errlen > 0) receives a one-line, NUL-terminated
 *	reason; on success it is set to "". The library never prints.
 *
 * The offset is what libbpf's bpf_program__attach_uprobe_opts() takes as func_offset with
 * opts.func_name NULL: st_value converted to a file offset through the PT_LOAD segment
 * holding it (st_value - p_vaddr + p_offset), or, when no PT_LOAD holds it, through the
 * section it is defined in (st_value - sh_addr + sh_offset).
 *
 * Candidates are the defined functions (STT_FUNC or STT_GNU_IFUNC, st_shndx != SHN_UNDEF,
 * st_value != 0) of .dynsym, then .symtab. Names:
 *	"name@@VER"	only the default version VER of name;
 *	"name@VER"	version VER of name, default or not (hidden);
 *	"name"		the default version when name is versioned, else the unversioned
 *			symbol; when only non-default (hidden) versions exist, the one with the
 *			highest version index (in practice the newest of them).
 * Versions of .dynsym come from .gnu.version and .gnu.version_d; .symtab names that
 * literally contain "@" or "@@" (as GNU ld writes them) are understood the same way.
 * Among equally good candidates the first one wins (.dynsym before .symtab), except that a
 * global or weak symbol is preferred to a local one.
 *
 * The file is opened O_RDONLY | O_CLOEXEC | O_NONBLOCK (a FIFO never blocks the caller) and
 * read with pread (ELF_C_READ, no mmap: a file truncated under us gives an error, not
 * SIGBUS). Everything is released on every path. Thread-safe: no shared state besides the
 * one-time elf_version() call.
 */
#ifndef BPFTEL_MANAGER_ELFSYM_H
#define BPFTEL_MANAGER_ELFSYM_H

#include <stddef.h>

struct bpftel_elf_sym_req {
	const char *name; /* "SSL_write", or with a version: "SSL_write@@OPENSSL_3.0.0" /
			     "foo@VERS_1" */
	long offset;	  /* out: file offset for a uprobe, or negative errno */
};

int bpftel_elf_resolve(const char *path, struct bpftel_elf_sym_req *reqs, size_t n, char *err,
		       size_t errlen);

long bpftel_elf_sym_offset(const char *path, const char *name, char *err, size_t errlen);

#endif /* BPFTEL_MANAGER_ELFSYM_H */
