/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Small library for BPF_PROG_TEST_RUN tests: load a skeleton, run a program with a
 * context, read maps and the ring buffer. Every BPF test uses it:
 *
 *   main():  bpftel_test_require_bpf();          // exit 77 (ctest skip) without privileges
 *   setup:   skel = x__open_and_load();          // the harness object
 *   case:    bpftel_test_run(prog, &ctx, sizeof(ctx), &retval);
 *            bpftel_rb_capture__drain(&cap);      // records the run emitted
 *            bpftel_test_percpu_sum(map_fd, key); // counters
 *
 * Tests assert; this library only reports errors (negative errno).
 */
#ifndef BPFTEL_TEST_HARNESS_H
#define BPFTEL_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
#include <bpf/libbpf.h>

/* Exit 77 (ctest's SKIP_RETURN_CODE) unless this process may load BPF programs. */
void bpftel_test_require_bpf(void);

/* Run prog once with ctx_in (syscall/raw_tp) and store its return value. 0 or -errno. */
int bpftel_test_run(const struct bpf_program *prog, void *ctx, size_t ctx_size, int *retval);

/* Sum of one u64 per-CPU array slot over all CPUs; 0 if the lookup fails. */
__u64 bpftel_test_percpu_sum(int map_fd, __u32 key);

/* Zero every slot of a per-CPU array of u64s. */
int bpftel_test_percpu_clear(int map_fd, __u32 nkeys);

/*
 * This process's open fds, and among them its BPF programs, maps and links. Only its
 * own: what the rest of the host loads meanwhile (a service's cgroup device program,
 * another test run) is none of a test's business. Everything this process keeps in
 * the kernel hangs off one of its fds (a link, a perf event, a socket: the agent pins
 * nothing), so a leak shows here.
 */
struct bpftel_obj_counts {
	unsigned int progs, maps, links, fds;
};

void bpftel_test_count_objects(struct bpftel_obj_counts *out);
/* A baseline: counts once they stay the same for 50 ms (the reaper may still be
 * destroying a previous test's links), at most 3 s. */
void bpftel_test_baseline(struct bpftel_obj_counts *out);
/*
 * Count until the counts equal *base or 30 s pass, then store the last counts in *out
 * (links handed to the reaper are held until it has destroyed them: ~80 ms each).
 */
void bpftel_test_settle_objects(const struct bpftel_obj_counts *base,
				struct bpftel_obj_counts *out);

/* Nothing left behind: this process's fds, programs, maps and links as in base. */
#define assert_objects_back(base, now)                         \
	do {                                                   \
		assert_int_equal((now)->fds, (base)->fds);     \
		assert_int_equal((now)->progs, (base)->progs); \
		assert_int_equal((now)->maps, (base)->maps);   \
		assert_int_equal((now)->links, (base)->links); \
	} while (0)

/* Whether this process holds an fd whose link names real (a resolved path). */
bool bpftel_test_holds_fd_of(const char *real);

/* List this process's fds and what they point to (leak diagnostics). */
void bpftel_test_list_fds(FILE *out);

#define BPFTEL_RB_CAPTURE_MAX 64

struct bpftel_rb_record {
	size_t size;
	void *data;
};

struct bpftel_rb_capture {
	struct ring_buffer *rb;
	size_t n;
	size_t dropped; /* records past BPFTEL_RB_CAPTURE_MAX */
	struct bpftel_rb_record rec[BPFTEL_RB_CAPTURE_MAX];
};

int bpftel_rb_capture__open(struct bpftel_rb_capture *cap, int map_fd);
/* Free what the last drain captured, then read every pending record. Returns cap->n. */
int bpftel_rb_capture__drain(struct bpftel_rb_capture *cap);
void bpftel_rb_capture__close(struct bpftel_rb_capture *cap);

/* x86-64 struct pt_regs as vmlinux.h has it: the synthetic register set that harness
 * programs hand to probe bodies (uprobes read their arguments from it). */
struct test_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
		cs, flags, sp, ss;
};
_Static_assert(sizeof(struct test_regs) == 21 * 8, "struct pt_regs of x86-64");

#endif /* BPFTEL_TEST_HARNESS_H */
