/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Errors telemetry, BPF side: wrappers around every map operation and helper call that
 * can fail. Each returns exactly what the wrapped call returns; on failure it counts
 * (program, map or helper, op, errno) in per-CPU hash maps (layout: telemetry_defs.h).
 * On success the cost is the one branch on the return value: the counting is a
 * separate global function, called only on failure, and verified once.
 *
 * Use:
 *   TLM_MAP_KEY(my_map);                      file scope, once per map used below
 *   TLM_PROG_KEY(my_prog);                    file scope, once per program
 *   SEC("...") int my_prog(void *ctx)
 *   {
 *           TLM_PROG(my_prog);                first statement: names the program
 *           return helper(TLM_ARG, ...);      inline helpers take TLM_PARAM first
 *   }
 *   tlm_map_update(my_map, &k, &v, BPF_ANY)   (the map's name, not its address)
 *   tlm_map_insert(my_map, &k, &v)            BPF_NOEXIST; a lost race (EEXIST) is no error
 *   tlm_map_take(my_map, &k)                  delete; a lost race (ENOENT) is no error
 *   tlm_map_replace(my_map, &k, &v)           BPF_EXIST; a lost race (ENOENT) is no error
 *
 * Keys are 0 until the userspace owner assigns them before load; counts then land on
 * program or map 0 ("unassigned"), never on another resource.
 */
#ifndef BPFTEL_TELEMETRY_BPF_H
#define BPFTEL_TELEMETRY_BPF_H

#include "telemetry_defs.h"

#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef ENOENT
#define ENOENT 2
#endif
#ifndef ENOSPC
#define ENOSPC 28
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, TLM_MAX_ENTRIES);
	__type(key, struct tlm_map_key);
	__type(value, __u64);
} tlm_map_errors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, TLM_MAX_ENTRIES);
	__type(key, struct tlm_helper_key);
	__type(value, __u64);
} tlm_helper_errors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TLM_LOST__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} tlm_lost SEC(".maps");

#define TLM_PROG_KEY(prog) const volatile __u32 tlm_key_prog_##prog = 0
#define TLM_MAP_KEY(map)   const volatile __u32 tlm_key_map_##map = 0
#define TLM_PROG(prog)	   __u32 __tlm_prog = tlm_key_prog_##prog
#define TLM_PARAM	   __u32 __tlm_prog
#define TLM_ARG		   __tlm_prog

static __always_inline __u16 tlm_errno(long ret)
{
	long err = -ret;

	return err >= 0 && err < TLM_ERRNO_OTHER ? (__u16)err : TLM_ERRNO_OTHER;
}

static __always_inline void tlm_lost_inc(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&tlm_lost, &slot);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* Per-CPU values, added to atomically all the same: a program can be interrupted on
 * its CPU by another that counts too (a socket filter in softirq, or on a preemptible
 * kernel another task's program), and a plain increment would lose one. A failed insert
 * means another CPU inserted the same key first (look again) or the map is full (count
 * as lost). */
__noinline int tlm_count_map_error(__u32 prog, __u32 map, __u32 op, long ret)
{
	struct tlm_map_key key = {.prog = prog, .map = map, .op = (__u16)op, .err = tlm_errno(ret)};
	__u64 one = 1, *v;

	v = bpf_map_lookup_elem(&tlm_map_errors, &key);
	if (!v && !bpf_map_update_elem(&tlm_map_errors, &key, &one, BPF_NOEXIST))
		return 0;
	if (!v)
		v = bpf_map_lookup_elem(&tlm_map_errors, &key);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		tlm_lost_inc(TLM_LOST_MAP_ERRORS);
	return 0;
}

__noinline int tlm_count_helper_error(__u32 prog, __u32 helper, long ret)
{
	struct tlm_helper_key key = {.prog = prog, .helper = helper, .err = tlm_errno(ret)};
	__u64 one = 1, *v;

	v = bpf_map_lookup_elem(&tlm_helper_errors, &key);
	if (!v && !bpf_map_update_elem(&tlm_helper_errors, &key, &one, BPF_NOEXIST))
		return 0;
	if (!v)
		v = bpf_map_lookup_elem(&tlm_helper_errors, &key);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		tlm_lost_inc(TLM_LOST_HELPER_ERRORS);
	return 0;
}

#define __tlm_map_ret(map, op, expr)                                                 \
	({                                                                           \
		long __r = (expr);                                                   \
		if (__r < 0)                                                         \
			tlm_count_map_error(__tlm_prog, tlm_key_map_##map, op, __r); \
		__r;                                                                 \
	})

#define __tlm_helper_ret(helper, expr)                                   \
	({                                                               \
		long __r = (expr);                                       \
		if (__r < 0)                                             \
			tlm_count_helper_error(__tlm_prog, helper, __r); \
		__r;                                                     \
	})

#define tlm_map_update(map, key, val, flags) \
	__tlm_map_ret(map, TLM_OP_UPDATE, bpf_map_update_elem(&map, key, val, flags))
#define tlm_map_delete(map, key) __tlm_map_ret(map, TLM_OP_DELETE, bpf_map_delete_elem(&map, key))

/* expr's result, counted under op unless it succeeded or failed with raced: the
 * outcome of a race with another CPU that the caller handles. */
#define __tlm_map_ret_raced(map, op, expr, raced)                                         \
	({                                                                                \
		long __r = (expr);                                                        \
		if (__r < 0 && __r != (raced))                                           \
			tlm_count_map_error(__tlm_prog, tlm_key_map_##map, op, __r);      \
		__r;                                                                      \
	})

/*
 * Insert key only where it is absent (BPF_NOEXIST). -EEXIST is an expected outcome
 * here, not an error: another CPU inserted the same key first, a race the caller
 * handles (looks the key up again). Any other failure (a full map: E2BIG) is counted,
 * under op "insert". tlm_map_update(map, key, val, BPF_NOEXIST) counts -EEXIST too:
 * use it where an existing key is a fault.
 */
#define tlm_map_insert(map, key, val)                                                     \
	__tlm_map_ret_raced(map, TLM_OP_INSERT, bpf_map_update_elem(&map, key, val, BPF_NOEXIST), \
			    -EEXIST)

/*
 * Take key out where another CPU may have taken it first (two frees of one pointer):
 * -ENOENT is that race, an outcome the caller handles, not an error. Any other failure
 * is counted, under op "delete". tlm_map_delete counts -ENOENT too: use it where a
 * missing key is a fault.
 */
#define tlm_map_take(map, key) \
	__tlm_map_ret_raced(map, TLM_OP_DELETE, bpf_map_delete_elem(&map, key), -ENOENT)

/* Replace key's value where another CPU may have taken the key meanwhile (BPF_EXIST):
 * -ENOENT is that race, not an error. Other failures are counted, under "update". */
#define tlm_map_replace(map, key, val)                                                    \
	__tlm_map_ret_raced(map, TLM_OP_UPDATE, bpf_map_update_elem(&map, key, val, BPF_EXIST), \
			    -ENOENT)

/* Lookup, or insert init and look up again. A lost insert race (EEXIST) is no error. */
#define tlm_map_lookup_or_init(map, key, init)                                        \
	({                                                                            \
		void *__v = bpf_map_lookup_elem(&map, key);                           \
		if (!__v) {                                                           \
			long __r = bpf_map_update_elem(&map, key, init, BPF_NOEXIST); \
			if (__r < 0 && __r != -EEXIST)                                \
				tlm_count_map_error(__tlm_prog, tlm_key_map_##map,    \
						    TLM_OP_LOOKUP_INIT, __r);         \
			__v = bpf_map_lookup_elem(&map, key);                         \
		}                                                                     \
		__v;                                                                  \
	})

#define tlm_ringbuf_output(map, data, size, flags) \
	__tlm_map_ret(map, TLM_OP_RB_OUTPUT, bpf_ringbuf_output(&map, data, size, flags))

/* bpf_ringbuf_reserve gives no errno: a NULL is counted as ENOSPC. */
#define tlm_ringbuf_reserve(map, size, flags)                                                 \
	({                                                                                    \
		void *__p = bpf_ringbuf_reserve(&map, size, flags);                           \
		if (!__p)                                                                     \
			tlm_count_map_error(__tlm_prog, tlm_key_map_##map, TLM_OP_RB_RESERVE, \
					    -ENOSPC);                                         \
		__p;                                                                          \
	})
/* Cannot fail; here so that no raw bpf_ringbuf_* call is needed outside this header. */
#define tlm_ringbuf_submit(ptr, flags)	bpf_ringbuf_submit(ptr, flags)
#define tlm_ringbuf_discard(ptr, flags) bpf_ringbuf_discard(ptr, flags)
#define tlm_ringbuf_query(map, flags)	bpf_ringbuf_query(&map, flags)

#define tlm_probe_read_user(dst, size, src) \
	__tlm_helper_ret(BPF_FUNC_probe_read_user, bpf_probe_read_user(dst, size, src))
#define tlm_probe_read_kernel(dst, size, src) \
	__tlm_helper_ret(BPF_FUNC_probe_read_kernel, bpf_probe_read_kernel(dst, size, src))
#define tlm_probe_read_user_str(dst, size, src) \
	__tlm_helper_ret(BPF_FUNC_probe_read_user_str, bpf_probe_read_user_str(dst, size, src))
#define tlm_probe_read_kernel_str(dst, size, src) \
	__tlm_helper_ret(BPF_FUNC_probe_read_kernel_str, bpf_probe_read_kernel_str(dst, size, src))
#define tlm_skb_load_bytes(skb, off, to, len) \
	__tlm_helper_ret(BPF_FUNC_skb_load_bytes, bpf_skb_load_bytes(skb, off, to, len))
#define tlm_skb_load_bytes_relative(skb, off, to, len, hdr) \
	__tlm_helper_ret(BPF_FUNC_skb_load_bytes_relative,  \
			 bpf_skb_load_bytes_relative(skb, off, to, len, hdr))

#endif /* BPFTEL_TELEMETRY_BPF_H */
