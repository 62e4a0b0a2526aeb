// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The `gpu` control command: the GPU module's per-process state as JSON. */
#include <jansson.h>

#include "agent.h"
#include "user/manager/manager.h"
#include "user/modules/gpu/gpu.h"

static json_t *memory_json(const struct bpftel_gpu_proc *p)
{
	json_t *age = json_object();
	int b;

	for (b = 0; b < BPFTEL_GPU_AGE_BUCKETS; b++)
		json_object_set_new(age, bpftel_gpu_age_names[b],
				    json_pack("{s:I, s:I}", "allocs", (json_int_t)p->age_allocs[b],
					      "bytes", (json_int_t)p->age_bytes[b]));
	return json_pack(
		"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "allocs",
		(json_int_t)p->st.allocs, "alloc_bytes", (json_int_t)p->st.alloc_bytes, "frees",
		(json_int_t)p->st.frees, "freed_bytes", (json_int_t)p->st.freed_bytes,
		"frees_unknown", (json_int_t)p->st.frees_unknown, "allocs_untracked",
		(json_int_t)p->st.allocs_untracked, "outstanding_bytes",
		(json_int_t)p->st.outstanding_bytes, "peak_bytes", (json_int_t)p->st.peak_bytes,
		"outstanding_allocs", (json_int_t)p->outstanding_allocs, "oldest_seconds",
		p->oldest_ns / 1e9, "age", age);
}

static json_t *proc_json(const struct bpftel_gpu_proc *p)
{
	json_t *calls = json_object(), *failed = json_object(), *copies = json_object();
	json_t *sizes = json_array(), *errors = json_array();
	const char *name;
	size_t i;

	for (i = 0; i < GPU_FN__COUNT; i++) {
		json_object_set_new(calls, bpftel_gpu_func_name(i), json_integer(p->st.calls[i]));
		json_object_set_new(failed, bpftel_gpu_func_name(i), json_integer(p->st.failed[i]));
	}
	for (i = 0; i < GPU_MEMCPY__COUNT; i++)
		json_object_set_new(copies, bpftel_gpu_memcpy_kind_name(i),
				    json_integer(p->st.memcpy_bytes[i]));
	for (i = 0; i < GPU_LAUNCH_BUCKETS; i++) {
		if (p->st.launch_threads[i])
			json_array_append_new(
				sizes, json_pack("{s:I, s:I}", "min_threads", (json_int_t)1 << i,
						 "launches", (json_int_t)p->st.launch_threads[i]));
	}
	for (i = 0; i < p->nerrors && i < BPFTEL_GPU_MAX_ERRORS; i++) {
		name = bpftel_cuda_error_name(p->errors[i].error);
		json_array_append_new(errors, json_pack("{s:s, s:i, s:s?, s:I}", "function",
							bpftel_gpu_func_name(p->errors[i].func),
							"error", p->errors[i].error, "name", name,
							"count", (json_int_t)p->errors[i].count));
	}
	return json_pack(
		"{s:i, s:s, s:i, s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:f, s:f, s:o, "
		"s:I}",
		"pid", (int)p->pid, "comm", p->comm, "device", p->st.device, "calls", calls,
		"failed", failed, "launches", (json_int_t)p->st.calls[GPU_FN_LAUNCH], "threads",
		(json_int_t)p->st.threads, "shared_mem_bytes", (json_int_t)p->st.shared_mem_bytes,
		"launch_sizes", sizes, "memory", memory_json(p), "memcpy_bytes", copies,
		"memcpy_seconds", p->st.memcpy_ns / 1e9, "sync_wait_seconds", p->st.sync_ns / 1e9,
		"errors", errors, "errors_not_listed",
		(json_int_t)(p->nerrors > BPFTEL_GPU_MAX_ERRORS ? p->nerrors - BPFTEL_GPU_MAX_ERRORS
								: 0));
}

json_t *bpftel_agent_gpu_json(struct bpftel_agent *agent)
{
	struct bpftel_gpu_proc *rows;
	json_t *procs = json_array();
	struct bpftel_module *m;
	int n, i;

	if (!agent->gpu)
		return json_pack("{s:s, s:o}", "state", "absent", "processes", procs);
	m = bpftel_gpu__module(agent->gpu);
	n = bpftel_gpu__processes(agent->gpu, &rows);
	for (i = 0; i < n; i++)
		json_array_append_new(procs, proc_json(&rows[i]));
	free(rows);
	return json_pack("{s:s, s:o}", "state", bpftel_module_state_name(bpftel_module__state(m)),
			 "processes", procs);
}
