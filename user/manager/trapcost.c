// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Uprobe trap cost calibration (trapcost.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>

#include "manager.h"
#include "trapcost.h"
#include "uprobe_multi.h"

/*
 * The functions timed. noipa: never inlined, cloned or folded into one another (their
 * bodies differ too), so that each has its own address for its own probe; used: kept.
 */
__attribute__((noipa, used)) int bpftel_trap_target_none(int x)
{
	return x + 1;
}

__attribute__((noipa, used)) int bpftel_trap_target_entry(int x)
{
	return x + 2;
}

__attribute__((noipa, used)) int bpftel_trap_target_return(int x)
{
	return x + 3;
}

__attribute__((noipa, used)) int bpftel_trap_target_pair(int x)
{
	return x + 4;
}

/* Starts with an instruction the kernel emulates (push), where the others start with
 * one it single-steps: written out, since what a compiler puts first is its choice. */
int bpftel_trap_target_emulated(int x);
__asm__(".text\n"
	".globl bpftel_trap_target_emulated\n"
	".type bpftel_trap_target_emulated, @function\n"
	"bpftel_trap_target_emulated:\n"
	"\tpush %rbp\n"
	"\tpop %rbp\n"
	"\tlea 5(%rdi), %eax\n"
	"\tret\n"
	".size bpftel_trap_target_emulated, .-bpftel_trap_target_emulated\n");

static volatile int sink;

static double mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Mean ns per call of fn over n calls. */
static double time_calls(int (*fn)(int), unsigned int n)
{
	double t0 = mono_ns();
	unsigned int i;
	int acc = 0;

	for (i = 0; i < n; i++)
		acc += fn((int)i);
	sink = acc;
	return (mono_ns() - t0) / n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* r0 = 0; exit: the cheapest program a probe can run. */
static int load_empty(bool multi)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts);
	int fd;

	if (multi)
		opts.expected_attach_type = (enum bpf_attach_type)BPFTEL_TRACE_UPROBE_MULTI;
	fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "bpftel_trapcal", "GPL", insns, 2, &opts);
	return fd < 0 ? -errno : fd;
}

static int read_int_file(const char *path, const char *fmt, int *out)
{
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, fmt, out);
	fclose(f);
	return n == 1 ? 0 : -EINVAL;
}

/* A perf-event uprobe (kernels without multi-uprobe links): the event's fd holds it. */
static int perf_uprobe(int prog, unsigned long off, bool retprobe)
{
	struct perf_event_attr attr;
	int type, bit = 0, fd, err;

	err = read_int_file("/sys/bus/event_source/devices/uprobe/type", "%d", &type);
	if (!err && retprobe)
		err = read_int_file("/sys/bus/event_source/devices/uprobe/format/retprobe",
				    "config:%d", &bit);
	if (err)
		return err;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = type;
	attr.config = retprobe ? 1ULL << bit : 0;
	attr.config1 = (__u64)(unsigned long)"/proc/self/exe"; /* uprobe_path */
	attr.config2 = off;				       /* probe_offset */
	fd = (int)syscall(__NR_perf_event_open, &attr, getpid(), -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* An empty program on fn's entry or return, this process only: the link's fd. */
static int probe(int (*fn)(int), bool retprobe, bool multi, char *why, size_t len)
{
	long off = bpftel_uprobe_self_offset((const void *)fn);
	unsigned long uoff;
	int prog, link;

	if (off < 0) {
		snprintf(why, len, "no executable mapping of our own code: %s",
			 strerror((int)-off));
		return (int)off;
	}
	uoff = (unsigned long)off;
	prog = load_empty(multi);
	if (prog < 0) {
		snprintf(why, len, "cannot load an empty uprobe program: %s", strerror(-prog));
		return prog;
	}
	link = multi ? bpftel_uprobe_multi_attach(prog, "/proc/self/exe", &uoff, NULL, 1, retprobe,
						  getpid())
		     : perf_uprobe(prog, uoff, retprobe);
	close(prog); /* the link holds it */
	if (link < 0)
		snprintf(why, len, "cannot attach a %s: %s", retprobe ? "uretprobe" : "uprobe",
			 strerror(-link));
	return link;
}

int bpftel_trap_cost_calibrate(struct bpftel_trap_cost *out)
{
	static int (*const fns[])(int) = {bpftel_trap_target_none, bpftel_trap_target_entry,
					  bpftel_trap_target_return, bpftel_trap_target_pair,
					  bpftel_trap_target_emulated};
	/* Which function each link goes on, and at its entry or return. */
	static const struct {
		int fn;
		bool ret;
	} links[] = {{1, false}, {2, true}, {3, false}, {3, true}, {4, false}};
	double t[5][BPFTEL_TRAP_BATCHES], med[5], t0 = mono_ns();
	bool multi = !bpftel_uprobe_multi_detect(NULL, 0);
	int fd[5] = {-1, -1, -1, -1, -1}, err = 0, b, i;

	memset(out, 0, sizeof(*out));
	out->link = multi ? "multi" : "perf_event";
	for (i = 0; i < 5 && !err; i++) {
		fd[i] = probe(fns[links[i].fn], links[i].ret, multi, out->error,
			      sizeof(out->error));
		err = fd[i] < 0 ? fd[i] : 0;
	}
	if (err)
		goto out;
	/* The first hit of a probe sets it up in the process (its slot, its page): not
	 * part of the cost. */
	for (i = 0; i < 5; i++)
		time_calls(fns[i], 16);
	for (b = 0; b < BPFTEL_TRAP_BATCHES; b++) {
		for (i = 0; i < 5; i++)
			t[i][b] = time_calls(fns[i], BPFTEL_TRAP_CALLS);
	}
	for (i = 0; i < 5; i++)
		med[i] = median(t[i], BPFTEL_TRAP_BATCHES);
	out->call_ns = med[0];
	out->uprobe_ns = med[1] - med[0];
	out->uretprobe_ns = med[2] - med[0];
	out->pair_ns = med[3] - med[0];
	/* Cheap enough to vanish in the noise on some hosts: then not known, and entry
	 * probes on such instructions are charged uprobe_ns (an over-estimate). */
	out->uprobe_emulated_ns = med[4] - med[0] > 0 ? med[4] - med[0] : -1;
	out->calls = BPFTEL_TRAP_CALLS * BPFTEL_TRAP_BATCHES;
	/* pair - uprobe, what a return probe adds to an entry probe, is small (~0.2-2 us
	 * here) and may come out below 0 in the noise: not a failure (overhead.c clamps). */
	if (out->uprobe_ns <= 0 || out->uretprobe_ns <= 0 || out->pair_ns <= 0) {
		/* The probes did not fire (another tool's filter? a kernel quirk): a cost we
		 * did not see is unknown, not zero. */
		snprintf(out->error, sizeof(out->error),
			 "the probes did not slow the calls down (%.0f, %.0f, %.0f ns): not firing",
			 out->uprobe_ns, out->uretprobe_ns, out->pair_ns);
		err = -ENODATA;
	}
out:
	/* Detaching waits for the kernel: the reaper does it, off this thread. */
	for (i = 0; i < 5; i++) {
		if (fd[i] >= 0)
			bpftel_release(NULL, fd[i], NULL, NULL);
	}
	out->known = !err;
	out->took_ms = (mono_ns() - t0) / 1e6;
	return err;
}
