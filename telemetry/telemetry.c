// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "retired.h"
#include "sampler.h"
#include "telemetry.h"
#include "user/common/log.h"
#include "user/manager/manager.h"

#define MAX_INSTRUMENTED 32

struct key_entry {
	__u32 key;
	bool is_map;
	char module[BPFTEL_TLM_NAME];
	char name[BPFTEL_TLM_NAME];
};

struct instrumented {
	struct bpftel_telemetry *t;
	char module[BPFTEL_TLM_NAME];
	struct bpf_object *obj; /* while reporting: between after_init and before_stop */
	/* What bpftel_telemetry__ringbuf_failures last gave for its module, all read: given
	 * again where a read fails, not a total that went down. */
	__u64 rb_last;
};

struct bpftel_telemetry {
	pthread_mutex_t lock;
	int map_errors_fd, helper_errors_fd, lost_fd;
	__u64 lost_last[TLM_LOST__COUNT]; /* under lock: as bpftel_telemetry__lost last gave */
	struct bpftel_sampler *rs; /* run stats: holds BPF_ENABLE_STATS */
	struct key_entry *keys;
	size_t nkeys, cap;
	/* Under lock: what modules' stops took out of tlm_map_errors and tlm_helper_errs,
	 * by key (retired.h), indexed by their slots in tlm_lost. */
	struct bpftel_retired retired[TLM_LOST__COUNT];
	size_t ninst;
	struct instrumented *inst[MAX_INSTRUMENTED];
};

static const char *const op_names[TLM_OP__COUNT] = {
	[TLM_OP_UPDATE] = "update",
	[TLM_OP_DELETE] = "delete",
	[TLM_OP_LOOKUP_INIT] = "lookup_or_init",
	[TLM_OP_RB_RESERVE] = "ringbuf_reserve",
	[TLM_OP_RB_OUTPUT] = "ringbuf_output",
	[TLM_OP_INSERT] = "insert",
};

const char *bpftel_tlm_op_name(enum tlm_map_op op)
{
	return (unsigned)op < TLM_OP__COUNT ? op_names[op] : "unknown";
}

const char *bpftel_tlm_helper_name(__u32 helper)
{
	switch (helper) {
	case BPF_FUNC_probe_read_user:
		return "probe_read_user";
	case BPF_FUNC_probe_read_kernel:
		return "probe_read_kernel";
	case BPF_FUNC_probe_read_user_str:
		return "probe_read_user_str";
	case BPF_FUNC_probe_read_kernel_str:
		return "probe_read_kernel_str";
	case BPF_FUNC_skb_load_bytes:
		return "skb_load_bytes";
	case BPF_FUNC_skb_load_bytes_relative:
		return "skb_load_bytes_relative";
	}
	return "unknown";
}

/* Telemetry's own maps; reused in each object, where the kernel's (shortened) name
 * replaces the declared one: the prefix "tlm_" is reserved for them. */
static bool is_tlm_map(const char *name)
{
	return !strncmp(name, "tlm_", 4);
}

static int read_counts(void *ctx, struct bpftel_rs_reading **out, __u64 *now);

int bpftel_telemetry__new(struct bpftel_telemetry **out)
{
	struct bpftel_telemetry *t = calloc(1, sizeof(*t));
	int err;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->map_errors_fd =
		bpf_map_create(BPF_MAP_TYPE_PERCPU_HASH, "tlm_map_errors",
			       sizeof(struct tlm_map_key), sizeof(__u64), TLM_MAX_ENTRIES, NULL);
	t->helper_errors_fd =
		bpf_map_create(BPF_MAP_TYPE_PERCPU_HASH, "tlm_helper_errs",
			       sizeof(struct tlm_helper_key), sizeof(__u64), TLM_MAX_ENTRIES, NULL);
	t->lost_fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "tlm_lost", sizeof(__u32),
				    sizeof(__u64), TLM_LOST__COUNT, NULL);
	if (t->map_errors_fd < 0 || t->helper_errors_fd < 0 || t->lost_fd < 0) {
		err = -errno;
		pr_err("telemetry: cannot create maps: %s", strerror(-err));
		bpftel_telemetry__free(t);
		return err;
	}
	err = bpftel_sampler__new(read_counts, t, &t->rs);
	if (err) {
		bpftel_telemetry__free(t);
		return err;
	}
	/* Exact run counts until told otherwise (the agent samples them by default). */
	err = bpftel_telemetry__set_run_stats(t, true);
	if (err)
		pr_warn("telemetry: BPF_ENABLE_STATS unavailable (%s): no run counts",
			strerror(-err));
	*out = t;
	return 0;
}

void bpftel_telemetry__free(struct bpftel_telemetry *t)
{
	size_t i;

	if (!t)
		return;
	/* Its thread reads programs through t: gone first. */
	bpftel_sampler__free(t->rs);
	if (t->map_errors_fd > 0)
		close(t->map_errors_fd);
	if (t->helper_errors_fd > 0)
		close(t->helper_errors_fd);
	if (t->lost_fd > 0)
		close(t->lost_fd);
	for (i = 0; i < t->ninst; i++)
		free(t->inst[i]);
	for (i = 0; i < TLM_LOST__COUNT; i++)
		bpftel_retired_free(&t->retired[i]);
	free(t->keys);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static const char *const run_stats_names[] = {
	[BPFTEL_RUN_STATS_OFF] = "off",
	[BPFTEL_RUN_STATS_ALWAYS] = "always",
	[BPFTEL_RUN_STATS_SAMPLED] = "sampled",
};

const char *bpftel_run_stats_mode_name(enum bpftel_run_stats_mode mode)
{
	return (unsigned)mode <= BPFTEL_RUN_STATS_SAMPLED ? run_stats_names[mode] : "unknown";
}

bool bpftel_telemetry__stats_enabled(struct bpftel_telemetry *t)
{
	return bpftel_sampler__stats_on(t->rs);
}

int bpftel_telemetry__set_run_stats_mode(struct bpftel_telemetry *t,
					 const struct bpftel_run_stats_cfg *cfg)
{
	return bpftel_sampler__set(t->rs, cfg);
}

void bpftel_telemetry__run_stats(struct bpftel_telemetry *t, struct bpftel_run_stats_info *out)
{
	bpftel_sampler__info(t->rs, out);
}

int bpftel_telemetry__set_run_stats(struct bpftel_telemetry *t, bool on)
{
	struct bpftel_run_stats_cfg cfg = {
		.mode = on ? BPFTEL_RUN_STATS_ALWAYS : BPFTEL_RUN_STATS_OFF,
		.on_ms = BPFTEL_RUN_STATS_ON_MS,
		.period_ms = BPFTEL_RUN_STATS_PERIOD_MS,
	};

	return bpftel_sampler__set(t->rs, &cfg);
}

/* ---- keys ---- */

/* The key of (module, name, kind): the same one every time, a new one the first time. */
static __u32 key_get(struct bpftel_telemetry *t, const char *module, const char *name, bool is_map)
{
	struct key_entry *grown, *e;
	size_t i;

	for (i = 0; i < t->nkeys; i++) {
		e = &t->keys[i];
		if (e->is_map == is_map && !strcmp(e->module, module) && !strcmp(e->name, name))
			return e->key;
	}
	if (t->nkeys == t->cap) {
		grown = realloc(t->keys, (t->cap ? t->cap * 2 : 64) * sizeof(*grown));
		if (!grown)
			return 0;
		t->keys = grown;
		t->cap = t->cap ? t->cap * 2 : 64;
	}
	e = &t->keys[t->nkeys++];
	e->key = (__u32)t->nkeys; /* 1-based: 0 stays "unassigned" */
	e->is_map = is_map;
	snprintf(e->module, sizeof(e->module), "%s", module);
	snprintf(e->name, sizeof(e->name), "%s", name);
	return e->key;
}

static const struct key_entry *key_find(const struct bpftel_telemetry *t, __u32 key)
{
	return key >= 1 && key <= t->nkeys ? &t->keys[key - 1] : NULL;
}

static bool key_of_module(const struct bpftel_telemetry *t, __u32 key, const char *module)
{
	const struct key_entry *e = key_find(t, key);

	return e && !strcmp(e->module, module);
}

/* Write value into the .rodata variable `name` of obj, if the object declares it. */
static int set_rodata(struct bpf_object *obj, const char *name, __u32 value)
{
	struct bpf_map *rodata = bpf_object__find_map_by_name(obj, ".rodata");
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	size_t size;
	char *data;
	int id, i;

	if (!rodata || !btf)
		return -ENOENT;
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (id < 0)
		return -ENOENT;
	sec = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *var = btf__type_by_id(btf, vs->type);

		if (strcmp(btf__name_by_offset(btf, var->name_off), name))
			continue;
		/* Before load this is the mmaped image skeletons write their rodata into;
		 * libbpf 1.1 only types it const. */
		data = (char *)(uintptr_t)bpf_map__initial_value(rodata, &size);
		if (!data || vs->offset + sizeof(value) > size || vs->size != sizeof(value))
			return -EINVAL;
		memcpy(data + vs->offset, &value, sizeof(value));
		return 0;
	}
	return -ENOENT;
}

/* ---- hooks ---- */

static int tlm_before_init(const struct bpftel_hook_before_init *h, void *ctx)
{
	struct instrumented *in = ctx;
	struct bpftel_telemetry *t = in->t;
	struct bpf_program *prog;
	struct bpf_map *map;
	char var[BPFTEL_TLM_NAME + 32];
	const char *name;
	int err = 0;

	pthread_mutex_lock(&t->lock);
	bpf_object__for_each_program(prog, h->obj)
	{
		name = bpf_program__name(prog);
		snprintf(var, sizeof(var), TLM_KEY_PROG_PREFIX "%s", name);
		set_rodata(h->obj, var, key_get(t, in->module, name, false));
	}
	bpf_object__for_each_map(map, h->obj)
	{
		name = bpf_map__name(map);
		if (!strcmp(name, "tlm_map_errors"))
			err = bpf_map__reuse_fd(map, t->map_errors_fd);
		else if (!strcmp(name, "tlm_helper_errors"))
			err = bpf_map__reuse_fd(map, t->helper_errors_fd);
		else if (!strcmp(name, "tlm_lost"))
			err = bpf_map__reuse_fd(map, t->lost_fd);
		else if (!bpf_map__is_internal(map)) {
			snprintf(var, sizeof(var), TLM_KEY_MAP_PREFIX "%s", name);
			set_rodata(h->obj, var, key_get(t, in->module, name, true));
		}
		if (err) {
			pr_err("telemetry: module '%s': cannot share map %s: %s", in->module, name,
			       strerror(-err));
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

static int tlm_after_init(const struct bpftel_hook_after_init *h, void *ctx)
{
	struct instrumented *in = ctx;

	pthread_mutex_lock(&in->t->lock);
	in->obj = h->obj;
	pthread_mutex_unlock(&in->t->lock);
	return 0;
}

static __u64 percpu_sum(int fd, const void *key, bool *ok);
static int percpu_take(int fd, const void *key, __u64 *sum);

/*
 * Take key's counter out of map fd into table's retired totals. Not taken where the
 * totals have no room for it (-ENOSPC: 4096 keys; -ENOMEM): it stays in the map, read
 * live, and the module's next programs count on in it. -errno when not taken.
 */
static int retire(struct bpftel_telemetry *t, enum tlm_lost_slot table, int fd,
		  const void *key, __u64 *count)
{
	int err = bpftel_retired_room(&t->retired[table], key);

	if (!err)
		err = percpu_take(fd, key, count);
	if (!err)
		err = bpftel_retired_add(&t->retired[table], key, *count);
	return err;
}

/* Take every counter whose program or map key belongs to in's module out of the maps,
 * into the retired totals. With t->lock. -errno of the last failure (an entry left in the maps). */
static int sweep(struct bpftel_telemetry *t, struct instrumented *in)
{
	const char *module = in->module;
	struct tlm_map_key *mk = calloc(TLM_MAX_ENTRIES, sizeof(*mk));
	struct tlm_helper_key *hk = calloc(TLM_MAX_ENTRIES, sizeof(*hk));
	struct tlm_map_key mcur, *mprev = NULL;
	struct tlm_helper_key hcur, *hprev = NULL;
	size_t nm = 0, nh = 0, i;
	int err = 0;

	if (!mk || !hk) {
		free(mk);
		free(hk);
		return -ENOMEM;
	}
	while (nm < TLM_MAX_ENTRIES && !bpf_map_get_next_key(t->map_errors_fd, mprev, &mcur)) {
		if (key_of_module(t, mcur.prog, module) || key_of_module(t, mcur.map, module))
			mk[nm++] = mcur;
		mprev = &mcur;
	}
	while (nh < TLM_MAX_ENTRIES && !bpf_map_get_next_key(t->helper_errors_fd, hprev, &hcur)) {
		if (key_of_module(t, hcur.prog, module))
			hk[nh++] = hcur;
		hprev = &hcur;
	}
	/* Each read and deleted in one step, after the stop (tlm_after_stop): a program
	 * that read the stop gate open just before it closed may still count, for
	 * microseconds (module.c), in the sum or a new entry, not lost between a read and
	 * a delete; and an entry that could not be taken is not retired, to be read again
	 * live, not counted twice. */
	for (i = 0; i < nm; i++) {
		__u64 v = 0;
		int e = retire(t, TLM_LOST_MAP_ERRORS, t->map_errors_fd, &mk[i], &v);

		if (e && e != -ENOENT)
			err = e;
	}
	for (i = 0; i < nh; i++) {
		__u64 v = 0;
		int e = retire(t, TLM_LOST_HELPER_ERRORS, t->helper_errors_fd, &hk[i], &v);

		if (e && e != -ENOENT)
			err = e;
	}
	free(mk);
	free(hk);
	return err;
}

/*
 * The module's programs leave the report now (bpftel_telemetry__programs). Its error
 * counters are taken out of the maps only after the stop (tlm_after_stop), once its
 * programs are inert or detached, and read live until then. Deleted while they run, an
 * entry a program had just looked up could go back to the preallocated map's free list
 * and be reused for another key before the program's add: the add would land in that
 * key's count (counted twice) or be wiped by its initialisation (lost).
 */
static int tlm_before_stop(const struct bpftel_hook_before_stop *h, void *ctx)
{
	struct instrumented *in = ctx;

	(void)h;
	pthread_mutex_lock(&in->t->lock);
	in->obj = NULL;
	pthread_mutex_unlock(&in->t->lock);
	return 0;
}

/* The programs ran until detach, after before_stop: sweep what they counted. */
static int tlm_after_stop(const struct bpftel_hook_after_stop *h, void *ctx)
{
	struct instrumented *in = ctx;
	int err;

	(void)h;
	pthread_mutex_lock(&in->t->lock);
	err = sweep(in->t, in);
	pthread_mutex_unlock(&in->t->lock);
	return err;
}

int bpftel_telemetry__instrument(struct bpftel_telemetry *t, struct bpftel_module *m)
{
	struct instrumented *in;
	int err;

	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->t = t;
	snprintf(in->module, sizeof(in->module), "%s", bpftel_module__name(m));
	pthread_mutex_lock(&t->lock);
	if (t->ninst == MAX_INSTRUMENTED) {
		pthread_mutex_unlock(&t->lock);
		free(in);
		return -ENOSPC;
	}
	t->inst[t->ninst++] = in;
	pthread_mutex_unlock(&t->lock);

	err = bpftel_module__add_before_init(m, tlm_before_init, in);
	if (!err)
		err = bpftel_module__add_after_init(m, tlm_after_init, in);
	if (!err)
		err = bpftel_module__add_before_stop(m, tlm_before_stop, in);
	if (!err)
		err = bpftel_module__add_after_stop(m, tlm_after_stop, in);
	return err;
}

/* ---- collection ---- */

#ifndef ENOTSUPP
#define ENOTSUPP 524 /* the kernel's, as a BPF syscall can return it */
#endif

/* Look key up and delete it in one step; *sum: its values' sum. -errno. */
static int percpu_take(int fd, const void *key, __u64 *sum)
{
	int ncpu = libbpf_num_possible_cpus(), i, err = 0;
	__u64 *vals;

	*sum = 0;
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	if (bpf_map_lookup_and_delete_elem(fd, key, vals))
		err = -errno;
	if (err == -EINVAL || err == -ENOTSUPP || err == -EOPNOTSUPP) {
		/* Before 5.14 no per-CPU hash has it: read, then delete (what the
		 * module's programs count in between is lost). */
		err = bpf_map_lookup_elem(fd, key, vals) ? -errno : 0;
		if (!err && bpf_map_delete_elem(fd, key) && errno != ENOENT)
			err = -errno;
	}
	for (i = 0; !err && i < ncpu; i++)
		*sum += vals[i];
	free(vals);
	return err;
}

/* The sum over CPUs of key's counter; *ok (may be NULL) false when it could not be
 * read (out of memory): 0 then. */
static __u64 percpu_sum(int fd, const void *key, bool *ok)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	__u64 sum = 0, *vals;
	bool read;

	vals = ncpu > 0 ? calloc(ncpu, sizeof(*vals)) : NULL;
	read = vals && !bpf_map_lookup_elem(fd, key, vals);
	for (i = 0; read && i < ncpu; i++)
		sum += vals[i];
	free(vals);
	if (ok)
		*ok = read;
	return sum;
}

/* Label a program key. Key 0: "unassigned". */
static void label_prog(const struct bpftel_telemetry *t, __u32 key, struct bpftel_tlm_error *e)
{
	const struct key_entry *k = key_find(t, key);

	snprintf(e->module, sizeof(e->module), "%s", k ? k->module : "-");
	snprintf(e->program, sizeof(e->program), "%s", k ? k->name : "unassigned");
}

static int push(void **arr, size_t *n, size_t *cap, size_t elem)
{
	void *grown;

	if (*n < *cap)
		return 0;
	grown = realloc(*arr, (*cap ? *cap * 2 : 16) * elem);
	if (!grown)
		return -ENOMEM;
	*arr = grown;
	*cap = *cap ? *cap * 2 : 16;
	return 0;
}

/* e for map-error key k counted count times. */
static void map_error(const struct bpftel_telemetry *t, const struct tlm_map_key *k,
		      __u64 count, struct bpftel_tlm_error *e)
{
	const struct key_entry *res;

	memset(e, 0, sizeof(*e));
	label_prog(t, k->prog, e);
	res = key_find(t, k->map);
	snprintf(e->resource, sizeof(e->resource), "%s", res ? res->name : "unassigned");
	e->is_map = true;
	e->op = bpftel_tlm_op_name(k->op);
	e->err = k->err;
	e->count = count;
}

/* The same for helper-error key k. */
static void helper_error(const struct bpftel_telemetry *t, const struct tlm_helper_key *k,
			 __u64 count, struct bpftel_tlm_error *e)
{
	memset(e, 0, sizeof(*e));
	label_prog(t, k->prog, e);
	snprintf(e->resource, sizeof(e->resource), "%s", bpftel_tlm_helper_name(k->helper));
	e->op = "call";
	e->err = k->err;
	e->count = count;
}

/* What table's retired totals hold of key, marked in used[] as counted. */
static __u64 retired_of(const struct bpftel_telemetry *t, enum tlm_lost_slot table,
			const void *key, bool *used)
{
	long i = bpftel_retired_find(&t->retired[table], key);

	if (i < 0)
		return 0;
	used[i] = true;
	return t->retired[table].e[i].count;
}

/* Add e to *arr unless it counts nothing. */
static void add_row(struct bpftel_tlm_error **arr, size_t *n, size_t *cap,
		    const struct bpftel_tlm_error *e)
{
	if (e->count && !push((void **)arr, n, cap, sizeof(*e)))
		(*arr)[(*n)++] = *e;
}

/*
 * A live counter and its key's retired total make one row: the errors since the agent
 * started, across the module's restarts, and kept while it is stopped. A key only
 * retired is a row of its own. A live counter that cannot be read is left out this
 * time (its key's retired total with it): a row shown lower than before would read as
 * a counter reset.
 */
int bpftel_telemetry__errors(struct bpftel_telemetry *t, struct bpftel_tlm_error **out)
{
	struct bpftel_tlm_error *arr = NULL, e;
	struct tlm_map_key mk, *mprev = NULL;
	struct tlm_helper_key hk, *hprev = NULL;
	bool *used[TLM_LOST__COUNT] = {}, ok;
	struct bpftel_retired *r;
	size_t n = 0, cap = 0, i;
	int err = 0;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < TLM_LOST__COUNT; i++) {
		used[i] = calloc(t->retired[i].n + 1, sizeof(bool));
		if (!used[i])
			err = -ENOMEM;
	}
	while (!err && !bpf_map_get_next_key(t->map_errors_fd, mprev, &mk)) {
		mprev = &mk;
		map_error(t, &mk, percpu_sum(t->map_errors_fd, &mk, &ok), &e);
		e.count += retired_of(t, TLM_LOST_MAP_ERRORS, &mk, used[TLM_LOST_MAP_ERRORS]);
		if (ok)
			add_row(&arr, &n, &cap, &e);
	}
	while (!err && !bpf_map_get_next_key(t->helper_errors_fd, hprev, &hk)) {
		hprev = &hk;
		helper_error(t, &hk, percpu_sum(t->helper_errors_fd, &hk, &ok), &e);
		e.count += retired_of(t, TLM_LOST_HELPER_ERRORS, &hk, used[TLM_LOST_HELPER_ERRORS]);
		if (ok)
			add_row(&arr, &n, &cap, &e);
	}
	r = &t->retired[TLM_LOST_MAP_ERRORS];
	for (i = 0; !err && i < r->n; i++) {
		if (used[TLM_LOST_MAP_ERRORS][i])
			continue;
		memcpy(&mk, r->e[i].key, sizeof(mk));
		map_error(t, &mk, r->e[i].count, &e);
		add_row(&arr, &n, &cap, &e);
	}
	r = &t->retired[TLM_LOST_HELPER_ERRORS];
	for (i = 0; !err && i < r->n; i++) {
		if (used[TLM_LOST_HELPER_ERRORS][i])
			continue;
		memcpy(&hk, r->e[i].key, sizeof(hk));
		helper_error(t, &hk, r->e[i].count, &e);
		add_row(&arr, &n, &cap, &e);
	}
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < TLM_LOST__COUNT; i++)
		free(used[i]);
	if (err) {
		free(arr);
		*out = NULL;
		return err;
	}
	*out = arr;
	return (int)n;
}

/* Every reported program with the kernel's counters. With t->lock. */
static int read_locked(struct bpftel_telemetry *t, struct bpftel_tlm_prog **out)
{
	struct bpftel_tlm_prog *arr = NULL, p;
	struct bpf_prog_info info;
	struct bpf_program *prog;
	size_t n = 0, cap = 0, i;
	__u32 len;

	for (i = 0; i < t->ninst; i++) {
		if (!t->inst[i]->obj)
			continue;
		bpf_object__for_each_program(prog, t->inst[i]->obj)
		{
			memset(&info, 0, sizeof(info));
			len = sizeof(info);
			if (bpf_program__fd(prog) < 0 ||
			    bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) ||
			    push((void **)&arr, &n, &cap, sizeof(p)))
				continue;
			memset(&p, 0, sizeof(p));
			snprintf(p.module, sizeof(p.module), "%s", t->inst[i]->module);
			snprintf(p.program, sizeof(p.program), "%s", bpf_program__name(prog));
			p.id = info.id;
			p.run_cnt = info.run_cnt;
			p.run_time_ns = info.run_time_ns;
			p.load_time_ns = info.load_time;
			arr[n++] = p;
		}
	}
	*out = arr;
	return (int)n;
}

static __u64 boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* The kernel's counters of every program, read at *now: the sampler's read function. */
static int read_raw(struct bpftel_telemetry *t, struct bpftel_rs_reading **out, __u64 *now,
		    struct bpftel_tlm_prog **progs)
{
	struct bpftel_rs_reading *r;
	struct bpftel_tlm_prog *p;
	int n, i;

	pthread_mutex_lock(&t->lock);
	n = read_locked(t, &p);
	pthread_mutex_unlock(&t->lock);
	*now = boottime_ns();
	r = calloc(n + 1, sizeof(*r));
	if (!r) {
		free(p);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		r[i] = (struct bpftel_rs_reading){.id = p[i].id,
						  .load_ns = p[i].load_time_ns,
						  .c = {p[i].run_cnt, p[i].run_time_ns}};
	*out = r;
	if (progs)
		*progs = p;
	else
		free(p);
	return n;
}

static int read_counts(void *ctx, struct bpftel_rs_reading **out, __u64 *now)
{
	return read_raw(ctx, out, now, NULL);
}

int bpftel_telemetry__programs(struct bpftel_telemetry *t, struct bpftel_tlm_prog **out)
{
	struct bpftel_rs_reading *r = NULL;
	struct bpftel_tlm_prog *p = NULL;
	struct bpftel_rs_count *cur;
	struct bpftel_rs_est *est;
	__u64 now;
	int n, i;

	*out = NULL;
	n = read_raw(t, &r, &now, &p);
	if (n < 0)
		return n;
	est = calloc(n + 1, sizeof(*est));
	cur = calloc(n + 1, sizeof(*cur));
	if (!est || !cur) {
		free(est);
		free(cur);
		free(r);
		free(p);
		return -ENOMEM;
	}
	/* The kernel's counters become the estimates: exact in always mode. */
	bpftel_sampler__estimates(t->rs, r, n, now, est, cur);
	for (i = 0; i < n; i++) {
		const struct bpftel_rs_est *e = &est[i];

		p[i].run_cnt = cur[i].cnt;
		p[i].run_time_ns = cur[i].ns;
		p[i].covered_ns = e->covered_to > e->load_ns ? e->covered_to - e->load_ns : 0;
		p[i].sampled_fraction = bpftel_rs_fraction(e);
		p[i].window_ns = e->last_len_ns;
		p[i].window_age_ns = e->last_end_ns && now > e->last_end_ns ? now - e->last_end_ns : 0;
		p[i].window_runs_per_s = bpftel_rs_last_runs_per_s(e);
		p[i].window_ns_per_s = bpftel_rs_last_ns_per_s(e);
	}
	free(est);
	free(cur);
	free(r);
	*out = p;
	return n;
}

/*
 * Walk the keys, one syscall each: where batches are refused. A key deleted under our
 * feet restarts the kernel's walk from the first key, so under churn this over-counts:
 * the walk stops at max_entries, which bounds both the time spent and the error.
 */
static long count_by_keys(int fd, __u32 key_size, __u32 max_entries)
{
	char *prev = NULL, *cur = malloc(key_size), *tmp = malloc(key_size);
	long n = 0;

	if (!cur || !tmp) {
		free(cur);
		free(tmp);
		return -1;
	}
	while (n < max_entries && !bpf_map_get_next_key(fd, prev, cur)) {
		n++;
		memcpy(tmp, cur, key_size);
		prev = tmp;
	}
	free(cur);
	free(tmp);
	return n;
}

#define COUNT_BATCH	    256
#define COUNT_BATCH_VALUES (1u << 20) /* bytes of values one batch reads at most */

/*
 * Count a hash map's entries in batches (bpf_map_lookup_batch: 256 entries a syscall,
 * where a walk of the keys takes one each: 65536 for the largest map). A batch goes on
 * from the bucket the last one ended at, so a key deleted meanwhile does not restart
 * it: each entry present throughout is counted once. The values are read too (the
 * call has no keys-only form): value_size is what one entry's takes (per-CPU maps: one
 * per possible CPU). Returns -1 where the kernel refuses batches, or a bucket holds
 * more than a batch (ENOSPC): then the keys are walked.
 */
static long count_in_batches(int fd, __u32 key_size, size_t value_size, __u32 max_entries)
{
	size_t per = COUNT_BATCH, tok = key_size > 8 ? key_size : 8;
	char *keys, *vals, *at, *next;
	bool first = true;
	long n = 0;
	__u32 count;
	int err;

	if (value_size * per > COUNT_BATCH_VALUES)
		per = value_size >= COUNT_BATCH_VALUES ? 1 : COUNT_BATCH_VALUES / value_size;
	keys = malloc(per * key_size);
	vals = malloc(per * value_size);
	at = calloc(1, tok);
	next = calloc(1, tok);
	if (!keys || !vals || !at || !next) {
		n = -1;
		goto out;
	}
	do {
		count = per;
		err = bpf_map_lookup_batch(fd, first ? NULL : at, next, keys, vals, &count, NULL);
		if (err && errno != ENOENT) {
			n = -1;
			break;
		}
		n += count;
		memcpy(at, next, tok);
		first = false;
	} while (!err && n < max_entries);
out:
	free(keys);
	free(vals);
	free(at);
	free(next);
	return n;
}

static bool is_percpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static long count_entries(int fd, const struct bpf_map_info *info)
{
	size_t vsize = info->value_size;
	int ncpus;
	long n;

	if (is_percpu(info->type)) {
		ncpus = libbpf_num_possible_cpus();
		if (ncpus <= 0)
			return count_by_keys(fd, info->key_size, info->max_entries);
		vsize = ((vsize + 7) & ~(size_t)7) * (size_t)ncpus;
	}
	n = count_in_batches(fd, info->key_size, vsize, info->max_entries);
	return n >= 0 ? n : count_by_keys(fd, info->key_size, info->max_entries);
}

static const char *map_type_name(__u32 type)
{
	const char *name = libbpf_bpf_map_type_str(type);

	return name ? name : "unknown";
}

static bool is_hash(__u32 type)
{
	return type == BPF_MAP_TYPE_HASH || type == BPF_MAP_TYPE_PERCPU_HASH ||
	       type == BPF_MAP_TYPE_LRU_HASH || type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static bool is_array(__u32 type)
{
	return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

/* fd's map's "memlock:" in /proc/self/fdinfo, bytes; 0 when not there. */
static __u64 map_memory(int fd)
{
	unsigned long long v = 0;
	char path[64], line[128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "memlock: %llu", &v) == 1)
			break;
	}
	fclose(f);
	return v;
}

static int add_map(struct bpftel_tlm_map **arr, size_t *n, size_t *cap, const char *module,
		   const char *name, int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	struct bpftel_tlm_map m = {};

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    push((void **)arr, n, cap, sizeof(m)))
		return -1;
	snprintf(m.module, sizeof(m.module), "%s", module);
	snprintf(m.map, sizeof(m.map), "%s", name);
	m.type = map_type_name(info.type);
	m.capacity = info.max_entries;
	m.entries = is_hash(info.type)	  ? count_entries(fd, &info)
		    : is_array(info.type) ? (long)info.max_entries
					  : -1;
	m.memory = map_memory(fd);
	(*arr)[(*n)++] = m;
	return 0;
}

/* A map to describe: its own fd (a dup), so that it is read without the lock, also if
 * its module stops meanwhile. */
struct map_ref {
	char module[sizeof(((struct bpftel_tlm_map *)0)->module)];
	char name[sizeof(((struct bpftel_tlm_map *)0)->map)];
	int fd;
};

static void ref_map(struct map_ref **refs, size_t *n, size_t *cap, const char *module,
		    const char *name, int fd)
{
	int dup = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 3);

	if (dup < 0)
		return;
	if (push((void **)refs, n, cap, sizeof(**refs))) {
		close(dup);
		return;
	}
	snprintf((*refs)[*n].module, sizeof((*refs)[*n].module), "%s", module);
	snprintf((*refs)[*n].name, sizeof((*refs)[*n].name), "%s", name);
	(*refs)[(*n)++].fd = dup;
}

/* Every map, its entries counted by a walk of its keys (65536 for the largest): under
 * the lock only the list is made, since a walk of large LRU maps takes long enough to
 * hold up module starts and stops and the sampler (DESIGN: no lock across slow work). */
int bpftel_telemetry__maps(struct bpftel_telemetry *t, struct bpftel_tlm_map **out)
{
	struct bpftel_tlm_map *arr = NULL;
	size_t n = 0, cap = 0, nrefs = 0, crefs = 0, i;
	struct map_ref *refs = NULL;
	struct bpf_map *map;

	pthread_mutex_lock(&t->lock);
	ref_map(&refs, &nrefs, &crefs, "telemetry", "tlm_map_errors", t->map_errors_fd);
	ref_map(&refs, &nrefs, &crefs, "telemetry", "tlm_helper_errors", t->helper_errors_fd);
	ref_map(&refs, &nrefs, &crefs, "telemetry", "tlm_lost", t->lost_fd);
	for (i = 0; i < t->ninst; i++) {
		if (!t->inst[i]->obj)
			continue;
		bpf_object__for_each_map(map, t->inst[i]->obj)
		{
			if (bpf_map__is_internal(map) || is_tlm_map(bpf_map__name(map)))
				continue;
			ref_map(&refs, &nrefs, &crefs, t->inst[i]->module, bpf_map__name(map),
				bpf_map__fd(map));
		}
	}
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < nrefs; i++) {
		add_map(&arr, &n, &cap, refs[i].module, refs[i].name, refs[i].fd);
		close(refs[i].fd);
	}
	free(refs);
	*out = arr;
	return (int)n;
}

/* Is k a ring-buffer failure (reserve, output) of module's programs or maps? */
static bool ringbuf_key_of(const struct bpftel_telemetry *t, const struct tlm_map_key *k,
			   const char *module)
{
	return (k->op == TLM_OP_RB_RESERVE || k->op == TLM_OP_RB_OUTPUT) &&
	       (key_of_module(t, k->prog, module) || key_of_module(t, k->map, module));
}

/* With t->lock: module's ring-buffer failures its stops swept. */
static __u64 retired_ringbuf_locked(struct bpftel_telemetry *t, const char *module)
{
	const struct bpftel_retired *r = &t->retired[TLM_LOST_MAP_ERRORS];
	struct tlm_map_key k;
	__u64 n = 0;
	size_t i;

	for (i = 0; i < r->n; i++) {
		memcpy(&k, r->e[i].key, sizeof(k));
		if (ringbuf_key_of(t, &k, module))
			n += r->e[i].count;
	}
	return n;
}

__u64 bpftel_telemetry__retired_ringbuf(struct bpftel_telemetry *t, const char *module)
{
	__u64 n;

	pthread_mutex_lock(&t->lock);
	n = retired_ringbuf_locked(t, module);
	pthread_mutex_unlock(&t->lock);
	return n;
}

__u64 bpftel_telemetry__ringbuf_failures(struct bpftel_telemetry *t, const char *module)
{
	struct tlm_map_key k, *prev = NULL;
	struct instrumented *held = NULL;
	bool ok, all = true;
	size_t i;
	__u64 n;

	/* One lock for both: a stop's sweep between them would move a count from the
	 * live keys to the retired totals and have it read twice (or not at all). */
	pthread_mutex_lock(&t->lock);
	n = retired_ringbuf_locked(t, module);
	while (!bpf_map_get_next_key(t->map_errors_fd, prev, &k)) {
		prev = &k;
		if (ringbuf_key_of(t, &k, module)) {
			n += percpu_sum(t->map_errors_fd, &k, &ok);
			all &= ok;
		}
	}
	for (i = 0; !held && i < t->ninst; i++)
		if (!strcmp(t->inst[i]->module, module))
			held = t->inst[i];
	if (held && all)
		held->rb_last = n;
	else if (held)
		n = held->rb_last; /* the kernel stage of its loss: never down */
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* A slot that cannot be read gives what it gave last: a counter that went down would
 * be taken for a reset by a scraper (a rate's spike). The slots only grow: two
 * readers storing out of order keep the greater. */
__u64 bpftel_telemetry__lost(struct bpftel_telemetry *t, enum tlm_lost_slot slot)
{
	__u32 key = slot;
	__u64 n;
	bool ok;

	if ((unsigned int)slot >= TLM_LOST__COUNT)
		return 0;
	n = percpu_sum(t->lost_fd, &key, &ok);
	pthread_mutex_lock(&t->lock);
	if (ok && n > t->lost_last[slot])
		t->lost_last[slot] = n;
	n = t->lost_last[slot];
	pthread_mutex_unlock(&t->lock);
	return n;
}

int bpftel_telemetry__module_entries(struct bpftel_telemetry *t, const char *module)
{
	struct tlm_map_key mk, *mprev = NULL;
	struct tlm_helper_key hk, *hprev = NULL;
	int n = 0;

	pthread_mutex_lock(&t->lock);
	while (!bpf_map_get_next_key(t->map_errors_fd, mprev, &mk)) {
		mprev = &mk;
		n += key_of_module(t, mk.prog, module) || key_of_module(t, mk.map, module);
	}
	while (!bpf_map_get_next_key(t->helper_errors_fd, hprev, &hk)) {
		hprev = &hk;
		n += key_of_module(t, hk.prog, module);
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}
