// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>

#include "harness.h"

void bpftel_test_require_bpf(void)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	int fd;

	fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "bpftel_probe", "GPL", insns, 2, NULL);
	if (fd >= 0) {
		close(fd);
		return;
	}
	printf("SKIP: cannot load BPF programs (%s); run as root\n", strerror(errno));
	exit(77);
}

int bpftel_test_run(const struct bpf_program *prog, void *ctx, size_t ctx_size, int *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = ctx, .ctx_size_in = ctx_size);
	int err;

	err = bpf_prog_test_run_opts(bpf_program__fd(prog), &opts);
	if (err)
		return -errno;
	if (retval)
		*retval = (int)opts.retval;
	return 0;
}

__u64 bpftel_test_percpu_sum(int map_fd, __u32 key)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	__u64 sum = 0, *vals;

	if (ncpu <= 0)
		return 0;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return 0;
	if (!bpf_map_lookup_elem(map_fd, &key, vals)) {
		for (i = 0; i < ncpu; i++)
			sum += vals[i];
	}
	free(vals);
	return sum;
}

int bpftel_test_percpu_clear(int map_fd, __u32 nkeys)
{
	int ncpu = libbpf_num_possible_cpus(), err = 0;
	__u64 *zeros;
	__u32 key;

	if (ncpu <= 0)
		return -EINVAL;
	zeros = calloc(ncpu, sizeof(*zeros));
	if (!zeros)
		return -ENOMEM;
	for (key = 0; key < nkeys && !err; key++)
		err = bpf_map_update_elem(map_fd, &key, zeros, BPF_ANY) ? -errno : 0;
	free(zeros);
	return err;
}

/* A BPF object this process holds an fd of, by what the fd's link names. */
static void count_fd(struct bpftel_obj_counts *out, const char *name)
{
	char path[300], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%s", name);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return; /* closed meanwhile, by another thread */
	target[n] = '\0';
	out->fds++;
	if (!strcmp(target, "anon_inode:bpf-prog"))
		out->progs++;
	else if (!strcmp(target, "anon_inode:bpf-map"))
		out->maps++;
	else if (!strcmp(target, "anon_inode:bpf_link"))
		out->links++;
}

void bpftel_test_count_objects(struct bpftel_obj_counts *out)
{
	struct dirent *de;
	DIR *dir;

	memset(out, 0, sizeof(*out));
	dir = opendir("/proc/self/fd");
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (de->d_name[0] != '.')
			count_fd(out, de->d_name);
	}
	closedir(dir);
	out->fds--; /* the directory's own fd */
}

void bpftel_test_baseline(struct bpftel_obj_counts *out)
{
	struct bpftel_obj_counts prev;
	int tries;

	bpftel_test_count_objects(&prev);
	for (tries = 0; tries < 60; tries++) {
		usleep(50000);
		bpftel_test_count_objects(out);
		if (!memcmp(out, &prev, sizeof(prev)))
			return;
		prev = *out;
	}
}

void bpftel_test_settle_objects(const struct bpftel_obj_counts *base, struct bpftel_obj_counts *out)
{
	int tries;

	for (tries = 0; tries < 3000; tries++) {
		bpftel_test_count_objects(out);
		if (!memcmp(out, base, sizeof(*out)))
			return;
		usleep(10000);
	}
	fprintf(stderr, "objects did not settle: progs %u/%u maps %u/%u links %u/%u fds %u/%u\n",
		out->progs, base->progs, out->maps, base->maps, out->links, base->links, out->fds,
		base->fds);
	bpftel_test_list_fds(stderr);
}

void bpftel_test_list_fds(FILE *out)
{
	char path[300], target[256];
	struct dirent *de;
	ssize_t n;
	DIR *dir;

	dir = opendir("/proc/self/fd");
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		fprintf(out, "  fd %s -> %s\n", de->d_name, target);
	}
	closedir(dir);
}

static int capture_record(void *ctx, void *data, size_t size)
{
	struct bpftel_rb_capture *cap = ctx;
	struct bpftel_rb_record *rec;

	if (cap->n == BPFTEL_RB_CAPTURE_MAX) {
		cap->dropped++;
		return 0;
	}
	rec = &cap->rec[cap->n];
	rec->data = malloc(size);
	if (!rec->data)
		return -ENOMEM;
	memcpy(rec->data, data, size);
	rec->size = size;
	cap->n++;
	return 0;
}

static void capture_reset(struct bpftel_rb_capture *cap)
{
	size_t i;

	for (i = 0; i < cap->n; i++)
		free(cap->rec[i].data);
	cap->n = 0;
	cap->dropped = 0;
}

int bpftel_rb_capture__open(struct bpftel_rb_capture *cap, int map_fd)
{
	memset(cap, 0, sizeof(*cap));
	cap->rb = ring_buffer__new(map_fd, capture_record, cap, NULL);
	return cap->rb ? 0 : -errno;
}

int bpftel_rb_capture__drain(struct bpftel_rb_capture *cap)
{
	int err;

	capture_reset(cap);
	err = ring_buffer__consume(cap->rb);
	return err < 0 ? err : (int)cap->n;
}

void bpftel_rb_capture__close(struct bpftel_rb_capture *cap)
{
	capture_reset(cap);
	ring_buffer__free(cap->rb);
	cap->rb = NULL;
}
