/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * GPU module: per-process use of CUDA, from uprobes on every libcudart (runtime API) and
 * libcuda (driver API) the shared-libraries watcher finds (libset "gpu"). A driver call
 * the runtime makes on behalf of a runtime call is not counted again (bpf/lib/gpu_state.h
 * says how). A module like any other: registered
 * with the manager, its uprobes attached per library file by the uprobe registry, its
 * BPF maps read here on demand (bpf/gpu.h has their layout).
 *
 * Memory is bounded by the BPF maps' sizes (processes, allocations, error kinds);
 * bpftel_gpu__sweep() drops the state of processes that exited.
 */
#ifndef BPFTEL_GPU_MODULE_H
#define BPFTEL_GPU_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <linux/types.h>

#include "bpf/gpu.h"
#include "user/manager/fair_share.h"

#define BPFTEL_GPU_MODULE "gpu"

struct bpftel_gpu;
struct bpftel_manager;
struct bpftel_module;
struct bpftel_uprobes;

/* Register the module with mgr, its uprobes with up, and its subscription to the
 * watcher's gpu libset (taken while the module runs). Not started. */
int bpftel_gpu__new(struct bpftel_manager *mgr, struct bpftel_uprobes *up, struct bpftel_gpu **out);
/* After bpftel_manager__free(). NULL is a no-op. */
void bpftel_gpu__free(struct bpftel_gpu *g);
struct bpftel_module *bpftel_gpu__module(struct bpftel_gpu *g);
/* Sum launches' dynamic shared memory (config gpu_launch_shared_mem): from the module's
 * next start, as the BPF object is configured before load. Each user's share of the
 * module's tables (user_share_percent, 1..100; 0: the default): at once. */
void bpftel_gpu__configure(struct bpftel_gpu *g, bool launch_shared_mem,
			   unsigned int user_share_percent);

/* Users' shares of the module's tables (enum gpu_share_table; gpu_shares.h). */
struct bpftel_gpu_shares {
	unsigned int percent;		 /* user_share_percent */
	__u32 entries[GPU_SHARE__COUNT]; /* the tables' sizes */
	__s64 cap[GPU_SHARE__COUNT];	 /* what one owner but root may hold; 0: no bound */
	/* The owners but root holding the most at the last recount (none while the module
	 * is not loaded). */
	struct fair_share_holders holders[GPU_SHARE__COUNT];
	__u64 refused[GPU_SHARE__COUNT]; /* gpu_share_refused, since the agent started */
	/* The owners refused the most, since the module last started, as the last recount
	 * read them. */
	struct fair_share_refusers refused_by[GPU_SHARE__COUNT];
	/* The uid ranges granted to users, counted as theirs (subuid.h), as last read. */
	unsigned int ranges, ranges_left_out;
	int ranges_err;
};

void bpftel_gpu__shares(struct bpftel_gpu *g, struct bpftel_gpu_shares *out);

/* Age of outstanding allocations: < 10 s, < 1 min, < 10 min, < 1 h, older. */
#define BPFTEL_GPU_AGE_BUCKETS 5
extern const char *const bpftel_gpu_age_names[BPFTEL_GPU_AGE_BUCKETS];

/* (function, error) kinds of failed calls with series of their own, per process. */
#define BPFTEL_GPU_MAX_ERRORS 16

#define BPFTEL_GPU_TOP_KERNELS 8 /* kernels per process reported, most launched first */
#define BPFTEL_GPU_KERNEL_NAME 256
/* Series of bpftel_gpu_kernel_name_launches_total (kernel="other" aside): at most
 * BPFTEL_GPU_TOP_KERNELS per process, BPFTEL_GPU_KERNEL_SERIES over all of them. */
#define BPFTEL_GPU_KERNEL_SERIES 64
#define BPFTEL_GPU_NAME_BUDGET	 32 /* host functions resolved per report at most */
/* Kernels of one process a report lists, and keeps a name for, at most (its most
 * launched; fewer when many processes share the list: gpu.c's cap_per_process): a
 * process launching thousands of distinct host functions must not take every other
 * process's kernels out of the list and their names. */
#define BPFTEL_GPU_KERNELS_PER_PROC 1024
/* Files parsed per report at most to name them: each parse of a file is shared by all
 * its host functions (of every process that maps it), and may cost ~0.3 s for a file
 * at the ELF reader's caps. */
#define BPFTEL_GPU_NAME_FILES 4
/* ... of which one process's, while others' wait: its share of a report's names. */
#define BPFTEL_GPU_NAME_PER_PROC (BPFTEL_GPU_NAME_BUDGET / 4)

/* A kernel, by its demangled name ("" when it has none we can tell); the launches of
 * every handle or host function with that name. */
struct bpftel_gpu_kernel_row {
	char name[BPFTEL_GPU_KERNEL_NAME];
	bool driver; /* launched through cuLaunchKernel (else cudaLaunchKernel) */
	__u64 launches;
	__u64 threads;
	__u32 grid[3]; /* of a last launch */
	__u32 block[3];
};

/* Outstanding allocations of one kind (enum gpu_mem_kind), as tracked. */
struct bpftel_gpu_kind {
	__u64 outstanding_allocs;
	__u64 age_allocs[BPFTEL_GPU_AGE_BUCKETS];
	__u64 age_bytes[BPFTEL_GPU_AGE_BUCKETS];
	__u64 oldest_ns; /* age of the oldest outstanding allocation */
};

/* A process's kernel launches, failed ones included: the runtime's and the driver's,
 * plain, with a launch config (the Ex calls) and cooperative. Not graph launches: a
 * graph's kernels are launched inside the driver, out of our sight. */
static inline __u64 bpftel_gpu_launches(const struct gpu_proc_stats *st)
{
	return st->calls[GPU_FN_LAUNCH] + st->calls[GPU_FN_LAUNCH_EX] +
	       st->calls[GPU_FN_LAUNCH_COOP] + st->calls[GPU_FN_CU_LAUNCH] +
	       st->calls[GPU_FN_CU_LAUNCH_EX] + st->calls[GPU_FN_CU_LAUNCH_COOP];
}

/* a + b, at most 2^64 - 1: a sum of counters the BPF side saturates (gpu_add_sat)
 * saturates too, and never wraps round to a small number (a counter reset). */
static inline __u64 bpftel_add_sat(__u64 a, __u64 b)
{
	return a + b < a ? ~0ULL : a + b;
}

/* a + b for gauges (bytes outstanding, peaks), held inside what 64 signed bits hold:
 * "other" sums the peaks of any number of folded processes. */
static inline __s64 bpftel_add_sat_s64(__s64 a, __s64 b)
{
	__s64 sum;

	if (!__builtin_add_overflow(a, b, &sum))
		return sum;
	return b > 0 ? INT64_MAX : INT64_MIN;
}

/* Add one of a process's rows of gpu_kernels to its stats st: where the BPF side counts
 * its launches (struct gpu_launch_key), by function, device and size. */
static inline void bpftel_gpu_add_launches(struct gpu_proc_stats *st,
					   const struct gpu_launch_key *key,
					   const struct gpu_kernel *k)
{
	unsigned int dev = key->dev < GPU_DEV_SLOTS ? key->dev : GPU_DEV_UNKNOWN;

	if (key->fn < GPU_FN__COUNT)
		st->calls[key->fn] += k->launches;
	st->dev[dev].launches += k->launches;
	st->dev[dev].threads = bpftel_add_sat(st->dev[dev].threads, k->threads);
	st->threads = bpftel_add_sat(st->threads, k->threads);
	if (key->bucket < GPU_LAUNCH_BUCKETS)
		st->launch_threads[key->bucket] += k->launches;
}

/* Kernels in order of (process, API, handle): qsort/bsearch order of gpu_kernel_key. */
static inline int bpftel_gpu_kernel_key_cmp(const void *a, const void *b)
{
	const struct gpu_kernel_key *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	if (x->api != y->api)
		return x->api < y->api ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

/* Room in *arr (*cap elements of size) for need: doubled from 16 as needed. False when
 * out of memory (the array as it was). */
static inline bool bpftel_gpu_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	p = realloc(*arr, c * size);
	if (!p)
		return false;
	*arr = p;
	*cap = c;
	return true;
}

/* A process's graph launches (cudaGraphLaunch, cuGraphLaunch), failed ones included. */
static inline __u64 bpftel_gpu_graph_launches(const struct gpu_proc_stats *st)
{
	return st->calls[GPU_FN_GRAPH_LAUNCH] + st->calls[GPU_FN_CU_GRAPH_LAUNCH];
}

struct bpftel_gpu_proc {
	__u32 pid;
	char comm[16];
	struct gpu_proc_stats st;
	bool shared_mem_counted; /* st.shared_mem_bytes is summed (gpu_launch_shared_mem) */
	struct bpftel_gpu_kind kinds[GPU_MEM__COUNT];
	size_t nkernels; /* by name; may exceed BPFTEL_GPU_TOP_KERNELS */
	struct bpftel_gpu_kernel_row kernels[BPFTEL_GPU_TOP_KERNELS];
	__u64 kernels_other_launches; /* of the kernels not listed */
	/* bpftel_gpu_kernel_name_launches_total, counters: the process's series (kept while
	 * it lives, in the order they began), each its kernel's launches since it began,
	 * and every other launch of the process (kernels with none, launches before theirs
	 * began, launches the kernel map missed) in kseries_other. */
	size_t nkseries;
	struct {
		char name[BPFTEL_GPU_KERNEL_NAME];
		__u64 launches;
	} kseries[BPFTEL_GPU_TOP_KERNELS];
	__u64 kseries_other;
	/* bpftel_gpu_cuda_errors_total, counters: the first BPFTEL_GPU_MAX_ERRORS kinds of
	 * failed call the process was seen with (the most failed first), kept while it
	 * lives, in the order they began; and per function the rest of its failed calls
	 * (kinds without a series, failures the error map could not hold). */
	size_t nerrors; /* kinds the process failed with; may exceed BPFTEL_GPU_MAX_ERRORS */
	size_t nlisted; /* of them with a series, in errors[] */
	struct {
		enum gpu_func func;
		int error; /* cudaError_t, or CUresult for a driver function */
		__u64 count;
	} errors[BPFTEL_GPU_MAX_ERRORS];
	__u64 errors_other[GPU_FN__COUNT];
	/* Without /metrics series of its own: summed under pid="other" (gpu_series.h). */
	bool folded;
	/* Read one last time by the sweep that forgets it (its process exited): no
	 * scrape will see it again, so it is given no series of its own (gpu_series.h). */
	bool gone;
};

/* A (function, error) kind of failed call as read from the module's maps. */
struct bpftel_gpu_error_seen {
	struct gpu_err_key key;
	__u64 count;
};

/* What is remembered of error kinds from one report to the next (gpu_report.c): those
 * each process has a series for, and its error="other" per function, which never goes
 * down. Not locked: the caller runs one report at a time, each on maps read after the
 * previous report's (the module's report lock). NULL when out of memory. */
struct bpftel_gpu_errors;
struct bpftel_gpu_errors *bpftel_gpu_errors__new(void);
void bpftel_gpu_errors__free(struct bpftel_gpu_errors *et);
/* One report: each row's errors[], nerrors, nlisted and errors_other from es; rows are
 * every process the module tracks: the state of a process not among them is dropped.
 * Reorders es. */
void bpftel_gpu_errors__fill(struct bpftel_gpu_errors *et, struct bpftel_gpu_proc *rows, size_t n,
			     struct bpftel_gpu_error_seen *es, size_t nes);
/* Forget pid (it exited); everything (the module restarted: its maps are new). */
void bpftel_gpu_errors__forget(struct bpftel_gpu_errors *et, __u32 pid);
void bpftel_gpu_errors__reset(struct bpftel_gpu_errors *et);

/* How bpftel_gpu_map_walk() reads a map: bpf_map_get_next_key()'s contract (0, or not 0
 * past the last key) on ctx; tests give their own. */
#define BPFTEL_GPU_WALK_KEY_MAX 16
struct bpftel_gpu_map_walk {
	int (*next_key)(void *ctx, const void *prev, void *next);
	void *ctx;
	size_t key_size;    /* at most BPFTEL_GPU_WALK_KEY_MAX */
	size_t max_entries; /* the map's: bounds the walk */
	bool *cut; /* NULL, or set when the walk stopped short (its bound, out of memory) */
};
/* visit(arg, key) once for each key of the map, also when a key is deleted during the
 * walk (a hash map's walk then starts over: no key is visited twice). Returns how many. */
size_t bpftel_gpu_map_walk(const struct bpftel_gpu_map_walk *w,
			   void (*visit)(void *arg, const void *key), void *arg);

/* Outstanding bytes over every kind (the order of bpftel_gpu__processes()). */
__s64 bpftel_gpu_proc__outstanding(const struct bpftel_gpu_proc *p);

/*
 * Per-process state, largest outstanding bytes (every kind) first. Returns the count (0 when the
 * module is not running) and a malloc'd array in *out, or a negative errno.
 */
int bpftel_gpu__processes(struct bpftel_gpu *g, struct bpftel_gpu_proc **out);
/* Which processes have series of their own on /metrics (gpu_series.h). */
struct bpftel_gpu_series *bpftel_gpu__series(struct bpftel_gpu *g);
/* Drop the state of processes that no longer exist. Returns how many. */
int bpftel_gpu__sweep(struct bpftel_gpu *g);
/* Tests: the sweep's /proc (a directory fd it takes over), and the fd of one of the
 * module's maps by name, e.g. "gpu_procs" (-1 when the module is not running). */
void bpftel_gpu__set_procfd(struct bpftel_gpu *g, int procfd);
/* Tests: fn(arg) runs in each report between its read of the processes' rows and that
 * of their kernels (where a process's exec can fall), with the module's lock held (use
 * map fds taken before); a negative errno from it fails the read, as maps changed
 * under it would. NULL: none. */
void bpftel_gpu__set_report_seam(struct bpftel_gpu *g, int (*fn)(void *), void *arg);
/* Processes forgotten by a sweep without their last read (their counts since the last
 * report lost), since the module was made. */
__u64 bpftel_gpu__exits_unread(struct bpftel_gpu *g);
int bpftel_gpu__map_fd(struct bpftel_gpu *g, const char *name);
/*
 * Whether pid is still the process the sweep first saw: /proc/<pid> (under procfd, a
 * directory of /proc, or a test's own) is a thread-group leader (Tgid in its status is
 * pid: kill(pid, 0) would also answer for a thread of another process) and started at
 * *start (field 22 of its stat). *start 0: the first look, which records it. True when
 * it cannot tell (a read refused, a line not understood): only a process known gone or
 * replaced has its state dropped. Bounded, non-blocking reads.
 */
bool bpftel_gpu_proc_alive(int procfd, __u32 pid, __u64 *start);

/* The module's report ops (gpu_report.c): the `gpu` command and its /metrics families. */
struct json_t;
struct bpftel_prom;
struct json_t *gpu_report(struct bpftel_module *m, struct json_t *req);
void gpu_metrics(struct bpftel_module *m, struct bpftel_prom *w);
/* gpu_metrics()'s families, of rows as bpftel_gpu__processes() gives them. */
void bpftel_gpu_metrics_rows(struct bpftel_prom *w, const struct bpftel_gpu_proc *rows, int n);

/* Names (gpu_names.c). */
const char *bpftel_gpu_func_name(enum gpu_func func);		    /* "cudaLaunchKernel" */
const char *bpftel_gpu_memcpy_kind_name(enum gpu_memcpy_kind kind); /* "htod" */
const char *bpftel_gpu_mem_kind_name(enum gpu_mem_kind kind);	    /* "managed" */
/* "cudaErrorInsufficientDriver", or NULL for a code the table does not know. */
const char *bpftel_cuda_error_name(int error);
/* "CUDA_ERROR_STUB_LIBRARY", or NULL. */
const char *bpftel_cu_result_name(int error);
/* The name of an error func returned: a CUresult for a driver function. */
const char *bpftel_gpu_error_name(enum gpu_func func, int error);

#endif /* BPFTEL_GPU_MODULE_H */
