// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the shared-libraries watcher reports, and its housekeeping: its part of
 * `bpftel stats` (event counters, detections), the `libs` command (the uprobe
 * registry's files and refusals), its Prometheus families, and every second the
 * registry's sweep and, after any loss, a rescan of /proc.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "sharedlibs_internal.h"
#include "uprobes.h"
#include "user/common/ctl.h"
#include "user/common/deadline_call.h"
#include "user/common/escape.h"
#include "user/common/prom.h"
#include "user/manager/manager.h"

static bool pid_alive(__u32 pid)
{
	return !kill((pid_t)pid, 0) || errno == EPERM;
}

static json_t *events_json(struct bpftel_sharedlibs *sl)
{
	struct bpftel_sharedlibs_counters cnt;
	json_t *obj = json_object(), *det;
	int i;

	if (bpftel_sharedlibs__counters(sl, &cnt))
		return obj;
	json_object_set_new(obj, "received", json_integer(cnt.received));
	json_object_set_new(obj, "malformed", json_integer(cnt.malformed));
	json_object_set_new(obj, "evicted", json_integer(cnt.evicted));
	json_object_set_new(obj, "execs", json_integer(cnt.execs));
	json_object_set_new(obj, "execs_skipped", json_integer(cnt.execs_skipped));
	for (i = 0; i < SHLIB_CNT__COUNT; i++)
		json_object_set_new(obj, bpftel_shlib_counter_name(i), json_integer(cnt.kernel[i]));
	det = json_object();
	for (i = 0; i < SHLIB_LIBSET__COUNT; i++)
		json_object_set_new(det, bpftel_shlib_libset_name(i),
				    json_integer(cnt.detected[i]));
	json_object_set_new(obj, "detected", det);
	return obj;
}

/*
 * A detection's path, escaped, in at most this many columns: its start and end
 * around "..." past it. A path is up to 4095 bytes of the process's choosing, ~20 KB
 * once escaped and in JSON (a control byte is \\xNN there), so 1024 detections of
 * such paths made `bpftel stats` an answer over the CLI's 16 MiB, refused, for good.
 * Now at most ~2.6 MB, host paths included; a path a person gave a library fits.
 */
#define PATH_SHOWN_MAX 1024

static json_t *path_json(const char *path)
{
	char *esc = bpftel_escape_dup(path, BPFTEL_ESC_BACKSLASH), *cut;
	json_t *s;

	if (!esc)
		return NULL;
	cut = bpftel_elide_dup(esc, PATH_SHOWN_MAX);
	s = cut ? json_string(cut) : NULL;
	free(cut);
	free(esc);
	return s;
}

static json_t *libraries_json(struct bpftel_sharedlibs *sl)
{
	struct bpftel_shlib_detection *det;
	json_t *arr = json_array(), *o;
	size_t i, n;

	n = bpftel_sharedlibs__detections(sl, &det);
	for (i = 0; i < n; i++) {
		o = json_pack("{s:I, s:o, s:s, s:s, s:o, s:I, s:b, s:I, s:I, s:o}", "pid",
			      (json_int_t)det[i].pid, "comm", bpftel_json_str(det[i].comm), "lib",
			      bpftel_shlib_lib_name(det[i].lib), "libset",
			      bpftel_shlib_libset_name(det[i].libset), "path",
			      path_json(det[i].path), "opens", (json_int_t)det[i].opens,
			      "alive", pid_alive(det[i].pid), "first_seen",
			      (json_int_t)det[i].first_seen, "last_seen",
			      (json_int_t)det[i].last_seen, "host_path",
			      det[i].host_path ? path_json(det[i].host_path) : json_null());
		if (o)
			json_array_append_new(arr, o);
	}
	bpftel_shlib_detections_free(det, n);
	return arr;
}

json_t *sharedlibs_stats(struct bpftel_module *m)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);

	return json_pack("{s:o, s:o}", "events", events_json(sl), "libraries",
			 libraries_json(sl));
}

static json_t *failures_json(const struct bpftel_uprobe_file_info *r)
{
	json_t *fails = json_array();
	size_t k;

	for (k = 0; k < r->failed && k < BPFTEL_UPROBE_MAX_FAIL; k++)
		json_array_append_new(fails, json_pack("{s:s, s:i, s:s}", "symbol",
						       r->fail[k].symbol, "errno",
						       -r->fail[k].err, "errno_name",
						       strerrorname_np(-r->fail[k].err) ?: "?"));
	return fails;
}

/* [{"symbol": "SSL_read", "with": "SSL_read_ex", "return": false, "callee_offset": N}] */
static json_t *folded_json(const struct bpftel_uprobe_file_info *r)
{
	json_t *arr = json_array();
	size_t k;

	for (k = 0; k < r->nfolded && k < BPFTEL_UPROBE_MAX_FOLDED; k++)
		json_array_append_new(arr, json_pack("{s:s, s:s, s:b, s:I}", "symbol",
						     r->folded[k].symbol, "with", r->folded[k].with,
						     "return", r->folded[k].retprobe,
						     "callee_offset",
						     (json_int_t)r->folded[k].callee));
	return arr;
}

/* [{"symbol": "gnutls_record_recv", "return": false, "record_type": 23,
 *   "offsets": [N, ...]}] */
static json_t *moved_json(const struct bpftel_uprobe_file_info *r)
{
	json_t *arr = json_array(), *at;
	size_t k, i;

	for (k = 0; k < r->nmoved && k < BPFTEL_UPROBE_MAX_MOVED; k++) {
		at = json_array();
		for (i = 0; i < r->moved[k].n && i < BPFTEL_UPROBE_MOVED_AT; i++)
			json_array_append_new(at, json_integer(r->moved[k].at[i]));
		json_array_append_new(arr, json_pack("{s:s, s:b, s:I, s:o}", "symbol",
						     r->moved[k].symbol, "return",
						     r->moved[k].retprobe, "record_type",
						     (json_int_t)r->moved[k].type, "offsets", at));
	}
	return arr;
}

static json_t *file_json(const struct bpftel_uprobe_file_info *r)
{
	json_t *o, *pids = json_array();
	char id[64];
	size_t k;

	for (k = 0; k < r->nprocs && k < 8; k++)
		json_array_append_new(pids, json_integer(r->pids[k]));
	/* A btrfs subvolume's file has its subvolume's device after: a snapshot's copy
	 * shares the others'. */
	if (r->sdev != r->dev)
		snprintf(id, sizeof(id), "%llx:%llu:%llx", (unsigned long long)r->dev,
			 (unsigned long long)r->ino, (unsigned long long)r->sdev);
	else
		snprintf(id, sizeof(id), "%llx:%llu", (unsigned long long)r->dev,
			 (unsigned long long)r->ino);
	o = json_pack("{s:o, s:s, s:s, s:I, s:o, s:s, s:I, s:s?, s:I, s:I, s:s?, s:I, s:o}", "path",
		      bpftel_json_str(r->path), "lib", bpftel_shlib_lib_name(r->lib), "file", id,
		      "processes", (json_int_t)r->nprocs, "pids", pids, "state", r->state,
		      "idle_seconds", (json_int_t)r->idle_s, "module",
		      r->module[0] ? r->module : NULL, "attached", (json_int_t)r->attached,
		      "links", (json_int_t)r->links, "link_mode", r->link_mode, "failed",
		      (json_int_t)r->failed, "failures", failures_json(r));
	if (!o)
		return NULL;
	if (r->mode_reason[0])
		json_object_set_new(o, "link_mode_reason", bpftel_json_str(r->mode_reason));
	json_object_set_new(o, "throttled", json_boolean(r->throttled));
	json_object_set_new(o, "opens", json_integer((json_int_t)r->opens));
	json_object_set_new(o, "folded", folded_json(r));
	/* Every probe point of the module is attached, failed, folded or skipped. */
	json_object_set_new(o, "folded_points", json_integer((json_int_t)r->nfolded));
	json_object_set_new(o, "skipped_optional", json_integer((json_int_t)r->skipped));
	json_object_set_new(o, "tail_reads", moved_json(r));
	json_object_set_new(o, "calls",
			    r->counted ? json_pack("{s:I, s:I, s:I}", "entries",
						   (json_int_t)r->entries,
						   "single_stepped_entries",
						   (json_int_t)r->stepped_entries, "returns",
						   (json_int_t)r->returns)
				       : json_null());
	json_object_set_new(o, "refused",
			    r->refused >= 0 ? json_string(bpftel_refusal_name(r->refused))
					    : json_null());
	if (r->refused >= 0)
		json_object_set_new(o, "refused_detail", bpftel_json_str(r->refused_detail));
	return o;
}

/* Opens of other processes' files that waited past their deadline (procfile.h): every
 * caller's, the GPU module's symbol lookups included. */
static json_t *deadline_json(json_t *resp)
{
	struct bpftel_deadline_stats ds;

	bpftel_deadline_stats(&ds);
	json_object_set_new(resp, "open_timeouts", json_integer((json_int_t)ds.abandoned));
	json_object_set_new(resp, "open_timeouts_waiting", json_integer((json_int_t)ds.stuck));
	json_object_set_new(resp, "opens_not_tried", json_integer((json_int_t)ds.refused));
	json_object_set_new(resp, "opens_not_tried_per_user",
			    json_integer((json_int_t)ds.refused_owner));
	json_object_set_new(resp, "opens_waiting_max", json_integer(BPFTEL_DEADLINE_STUCK_MAX));
	json_object_set_new(resp, "opens_waiting_per_user_max",
			    json_integer(BPFTEL_DEADLINE_STUCK_PER_OWNER));
	json_object_set_new(resp, "open_timeout_ms", json_integer(bpftel_procfile_timeout_ms()));
	return resp;
}

static json_t *refusals_json(struct bpftel_uprobes *u, json_t *resp)
{
	struct bpftel_uprobes_refusals *ref = calloc(1, sizeof(*ref));
	json_t *counts = json_object(), *recent = json_array();
	size_t i;

	if (!ref)
		return resp;
	bpftel_uprobes__refusals(u, ref);
	for (i = 0; i < BPFTEL_REFUSED__COUNT; i++)
		json_object_set_new(counts, bpftel_refusal_name(i), json_integer(ref->count[i]));
	for (i = 0; i < ref->nrecent; i++) {
		const struct bpftel_uprobe_refusal *e = &ref->recent[i];

		json_array_append_new(
			recent, json_pack("{s:I, s:I, s:I, s:s, s:s, s:o, s:o}", "time",
					  (json_int_t)e->when, "times", (json_int_t)e->times,
					  "pid", (json_int_t)e->pid, "lib",
					  bpftel_shlib_lib_name(e->lib), "reason",
					  bpftel_refusal_name(e->why), "path",
					  bpftel_json_str(e->path), "detail",
					  bpftel_json_str(e->detail)));
	}
	json_object_set_new(resp, "refused", counts);
	json_object_set_new(resp, "recent_refusals", recent);
	json_object_set_new(resp, "refused_cached", json_integer((json_int_t)ref->cached));
	json_object_set_new(resp, "new_files_per_user",
			    json_integer((json_int_t)bpftel_uprobes__file_budget(u)));
	json_object_set_new(resp, "refused_evicted", json_integer((json_int_t)ref->evicted));
	json_object_set_new(resp, "unprobed_evicted",
			    json_integer((json_int_t)ref->unprobed_evicted));
	json_object_set_new(resp, "sweeps", json_integer((json_int_t)ref->sweeps));
	json_object_set_new(resp, "released_modified",
			    json_integer((json_int_t)ref->released_modified));
	json_object_set_new(resp, "idle_used", json_integer((json_int_t)ref->idle_used));
	json_object_set_new(resp, "idle_scans", json_integer((json_int_t)ref->idle_scans));
	json_object_set_new(resp, "climbing_scans",
			    json_integer((json_int_t)ref->climbing_scans));
	json_object_set_new(resp, "unreached_scans",
			    json_integer((json_int_t)ref->unreached_scans));
	json_object_set_new(resp, "scan_maps_cut", json_integer((json_int_t)ref->scan_maps_cut));
	json_object_set_new(resp, "unwatched", json_integer((json_int_t)ref->unwatched));
	free(ref);
	return deadline_json(resp);
}

json_t *sharedlibs_report(struct bpftel_module *m, json_t *req)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);
	struct bpftel_uprobe_file_info *rows;
	json_t *arr = json_array(), *o, *resp;
	int n, i;

	(void)req;
	if (!sl->registry)
		return json_pack("{s:o}", "libs", arr);
	n = bpftel_uprobes__files(sl->registry, &rows);
	for (i = 0; i < n; i++) {
		o = file_json(&rows[i]);
		if (o)
			json_array_append_new(arr, o);
	}
	if (n >= 0)
		free(rows);
	resp = json_pack("{s:o, s:i}", "libs", arr, "sweep_interval_ms", BPFTEL_HOUSEKEEPING_MS);
	json_object_set_new(resp, "proc_scans", json_integer((json_int_t)sl->scans.scans));
	return refusals_json(sl->registry, resp);
}

static void deadline_metrics(struct bpftel_prom *w)
{
	struct bpftel_deadline_stats ds;

	bpftel_deadline_stats(&ds);
	bpftel_prom_scalar(w, "bpftel_file_open_timeouts_total", "counter",
			   "Opens of other processes' files given up at their deadline: their file "
			   "system did not answer (refused as slow_fs).",
			   ds.abandoned);
	bpftel_prom_scalar(w, "bpftel_file_opens_waiting", "gauge",
			   "Opens given up at their deadline whose threads still wait on their "
			   "file system.",
			   ds.stuck);
	bpftel_prom_scalar(w, "bpftel_file_opens_not_tried_total", "counter",
			   "Opens refused without trying: as many as allowed still waited, in "
			   "all or for the process's user.",
			   ds.refused);
}

void sharedlibs_metrics(struct bpftel_module *m, struct bpftel_prom *w)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);
	struct bpftel_sharedlibs_counters cnt;
	struct bpftel_uprobes_refusals *ref;
	struct bpftel_prom_label l[1];
	int i;

	bpftel_prom_family(w, "bpftel_sharedlibs_detected_total", "counter",
			   "Detections of a process opening a watched library by a path it had "
			   "not been seen opening (among the last 1024 detections), by libset: "
			   "a process that opens two libraries of a set, or one by two paths, "
			   "counts twice.");
	if (!bpftel_sharedlibs__counters(sl, &cnt)) {
		for (i = 0; i < SHLIB_LIBSET__COUNT; i++) {
			l[0] = (struct bpftel_prom_label){"libset", bpftel_shlib_libset_name(i)};
			bpftel_prom_sample_u64(w, "", l, 1, cnt.detected[i]);
		}
	}
	ref = sl->registry ? calloc(1, sizeof(*ref)) : NULL;
	if (!ref)
		return;
	bpftel_uprobes__refusals(sl->registry, ref);
	/* Two families: the second counts a subset of the first's events. */
	bpftel_prom_scalar(w, "bpftel_sharedlibs_execs_reported_total", "counter",
			   "Execs the watcher reported to userspace (USM asks, for Go programs).",
			   cnt.execs);
	bpftel_prom_scalar(w, "bpftel_sharedlibs_executables_not_go_total", "counter",
			   "Executables found not to be Go programs: their execs are not reported "
			   "again while the kernel remembers them (4096).",
			   cnt.execs_skipped);
	bpftel_prom_family(w, "bpftel_uprobe_files_refused_total", "counter",
			   "Library files the uprobe registry refused to open, parse or track, "
			   "by reason.");
	for (i = 0; i < BPFTEL_REFUSED__COUNT; i++) {
		l[0] = (struct bpftel_prom_label){"reason", bpftel_refusal_name(i)};
		bpftel_prom_sample_u64(w, "", l, 1, ref->count[i]);
	}
	bpftel_prom_scalar(w, "bpftel_uprobe_files_released_modified_total", "counter",
			   "Library files written in place (same inode) while probed: their uprobes "
			   "released at once, before a process could run an instruction the file "
			   "no longer holds.",
			   ref->released_modified);
	bpftel_prom_scalar(w, "bpftel_uprobe_files_unwatched_total", "counter",
			   "Library files probed without a watch for writes (the inotify watch "
			   "limit): released as soon as no process uses them, not after the grace.",
			   ref->unwatched);
	free(ref);
	deadline_metrics(w);
}

/* The gain of what the programs report, read as gained, is answered by a scan: clear
 * it, unless another came since. */
static void gain_answered(struct bpftel_sharedlibs *sl, long long gained)
{
	pthread_mutex_lock(&sl->lock);
	if (sl->gained_ms == gained)
		sl->gained_ms = 0;
	pthread_mutex_unlock(&sl->lock);
}

/*
 * Every second, on the agent's housekeeping thread: forget exited processes and detach
 * long-idle files; and after any loss of a library event (in the kernel, at a full
 * queue, or a path that no longer led to the file opened), after the programs began to
 * report what they did not (a module started: executables, a libset), or files refused
 * over their user's budget, read /proc instead, paced (scan_pace.h).
 */
void sharedlibs_housekeeping(struct bpftel_module *m)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);
	struct bpftel_module_event_stats es;
	struct bpftel_sharedlibs_counters cnt;
	long long now = bpftel_mono_ms();
	struct bpftel_budget_pace budget;
	long long gained;
	__u64 lost, over;
	bool scan;

	if (!sl->registry)
		return;
	bpftel_uprobes__sweep(sl->registry);
	if (bpftel_sharedlibs__counters(sl, &cnt))
		return;
	bpftel_module__event_stats(m, &es);
	lost = cnt.kernel[SHLIB_CNT_LOST] + cnt.kernel[SHLIB_CNT_EXEC_LOST] +
	       cnt.kernel[SHLIB_CNT_NESTED] +
	       cnt.kernel[SHLIB_CNT_NO_PATH] +
	       cnt.kernel[SHLIB_CNT_TOO_LONG] + cnt.malformed + es.lost_queue_full +
	       es.lost_too_big + bpftel_uprobes__stale(sl->registry);
	over = bpftel_uprobes__refused_for_user(sl->registry);
	budget = sl->budget_scans;
	pthread_mutex_lock(&sl->lock);
	gained = sl->gained_ms;
	pthread_mutex_unlock(&sl->lock);
	/* A scan begun since (the agent's start-up scan) answered it already. */
	if (gained && gained < bpftel_uprobes__scanned_from_ms(sl->registry)) {
		gain_answered(sl, gained);
		gained = 0;
	}
	scan = (lost != sl->lost_seen || gained) && bpftel_scan_pace_take(&sl->scans, now);
	/* Taken even when a loss's scan runs now: the one scan answers both. */
	scan = bpftel_budget_pace_take(&sl->budget_scans, over, now) || scan;
	if (!scan)
		return;
	/* Only this thread touches it. A scan that could not read /proc (no fd left) is
	 * asked for again at the next pace. */
	if (bpftel_uprobes__scan(sl->registry) >= 0) {
		sl->lost_seen = lost;
		if (gained)
			gain_answered(sl, gained);
	} else {
		sl->budget_scans = budget; /* its refusals still unanswered */
	}
}
