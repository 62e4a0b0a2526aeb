/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ELF symbol resolver for attaching uprobes by symbol name (libelf based).
 *
 * API:
 *
 *	int bpftel_elf_resolve_fd(int fd, const char *label, struct bpftel_elf_sym_req *reqs,
 *				  size_t n, char *err, size_t errlen);
 *		Resolve n symbols of the ELF file open at fd, with one parse. The caller opened
 *		it (safely, by its own rules); here it is fstat()ed and read with pread only (its
 *		file offset is neither used nor moved), never closed. label names the file in
 *		err (the caller's path, say); NULL gives "fd N".
 *		Returns 0 when the file could be parsed; each reqs[i].offset then holds its own
 *		result: a file offset >= 0, or -ENOENT when that symbol is absent or undefined.
 *		Otherwise returns a negative errno for the whole call, and every reqs[i].offset
 *		is set to that same value:
 *		  -EINVAL	bad arguments (NULL reqs, n == 0, a NULL or empty name, an empty
 *				base or version such as "@V", "f@" or "f@@"),
 *		  -EBADF	fd is not an open file descriptor,
 *		  -EISDIR	fd is a directory,
 *		  -ENOEXEC	not a regular file (FIFO, device, socket), not ELF, empty,
 *				truncated or malformed (among others: a header table or a table
 *				that runs past the end of the file, a symbol table whose entry size
 *				is not the ELF symbol size, a string table that does not end in
 *				NUL, a header that changed while it was read), or an ELF type other
 *				than ET_DYN / ET_EXEC,
 *		  -EFBIG	too large: the file is over BPFTEL_ELF_MAX_FILE_BYTES,
 *		  -E2BIG	a count or a table over its cap: more than BPFTEL_ELF_MAX_SECTIONS
 *				sections or BPFTEL_ELF_MAX_PHDRS program headers, or a table that
 *				would be read whole (.dynsym, .symtab, their string tables,
 *				.gnu.version, .gnu.version_d) over BPFTEL_ELF_MAX_TABLE_BYTES,
 *		  -ENOMEM	out of memory,
 *		  -EIO, ...	from fstat(2) or pread(2).
 *
 *	int bpftel_elf_resolve(const char *path, struct bpftel_elf_sym_req *reqs, size_t n,
 *			       char *err, size_t errlen);
 *		The same for the file at path, opened here with O_RDONLY | O_CLOEXEC |
 *		O_NONBLOCK | O_NOCTTY (a FIFO never blocks the caller, a tty never becomes its
 *		controlling one) and closed before returning. Besides the codes above:
 *		  -EINVAL	also a NULL or empty path,
 *		  -ENAMETOOLONG	path of PATH_MAX bytes or more,
 *		  -ENOENT, -EACCES, ...	from open(2).
 *
 *	long bpftel_elf_sym_offset_fd(int fd, const char *label, const char *name, char *err,
 *				      size_t errlen);
 *	long bpftel_elf_sym_offset(const char *path, const char *name, char *err, size_t errlen);
 *		One symbol: the file offset >= 0, or a negative errno as above (-ENOENT also
 *		when the file parses but the symbol is absent).
 *
 *	On failure err (when not NULL and errlen > 0) receives a one-line, NUL-terminated
 *	reason; on success it is set to "". The library never prints.
 *
 * Hostile files: the agent runs as root and reads libraries that any user may have crafted.
 * Every count or size that libelf would allocate or read by is checked against the caps
 * below first: the ELF header's section and program header counts with our own pread
 * before elf_begin() (which allocates by the section count), each table's section header
 * before its data is read. At most one symbol table is resident at a time, with its string
 * table (and, for .dynsym, .gnu.version and .gnu.version_d): .dynsym is released before
 * .symtab is read, through a second libelf handle, and .symtab is read only when it could
 * still change an answer (a request that .dynsym left unresolved, or matched only by a
 * hidden version or a local symbol). At most BPFTEL_ELF_MAX_VERDEFS version definitions are
 * read; later ones are ignored.
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
 * Files are read with pread (ELF_C_READ, no mmap: a file truncated under us gives an error,
 * not SIGBUS). Everything is released on every path. Thread-safe: no shared state besides
 * the one-time elf_version() call.
 */
#ifndef BPFTEL_MANAGER_ELFSYM_H
#define BPFTEL_MANAGER_ELFSYM_H

#include <stddef.h>

/* Larger than any shared library worth probing; a sparse file claims any size for free. */
#define BPFTEL_ELF_MAX_FILE_BYTES (1ULL << 30)
/* libelf reads a table whole; real ones stay well below (node's .strtab: 7.5 MiB). */
#define BPFTEL_ELF_MAX_TABLE_BYTES (16ULL << 20)
/* elf_begin() allocates per section before anything else looks at the count. */
#define BPFTEL_ELF_MAX_SECTIONS 32768
/* All program headers are loaded and searched per symbol; real files have about a dozen. */
#define BPFTEL_ELF_MAX_PHDRS 4096
/* Version indices are 15 bits (.gnu.version): further definitions cannot be referenced. */
#define BPFTEL_ELF_MAX_VERDEFS 32768

struct bpftel_elf_sym_req {
	const char *name; /* "SSL_write", or with a version: "SSL_write@@OPENSSL_3.0.0" /
			     "foo@VERS_1" */
	long offset;	  /* out: file offset for a uprobe, or negative errno */
	/* out: [code_lo, code_hi), the file bytes of the executable PT_LOAD that holds it
	 * (empty when none does, or it reaches past the file's end). Inside one segment a
	 * file offset moves as the address does: a call's displacement from code there
	 * lands where the call goes only while it stays inside it. */
	long code_lo, code_hi;
};

int bpftel_elf_resolve_fd(int fd, const char *label, struct bpftel_elf_sym_req *reqs, size_t n,
			  char *err, size_t errlen);

int bpftel_elf_resolve(const char *path, struct bpftel_elf_sym_req *reqs, size_t n, char *err,
		       size_t errlen);

long bpftel_elf_sym_offset_fd(int fd, const char *label, const char *name, char *err,
			      size_t errlen);

long bpftel_elf_sym_offset(const char *path, const char *name, char *err, size_t errlen);

#endif /* BPFTEL_MANAGER_ELFSYM_H */
