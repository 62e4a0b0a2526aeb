// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared-libraries watcher: notices successful read-only opens of the libraries that
 * modules care about (libssl, libcudart, ...) and reports them through a ring buffer.
 *
 * sys_enter_*: read the path once, reject non-libraries cheaply, remember a match per
 * thread. sys_exit_*: if the open succeeded, re-read the path and emit an event sized
 * to it. Only matched opens touch a hash map or the ring buffer. Thread exit: forget
 * the thread's open in flight (fentry, kprobe or tracepoint, whichever the kernel has).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "shared_libraries.h"
#include "lib/shlib_match.h"
#include "telemetry/telemetry.bpf.h"

#define O_ACCMODE 00000003
#define O_RDONLY  00000000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The agent's own process: it opens libraries to resolve uprobe symbols, and must not
 * see itself as their user. */
const volatile __u32 shlib_self_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} shlib_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shlib_config);
} shlib_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHLIB_CNT__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} shlib_counters SEC(".maps");

/* Too large for the BPF stack: the event is built in a per-CPU slot. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct shlib_event);
} shlib_scratch SEC(".maps");

struct shlib_inflight {
	__u64 filename; /* user pointer, re-read at exit */
	__u16 lib;	/* enum shlib_lib, or SHLIB_LIB_DEFERRED */
	__u16 syscall;
	__u16 libset;
	__u16 __pad;
};

/* LRU: an exit we never see (attached mid-syscall, thread killed) must not pin a slot. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct shlib_inflight);
} shlib_inflight SEC(".maps");

TLM_MAP_KEY(shlib_events);
TLM_MAP_KEY(shlib_inflight);
TLM_PROG_KEY(shlib_enter_openat);
TLM_PROG_KEY(shlib_exit_openat);
TLM_PROG_KEY(shlib_enter_open);
TLM_PROG_KEY(shlib_exit_open);
TLM_PROG_KEY(shlib_enter_openat2);
TLM_PROG_KEY(shlib_exit_openat2);
TLM_PROG_KEY(shlib_fentry_exit);
TLM_PROG_KEY(shlib_kprobe_exit);
TLM_PROG_KEY(shlib_tp_exit);

static __always_inline void shlib_count(enum shlib_counter counter)
{
	__u32 key = counter;
	__u64 *val;

	val = bpf_map_lookup_elem(&shlib_counters, &key);
	if (val)
		*val += 1;
}

#define SHLIB_UNREADABLE (-2)
#define SHLIB_SHORT_READ 128

/*
 * Copy the path at user address filename into ev->path. Returns its length, -1 if it is
 * empty or PATH_MAX bytes or longer (an open the kernel refuses anyway), or
 * SHLIB_UNREADABLE if the page holding it is not present yet: at sys_enter a path in a
 * freshly mapped page often is, since BPF cannot fault pages in.
 */
static __always_inline long shlib_read_path(TLM_PARAM, struct shlib_event *ev, const char *filename)
{
	long n;
	char next;

	/* Most paths are short, and the helper's cost grows with the size it is given
	 * (measured: 64 B ~200 ns, 4 KiB ~300 ns per call here): try a short read first. */
	n = tlm_probe_read_user_str(ev->path, SHLIB_SHORT_READ, filename);
	if (n == SHLIB_SHORT_READ)
		n = tlm_probe_read_user_str(ev->path, SHLIB_PATH_MAX, filename);
	if (n < 0)
		return SHLIB_UNREADABLE;
	if (n <= 1)
		return -1;
	if (n == SHLIB_PATH_MAX) {
		/* Buffer full: the path is PATH_MAX - 1 bytes exactly, or truncated. */
		if (tlm_probe_read_user(&next, 1, filename + SHLIB_PATH_MAX - 1) || next) {
			shlib_count(SHLIB_CNT_TOO_LONG);
			return -1;
		}
	}
	return n - 1;
}

/* Does the path in ev name a stem of cfg whose libset is enabled? Sets lib and libset. */
static __always_inline bool shlib_match_enabled(struct shlib_config *cfg, struct shlib_event *ev,
						long len, int *lib, __u32 *libset)
{
	int idx;

	if (!cfg)
		return false;
	idx = shlib_match_event(ev, len, cfg);
	if (idx < 0 || idx >= SHLIB_MAX_STEMS)
		return false;
	*lib = cfg->stems[idx].lib;
	*libset = cfg->stems[idx].libset;
	return *libset < 32 && (cfg->libsets & SHLIB_LIBSET_BIT(*libset));
}

static __always_inline int shlib_on_enter(TLM_PARAM, const char *filename, __u64 flags,
					  __u64 pid_tgid, enum shlib_syscall sys)
{
	struct shlib_inflight in = {};
	struct shlib_config *cfg;
	struct shlib_event *ev;
	__u32 zero = 0, libset = 0;
	long len;
	int lib;

	if ((flags & O_ACCMODE) != O_RDONLY || (pid_tgid >> 32) == shlib_self_tgid)
		return 0;
	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	if (!cfg || !cfg->libsets)
		return 0;
	ev = bpf_map_lookup_elem(&shlib_scratch, &zero);
	if (!ev)
		return 0;
	len = shlib_read_path(TLM_ARG, ev, filename);
	if (len == SHLIB_UNREADABLE) {
		/* The kernel faults the page in while it opens: match at exit instead. */
		shlib_count(SHLIB_CNT_DEFERRED);
		lib = SHLIB_LIB_DEFERRED;
		goto remember;
	}
	if (len < 0 || !shlib_match_enabled(cfg, ev, len, &lib, &libset))
		return 0;
	shlib_count(SHLIB_CNT_MATCHED);
remember:
	in.filename = (__u64)filename;
	in.lib = lib;
	in.libset = libset;
	in.syscall = sys;
	if (tlm_map_update(shlib_inflight, &pid_tgid, &in, BPF_ANY))
		shlib_count(SHLIB_CNT_INFLIGHT_FULL);
	return 0;
}

static __always_inline int shlib_on_exit(TLM_PARAM, long ret, __u64 pid_tgid)
{
	struct shlib_inflight *in;
	struct shlib_config *cfg;
	struct shlib_event *ev;
	__u64 filename;
	__u32 zero = 0, libset;
	__u16 sys;
	long len;
	int lib;

	in = bpf_map_lookup_elem(&shlib_inflight, &pid_tgid);
	if (!in)
		return 0;
	filename = in->filename;
	lib = in->lib;
	libset = in->libset;
	sys = in->syscall;
	tlm_map_delete(shlib_inflight, &pid_tgid);
	if (ret < 0) {
		if (lib != SHLIB_LIB_DEFERRED)
			shlib_count(SHLIB_CNT_OPEN_FAILED);
		return 0;
	}

	ev = bpf_map_lookup_elem(&shlib_scratch, &zero);
	if (!ev)
		return 0;
	len = shlib_read_path(TLM_ARG, ev, (const char *)filename);
	if (len < 0) {
		shlib_count(SHLIB_CNT_LOST);
		return 0;
	}
	if (lib == SHLIB_LIB_DEFERRED) {
		cfg = bpf_map_lookup_elem(&shlib_config, &zero);
		if (!shlib_match_enabled(cfg, ev, len, &lib, &libset))
			return 0;
		shlib_count(SHLIB_CNT_MATCHED);
	}
	ev->ktime_ns = bpf_ktime_get_ns();
	ev->pid = pid_tgid >> 32;
	ev->tid = (__u32)pid_tgid;
	ev->lib = lib;
	ev->libset = libset;
	ev->syscall = sys;
	ev->path_len = len;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	if (tlm_ringbuf_output(shlib_events, ev, SHLIB_EVENT_HDR_SIZE + SHLIB_IDX(len) + 1, 0))
		shlib_count(SHLIB_CNT_LOST);
	else
		shlib_count(SHLIB_CNT_EMITTED);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int shlib_enter_openat(struct trace_event_raw_sys_enter *ctx)
{
	TLM_PROG(shlib_enter_openat);

	return shlib_on_enter(TLM_ARG, (const char *)ctx->args[1], ctx->args[2],
			      bpf_get_current_pid_tgid(), SHLIB_SYS_OPENAT);
}

SEC("tracepoint/syscalls/sys_exit_openat")
int shlib_exit_openat(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_openat);

	return shlib_on_exit(TLM_ARG, ctx->ret, bpf_get_current_pid_tgid());
}

SEC("tracepoint/syscalls/sys_enter_open")
int shlib_enter_open(struct trace_event_raw_sys_enter *ctx)
{
	TLM_PROG(shlib_enter_open);

	return shlib_on_enter(TLM_ARG, (const char *)ctx->args[0], ctx->args[1],
			      bpf_get_current_pid_tgid(), SHLIB_SYS_OPEN);
}

SEC("tracepoint/syscalls/sys_exit_open")
int shlib_exit_open(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_open);

	return shlib_on_exit(TLM_ARG, ctx->ret, bpf_get_current_pid_tgid());
}

SEC("tracepoint/syscalls/sys_enter_openat2")
int shlib_enter_openat2(struct trace_event_raw_sys_enter *ctx)
{
	TLM_PROG(shlib_enter_openat2);
	struct open_how how = {};

	/* openat2(dfd, filename, how, size): the flags live in user memory. */
	if (tlm_probe_read_user(&how.flags, sizeof(how.flags), (void *)ctx->args[2]))
		return 0;
	return shlib_on_enter(TLM_ARG, (const char *)ctx->args[1], how.flags,
			      bpf_get_current_pid_tgid(), SHLIB_SYS_OPENAT2);
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int shlib_exit_openat2(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_openat2);

	return shlib_on_exit(TLM_ARG, ctx->ret, bpf_get_current_pid_tgid());
}

/* A thread that dies inside open() never reaches sys_exit: drop what it left. */
static __always_inline int shlib_on_task_exit(TLM_PARAM, __u64 pid_tgid)
{
	/* Look first: most exiting threads have nothing in flight, and a delete's ENOENT
	 * would be counted as an error. */
	if (bpf_map_lookup_elem(&shlib_inflight, &pid_tgid))
		tlm_map_delete(shlib_inflight, &pid_tgid);
	return 0;
}

SEC("fentry/do_exit")
int BPF_PROG(shlib_fentry_exit, long code)
{
	TLM_PROG(shlib_fentry_exit);

	return shlib_on_task_exit(TLM_ARG, bpf_get_current_pid_tgid());
}

SEC("kprobe/do_exit")
int shlib_kprobe_exit(void *ctx)
{
	TLM_PROG(shlib_kprobe_exit);

	return shlib_on_task_exit(TLM_ARG, bpf_get_current_pid_tgid());
}

SEC("tracepoint/sched/sched_process_exit")
int shlib_tp_exit(void *ctx)
{
	TLM_PROG(shlib_tp_exit);

	return shlib_on_task_exit(TLM_ARG, bpf_get_current_pid_tgid());
}
