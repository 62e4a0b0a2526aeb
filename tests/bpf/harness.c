// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
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

/*
 * Each fd of this process (its own directory's aside) with what its link names: fn(fd,
 * target, ctx) until fn returns true (then true). An fd closed meanwhile, by another
 * thread, is skipped.
 */
static bool for_each_fd(bool (*fn)(const char *fd, const char *target, void *ctx), void *ctx)
{
	char path[300], target[PATH_MAX];
	bool stop = false;
	struct dirent *de;
	int self;
	ssize_t n;
	DIR *dir;

	dir = opendir("/proc/self/fd");
	if (!dir)
		return false;
	self = dirfd(dir);
	while (!stop && (de = readdir(dir))) {
		if (de->d_name[0] == '.' || atoi(de->d_name) == self)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		stop = fn(de->d_name, target, ctx);
	}
	closedir(dir);
	return stop;
}

/* A BPF object this process holds an fd of, by what the fd's link names. */
static bool count_fd(const char *fd, const char *target, void *ctx)
{
	struct bpftel_obj_counts *out = ctx;

	(void)fd;
	out->fds++;
	if (!strcmp(target, "anon_inode:bpf-prog"))
		out->progs++;
	else if (!strcmp(target, "anon_inode:bpf-map"))
		out->maps++;
	else if (!strcmp(target, "anon_inode:bpf_link"))
		out->links++;
	return false;
}

void bpftel_test_count_objects(struct bpftel_obj_counts *out)
{
	memset(out, 0, sizeof(*out));
	for_each_fd(count_fd, out);
}

static bool is_target(const char *fd, const char *target, void *ctx)
{
	(void)fd;
	return !strcmp(target, ctx);
}

bool bpftel_test_holds_fd_of(const char *real)
{
	return for_each_fd(is_target, (void *)real);
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

static bool print_fd(const char *fd, const char *target, void *ctx)
{
	fprintf(ctx, "  fd %s -> %s\n", fd, target);
	return false;
}

void bpftel_test_list_fds(FILE *out)
{
	for_each_fd(print_fd, out);
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
