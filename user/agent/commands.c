// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Control commands of bpftel-agent: one function per command, dispatched by name. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "user/common/ctl.h"
#include "user/sharedlibs/sharedlibs.h"

static double uptime_s(const struct bpftel_agent *agent)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - agent->mono_start.tv_sec) +
	       (now.tv_nsec - agent->mono_start.tv_nsec) / 1e9;
}

static bool pid_alive(__u32 pid)
{
	return !kill((pid_t)pid, 0) || errno == EPERM;
}

static json_t *stats_programs(const struct bpftel_sharedlibs *sl)
{
	const struct bpftel_prog_info *progs;
	json_t *arr = json_array();
	size_t i, n;

	n = bpftel_sharedlibs__progs(sl, &progs);
	for (i = 0; i < n; i++) {
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:s, s:I, s:b}", "name", progs[i].name,
				       "component", "sharedlibs", "attach", progs[i].attach, "id",
				       (json_int_t)progs[i].id, "attached", progs[i].attached));
	}
	return arr;
}

static json_t *stats_events(const struct bpftel_sharedlibs *sl)
{
	struct bpftel_sharedlibs_counters cnt;
	json_t *obj = json_object();
	int i;

	if (bpftel_sharedlibs__counters(sl, &cnt))
		return obj;
	json_object_set_new(obj, "received", json_integer(cnt.received));
	json_object_set_new(obj, "malformed", json_integer(cnt.malformed));
	json_object_set_new(obj, "evicted", json_integer(cnt.evicted));
	for (i = 0; i < SHLIB_CNT__COUNT; i++)
		json_object_set_new(obj, bpftel_shlib_counter_name(i), json_integer(cnt.kernel[i]));
	return obj;
}

static json_t *stats_libraries(const struct bpftel_sharedlibs *sl)
{
	const struct bpftel_shlib_detection *det;
	json_t *arr = json_array(), *o;
	size_t i, n;

	n = bpftel_sharedlibs__detections(sl, &det);
	for (i = 0; i < n; i++) {
		o = json_pack("{s:I, s:o, s:s, s:s, s:o, s:I, s:b, s:I, s:I}", "pid",
			      (json_int_t)det[i].pid, "comm", bpftel_json_str(det[i].comm), "lib",
			      bpftel_shlib_lib_name(det[i].lib), "libset",
			      bpftel_shlib_libset_name(det[i].libset), "path",
			      bpftel_json_str(det[i].path), "opens", (json_int_t)det[i].opens,
			      "alive", pid_alive(det[i].pid), "first_seen",
			      (json_int_t)det[i].first_seen, "last_seen",
			      (json_int_t)det[i].last_seen);
		if (!o)
			continue;
		json_object_set_new(o, "host_path",
				    det[i].host_path ? bpftel_json_str(det[i].host_path)
						     : json_null());
		json_array_append_new(arr, o);
	}
	return arr;
}

json_t *bpftel_agent_stats(struct bpftel_agent *agent)
{
	return json_pack(
		"{s:{s:s, s:i, s:f, s:I}, s:o, s:o, s:o}", "agent", "version", BPFTEL_VERSION,
		"pid", (int)getpid(), "uptime_s", uptime_s(agent), "started",
		(json_int_t)agent->started, "programs", stats_programs(agent->sharedlibs), "events",
		stats_events(agent->sharedlibs), "libraries", stats_libraries(agent->sharedlibs));
}

json_t *bpftel_agent_command(const char *cmd, json_t *req, void *ctx)
{
	struct bpftel_agent *agent = ctx;

	(void)req;
	if (!strcmp(cmd, "stats"))
		return bpftel_agent_stats(agent);
	if (!strcmp(cmd, "ping"))
		return json_pack("{s:s}", "version", BPFTEL_VERSION);
	return bpftel_ctl_error("unknown command '%.64s'", cmd);
}
