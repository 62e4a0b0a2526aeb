// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the GPU module reports: the `gpu` command (per-process state as JSON) and its
 * Prometheus families, both read from its BPF maps on demand (gpu.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "gpu.h"
#include "gpu_series.h"
#include "gpu_shares.h"
#include "user/common/ctl.h"
#include "user/common/prom.h"
#include "user/manager/manager.h"

/*
 * Error kinds with series of their own. bpftel_gpu_cuda_errors_total is a counter: a
 * process's series may only grow in number while it lives, and each only count up. The
 * first BPFTEL_GPU_MAX_ERRORS kinds a process is seen with (the most failed first among
 * those a report finds together) are given one, from 0: no failure of theirs was counted
 * elsewhere before, since a kind is given its series at the first report that reads it.
 * Once a process has them all, a new kind never gets one; its failures, and those the
 * error map could not hold, are its function's error="other": the function's failed
 * calls less its listed kinds', so that the family sums to the process's failed calls.
 */
struct eproc {
	__u32 pid;
	unsigned int n;
	struct {
		__u16 func;
		__s32 error;
		__u64 count; /* the most read */
	} e[BPFTEL_GPU_MAX_ERRORS];
	__u64 other[GPU_FN__COUNT]; /* as last reported: it never goes down */
};

struct bpftel_gpu_errors {
	struct eproc *p; /* by pid */
	size_t np, cap;
};

struct bpftel_gpu_errors *bpftel_gpu_errors__new(void)
{
	return calloc(1, sizeof(struct bpftel_gpu_errors));
}

void bpftel_gpu_errors__free(struct bpftel_gpu_errors *et)
{
	if (et)
		free(et->p);
	free(et);
}

void bpftel_gpu_errors__reset(struct bpftel_gpu_errors *et)
{
	et->np = 0;
}

/* A counter the BPF side saturates at 2^64 - 1 (gpu_add_sat), as a JSON integer,
 * which is signed: at most 2^63 - 1, never a negative number. */
static json_int_t ju(__u64 v)
{
	return v > (__u64)INT64_MAX ? INT64_MAX : (json_int_t)v;
}

static int cmp_pid(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

static struct eproc *find_eproc(struct bpftel_gpu_errors *et, size_t np, __u32 pid)
{
	return np ? bsearch(&pid, et->p, np, sizeof(*et->p), cmp_pid) : NULL;
}

void bpftel_gpu_errors__forget(struct bpftel_gpu_errors *et, __u32 pid)
{
	struct eproc *ep = find_eproc(et, et->np, pid);

	if (!ep)
		return;
	memmove(ep, ep + 1, (et->np - (size_t)(ep - et->p) - 1) * sizeof(*ep));
	et->np--;
}

/* By process, the most failed first (the order kinds are given series in). */
static int cmp_error_seen(const void *a, const void *b)
{
	const struct bpftel_gpu_error_seen *x = a, *y = b;

	if (x->key.tgid != y->key.tgid)
		return x->key.tgid < y->key.tgid ? -1 : 1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->key.func != y->key.func)
		return x->key.func < y->key.func ? -1 : 1;
	return x->key.error < y->key.error ? -1 : x->key.error > y->key.error;
}

/* An eproc per row, every other dropped. */
static void sync_eprocs(struct bpftel_gpu_errors *et, const struct bpftel_gpu_proc *rows, size_t n)
{
	__u32 *pids = malloc((n ? n : 1) * sizeof(*pids));
	size_t i, j, np;
	struct eproc *grown;

	if (pids) { /* else: kept until a later report */
		for (i = 0; i < n; i++)
			pids[i] = rows[i].pid;
		qsort(pids, n, sizeof(*pids), cmp_pid);
		for (i = j = 0; i < et->np; i++)
			if (n && bsearch(&et->p[i].pid, pids, n, sizeof(*pids), cmp_pid))
				et->p[j++] = et->p[i];
		et->np = j;
		free(pids);
	}
	np = et->np;
	for (i = 0; i < n; i++) {
		if (find_eproc(et, np, rows[i].pid))
			continue;
		if (et->np == et->cap) {
			grown = realloc(et->p, (et->cap ? et->cap * 2 : 16) * sizeof(*et->p));
			if (!grown)
				continue; /* that process's errors are not reported this time */
			et->p = grown;
			et->cap = et->cap ? et->cap * 2 : 16;
		}
		memset(&et->p[et->np], 0, sizeof(et->p[0]));
		et->p[et->np++].pid = rows[i].pid;
	}
	if (et->np != np)
		qsort(et->p, et->np, sizeof(*et->p), cmp_pid);
}

void bpftel_gpu_errors__fill(struct bpftel_gpu_errors *et, struct bpftel_gpu_proc *rows, size_t n,
			     struct bpftel_gpu_error_seen *es, size_t nes)
{
	size_t i, lo, hi, mid, j, unlisted;
	__u64 listed[GPU_FN__COUNT];
	struct bpftel_gpu_proc *r;
	struct eproc *ep;
	unsigned int k;
	int f;

	sync_eprocs(et, rows, n);
	if (nes)
		qsort(es, nes, sizeof(*es), cmp_error_seen);
	for (i = 0; i < n; i++) {
		r = &rows[i];
		ep = find_eproc(et, et->np, r->pid);
		for (lo = 0, hi = nes; lo < hi;) { /* the process's first kind */
			mid = (lo + hi) / 2;
			if (es[mid].key.tgid < r->pid)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (j = lo, unlisted = 0; j < nes && es[j].key.tgid == r->pid; j++) {
			if (!ep || es[j].key.func >= GPU_FN__COUNT) {
				unlisted++;
				continue;
			}
			for (k = 0; k < ep->n; k++)
				if (ep->e[k].func == es[j].key.func &&
				    ep->e[k].error == es[j].key.error)
					break;
			if (k == ep->n) {
				if (ep->n == BPFTEL_GPU_MAX_ERRORS) {
					unlisted++;
					continue;
				}
				ep->n++;
				ep->e[k].func = es[j].key.func;
				ep->e[k].error = es[j].key.error;
				ep->e[k].count = 0;
			}
			if (es[j].count > ep->e[k].count)
				ep->e[k].count = es[j].count;
		}
		/* The listed kinds (also one this read missed) and the others it read. */
		r->nlisted = ep ? ep->n : 0;
		r->nerrors = r->nlisted + unlisted;
		memset(listed, 0, sizeof(listed));
		for (k = 0; k < r->nlisted; k++) {
			r->errors[k].func = ep->e[k].func;
			r->errors[k].error = ep->e[k].error;
			r->errors[k].count = ep->e[k].count;
			listed[ep->e[k].func] += ep->e[k].count;
		}
		for (f = 0; f < GPU_FN__COUNT; f++) {
			/* Failed calls are read before their kinds: a failure between the two
			 * reads is in its kind's count and not yet in the function's. Such a
			 * difference must not take "other" down; it holds until caught up. */
			r->errors_other[f] =
				r->st.failed[f] > listed[f] ? r->st.failed[f] - listed[f] : 0;
			if (ep && r->errors_other[f] < ep->other[f])
				r->errors_other[f] = ep->other[f];
			if (ep)
				ep->other[f] = r->errors_other[f];
		}
	}
}

static json_t *kind_json(const struct gpu_mem_stats *m, const struct bpftel_gpu_kind *k)
{
	json_t *age = json_object();
	int b;

	for (b = 0; b < BPFTEL_GPU_AGE_BUCKETS; b++)
		json_object_set_new(age, bpftel_gpu_age_names[b],
				    json_pack("{s:I, s:I}", "allocs", (json_int_t)k->age_allocs[b],
					      "bytes", (json_int_t)k->age_bytes[b]));
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "allocs",
			 (json_int_t)m->allocs, "alloc_bytes", ju(m->alloc_bytes), "frees",
			 (json_int_t)m->frees, "freed_bytes", ju(m->freed_bytes),
			 "outstanding_bytes", (json_int_t)m->outstanding_bytes, "peak_bytes",
			 (json_int_t)m->peak_bytes, "outstanding_allocs",
			 (json_int_t)k->outstanding_allocs, "oldest_seconds", k->oldest_ns / 1e9,
			 "age", age);
}

/* "memory": device memory (cudaMalloc, cuMemAlloc_v2) at the top, as before kinds
 * existed, every kind under "kinds", and what the process's tracking missed. */
static json_t *memory_json(const struct bpftel_gpu_proc *p)
{
	json_t *mem = kind_json(&p->st.mem[GPU_MEM_DEVICE], &p->kinds[GPU_MEM_DEVICE]);
	json_t *kinds = json_object();
	int k;

	for (k = 0; k < GPU_MEM__COUNT; k++)
		json_object_set_new(kinds, bpftel_gpu_mem_kind_name(k),
				    kind_json(&p->st.mem[k], &p->kinds[k]));
	json_object_set_new(mem, "kinds", kinds);
	json_object_set_new(mem, "frees_unknown", json_integer(p->st.frees_unknown));
	json_object_set_new(mem, "allocs_untracked", json_integer(p->st.allocs_untracked));
	json_object_set_new(mem, "allocs_over_cap", json_integer(p->st.allocs_over_cap));
	json_object_set_new(mem, "allocs_replaced", json_integer(p->st.allocs_replaced));
	return mem;
}

/* A device slot's name: its index, or "unknown". */
static const char *dev_name(int slot, char *buf, size_t size)
{
	if (slot >= GPU_MAX_DEVICES)
		return "unknown";
	snprintf(buf, size, "%d", slot);
	return buf;
}

static bool dev_used(const struct gpu_dev_stats *d)
{
	return d->launches || d->errors || d->allocs || d->outstanding_bytes;
}

/* Devices the process used, by slot. */
static json_t *devices_json(const struct bpftel_gpu_proc *p)
{
	json_t *devs = json_array();
	const struct gpu_dev_stats *d;
	char name[16];
	int i;

	for (i = 0; i < GPU_DEV_SLOTS; i++) {
		d = &p->st.dev[i];
		if (!dev_used(d))
			continue;
		json_array_append_new(
			devs, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "device",
					dev_name(i, name, sizeof(name)), "launches",
					(json_int_t)d->launches, "threads", ju(d->threads),
					"allocs", (json_int_t)d->allocs, "outstanding_bytes",
					(json_int_t)d->outstanding_bytes, "errors",
					(json_int_t)d->errors));
	}
	return devs;
}

/* The process's most launched kernels (by demangled name; null: not named). */
static json_t *kernels_json(const struct bpftel_gpu_proc *p)
{
	const struct bpftel_gpu_kernel_row *k;
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < p->nkernels && i < BPFTEL_GPU_TOP_KERNELS; i++) {
		k = &p->kernels[i];
		json_array_append_new(
			arr, json_pack("{s:o, s:s, s:I, s:I, s:[I,I,I], s:[I,I,I]}", "name",
				       k->name[0] ? bpftel_json_str(k->name) : json_null(), "api",
				       k->driver ? "driver" : "runtime", "launches",
				       (json_int_t)k->launches, "threads", ju(k->threads),
				       "grid", (json_int_t)k->grid[0], (json_int_t)k->grid[1],
				       (json_int_t)k->grid[2], "block", (json_int_t)k->block[0],
				       (json_int_t)k->block[1], (json_int_t)k->block[2]));
	}
	return arr;
}

static json_t *proc_json(const struct bpftel_gpu_proc *p)
{
	json_t *calls = json_object(), *failed = json_object(), *copies = json_object();
	json_t *sizes = json_array(), *errors = json_array();
	const char *name;
	size_t i;

	for (i = 0; i < GPU_FN__COUNT; i++) {
		if (!strcmp(bpftel_gpu_func_name(i), "unknown"))
			continue; /* a slot no probe uses */
		json_object_set_new(calls, bpftel_gpu_func_name(i), json_integer(p->st.calls[i]));
		json_object_set_new(failed, bpftel_gpu_func_name(i), json_integer(p->st.failed[i]));
	}
	for (i = 0; i < GPU_MEMCPY__COUNT; i++)
		json_object_set_new(copies, bpftel_gpu_memcpy_kind_name(i),
				    json_integer(ju(p->st.memcpy_bytes[i])));
	for (i = 0; i < GPU_LAUNCH_BUCKETS; i++) {
		if (p->st.launch_threads[i])
			json_array_append_new(
				sizes, json_pack("{s:I, s:I}", "min_threads", (json_int_t)1 << i,
						 "launches", (json_int_t)p->st.launch_threads[i]));
	}
	for (i = 0; i < p->nlisted; i++) {
		name = bpftel_gpu_error_name(p->errors[i].func, p->errors[i].error);
		json_array_append_new(errors, json_pack("{s:s, s:i, s:s?, s:I}", "function",
							bpftel_gpu_func_name(p->errors[i].func),
							"error", p->errors[i].error, "name", name,
							"count", (json_int_t)p->errors[i].count));
	}
	json_t *j = json_pack(
		"{s:i, s:o, s:i, s:o, s:o, s:I, s:I, s:o, s:I, s:o, s:o, s:o, s:o, s:f, s:f, "
		"s:o, s:I}",
		"pid", (int)p->pid, "comm", bpftel_json_str(p->comm), "device", p->st.device,
		"calls", calls, "failed", failed, "launches",
		(json_int_t)bpftel_gpu_launches(&p->st),
		"threads", ju(p->st.threads), "shared_mem_bytes",
		p->shared_mem_counted ? json_integer(ju(p->st.shared_mem_bytes))
				      : json_null(),
		"driver_calls_inside_runtime",
		(json_int_t)p->st.driver_nested, "launch_sizes", sizes, "memory",
		memory_json(p), "devices", devices_json(p), "memcpy_bytes", copies,
		"memcpy_seconds", p->st.memcpy_ns / 1e9, "sync_wait_seconds", p->st.sync_ns / 1e9,
		"errors", errors, "errors_not_listed", (json_int_t)(p->nerrors - p->nlisted));

	/* Calls whose entry found no room to keep its arguments: their returns accounted
	 * nothing (an allocation, a free, a wait, a device switch). */
	json_object_set_new(j, "calls_untracked", json_integer((json_int_t)p->st.calls_untracked));
	json_object_set_new(j, "graph_launches",
			    json_integer((json_int_t)bpftel_gpu_graph_launches(&p->st)));
	json_object_set_new(j, "kernels", kernels_json(p));
	json_object_set_new(j, "kernels_total", json_integer((json_int_t)p->nkernels));
	json_object_set_new(j, "kernels_other_launches",
			    json_integer((json_int_t)p->kernels_other_launches));
	/* Past the process's share of the kernel rows and error kinds (bpf/lib/gpu_state.h):
	 * in its totals, not per kernel or per kind. */
	json_object_set_new(j, "kernel_launches_over_cap",
			    json_integer((json_int_t)p->st.kernel_rows_over_cap));
	json_object_set_new(j, "errors_over_cap",
			    json_integer((json_int_t)p->st.error_kinds_over_cap));
	return j;
}

/* Each table shared out by user (gpu_shares.h): its size, the share (null: no bound),
 * who holds the most of it at the last recount, and what was refused over a share. */
static json_t *shares_json(const struct bpftel_gpu_shares *sh)
{
	json_t *o = json_object(), *t;
	int i;

	json_object_set_new(o, "subuid", fair_share_subuid_json(sh->ranges, sh->ranges_left_out,
								 sh->ranges_err));
	for (i = 0; i < GPU_SHARE__COUNT; i++) {
		t = fair_share_table_json(sh->entries[i], sh->cap[i], &sh->holders[i],
					  &sh->refused_by[i]);
		json_object_set_new(t, "refused", json_integer(ju(sh->refused[i])));
		json_object_set_new(o, bpftel_gpu_share_names[i], t);
	}
	return o;
}

json_t *gpu_report(struct bpftel_module *m, json_t *req)
{
	struct bpftel_gpu *g = bpftel_module__priv(m);
	struct bpftel_gpu_shares sh;
	struct bpftel_gpu_proc *rows;
	json_t *procs = json_array();
	int n, i;

	(void)req;
	n = bpftel_gpu__processes(g, &rows);
	if (n < 0) { /* not an empty list: that would say no process uses CUDA */
		json_decref(procs);
		return bpftel_ctl_error("gpu: the processes could not be read: %s%s", strerror(-n),
					n == -EAGAIN ? " (they changed while read; try again)" : "");
	}
	for (i = 0; i < n; i++)
		json_array_append_new(procs, proc_json(&rows[i]));
	free(rows);
	bpftel_gpu__shares(g, &sh);
	return json_pack("{s:s, s:o, s:I, s:o, s:I}", "state",
			 bpftel_module_state_name(bpftel_module__state(m)), "processes", procs,
			 "user_share_percent", (json_int_t)sh.percent, "shares", shares_json(&sh),
			 "exits_unread", (json_int_t)bpftel_gpu__exits_unread(g));
}

/* Per live process: pid and comm label its series (bounded by live processes). */
/* A row's pid label: "other" for the processes without series of their own (pid 0,
 * gpu_series.h). */
static const char *pid_label(const struct bpftel_gpu_proc *p, char *buf, size_t len)
{
	if (!p->pid)
		return "other";
	snprintf(buf, len, "%u", p->pid);
	return buf;
}

static void put(struct bpftel_prom *w, const struct bpftel_gpu_proc *p, const char *lname,
		const char *lval, __u64 v)
{
	struct bpftel_prom_label l[3];
	char pid[16];

	l[0] = (struct bpftel_prom_label){"pid", pid_label(p, pid, sizeof(pid))};
	l[1] = (struct bpftel_prom_label){"comm", p->comm};
	l[2] = (struct bpftel_prom_label){lname, lval};
	bpftel_prom_sample_u64(w, "", l, lname ? 3 : 2, v);
}

/* A value that is not a count: bytes that may go negative after lost frees, seconds. */
static void put_value(struct bpftel_prom *w, const struct bpftel_gpu_proc *p, double v)
{
	struct bpftel_prom_label l[2];
	char pid[16];

	l[0] = (struct bpftel_prom_label){"pid", pid_label(p, pid, sizeof(pid))};
	l[1] = (struct bpftel_prom_label){"comm", p->comm};
	bpftel_prom_sample(w, "", l, 2, v);
}

/* Per live process and memory kind. */
static void put_kinds(struct bpftel_prom *w, const struct bpftel_gpu_proc *rows, int n,
		      double (*value)(const struct bpftel_gpu_proc *, int))
{
	struct bpftel_prom_label l[3];
	char pid[16];
	int i, k;

	for (i = 0; i < n; i++) {
		l[0] = (struct bpftel_prom_label){"pid", pid_label(&rows[i], pid, sizeof(pid))};
		l[1] = (struct bpftel_prom_label){"comm", rows[i].comm};
		for (k = 0; k < GPU_MEM__COUNT; k++) {
			l[2] = (struct bpftel_prom_label){"kind", bpftel_gpu_mem_kind_name(k)};
			bpftel_prom_sample(w, "", l, 3, value(&rows[i], k));
		}
	}
}

static double kind_outstanding(const struct bpftel_gpu_proc *p, int k)
{
	return (double)p->st.mem[k].outstanding_bytes;
}

static double kind_peak(const struct bpftel_gpu_proc *p, int k)
{
	return (double)p->st.mem[k].peak_bytes;
}

static double kind_oldest(const struct bpftel_gpu_proc *p, int k)
{
	return p->kinds[k].oldest_ns / 1e9;
}

/* Per live process and device it used (bounded: GPU_DEV_SLOTS). */
static void put_devices(struct bpftel_prom *w, const struct bpftel_gpu_proc *rows, int n,
			int what)
{
	const struct gpu_dev_stats *d;
	struct bpftel_prom_label l[3];
	char pid[16], dev[16];
	int i, k;

	for (i = 0; i < n; i++) {
		l[0] = (struct bpftel_prom_label){"pid", pid_label(&rows[i], pid, sizeof(pid))};
		l[1] = (struct bpftel_prom_label){"comm", rows[i].comm};
		for (k = 0; k < GPU_DEV_SLOTS; k++) {
			d = &rows[i].st.dev[k];
			if (!dev_used(d))
				continue;
			l[2] = (struct bpftel_prom_label){"device", dev_name(k, dev, sizeof(dev))};
			if (what == 0)
				bpftel_prom_sample_u64(w, "", l, 3, d->launches);
			else if (what == 1)
				bpftel_prom_sample(w, "", l, 3, (double)d->outstanding_bytes);
			else
				bpftel_prom_sample_u64(w, "", l, 3, d->errors);
		}
	}
}

/* bpftel_gpu_kernel_name_launches_total: each process's series (gpu_kernels.c says how
 * they stay counters) and the rest of its launches under kernel="other", there once it
 * is not 0 (it never goes down). */
static void put_kernels(struct bpftel_prom *w, const struct bpftel_gpu_proc *rows, int n)
{
	size_t k;
	int r;

	for (r = 0; r < n; r++) {
		for (k = 0; k < rows[r].nkseries; k++)
			put(w, &rows[r], "kernel", rows[r].kseries[k].name,
			    rows[r].kseries[k].launches);
		if (rows[r].kseries_other)
			put(w, &rows[r], "kernel", "other", rows[r].kseries_other);
	}
}

/* Per table shared out by user (label table, four values): the share, what the owner
 * holding the most of it held at the last recount, and what was refused over a share. */
static void share_metrics(struct bpftel_prom *w, struct bpftel_gpu *g)
{
	__u64 share[GPU_SHARE__COUNT], top[GPU_SHARE__COUNT];
	struct bpftel_gpu_shares sh;
	int t;

	bpftel_gpu__shares(g, &sh);
	for (t = 0; t < GPU_SHARE__COUNT; t++) {
		share[t] = sh.cap[t] ? (__u64)sh.cap[t] : sh.entries[t];
		top[t] = sh.holders[t].n ? sh.holders[t].v[0].held : 0;
	}
	bpftel_prom_keyed(w, "bpftel_gpu_user_share_entries", "gauge",
			  "Entries of a GPU table shared out by user (processes, allocations, "
			  "kernel_rows, error_kinds, threads, calls_in_flight) that one user but root, or one container's "
			  "root, may hold over all its processes (user_share_percent); the "
			  "table's size when there is no bound.",
			  "table", bpftel_gpu_share_names, share, GPU_SHARE__COUNT);
	bpftel_prom_keyed(w, "bpftel_gpu_user_share_top_holder_entries", "gauge",
			  "Entries of that table held by the user but root (or container's root) "
			  "holding the most, as counted every 10 s; 0 when only root holds some. "
			  "At the share, its new entries are refused "
			  "(bpftel_gpu_user_share_refused_total).",
			  "table", bpftel_gpu_share_names, top, GPU_SHARE__COUNT);
	bpftel_prom_keyed(w, "bpftel_gpu_user_share_refused_total", "counter",
			  "Entries refused because their owner held its share of the table: "
			  "processes: calls of a process given no row (each call tries again; "
			  "the process is not shown), allocations: allocations not tracked, "
			  "kernel_rows: launches counted in their process's totals only, "
			  "error_kinds: failures counted in failed calls only.",
			  "table", bpftel_gpu_share_names, sh.refused, GPU_SHARE__COUNT);
}

void gpu_metrics(struct bpftel_module *m, struct bpftel_prom *w)
{
	struct bpftel_gpu *g = bpftel_module__priv(m);
	struct bpftel_gpu_proc *rows = NULL, *grown;
	bool other = false;
	size_t own;
	int n;

	share_metrics(w, g);
	n = bpftel_gpu__processes(g, &rows);
	if (n < 0) { /* this scrape without GPU series: none goes down or starts again */
		bpftel_gpu_metrics_rows(w, NULL, 0);
		return;
	}
	/* Room for the "other" row of the processes without series of their own. */
	grown = realloc(rows, ((size_t)n + 1) * sizeof(*rows));
	if (grown) {
		rows = grown;
		own = bpftel_gpu_series__fold(bpftel_gpu__series(g), rows, (size_t)n, &other);
	} else {
		own = 0; /* out of memory: no series this scrape, none goes down */
	}
	bpftel_gpu_metrics_rows(w, rows, (int)(own + other));
	free(rows);
}

void bpftel_gpu_metrics_rows(struct bpftel_prom *w, const struct bpftel_gpu_proc *rows, int n)
{
	const char *name;
	char code[16];
	size_t k, e;
	int i;

	bpftel_prom_family(w, "bpftel_gpu_kernel_launches_total", "counter",
			   "Kernel launch calls (cudaLaunchKernel, cudaLaunchKernelExC, "
			   "cudaLaunchCooperativeKernel and their driver counterparts), failed "
			   "ones included (also in bpftel_gpu_cuda_errors_total), per live "
			   "process. Not the kernels of graph launches.");
	for (i = 0; i < n; i++)
		put(w, &rows[i], NULL, NULL, bpftel_gpu_launches(&rows[i].st));
	bpftel_prom_family(w, "bpftel_gpu_graph_launches_total", "counter",
			   "cudaGraphLaunch and cuGraphLaunch calls, failed ones included, per "
			   "live process: their kernels are launched inside the driver, not "
			   "counted as kernel launches.");
	for (i = 0; i < n; i++)
		put(w, &rows[i], NULL, NULL, bpftel_gpu_graph_launches(&rows[i].st));
	bpftel_prom_family(w, "bpftel_gpu_kernel_name_launches_total", "counter",
			   "Launches per kernel (demangled name), failed ones included, since its "
			   "series began, per live "
			   "process: at most 8 named kernels each, 64 over all, kept while the "
			   "process lives; its other launches under kernel=\"other\".");
	put_kernels(w, rows, n);
	bpftel_prom_family(w, "bpftel_gpu_threads_launched_total", "counter",
			   "Threads of kernel launches (grid x block), failed launches included, "
			   "per live process.");
	for (i = 0; i < n; i++)
		put(w, &rows[i], NULL, NULL, rows[i].st.threads);
	bpftel_prom_family(w, "bpftel_gpu_memory_outstanding_bytes", "gauge",
			   "Memory allocated and not freed, by kind (device, async, managed, "
			   "pinned_host), per live process.");
	put_kinds(w, rows, n, kind_outstanding);
	bpftel_prom_family(w, "bpftel_gpu_memory_peak_bytes", "gauge",
			   "Highest outstanding memory, by kind, per live process.");
	put_kinds(w, rows, n, kind_peak);
	bpftel_prom_family(w, "bpftel_gpu_memory_oldest_allocation_seconds", "gauge",
			   "Age of the oldest outstanding allocation (a leak's age), by kind, per "
			   "live process.");
	put_kinds(w, rows, n, kind_oldest);
	bpftel_prom_family(w, "bpftel_gpu_memory_allocs_untracked_total", "counter",
			   "Allocations not tracked (the process's share of the allocation map "
			   "held, map full, pointer unreadable), per live process.");
	for (i = 0; i < n; i++)
		put(w, &rows[i], NULL, NULL, rows[i].st.allocs_untracked);
	bpftel_prom_family(w, "bpftel_gpu_calls_untracked_total", "counter",
			   "CUDA calls whose return was not accounted (an allocation, free, copy, "
			   "sync or device switch): no room to keep their arguments from their "
			   "entry, per live process.");
	for (i = 0; i < n; i++)
		put(w, &rows[i], NULL, NULL, rows[i].st.calls_untracked);
	bpftel_prom_family(w, "bpftel_gpu_device_kernel_launches_total", "counter",
			   "Kernel launches, failed ones included, by device index (\"unknown\": a "
			   "driver context not seen made), per live process.");
	put_devices(w, rows, n, 0);
	bpftel_prom_family(w, "bpftel_gpu_device_memory_outstanding_bytes", "gauge",
			   "Memory of every kind allocated and not freed, by device, per live "
			   "process.");
	put_devices(w, rows, n, 1);
	bpftel_prom_family(w, "bpftel_gpu_device_errors_total", "counter",
			   "Failed CUDA calls by device, per live process.");
	put_devices(w, rows, n, 2);
	bpftel_prom_family(w, "bpftel_gpu_memcpy_bytes_total", "counter",
			   "Bytes copied by cudaMemcpy(Async) and the driver's copies (cuMemcpy*), "
			   "by direction (default: inferred from unified addresses), per live "
			   "process.");
	for (i = 0; i < n; i++) {
		for (k = 0; k < GPU_MEMCPY__COUNT; k++)
			put(w, &rows[i], "direction", bpftel_gpu_memcpy_kind_name(k),
			    rows[i].st.memcpy_bytes[k]);
	}
	bpftel_prom_family(w, "bpftel_gpu_sync_wait_seconds_total", "counter",
			   "Time inside cudaStreamSynchronize, cudaDeviceSynchronize, "
			   "cudaEventSynchronize and the driver's cuCtxSynchronize(_v2), "
			   "cuStreamSynchronize and cuEventSynchronize, per live process.");
	for (i = 0; i < n; i++)
		put_value(w, &rows[i], rows[i].st.sync_ns / 1e9);
	bpftel_prom_family(w, "bpftel_gpu_cuda_errors_total", "counter",
			   "CUDA calls that failed, by function and error (cudaError_t for the "
			   "runtime, CUresult for the driver), per live process: its first 16 "
			   "kinds, kept while it lives; the rest under error=\"other\".");
	for (i = 0; i < n; i++) {
		struct bpftel_prom_label l[4];
		char pid[16];

		l[0] = (struct bpftel_prom_label){"pid", pid_label(&rows[i], pid, sizeof(pid))};
		l[1] = (struct bpftel_prom_label){"comm", rows[i].comm};
		for (e = 0; e < rows[i].nlisted; e++) {
			name = bpftel_gpu_error_name(rows[i].errors[e].func,
						     rows[i].errors[e].error);
			snprintf(code, sizeof(code), "%d", rows[i].errors[e].error);
			l[2] = (struct bpftel_prom_label){
				"function", bpftel_gpu_func_name(rows[i].errors[e].func)};
			l[3] = (struct bpftel_prom_label){"error", name ? name : code};
			bpftel_prom_sample_u64(w, "", l, 4, rows[i].errors[e].count);
		}
		/* There once not 0: it never goes down. */
		for (k = 0; k < GPU_FN__COUNT; k++) {
			if (!rows[i].errors_other[k])
				continue;
			l[2] = (struct bpftel_prom_label){"function", bpftel_gpu_func_name(k)};
			l[3] = (struct bpftel_prom_label){"error", "other"};
			bpftel_prom_sample_u64(w, "", l, 4, rows[i].errors_other[k]);
		}
	}
}
