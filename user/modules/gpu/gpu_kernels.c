// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel names for the GPU module: the BPF side counts launches per (process, host
 * function) for cudaLaunchKernel and per (process, CUfunction) for cuLaunchKernel; here
 * a host function's address is resolved to the symbol that holds it in the process's
 * ELF objects (/proc/<pid>/maps, the file opened through /proc/<pid>/map_files as the
 * uprobe registry does, read by the capped reader of user/manager/elfaddr.h), and a
 * CUfunction gets the name cuModuleGetFunction was given. Names are demangled with
 * __cxa_demangle from libstdc++: it is the Itanium C++ ABI's own demangler, shipped as a
 * shared library on every system that runs CUDA programs (they are C++), while Debian
 * has libiberty's only as a static archive. Input is capped (GPU_KNAME_LEN, or
 * BPFTEL_ELF_NAME_MAX) before it is demangled.
 *
 * Resolution opens and parses files of other processes: never under the module's lock,
 * once per (process, address): results, misses included, are cached until the process
 * is swept; and at most RESOLVE_BUDGET of them per report, so that a process launching
 * thousands of distinct host functions costs a report (a /metrics scrape) a bounded
 * number of parses. The rest stay unnamed until a later report names them.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "gpu_kernels.h"
#include "user/manager/elfaddr.h"
#include "user/sharedlibs/procfile.h"

/* libstdc++ (cxxabi.h is C++ only). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define CACHE_SLOTS    1024
#define MAPS_MAX_LINE  100000 /* lines of /proc/<pid>/maps read at most */
#define RESOLVE_BUDGET 32     /* host functions resolved per report at most */

struct cache_entry {
	__u32 pid; /* 0: free */
	__u64 addr;
	char name[BPFTEL_GPU_KERNEL_NAME];
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cache_entry cache[CACHE_SLOTS];

static size_t slot_of(__u32 pid, __u64 addr)
{
	return (size_t)(((addr ^ pid) * 0x9e3779b97f4a7c15ull) >> 32) % CACHE_SLOTS;
}

static bool cache_get(__u32 pid, __u64 addr, char *name, size_t size)
{
	struct cache_entry *e = &cache[slot_of(pid, addr)];
	bool hit;

	pthread_mutex_lock(&cache_lock);
	hit = e->pid == pid && e->addr == addr;
	if (hit)
		snprintf(name, size, "%s", e->name);
	pthread_mutex_unlock(&cache_lock);
	return hit;
}

/* A slot taken by another (process, address) is replaced: a later miss parses again. */
static void cache_put(__u32 pid, __u64 addr, const char *name)
{
	struct cache_entry *e = &cache[slot_of(pid, addr)];

	pthread_mutex_lock(&cache_lock);
	e->pid = pid;
	e->addr = addr;
	snprintf(e->name, sizeof(e->name), "%s", name);
	pthread_mutex_unlock(&cache_lock);
}

void bpftel_gpu_kernels__forget(__u32 pid)
{
	size_t i;

	pthread_mutex_lock(&cache_lock);
	for (i = 0; i < CACHE_SLOTS; i++)
		if (cache[i].pid == pid)
			cache[i].pid = 0;
	pthread_mutex_unlock(&cache_lock);
}

void bpftel_gpu_demangle(const char *in, char *out, size_t size)
{
	int status = -1;
	char *d = NULL;

	if (!strncmp(in, "_Z", 2) && strlen(in) < BPFTEL_ELF_NAME_MAX)
		d = __cxa_demangle(in, NULL, NULL, &status);
	snprintf(out, size, "%s", d && !status ? d : in);
	free(d);
}

/* The mapping of pid holding addr: its "start-end" (for map_files), file identity and
 * the file offset of addr. False when none, or it maps no file. */
static bool find_mapping(__u32 pid, __u64 addr, char *range, size_t rsize, dev_t *dev, __u64 *ino,
			 long *off)
{
	unsigned long start, end, pgoff, inode;
	unsigned int maj, min, lines = 0;
	char path[64], line[512], perms[8];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && lines++ < MAPS_MAX_LINE && fgets(line, sizeof(line), f)) {
		if (!strchr(line, '\n') && !feof(f)) { /* a long path: skip the rest of it */
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				;
		}
		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &pgoff, &maj,
			   &min, &inode) != 7 ||
		    addr < start || addr >= end || !inode)
			continue;
		snprintf(range, rsize, "%lx-%lx", start, end);
		*dev = makedev(maj, min);
		*ino = inode;
		*off = (long)(addr - start + pgoff);
		found = true;
	}
	fclose(f);
	return found;
}

/* The symbol holding addr in pid's ELF objects, demangled; "" when none. */
static void symbolize(__u32 pid, __u64 addr, char *name, size_t size)
{
	struct bpftel_elf_addr_req req = {};
	struct bpftel_procfile_target t = {.pid = pid, .dirfd = BPFTEL_PROCFILE_MAPPED};
	enum bpftel_refusal why;
	char range[64];
	struct stat st;
	int fd;

	name[0] = '\0';
	if (!find_mapping(pid, addr, range, sizeof(range), &t.dev, &t.ino, &req.offset))
		return;
	t.path = range;
	fd = bpftel_procfile_open(&t, &st, &why);
	if (fd < 0)
		return;
	if (!bpftel_elf_symbolize_fd(fd, NULL, &req, 1, NULL, 0) && req.name[0])
		bpftel_gpu_demangle(req.name, name, size);
	close(fd);
}

void bpftel_gpu_kernels__name(__u32 pid, const struct gpu_kernel_key *key, const char *driver_name,
			      char *name, size_t size, int *budget)
{
	if (key->api == GPU_KERNEL_DRIVER) {
		if (driver_name && driver_name[0])
			bpftel_gpu_demangle(driver_name, name, size);
		else
			name[0] = '\0';
		return;
	}
	if (cache_get(pid, key->func, name, size))
		return;
	name[0] = '\0';
	if (*budget <= 0)
		return; /* not now: not cached either */
	(*budget)--;
	symbolize(pid, key->func, name, size);
	cache_put(pid, key->func, name);
}

static int cmp_seen(const void *a, const void *b)
{
	const struct bpftel_gpu_kernel_seen *x = a, *y = b;

	if (x->key.tgid != y->key.tgid)
		return x->key.tgid < y->key.tgid ? -1 : 1;
	return strcmp(x->name, y->name);
}

static struct bpftel_gpu_proc *row_of(struct bpftel_gpu_proc *rows, size_t n, __u32 pid)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (rows[i].pid == pid)
			return &rows[i];
	return NULL;
}

/* Put one kernel (merged) among p's top ones, or count its launches as the others'. */
static void offer(struct bpftel_gpu_proc *p, const struct bpftel_gpu_kernel_row *r)
{
	size_t n = p->nkernels < BPFTEL_GPU_TOP_KERNELS ? p->nkernels : BPFTEL_GPU_TOP_KERNELS;
	size_t i, least = 0;

	p->nkernels++;
	if (n < BPFTEL_GPU_TOP_KERNELS) {
		p->kernels[n] = *r;
		return;
	}
	for (i = 1; i < n; i++)
		if (p->kernels[i].launches < p->kernels[least].launches)
			least = i;
	if (r->launches > p->kernels[least].launches) {
		p->kernels_other_launches += p->kernels[least].launches;
		p->kernels[least] = *r;
	} else {
		p->kernels_other_launches += r->launches;
	}
}

static int cmp_row(const void *a, const void *b)
{
	const struct bpftel_gpu_kernel_row *x = a, *y = b;

	if (x->launches != y->launches)
		return x->launches < y->launches ? 1 : -1;
	return strcmp(x->name, y->name);
}

void bpftel_gpu_kernels__fill(struct bpftel_gpu_proc *rows, size_t n,
			      struct bpftel_gpu_kernel_seen *ks, size_t nks)
{
	struct bpftel_gpu_kernel_row r;
	int budget = RESOLVE_BUDGET;
	struct bpftel_gpu_proc *p;
	size_t i, j, top;

	for (i = 0; i < nks; i++)
		bpftel_gpu_kernels__name(ks[i].key.tgid, &ks[i].key, ks[i].driver_name, ks[i].name,
					 sizeof(ks[i].name), &budget);
	if (nks)
		qsort(ks, nks, sizeof(*ks), cmp_seen);
	for (i = 0; i < nks; i = j) {
		memset(&r, 0, sizeof(r));
		snprintf(r.name, sizeof(r.name), "%s", ks[i].name);
		r.driver = ks[i].key.api == GPU_KERNEL_DRIVER;
		memcpy(r.grid, ks[i].k.grid, sizeof(r.grid));
		memcpy(r.block, ks[i].k.block, sizeof(r.block));
		for (j = i; j < nks && !cmp_seen(&ks[i], &ks[j]); j++) {
			r.launches += ks[j].k.launches;
			r.threads += ks[j].k.threads;
		}
		p = row_of(rows, n, ks[i].key.tgid);
		if (p)
			offer(p, &r);
	}
	for (i = 0; i < n; i++) {
		top = rows[i].nkernels < BPFTEL_GPU_TOP_KERNELS ? rows[i].nkernels
								: BPFTEL_GPU_TOP_KERNELS;
		if (top)
			qsort(rows[i].kernels, top, sizeof(rows[i].kernels[0]), cmp_row);
	}
}
