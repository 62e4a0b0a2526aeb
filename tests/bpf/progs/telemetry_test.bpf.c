// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Programs that fail on purpose through the telemetry wrappers (and one that only
 * succeeds), for BPF_PROG_TEST_RUN tests; inserts whose EEXIST is expected or not; a
 * getppid tracepoint that fails a read for module-level tests; and socket programs
 * doing N map updates wrapped or raw, for tools/bench (test_run with repeat works for
 * socket programs).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "telemetry/telemetry.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* inputs */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} tiny SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} small_rb SEC(".maps");

/* Filled from userspace: telemetry's count of a map's entries over several batches,
 * per-CPU values. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} many SEC(".maps");

/* For tlm_map_insert against a plain BPF_NOEXIST update. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} ins_map SEC(".maps");

#define BENCH_UPDATES 64

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_UPDATES);
	__type(key, __u32);
	__type(value, __u64);
} bench_map SEC(".maps");

TLM_MAP_KEY(tiny);
TLM_MAP_KEY(small_rb);
TLM_MAP_KEY(bench_map);
TLM_MAP_KEY(ins_map);
TLM_PROG_KEY(tt_fill_hash);
TLM_PROG_KEY(tt_bad_read);
TLM_PROG_KEY(tt_fill_rb);
TLM_PROG_KEY(tt_success);
TLM_PROG_KEY(tt_getppid);
TLM_PROG_KEY(tt_bench_wrapped);
TLM_PROG_KEY(tt_insert_dup);
TLM_PROG_KEY(tt_update_dup);
TLM_PROG_KEY(tt_insert_full);
TLM_PROG_KEY(tt_take_gone);

/* Three keys into a two-entry hash: the third update fails with E2BIG. */
SEC("syscall")
int tt_fill_hash(void *ctx)
{
	TLM_PROG(tt_fill_hash);
	__u64 val = 1;
	__u32 i, k;
	int failed = 0;

	/* The key is a copy: a loop counter whose address goes to a helper loses its
	 * bounds in the verifier. */
	for (i = 1; i <= 3; i++) {
		k = i;
		failed += tlm_map_update(tiny, &k, &val, BPF_ANY) < 0;
	}
	return failed;
}

SEC("syscall")
int tt_bad_read(void *ctx)
{
	TLM_PROG(tt_bad_read);
	char buf[8];

	return tlm_probe_read_user(buf, sizeof(buf), (void *)16) < 0;
}

/* 1000-byte records into a 4 KiB ring buffer: four fit (1008 bytes each with their
 * header), the fifth reserve fails, and a 64-byte output no longer fits in the 64
 * bytes left (it needs 72). Returns how many reservations failed. */
SEC("syscall")
int tt_fill_rb(void *ctx)
{
	TLM_PROG(tt_fill_rb);
	char small[64] = {};
	int i, failed = 0;
	void *rec;

	for (i = 0; i < 5; i++) {
		rec = tlm_ringbuf_reserve(small_rb, 1000, 0);
		if (!rec) {
			failed++;
			continue;
		}
		tlm_ringbuf_submit(rec, 0);
	}
	tlm_ringbuf_output(small_rb, small, sizeof(small), 0);
	return failed;
}

/* Every wrapper, every call succeeding: no counter may move. */
SEC("syscall")
int tt_success(void *ctx)
{
	TLM_PROG(tt_success);
	__u64 val = 7, init = 0, *v;
	__u32 k = 1;
	char buf[8];
	void *rec;
	long ret = 0;

	ret |= tlm_map_update(tiny, &k, &val, BPF_ANY);
	v = tlm_map_lookup_or_init(tiny, &k, &init);
	ret |= !v;
	ret |= tlm_map_delete(tiny, &k);
	ret |= tlm_probe_read_kernel(buf, sizeof(buf), &val);
	rec = tlm_ringbuf_reserve(small_rb, 8, 0);
	if (rec)
		tlm_ringbuf_submit(rec, 0);
	else
		ret |= 1;
	ret |= tlm_ringbuf_output(small_rb, &val, sizeof(val), 0);
	return ret != 0;
}

/* The same key inserted twice: the second insert loses (-EEXIST), as a racing CPU's
 * would. Returns 1 when the calls returned 0, then -EEXIST. */
SEC("syscall")
int tt_insert_dup(void *ctx)
{
	TLM_PROG(tt_insert_dup);
	__u64 val = 1;
	__u32 k = 1;
	long first, second;

	first = tlm_map_insert(ins_map, &k, &val);
	second = tlm_map_insert(ins_map, &k, &val);
	return first == 0 && second == -EEXIST;
}

/* The same with a plain update and BPF_NOEXIST: there the EEXIST is an error. */
SEC("syscall")
int tt_update_dup(void *ctx)
{
	TLM_PROG(tt_update_dup);
	__u64 val = 1;
	__u32 k = 1;
	long first, second;

	first = tlm_map_update(ins_map, &k, &val, BPF_NOEXIST);
	second = tlm_map_update(ins_map, &k, &val, BPF_NOEXIST);
	return first == 0 && second == -EEXIST;
}

/* A key taken twice, and replaced once gone, as racing CPUs would: -ENOENT each time,
 * expected. Then a plain delete of the gone key: that -ENOENT is an error. Returns 1
 * when the calls returned so. */
SEC("syscall")
int tt_take_gone(void *ctx)
{
	TLM_PROG(tt_take_gone);
	__u64 val = 1;
	__u32 k = 7;
	long ins, first, second, repl, del;

	ins = tlm_map_insert(ins_map, &k, &val);
	first = tlm_map_take(ins_map, &k);
	second = tlm_map_take(ins_map, &k);
	repl = tlm_map_replace(ins_map, &k, &val);
	del = tlm_map_delete(ins_map, &k);
	return !ins && !first && second == -ENOENT && repl == -ENOENT && del == -ENOENT;
}

/* Three new keys inserted into a two-entry hash: the third fails (E2BIG), an error
 * even for an insert. Returns how many inserts failed. */
SEC("syscall")
int tt_insert_full(void *ctx)
{
	TLM_PROG(tt_insert_full);
	__u64 val = 1;
	__u32 i, k;
	int failed = 0;

	for (i = 1; i <= 3; i++) {
		k = i;
		failed += tlm_map_insert(ins_map, &k, &val) < 0;
	}
	return failed;
}

/* For module tests: each getppid() of the target process counts one EFAULT. */
SEC("tracepoint/syscalls/sys_enter_getppid")
int tt_getppid(void *ctx)
{
	TLM_PROG(tt_getppid);
	char buf[8];

	if ((bpf_get_current_pid_tgid() >> 32) == target_tgid)
		tlm_probe_read_user(buf, sizeof(buf), (void *)16);
	return 0;
}

SEC("socket")
int tt_bench_wrapped(struct __sk_buff *skb)
{
	TLM_PROG(tt_bench_wrapped);
	__u64 val = 1;
	__u32 i, k;

	for (i = 0; i < BENCH_UPDATES; i++) {
		k = i;
		tlm_map_update(bench_map, &k, &val, BPF_ANY);
	}
	return 0;
}

SEC("socket")
int tt_bench_raw(struct __sk_buff *skb)
{
	__u64 val = 1;
	__u32 i, k;

	for (i = 0; i < BENCH_UPDATES; i++) {
		k = i;
		bpf_map_update_elem(&bench_map, &k, &val, BPF_ANY);
	}
	return 0;
}
