// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel names and series for the GPU module: the BPF side counts launches per (process,
 * host function) for cudaLaunchKernel and per (process, CUfunction) for cuLaunchKernel;
 * here a host function's address is resolved to the symbol that holds it in the
 * process's ELF objects (the mapping that holds it: user/common/procmap.h, one query
 * whatever the process's count of mappings; the file opened through
 * /proc/<pid>/map_files as the uprobe registry does, read by the capped reader of
 * user/manager/elfaddr.h), and a CUfunction gets the name cuModuleGetFunction was
 * given. Names are demangled on work bounded by the label's size (gpu_demangle.h);
 * input is capped (GPU_KNAME_LEN, or BPFTEL_ELF_NAME_MAX) before it is demangled.
 *
 * Resolution opens and parses files of other processes: never under the module's lock
 * nor its report lock (bpftel_gpu_kernels__wanted() then __symbolize()); once per
 * handle (process, address): results, misses included, are kept with the handle until
 * the process is swept, so a named kernel never reads unnamed again (a file that no
 * process mapping it let us open is asked again, BPFTEL_GPU_NAME_TRIES reports at
 * most: the one that launched most may have just exited, or be a user's whose opens
 * stall, and other users' kernels in the same library must not stay unnamed; and a
 * driver kernel's name is read again at each report, its CUfunction's address being
 * another kernel's after a module unload: rename_handle()); and
 * at most BPFTEL_GPU_NAME_BUDGET of them per report, the most launched first, those of
 * one file (any process's) in one parse of it, at most BPFTEL_GPU_NAME_FILES files, so
 * that a process launching thousands of distinct host functions costs a report (a
 * /metrics scrape) a bounded number of parses. The rest stay unnamed until a later
 * report.
 *
 * Series: bpftel_gpu_kernel_name_launches_total is a counter, so a process's series
 * only ever grow in number while it lives, and each only counts up. A named kernel is
 * given one (at most BPFTEL_GPU_TOP_KERNELS per process, BPFTEL_GPU_KERNEL_SERIES over
 * all, the most launched first) and keeps it; a handle joins its name's series with a
 * baseline, the launches it had at the report before (they were counted under
 * kernel="other" then), and adds its launches beyond it; launches no report read per
 * kernel (the list is the most launched) stay "other"'s (track()). kernel="other" is
 * the process's launches less its series', so the family sums to
 * bpftel_gpu_kernel_launches_total.
 * Handles are those a report lists (gpu.c: each process's most launched, an equal share
 * of KERNELS_LISTED) and those with a series: any other is dropped (drop_unlisted()).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/sysmacros.h>

#include "gpu_demangle.h"
#include "gpu_kernels.h"
#include "user/common/log.h"
#include "user/common/proc.h"
#include "user/common/procmap.h"
#include "user/manager/elfaddr.h"
#include "user/sharedlibs/procfile.h"

/* The kernels gpu.c lists per report at most (KERNELS_LISTED), and those with a series
 * (kept when not listed): a handle neither listed nor with a series is dropped. */
#define HANDLES_MAX   (8192 + BPFTEL_GPU_KERNEL_SERIES)
#define NO_HANDLE     SIZE_MAX

/* A kernel handle read from the map: (process, host function) or (process, CUfunction). */
struct handle {
	struct gpu_kernel_key key;
	__u64 launches; /* the most read */
	__u64 base;	/* launches counted under kernel="other" before it joined its series */
	char *name;	/* NULL: not resolved yet; "": none we can tell */
	unsigned int failed; /* reports whose symbolizer could not open its file */
	int series;	/* in its process's series, -1 none */
	unsigned long seen; /* the last report that read it (kt->report) */
};

/* A process's series, in the order they began, and its name as of its first report:
 * the label of its every series, which a process that renames itself (setproctitle,
 * as Ray's workers do at each task) would otherwise turn into new series each time. */
struct kproc {
	__u32 pid;
	__u32 owner; /* gpu_proc_stats.owner: whose share its series are in */
	char comm[16];
	unsigned int nseries;
	char *series[BPFTEL_GPU_TOP_KERNELS];
	/* Launches a series keeps of handles that left it: renamed (rename()). */
	__u64 retired[BPFTEL_GPU_TOP_KERNELS];
	__u64 other; /* kernel="other" as last reported: it never goes down */
	unsigned long since; /* its first report (kt->report) */
	size_t nhandles; /* listed and with a series: about BPFTEL_GPU_KERNELS_PER_PROC */
	bool folded;	 /* no /metrics series of its own (gpu_series.h): no kernel series */
};

struct bpftel_gpu_kernels {
	bpftel_gpu_symbolize_fn *symbolize;
	struct handle *h; /* by key */
	size_t nh, caph;
	struct kproc *p; /* by pid */
	size_t np, capp;
	size_t nseries; /* over every process */
	size_t per_owner; /* of them, an owner but root's at most (atomic); 0: no cap */
	unsigned long report; /* reports filled, this one included */
	bool complete; /* the last report read every kernel of its processes, each tracked */
};

static void symbolize(struct bpftel_gpu_sym *syms, size_t n);

struct bpftel_gpu_kernels *bpftel_gpu_kernels__new(bpftel_gpu_symbolize_fn *fn)
{
	struct bpftel_gpu_kernels *kt = calloc(1, sizeof(*kt));

	if (kt) {
		kt->symbolize = fn ? fn : symbolize;
		kt->complete = true;
	}
	return kt;
}

void bpftel_gpu_kernels__set_per_owner(struct bpftel_gpu_kernels *kt, size_t per_owner)
{
	__atomic_store_n(&kt->per_owner, per_owner, __ATOMIC_RELAXED);
}

static void free_proc(struct bpftel_gpu_kernels *kt, struct kproc *kp)
{
	unsigned int s;

	for (s = 0; s < kp->nseries; s++)
		free(kp->series[s]);
	kt->nseries -= kp->nseries;
}

/* Keep the handles and processes for which keep(pid) holds. */
static void retain(struct bpftel_gpu_kernels *kt, bool (*keep)(__u32 pid, const void *arg),
		   const void *arg)
{
	size_t i, j;

	for (i = j = 0; i < kt->nh; i++) {
		if (keep(kt->h[i].key.tgid, arg))
			kt->h[j++] = kt->h[i];
		else
			free(kt->h[i].name);
	}
	kt->nh = j;
	for (i = j = 0; i < kt->np; i++) {
		if (keep(kt->p[i].pid, arg))
			kt->p[j++] = kt->p[i];
		else
			free_proc(kt, &kt->p[i]);
	}
	kt->np = j;
}

static bool keep_none(__u32 pid, const void *arg)
{
	(void)pid;
	(void)arg;
	return false;
}

static bool keep_other(__u32 pid, const void *arg)
{
	return pid != *(const __u32 *)arg;
}

void bpftel_gpu_kernels__reset(struct bpftel_gpu_kernels *kt)
{
	retain(kt, keep_none, NULL);
}

void bpftel_gpu_kernels__forget(struct bpftel_gpu_kernels *kt, __u32 pid)
{
	retain(kt, keep_other, &pid);
}

void bpftel_gpu_kernels__free(struct bpftel_gpu_kernels *kt)
{
	if (!kt)
		return;
	bpftel_gpu_kernels__reset(kt);
	free(kt->h);
	free(kt->p);
	free(kt);
}

/* A host function's file: where the address lies in it, and the mapping to open it by. */
struct sym_file {
	struct bpftel_procmap_vma vma;
	bool mapped;
};

/* The file of sf[k], opened through syms[k]'s process, or -errno; *final: the file itself
 * was refused (not ELF, too large, ...), whichever process it is opened through. */
static int open_file(const struct bpftel_gpu_sym *syms, const struct sym_file *sf, size_t k,
		     bpftel_gpu_open_fn *open, bool *final)
{
	struct bpftel_procfile_target t = {.pid = syms[k].pid, .dirfd = BPFTEL_PROCFILE_MAPPED};
	enum bpftel_refusal why = BPFTEL_REFUSED__COUNT;
	char range[64];
	struct stat st;
	int fd;

	snprintf(range, sizeof(range), "%llx-%llx", (unsigned long long)sf[k].vma.start,
		 (unsigned long long)sf[k].vma.end);
	t.dev = sf[k].vma.dev;
	t.ino = sf[k].vma.ino;
	t.path = range;
	fd = open(&t, &st, &why);
	/* A slow file system's refusal is its owner's stalled opens, or a lookup that may
	 * answer later: another process, or a later report, may do better. */
	*final = fd < 0 && why < BPFTEL_REFUSED__COUNT && why != BPFTEL_REFUSED_SLOW_FS;
	return fd;
}

/* syms[i] and the others of its file (same device and inode, any process): named in
 * one parse of that file, opened through syms[i]'s process, else through the next of
 * them whose process is another (its most launched first: the order of syms). None
 * could open it: all are left failed, for a later report. */
static void name_file(struct bpftel_gpu_sym *syms, const struct sym_file *sf, size_t n, size_t i,
		      bpftel_gpu_open_fn *open)
{
	/* 4 KiB a name: on the heap, not the stack of the thread that reports. */
	struct bpftel_elf_addr_req *req = calloc(BPFTEL_GPU_NAME_BUDGET, sizeof(*req));
	size_t idx[BPFTEL_GPU_NAME_BUDGET], k, nr = 0, opens = 0;
	__u32 tried_pids[BPFTEL_GPU_NAME_OPENS];
	bool final = false;
	char err[160];
	int fd = -1;

	if (!req)
		return; /* untried: a later report names them */
	for (k = i; k < n && nr < BPFTEL_GPU_NAME_BUDGET; k++) {
		if (syms[k].tried || syms[k].failed || !sf[k].mapped ||
		    sf[k].vma.dev != sf[i].vma.dev || sf[k].vma.ino != sf[i].vma.ino)
			continue;
		req[nr] = (struct bpftel_elf_addr_req){.offset = (long)sf[k].vma.offset};
		idx[nr++] = k;
	}
	for (k = 0; k < nr && fd < 0 && !final && opens < BPFTEL_GPU_NAME_OPENS; k++) {
		size_t j;

		for (j = 0; j < opens && tried_pids[j] != syms[idx[k]].pid; j++)
			;
		if (j < opens)
			continue; /* that process failed already */
		tried_pids[opens++] = syms[idx[k]].pid;
		fd = open_file(syms, sf, idx[k], open, &final);
	}
	for (k = 0; k < nr; k++) {
		syms[idx[k]].tried = fd >= 0 || final;
		syms[idx[k]].failed = !syms[idx[k]].tried;
	}
	if (fd < 0) {
		free(req);
		return;
	}
	if (!bpftel_elf_symbolize_fd(fd, NULL, req, nr, err, sizeof(err))) {
		for (k = 0; k < nr; k++)
			if (req[k].name[0])
				bpftel_gpu_demangle(req[k].name, syms[idx[k]].name,
						    sizeof(syms[idx[k]].name));
	} else { /* the file by its identity: its path is another process's to choose */
		pr_debug("gpu: %zu kernels of pid %u not named: file %u:%u inode %llu: %s", nr,
			 syms[i].pid, major(sf[i].vma.dev), minor(sf[i].vma.dev),
			 (unsigned long long)sf[i].vma.ino, err);
	}
	close(fd);
	free(req);
}

void bpftel_gpu_symbolize_files(struct bpftel_gpu_sym *syms, size_t n, bpftel_gpu_open_fn *open)
{
	struct sym_file sf[BPFTEL_GPU_NAME_BUDGET];
	size_t i, files = 0;

	if (n > BPFTEL_GPU_NAME_BUDGET)
		n = BPFTEL_GPU_NAME_BUDGET;
	for (i = 0; i < n; i++) {
		syms[i].name[0] = '\0';
		syms[i].failed = false;
		sf[i].mapped = !bpftel_procmap_find(syms[i].pid, syms[i].addr, &sf[i].vma);
		syms[i].tried = !sf[i].mapped; /* no file holds it: no name, known now */
	}
	for (i = 0; i < n && files < BPFTEL_GPU_NAME_FILES; i++) {
		if (syms[i].tried || syms[i].failed)
			continue;
		name_file(syms, sf, n, i, open);
		files++;
	}
}

static void symbolize(struct bpftel_gpu_sym *syms, size_t n)
{
	bpftel_gpu_symbolize_files(syms, n, bpftel_procfile_open);
}

static int cmp_seen(const void *a, const void *b)
{
	const struct bpftel_gpu_kernel_seen *x = a, *y = b;

	if (x->key.tgid != y->key.tgid)
		return x->key.tgid < y->key.tgid ? -1 : 1;
	/* Kernels not named are merged per API: a row says which it is. */
	if (!x->name[0] && !y->name[0] && x->key.api != y->key.api)
		return x->key.api < y->key.api ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Rows by pid: each row's pointer, sorted (rows themselves may come in any order). */
static int cmp_row_pid(const void *a, const void *b)
{
	__u32 x = (*(struct bpftel_gpu_proc *const *)a)->pid;
	__u32 y = (*(struct bpftel_gpu_proc *const *)b)->pid;

	return x < y ? -1 : x > y;
}

static int cmp_pid_row(const void *key, const void *elt)
{
	__u32 x = *(const __u32 *)key, y = (*(struct bpftel_gpu_proc *const *)elt)->pid;

	return x < y ? -1 : x > y;
}

/* The row of pid: by bsearch of byp (n sorted pointers), or a walk of rows without it
 * (out of memory). Up to 8192 kernels each look one up. */
static struct bpftel_gpu_proc *row_of(struct bpftel_gpu_proc *rows, struct bpftel_gpu_proc **byp,
				      size_t n, __u32 pid)
{
	struct bpftel_gpu_proc **hit;
	size_t i;

	if (byp) {
		hit = n ? bsearch(&pid, byp, n, sizeof(*byp), cmp_pid_row) : NULL;
		return hit ? *hit : NULL;
	}
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

/* Name each process's top kernels by launches, same names merged (the JSON snapshot). */
static void top_kernels(struct bpftel_gpu_proc *rows, size_t n, struct bpftel_gpu_kernel_seen *ks,
			size_t nks)
{
	struct bpftel_gpu_proc **byp = malloc((n ? n : 1) * sizeof(*byp));
	struct bpftel_gpu_kernel_row r;
	struct bpftel_gpu_proc *p;
	size_t i, j, top, most;

	for (i = 0; byp && i < n; i++)
		byp[i] = &rows[i];
	if (byp && n)
		qsort(byp, n, sizeof(*byp), cmp_row_pid);
	if (nks)
		qsort(ks, nks, sizeof(*ks), cmp_seen);
	for (i = 0; i < nks; i = j) {
		memset(&r, 0, sizeof(r));
		snprintf(r.name, sizeof(r.name), "%s", ks[i].name);
		r.driver = ks[i].key.api == GPU_KERNEL_DRIVER;
		for (j = most = i; j < nks && !cmp_seen(&ks[i], &ks[j]); j++) {
			r.launches += ks[j].k.launches;
			r.threads = bpftel_add_sat(r.threads, ks[j].k.threads);
			if (ks[j].k.launches > ks[most].k.launches ||
			    (ks[j].k.launches == ks[most].k.launches &&
			     bpftel_gpu_kernel_key_cmp(&ks[j].key, &ks[most].key) < 0))
				most = j;
		}
		/* The sizes of the name's most launched handle, whatever order qsort left. */
		memcpy(r.grid, ks[most].k.grid, sizeof(r.grid));
		memcpy(r.block, ks[most].k.block, sizeof(r.block));
		p = row_of(rows, byp, n, ks[i].key.tgid);
		if (p)
			offer(p, &r);
	}
	free(byp);
	for (i = 0; i < n; i++) {
		top = rows[i].nkernels < BPFTEL_GPU_TOP_KERNELS ? rows[i].nkernels
								: BPFTEL_GPU_TOP_KERNELS;
		if (top)
			qsort(rows[i].kernels, top, sizeof(rows[i].kernels[0]), cmp_row);
	}
}

/* Handles and processes sort by their first member (a key, a pid). */
static int cmp_handle(const void *a, const void *b)
{
	return bpftel_gpu_kernel_key_cmp(&((const struct handle *)a)->key,
					 &((const struct handle *)b)->key);
}

static int cmp_pid(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

static struct kproc *find_proc(struct bpftel_gpu_kernels *kt, __u32 pid)
{
	return kt->np ? bsearch(&pid, kt->p, kt->np, sizeof(*kt->p), cmp_pid) : NULL;
}

/* The first handle of pid (or where it would be). */
static size_t first_handle(const struct bpftel_gpu_kernels *kt, __u32 pid)
{
	size_t lo = 0, hi = kt->nh, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (kt->h[mid].key.tgid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool in_rows(__u32 pid, const void *arg)
{
	const struct {
		const __u32 *pids;
		size_t n;
	} *set = arg;

	return set->n && bsearch(&pid, set->pids, set->n, sizeof(*set->pids), cmp_pid);
}

/* A process per row (the state of any other process is dropped). */
static void sync_procs(struct bpftel_gpu_kernels *kt, const struct bpftel_gpu_proc *rows, size_t n)
{
	struct {
		__u32 *pids;
		size_t n;
	} set = {malloc((n ? n : 1) * sizeof(__u32)), n};
	size_t i, np;

	if (set.pids) { /* else: kept until a later report */
		for (i = 0; i < n; i++)
			set.pids[i] = rows[i].pid;
		qsort(set.pids, n, sizeof(*set.pids), cmp_pid);
		retain(kt, in_rows, &set);
		free(set.pids);
	}
	np = kt->np;
	for (i = 0; i < n; i++) {
		if ((np && bsearch(&rows[i].pid, kt->p, np, sizeof(*kt->p), cmp_pid)) ||
		    !bpftel_gpu_grow((void **)&kt->p, &kt->capp, kt->np + 1, sizeof(*kt->p)))
			continue;
		kt->p[kt->np] = (struct kproc){.pid = rows[i].pid, .since = kt->report};
		bpftel_proc_comm(rows[i].pid, kt->p[kt->np].comm, sizeof(kt->p[kt->np].comm));
		kt->np++;
	}
	if (kt->np != np)
		qsort(kt->p, kt->np, sizeof(*kt->p), cmp_pid);
	for (i = 0; i < n; i++) {
		struct kproc *kp = find_proc(kt, rows[i].pid);

		if (kp) {
			kp->folded = rows[i].folded;
			kp->owner = rows[i].st.owner;
		}
	}
}

/*
 * Handles this report did not list, without a series: dropped (their names too, which
 * a later report resolves again if it lists them), so that handles are those listed
 * and those with a series, and a process whose kernels the list once held does not
 * keep every other process's out. Counting is as for a kernel not read (track()).
 * hi[] is looked up again.
 */
static void drop_unlisted(struct bpftel_gpu_kernels *kt, const struct bpftel_gpu_kernel_seen *ks,
			  size_t nks, size_t *hi)
{
	struct kproc *kp;
	struct handle *h;
	size_t i, j;

	for (i = j = 0; i < kt->nh; i++) {
		h = &kt->h[i];
		if (h->series >= 0 || h->seen == kt->report) {
			kt->h[j++] = *h;
			continue;
		}
		kp = find_proc(kt, h->key.tgid);
		if (kp && kp->nhandles)
			kp->nhandles--;
		free(h->name);
	}
	if (j == kt->nh)
		return;
	kt->nh = j;
	for (i = 0; i < nks; i++) {
		h = kt->nh ? bsearch(&ks[i].key, kt->h, kt->nh, sizeof(*kt->h), cmp_handle) : NULL;
		hi[i] = h ? (size_t)(h - kt->h) : NO_HANDLE;
	}
}

/*
 * hi[i]: the handle of ks[i] (NO_HANDLE: not tracked); prev[i]: its launches as of the
 * report before, which "other" counted then (what a series it joins now starts from),
 * before they are raised to what ks[i] read. Launches no report read per kernel went to
 * "other" too, never to a series as well:
 * - a handle the report before did not read (that report listed only the most launched
 *   kernels, or had no room for the handle) comes back with the launches it made
 *   meanwhile in "other": a series it has moves its base past them;
 * - a new handle of a process reported before had launches then only if that report
 *   missed kernels (!kt->complete): they were "other"'s.
 * Returns false when a kernel of ks could not be tracked.
 */
static bool track(struct bpftel_gpu_kernels *kt, const struct bpftel_gpu_kernel_seen *ks,
		  size_t nks, size_t *hi, __u64 *prev)
{
	size_t sorted = kt->nh, i;
	bool all = true;
	struct kproc *kp;
	struct handle *h;
	__u64 cur;

	for (i = 0; i < nks; i++) {
		kp = find_proc(kt, ks[i].key.tgid);
		if (!kp || (sorted && bsearch(&ks[i].key, kt->h, sorted, sizeof(*kt->h), cmp_handle)))
			continue;
		/* Capped per process as the list is (gpu.c), with its series' beside. */
		if (kp->nhandles >= BPFTEL_GPU_KERNELS_PER_PROC + BPFTEL_GPU_TOP_KERNELS ||
		    kt->nh >= HANDLES_MAX ||
		    !bpftel_gpu_grow((void **)&kt->h, &kt->caph, kt->nh + 1, sizeof(*kt->h))) {
			all = false;
			continue;
		}
		kt->h[kt->nh++] = (struct handle){.key = ks[i].key, .series = -1};
		kp->nhandles++;
	}
	if (kt->nh != sorted)
		qsort(kt->h, kt->nh, sizeof(*kt->h), cmp_handle);
	for (i = 0; i < nks; i++) {
		h = kt->nh ? bsearch(&ks[i].key, kt->h, kt->nh, sizeof(*kt->h), cmp_handle) : NULL;
		hi[i] = h ? (size_t)(h - kt->h) : NO_HANDLE;
		prev[i] = 0;
		if (!h)
			continue;
		cur = ks[i].k.launches;
		if (h->seen + 1 == kt->report) {
			prev[i] = h->launches;
		} else if (h->seen) { /* back after a report that did not read it */
			if (h->series >= 0 && cur > h->launches)
				h->base += cur - h->launches;
			prev[i] = cur;
		} else if (!kt->complete && (kp = find_proc(kt, h->key.tgid)) &&
			   kp->since != kt->report) {
			prev[i] = cur;
		}
		h->seen = kt->report;
		/* A read older than one already taken (it cannot be, reports running one at
		 * a time) must not take a counter down. */
		if (cur > h->launches)
			h->launches = cur;
	}
	drop_unlisted(kt, ks, nks, hi);
	return all;
}

static int cmp_by_launches(const void *a, const void *b, void *arg)
{
	const struct bpftel_gpu_kernel_seen *ks = arg, *x = &ks[*(const size_t *)a],
					    *y = &ks[*(const size_t *)b];

	if (x->k.launches != y->k.launches)
		return x->k.launches < y->k.launches ? 1 : -1;
	return bpftel_gpu_kernel_key_cmp(&x->key, &y->key);
}

/* The host function that names ks: the address it was launched by, or the one its
 * cudaKernel_t was made for. */
static struct bpftel_gpu_sym sym_of(const struct bpftel_gpu_kernel_seen *ks)
{
	return (struct bpftel_gpu_sym){.pid = ks->key.tgid,
				       .addr = ks->host ? ks->host : ks->key.func};
}

/* A kernel of ks that a report would name by a parse: a runtime one whose handle has no
 * name yet, or that has no handle yet, which track() would make. */
static bool to_parse(const struct bpftel_gpu_kernels *kt, const struct bpftel_gpu_kernel_seen *ks)
{
	const struct handle *h;
	const struct kproc *kp;

	if (ks->key.api != GPU_KERNEL_RUNTIME)
		return false;
	h = kt->nh ? bsearch(&ks->key, kt->h, kt->nh, sizeof(*kt->h), cmp_handle) : NULL;
	if (h)
		return !h->name;
	kp = kt->np ? bsearch(&ks->key.tgid, kt->p, kt->np, sizeof(*kt->p), cmp_pid) : NULL;
	return kt->nh < HANDLES_MAX &&
	       (!kp || kp->nhandles < BPFTEL_GPU_KERNELS_PER_PROC + BPFTEL_GPU_TOP_KERNELS);
}

/* The entry of named[0..n) for want's (pid, address). */
static const struct bpftel_gpu_sym *named_of(const struct bpftel_gpu_sym *named, size_t n,
					     const struct bpftel_gpu_sym *want)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (named[i].pid == want->pid && named[i].addr == want->addr)
			return &named[i];
	return NULL;
}

/* The host functions of pid among syms[0..n). */
static size_t asked_of(const struct bpftel_gpu_sym *syms, size_t n, __u32 pid)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += syms[i].pid == pid;
	return k;
}

size_t bpftel_gpu_kernels__wanted(const struct bpftel_gpu_kernels *kt,
				  const struct bpftel_gpu_kernel_seen *ks, size_t nks,
				  struct bpftel_gpu_sym *syms)
{
	size_t *todo = malloc((nks ? nks : 1) * sizeof(*todo));
	size_t i, nt = 0, n = 0;
	struct bpftel_gpu_sym want;
	int pass;

	if (!todo)
		return 0; /* named at a later report */
	for (i = 0; i < nks; i++)
		if (to_parse(kt, &ks[i]))
			todo[nt++] = i;
	if (nt)
		qsort_r(todo, nt, sizeof(*todo), cmp_by_launches, (void *)ks);
	/* Two passes: first each process's most launched, BPFTEL_GPU_NAME_PER_PROC of them
	 * at most, so that one launching thousands of functions, many times each (failed
	 * launches need no GPU), cannot take every report's names from the others; then
	 * what is left of the budget, the most launched first, whoever's. */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < nt && n < BPFTEL_GPU_NAME_BUDGET; i++) {
			if (todo[i] == SIZE_MAX)
				continue;
			want = sym_of(&ks[todo[i]]);
			if (!pass && asked_of(syms, n, want.pid) >= BPFTEL_GPU_NAME_PER_PROC)
				continue;
			todo[i] = SIZE_MAX;
			/* One host function launched on several devices or sizes: asked once. */
			if (!named_of(syms, n, &want))
				syms[n++] = want;
		}
	}
	free(todo);
	return n;
}

void bpftel_gpu_kernels__symbolize(const struct bpftel_gpu_kernels *kt, struct bpftel_gpu_sym *syms,
				   size_t n)
{
	if (n)
		kt->symbolize(syms, n > BPFTEL_GPU_NAME_BUDGET ? BPFTEL_GPU_NAME_BUDGET : n);
}


/*
 * A driver kernel's handle (a CUfunction) now named name, another than its own: the
 * module that held it was unloaded and a new one's function was given its address
 * (JIT compilers: load, launch, unload, again). Its series keeps the launches it had
 * at the report before (prev), which were the old kernel's; from them on, the handle
 * joins the new name's series (admit()).
 */
static void rename_handle(struct bpftel_gpu_kernels *kt, struct handle *h, const char *name,
			  __u64 prev)
{
	struct kproc *kp = find_proc(kt, h->key.tgid);
	char *dup = strdup(name);

	if (!dup)
		return; /* the old name, until a later report */
	if (h->series >= 0 && kp && prev > h->base)
		kp->retired[h->series] += prev - h->base;
	h->series = -1;
	free(h->name);
	h->name = dup;
}

/* A driver kernel's label: its name demangled, or, cut where gpu_knames' entry ended,
 * the bytes it holds and "...": the first bytes of a mangled name may demangle, to
 * another signature than the kernel's. */
static void driver_label(const struct bpftel_gpu_kernel_seen *ks, char *out, size_t size)
{
	static const char more[] = "...";

	if (!ks->driver_cut) {
		bpftel_gpu_demangle(ks->driver_name, out, size);
		return;
	}
	snprintf(out, size, "%.*s%s", (int)(size > sizeof(more) ? size - sizeof(more) : 0),
		 ks->driver_name, more);
}

/* Name every kernel of ks: from its handle, a driver kernel from its name in the map
 * (again at each report: its handle may be another kernel's since), a runtime one from
 * named (its host function's symbol, parsed without the report's lock:
 * bpftel_gpu_kernels__wanted()); one not there is named at a later report. */
static void name_all(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_kernel_seen *ks, size_t nks,
		     const size_t *hi, const __u64 *prev, const struct bpftel_gpu_sym *named,
		     size_t nnamed)
{
	const struct bpftel_gpu_sym *got;
	struct bpftel_gpu_sym want;
	struct handle *h;
	size_t i;

	for (i = 0; i < nks; i++) {
		h = hi[i] == NO_HANDLE ? NULL : &kt->h[hi[i]];
		ks[i].name[0] = '\0';
		if (h && h->name && ks[i].key.api == GPU_KERNEL_DRIVER && ks[i].driver_name[0]) {
			driver_label(&ks[i], ks[i].name, sizeof(ks[i].name));
			if (strcmp(ks[i].name, h->name))
				rename_handle(kt, h, ks[i].name, prev[i]);
			continue;
		}
		if (h && h->name)
			continue;
		if (ks[i].key.api == GPU_KERNEL_DRIVER) {
			/* No name read: the map may have it at a later report. */
			if (ks[i].driver_name[0]) {
				driver_label(&ks[i], ks[i].name, sizeof(ks[i].name));
				if (h)
					h->name = strdup(ks[i].name);
			}
		} else if (h) {
			want = sym_of(&ks[i]);
			got = named_of(named, nnamed, &want);
			if (got && got->tried)
				h->name = strdup(got->name); /* NULL: no memory, tried again */
			else if (got && got->failed && ++h->failed >= BPFTEL_GPU_NAME_TRIES)
				h->name = strdup(""); /* its file failed every time: unnamed */
			/* else its file was beyond this report's: a later one */
		}
	}
	for (i = 0; i < nks; i++) {
		h = hi[i] == NO_HANDLE ? NULL : &kt->h[hi[i]];
		if (h && h->name)
			snprintf(ks[i].name, sizeof(ks[i].name), "%s", h->name);
	}
}

static int series_of(const struct kproc *kp, const char *name)
{
	unsigned int s;

	for (s = 0; s < kp->nseries; s++)
		if (!strcmp(kp->series[s], name))
			return (int)s;
	return -1;
}

/* A named handle without a series, of a name its process has no series for. */
struct cand {
	__u32 pid;
	const char *name;
	size_t ks; /* index in ks */
};

struct group {
	size_t first, end; /* in the candidates */
	__u64 launches;
};

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_group(const void *a, const void *b, void *arg)
{
	const struct group *x = a, *y = b;
	const struct cand *c = arg;

	if (x->launches != y->launches)
		return x->launches < y->launches ? 1 : -1;
	return cmp_cand(&c[x->first], &c[y->first]);
}

/* The series each owner but root holds: an owner holds at most per_owner of them (as
 * its processes' series: gpu_series.c), or a user's idle processes could keep every
 * series from everyone else's kernels for as long as they live. */
struct owner_held {
	__u32 owner;
	size_t held;
};

static int cmp_owner(const void *a, const void *b)
{
	__u32 x = ((const struct owner_held *)a)->owner, y = ((const struct owner_held *)b)->owner;

	return x < y ? -1 : x > y;
}

/* Each owner's series, sorted by owner, into *out (NULL: no memory, or no cap); their
 * count. */
static size_t owners_held(const struct bpftel_gpu_kernels *kt, struct owner_held **out)
{
	struct owner_held *oh = malloc((kt->np ? kt->np : 1) * sizeof(*oh));
	size_t i, n = 0, w = 0;

	*out = oh;
	if (!oh)
		return 0;
	for (i = 0; i < kt->np; i++)
		if (kt->p[i].owner)
			oh[n++] = (struct owner_held){kt->p[i].owner, kt->p[i].nseries};
	qsort(oh, n, sizeof(*oh), cmp_owner);
	for (i = 0; i < n; i++) { /* one entry per owner, its processes' added up */
		if (w && oh[w - 1].owner == oh[i].owner)
			oh[w - 1].held += oh[i].held;
		else
			oh[w++] = oh[i];
	}
	return w;
}

/* The entry of kp's owner, if one but root's with per_owner a cap (else NULL). */
static struct owner_held *owner_of(struct owner_held *oh, size_t n, const struct kproc *kp,
				   size_t per_owner)
{
	struct owner_held key = {kp->owner, 0};

	if (!kp->owner || !per_owner || !oh)
		return NULL;
	return bsearch(&key, oh, n, sizeof(*oh), cmp_owner);
}

/* Named handles join their process's series of that name, from their launches of the
 * report before (counted as "other" until now); names without one are given one, most
 * launched first, while the budgets last: the whole's, each process's and each
 * owner's. A series once given is kept. */
static void admit(struct bpftel_gpu_kernels *kt, size_t nks, const size_t *hi, const __u64 *prev)
{
	size_t per_owner = __atomic_load_n(&kt->per_owner, __ATOMIC_RELAXED);
	struct cand *c = malloc((nks ? nks : 1) * sizeof(*c));
	struct group *g = malloc((nks ? nks : 1) * sizeof(*g));
	size_t i, j, nc = 0, ng = 0, nowners = 0;
	struct owner_held *oh = NULL, *mine;
	struct kproc *kp;
	struct handle *h;
	char *name;
	int s;

	for (i = 0; i < nks; i++) {
		h = hi[i] == NO_HANDLE ? NULL : &kt->h[hi[i]];
		/* "other" is the label of the rest: a kernel of that name stays among them. */
		if (!h || h->series >= 0 || !h->name || !h->name[0] || !strcmp(h->name, "other") ||
		    !(kp = find_proc(kt, h->key.tgid)) || kp->folded)
			continue;
		s = series_of(kp, h->name);
		if (s >= 0) {
			h->series = s;
			h->base = prev[i];
		} else if (c) {
			c[nc++] = (struct cand){h->key.tgid, h->name, i};
		}
	}
	if (!nc || !g)
		goto out;
	qsort(c, nc, sizeof(*c), cmp_cand);
	for (i = 0; i < nc; i = j) {
		g[ng] = (struct group){.first = i};
		for (j = i; j < nc && !cmp_cand(&c[i], &c[j]); j++)
			g[ng].launches += kt->h[hi[c[j].ks]].launches;
		g[ng++].end = j;
	}
	qsort_r(g, ng, sizeof(*g), cmp_group, c);
	if (per_owner && !(nowners = owners_held(kt, &oh)) && !oh)
		goto out; /* no memory: no owner's share can be told, none given */
	for (i = 0; i < ng && kt->nseries < BPFTEL_GPU_KERNEL_SERIES; i++) {
		kp = find_proc(kt, c[g[i].first].pid);
		mine = owner_of(oh, nowners, kp, per_owner);
		if (kp->nseries >= BPFTEL_GPU_TOP_KERNELS || (mine && mine->held >= per_owner) ||
		    !(name = strdup(c[g[i].first].name)))
			continue;
		if (mine)
			mine->held++;
		s = (int)kp->nseries++;
		kp->series[s] = name;
		kt->nseries++;
		for (j = g[i].first; j < g[i].end; j++) {
			h = &kt->h[hi[c[j].ks]];
			h->series = s;
			h->base = prev[c[j].ks];
		}
	}
out:
	free(oh);
	free(c);
	free(g);
}

/* Each row's series and kernel="other": the process's launches less its series'. */
static void series_out(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_proc *rows, size_t n)
{
	__u64 sum, total, other;
	struct kproc *kp;
	size_t i, j;
	unsigned int s;

	for (i = 0; i < n; i++) {
		struct bpftel_gpu_proc *r = &rows[i];

		total = bpftel_gpu_launches(&r->st);
		kp = find_proc(kt, r->pid);
		if (kp) /* else (out of memory) its name now */
			memcpy(r->comm, kp->comm, sizeof(r->comm));
		else
			bpftel_proc_comm(r->pid, r->comm, sizeof(r->comm));
		r->nkseries = kp ? kp->nseries : 0;
		for (s = 0; s < r->nkseries; s++) {
			snprintf(r->kseries[s].name, sizeof(r->kseries[s].name), "%s",
				 kp->series[s]);
			r->kseries[s].launches = kp->retired[s];
		}
		for (j = first_handle(kt, r->pid); j < kt->nh && kt->h[j].key.tgid == r->pid; j++)
			if (kt->h[j].series >= 0)
				r->kseries[kt->h[j].series].launches +=
					kt->h[j].launches - kt->h[j].base;
		for (s = 0, sum = 0; s < r->nkseries; s++)
			sum += r->kseries[s].launches;
		/* The total and the series come from the same rows of the kernel map (but
		 * launches the map had no room for, in the process's own row, read before):
		 * a difference must not take "other" down; it holds until the total has
		 * caught up. */
		other = total > sum ? total - sum : 0;
		if (kp && other < kp->other)
			other = kp->other;
		if (kp)
			kp->other = other;
		r->kseries_other = other;
	}
}

void bpftel_gpu_kernels__fill_named(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_proc *rows,
				    size_t n, struct bpftel_gpu_kernel_seen *ks, size_t nks,
				    bool all_kernels, const struct bpftel_gpu_sym *named,
				    size_t nnamed)
{
	size_t *hi = calloc(nks ? nks : 1, sizeof(*hi));
	__u64 *prev = calloc(nks ? nks : 1, sizeof(*prev));
	bool complete = false;
	size_t i;

	kt->report++;
	sync_procs(kt, rows, n);
	if (hi && prev) {
		complete = track(kt, ks, nks, hi, prev) && all_kernels;
		name_all(kt, ks, nks, hi, prev, named, nnamed);
		admit(kt, nks, hi, prev);
	} else { /* out of memory: the series hold their counts, the kernels are unnamed */
		for (i = 0; i < nks; i++)
			ks[i].name[0] = '\0';
	}
	kt->complete = complete;
	series_out(kt, rows, n);
	free(hi);
	free(prev);
	top_kernels(rows, n, ks, nks);
}

void bpftel_gpu_kernels__fill(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_proc *rows, size_t n,
			      struct bpftel_gpu_kernel_seen *ks, size_t nks, bool all_kernels)
{
	struct bpftel_gpu_sym syms[BPFTEL_GPU_NAME_BUDGET];
	size_t nsyms = bpftel_gpu_kernels__wanted(kt, ks, nks, syms);

	bpftel_gpu_kernels__symbolize(kt, syms, nsyms);
	bpftel_gpu_kernels__fill_named(kt, rows, n, ks, nks, all_kernels, syms, nsyms);
}
