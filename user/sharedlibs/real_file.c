// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The files the agent's own mappings are of, through a task_vma iterator (real_file.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "real_file.h"
#include "bpf/real_file.h"
#include "real_file.skel.h"
#include "user/common/ctl.h"
#include "user/common/kdev.h"
#include "user/common/log.h"

/* The iterator, and who uses it: one reference for all holders, one per lookup. */
struct real_files {
	struct real_file *skel;
	struct bpf_link *link;
	unsigned int refs;
};

/* A load that failed (ENOMEM under a memory limit, a transient refusal) is tried
 * again at a lookup this long after: without the iterator, an overlay over FUSE looks
 * like any overlay (its statfs is the overlay's), and its file would be parsed on a
 * thread that waits on FUSE for ever. */
#define RETRY_S 30

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct real_files *cur;
static unsigned int holders;
static bool warned;
static __u64 last_try_ns;

static void real_files_destroy(struct real_files *r)
{
	if (!r)
		return;
	bpf_link__destroy(r->link);
	real_file__destroy(r->skel);
	free(r);
}

static struct real_files *real_files_load(int *err)
{
	LIBBPF_OPTS(bpf_iter_attach_opts, opts);
	union bpf_iter_link_info info = {};
	struct real_files *r = calloc(1, sizeof(*r));

	*err = -ENOMEM;
	if (!r)
		return NULL;
	r->skel = real_file__open();
	if (!r->skel) {
		*err = -errno;
		goto fail;
	}
	r->skel->rodata->self_tgid = getpid();
	*err = real_file__load(r->skel);
	if (*err)
		goto fail;
	/* The main thread's mappings are the process's. Kernels before 6.1 take no such
	 * filter, and would walk every task of the host at each lookup; they need no
	 * iterator either: their overlayfs maps the layer's file itself, which stat of the
	 * mapping shows. */
	info.task.tid = getpid();
	opts.link_info = &info;
	opts.link_info_len = sizeof(info);
	r->link = bpf_program__attach_iter(r->skel->progs.real_file_vmas, &opts);
	if (!r->link) {
		*err = -errno;
		goto fail;
	}
	r->refs = 1;
	*err = 0;
	return r;
fail:
	real_files_destroy(r);
	return NULL;
}

/* Load the iterator for its holders, unless one is there. Loaded without the lock (BPF
 * load is slow); a racing holder's may win. */
static int real_files_try_load(void)
{
	struct real_files *r = NULL;
	bool warn = false, recovered;
	int err = 0;

	r = real_files_load(&err);
	pthread_mutex_lock(&lock);
	last_try_ns = bpftel_mono_ns();
	if (r && !cur && holders) {
		cur = r;
		r = NULL;
	}
	recovered = !err && warned;
	if (err && !warned)
		warned = warn = true;
	pthread_mutex_unlock(&lock);
	real_files_destroy(r);
	if (recovered)
		pr_info("real_file: the task_vma iterator loaded at last");
	if (warn)
		pr_warn("real_file: no task_vma iterator (%s): files on overlayfs are known by "
			"what stat shows, as the overlay's, until it loads (tried again every "
			"%d s)",
			strerror(-err), RETRY_S);
	return err;
}

int bpftel_real_files_get(void)
{
	pthread_mutex_lock(&lock);
	holders++;
	if (cur) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	pthread_mutex_unlock(&lock);
	return real_files_try_load();
}

static void real_files_unref_locked(struct real_files *r, struct real_files **gone)
{
	if (--r->refs == 0)
		*gone = r;
}

void bpftel_real_files_put(void)
{
	struct real_files *gone = NULL;

	pthread_mutex_lock(&lock);
	if (holders && --holders == 0 && cur) {
		real_files_unref_locked(cur, &gone);
		cur = NULL;
	}
	pthread_mutex_unlock(&lock);
	real_files_destroy(gone);
}

/*
 * One walk of our mappings, in address order, until addr's. A walk's end is where the
 * addresses stop rising: the kernel (6.18 here) may hand a read after the end the last
 * part of the walk again.
 */
static int lookup(struct real_files *r, unsigned long addr, struct bpftel_real_file *out)
{
	struct real_file_rec recs[128];
	__u64 last = 0;
	ssize_t n, i;
	int fd;

	fd = bpf_iter_create(bpf_link__fd(r->link));
	if (fd < 0)
		return -errno;
	/* A read returns whole records: its size is a multiple of one. */
	while ((n = read(fd, recs, sizeof(recs))) > 0) {
		for (i = 0; i < n / (ssize_t)sizeof(recs[0]); i++) {
			if (recs[i].start <= last && last) {
				n = 0;
				break;
			}
			last = recs[i].start;
			if (recs[i].start != addr)
				continue;
			out->dev = bpftel_kdev(recs[i].dev);
			out->ino = recs[i].ino;
			out->magic = recs[i].magic;
			out->sdev = bpftel_kdev(recs[i].sdev);
			close(fd);
			return 0;
		}
		if (!n)
			break;
	}
	n = n < 0 ? -errno : -ENOENT;
	close(fd);
	return (int)n;
}

int bpftel_real_file_at(unsigned long addr, struct bpftel_real_file *out)
{
	struct real_files *r, *gone = NULL;
	__u64 now = bpftel_mono_ns();
	bool retry;
	int err;

	pthread_mutex_lock(&lock);
	retry = !cur && holders && now - last_try_ns >= RETRY_S * 1000000000ull;
	if (retry)
		last_try_ns = now; /* one try at a time */
	pthread_mutex_unlock(&lock);
	if (retry)
		real_files_try_load();
	pthread_mutex_lock(&lock);
	r = cur;
	if (r)
		r->refs++;
	pthread_mutex_unlock(&lock);
	if (!r)
		return -ENOENT;
	err = lookup(r, addr, out);
	pthread_mutex_lock(&lock);
	real_files_unref_locked(r, &gone);
	pthread_mutex_unlock(&lock);
	real_files_destroy(gone);
	return err;
}
