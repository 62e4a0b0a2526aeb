// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The GPU and USM objects are built without CO-RE (BPF_NO_PRESERVE_ACCESS_INDEX): they
 * read only ABI layouts, so libbpf loads them without the kernel's BTF, and a restart
 * is ~45 ms shorter. A CO-RE access that slips into them would make libbpf read that
 * BTF again, silently. This test reads .BTF.ext and fails on any CO-RE relocation there.
 * The watcher's object uses CO-RE for real (files and dentries): it is the control that
 * shows the reader finds relocations where there are some.
 *
 * Usage: test_unit_core_free GPU_OBJ USM_OBJ WATCHER_OBJ
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

/* The head of .BTF.ext (include/uapi/linux/btf.h has no type for it). */
struct btf_ext_head {
	uint16_t magic;
	uint8_t version;
	uint8_t flags;
	uint32_t hdr_len;
	uint32_t func_info_off, func_info_len;
	uint32_t line_info_off, line_info_len;
	uint32_t core_relo_off, core_relo_len; /* present when hdr_len covers them */
};

static char **paths;

/* Bytes of CO-RE relocation records in the object at path; -1 if it cannot be read. */
static long core_relo_bytes(const char *path)
{
	struct btf_ext_head h = {0};
	Elf_Scn *scn = NULL;
	long ret = -1;
	GElf_Shdr sh;
	size_t shstrndx;
	Elf_Data *d;
	Elf *elf;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		goto out;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			break;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".BTF.ext"))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || d->d_size < offsetof(struct btf_ext_head, core_relo_off))
			break;
		memcpy(&h, d->d_buf, d->d_size < sizeof(h) ? d->d_size : sizeof(h));
		if (h.magic != 0xeB9F)
			break;
		ret = h.hdr_len >= sizeof(h) ? (long)h.core_relo_len : 0;
		break;
	}
out:
	elf_end(elf);
	close(fd);
	return ret;
}

static void test_gpu_object_is_core_free(void **state)
{
	(void)state;
	assert_int_equal(core_relo_bytes(paths[1]), 0);
}

static void test_usm_object_is_core_free(void **state)
{
	(void)state;
	assert_int_equal(core_relo_bytes(paths[2]), 0);
}

static void test_watcher_object_has_core_relocations(void **state)
{
	(void)state;
	assert_true(core_relo_bytes(paths[3]) > 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_object_is_core_free),
		cmocka_unit_test(test_usm_object_is_core_free),
		cmocka_unit_test(test_watcher_object_has_core_relocations),
	};

	if (argc != 4 || elf_version(EV_CURRENT) == EV_NONE) {
		fprintf(stderr, "usage: %s GPU_OBJ USM_OBJ WATCHER_OBJ\n", argv[0]);
		return 2;
	}
	paths = argv;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
