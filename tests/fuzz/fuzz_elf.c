// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the ELF readers (user/manager/elfsym.c, elfaddr.c, elfcheck.c) and
 * the prologue decoder (prologue.c) on a library file anyone may have crafted and named
 * libssl.so.3 or libcudart.so.13: the agent, as root, reads every such file a process
 * maps. The input is the file (in a memfd: the readers take an fd); its bytes are also
 * decoded as a function's start.
 *
 * What must hold besides "no crash, no leak, no sanitizer report": the errors are the
 * documented ones, a whole-call error is in every request, names come back
 * NUL-terminated, and the decoders answer within their input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "user/manager/elfaddr.h"
#include "user/manager/elfsym.h"
#include "user/manager/prologue.h"

#define NREQ 5

static bool documented(long err)
{
	return err == -ENOEXEC || err == -EFBIG || err == -E2BIG || err == -ENOMEM ||
	       err == -EIO;
}

static void check_resolve(int fd, long *found)
{
	struct bpftel_elf_sym_req r[NREQ] = {
		{.name = "SSL_write"}, {.name = "SSL_read@@OPENSSL_3.0.0"}, {.name = "f@V1"},
		{.name = "cudaLaunchKernel"}, {.name = "_start"},
	};
	char err[128];
	int ret, i;

	ret = bpftel_elf_resolve_fd(fd, "fuzz", r, NREQ, err, sizeof(err));
	if (memchr(err, '\0', sizeof(err)) == NULL)
		abort();
	if (ret) {
		if (!documented(ret) || !*err)
			abort();
		for (i = 0; i < NREQ; i++)
			if (r[i].offset != ret)
				abort();
		return;
	}
	for (i = 0; i < NREQ; i++) {
		if (r[i].offset < 0 && r[i].offset != -ENOENT)
			abort();
		if (r[i].offset >= 0 && !*found)
			*found = r[i].offset;
	}
}

static void check_symbolize(int fd, size_t size, long found)
{
	struct bpftel_elf_addr_req a[3] = {{.offset = 0}, {.offset = (long)size / 2},
					   {.offset = found}};
	char err[128];
	int ret, i;

	ret = bpftel_elf_symbolize_fd(fd, "fuzz", a, 3, err, sizeof(err));
	if (memchr(err, '\0', sizeof(err)) == NULL)
		abort();
	if (ret) {
		if (!documented(ret))
			abort();
		return;
	}
	for (i = 0; i < 3; i++)
		if (!memchr(a[i].name, '\0', sizeof(a[i].name)))
			abort();
}

static void check_prologue(const uint8_t *data, size_t size)
{
	long callee = 0;

	if (bpftel_prologue_skip(data, size, 3) > size)
		abort();
	if (bpftel_prologue_callee(data, size, 2, &callee))
		(void)bpftel_code_calls(data, size, callee);
	(void)bpftel_insn_emulated(data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	long found = 0;
	int fd;

	check_prologue(data, size);
	fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	check_resolve(fd, &found);
	check_symbolize(fd, size, found);
	close(fd);
	return 0;
}
