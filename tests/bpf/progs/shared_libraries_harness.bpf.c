// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN harness for bpf/shared_libraries.bpf.c. It compiles the real object
 * (same maps, same inline code, same tracepoint programs) and adds a syscall program
 * that plays one open: enter with (filename, flags), then exit with ret, as the thread
 * pid_tgid. A syscall program runs in the test's own process, so filename is an
 * ordinary pointer into the test's memory and bpf_probe_read_user_str reads it as the
 * real probe would.
 */
#include "../../../bpf/shared_libraries.bpf.c"

struct shlib_test_open {
	__u64 filename;
	__u64 flags;
	__s64 ret;
	__u64 pid_tgid;
	__u32 syscall;
	__u32 __pad;
	__u64 exit_filename; /* if set: the path became readable there by exit time */
};

SEC("syscall")
int shlib_test_open(struct shlib_test_open *ctx)
{
	__u32 __tlm_prog = 0;

	__u64 pid_tgid = ctx->pid_tgid;
	struct shlib_inflight *in;

	shlib_on_enter(TLM_ARG, (const char *)ctx->filename, ctx->flags, ctx->pid_tgid,
		       ctx->syscall);
	/* Plays a page faulted in during the syscall: same open, readable at exit. */
	in = bpf_map_lookup_elem(&shlib_inflight, &pid_tgid);
	if (in && ctx->exit_filename)
		in->filename = ctx->exit_filename;
	return shlib_on_exit(TLM_ARG, ctx->ret, ctx->pid_tgid);
}

/* Returns shlib_match_event() of the path alone, without config or maps. */
SEC("syscall")
int shlib_test_match(struct shlib_test_open *ctx)
{
	struct shlib_config *cfg;
	struct shlib_event *ev;
	__u32 zero = 0, __tlm_prog = 0;
	long len;

	ev = bpf_map_lookup_elem(&shlib_scratch, &zero);
	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	if (!ev || !cfg)
		return -2;
	len = shlib_read_path(TLM_ARG, ev, (const char *)ctx->filename);
	if (len < 0)
		return -3;
	return shlib_match_event(ev, len, cfg);
}
