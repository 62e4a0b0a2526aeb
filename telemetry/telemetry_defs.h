/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Errors telemetry: the types both sides share (BPF includes it after vmlinux.h,
 * userspace after <linux/types.h>).
 *
 * Two per-CPU hash maps, created once by the userspace owner and reused (by fd) in
 * every instrumented object:
 *   tlm_map_errors    {prog, map, op, errno}  -> count   failed map operations
 *   tlm_helper_errors {prog, helper, errno}   -> count   failed helper calls
 * prog and map are keys the owner assigns before load, unique across all modules and
 * stable across restarts (a module that restarts gets the same keys back), written
 * into each object's .rodata variables tlm_key_prog_<program> / tlm_key_map_<map>.
 * helper is the kernel's BPF_FUNC_* number. errno is min(errno, TLM_ERRNO_OTHER).
 * When a hash is full, the count goes to slot TLM_LOST_* of tlm_lost instead.
 */
#ifndef BPFTEL_TELEMETRY_DEFS_H
#define BPFTEL_TELEMETRY_DEFS_H

/* errnos 0..TLM_ERRNO_OTHER-1 are kept apart; larger ones are counted as "other". */
#define TLM_ERRNO_OTHER 128
#define TLM_MAX_ENTRIES 4096

enum tlm_map_op {
	TLM_OP_UPDATE = 0,
	TLM_OP_DELETE = 1,
	TLM_OP_LOOKUP_INIT = 2, /* the insert of lookup-or-init */
	TLM_OP_RB_RESERVE = 3,	/* NULL from bpf_ringbuf_reserve: counted as ENOSPC */
	TLM_OP_RB_OUTPUT = 4,
	TLM_OP_INSERT = 5, /* tlm_map_insert: BPF_NOEXIST, its -EEXIST not counted */
	TLM_OP__COUNT,
};

enum tlm_lost_slot {
	TLM_LOST_MAP_ERRORS = 0,    /* tlm_map_errors was full */
	TLM_LOST_HELPER_ERRORS = 1, /* tlm_helper_errors was full */
	TLM_LOST__COUNT,
};

struct tlm_map_key {
	__u32 prog;
	__u32 map;
	__u16 op;
	__u16 err;
	__u32 __pad;
};

struct tlm_helper_key {
	__u32 prog;
	__u32 helper;
	__u16 err;
	__u16 __pad;
	__u32 __pad2;
};

_Static_assert(sizeof(struct tlm_map_key) == 16, "tlm_map_key layout");
_Static_assert(sizeof(struct tlm_helper_key) == 16, "tlm_helper_key layout");

#define TLM_KEY_PROG_PREFIX "tlm_key_prog_"
#define TLM_KEY_MAP_PREFIX  "tlm_key_map_"

#endif /* BPFTEL_TELEMETRY_DEFS_H */
