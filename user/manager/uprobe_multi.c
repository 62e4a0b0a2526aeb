// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Multi-uprobe links through raw bpf(2) (see uprobe_multi.h). */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "uprobe_multi.h"

/* BPF_LINK_CREATE's attributes for uprobe_multi, laid out as in the uapi of Linux >= 6.6:
 * the common link_create head, then the union member at offset 16. Debian 12's
 * linux/bpf.h predates it. */
struct link_create_uprobe_multi {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 um_flags;
	__u32 pid;
	__u32 __pad;
};

_Static_assert(offsetof(struct link_create_uprobe_multi, path) == 16, "uapi layout");
_Static_assert(offsetof(struct link_create_uprobe_multi, cnt) == 48, "uapi layout");
_Static_assert(offsetof(struct link_create_uprobe_multi, pid) == 56, "uapi layout");

int bpftel_uprobe_multi_attach(int prog_fd, const char *path, const unsigned long *offsets,
			       const __u64 *cookies, size_t cnt, bool retprobe, int pid)
{
	struct link_create_uprobe_multi attr;
	int fd;

	if (prog_fd < 0 || !path || !offsets || !cnt || cnt > BPFTEL_UPROBE_MULTI_MAX)
		return -EINVAL;
	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.attach_type = BPFTEL_TRACE_UPROBE_MULTI;
	attr.path = (__u64)(unsigned long)path;
	attr.offsets = (__u64)(unsigned long)offsets;
	attr.cookies = (__u64)(unsigned long)cookies;
	attr.cnt = (__u32)cnt;
	attr.um_flags = retprobe ? BPFTEL_F_UPROBE_MULTI_RETURN : 0;
	attr.pid = pid > 0 ? (__u32)pid : 0;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

int bpftel_uprobe_multi_prepare(struct bpf_program *prog)
{
	return bpf_program__set_expected_attach_type(
		prog, (enum bpf_attach_type)BPFTEL_TRACE_UPROBE_MULTI);
}

/* What detection probes: a function of our own binary, never called. */
__attribute__((noinline, used)) int bpftel_uprobe_multi_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

long bpftel_uprobe_self_offset(const void *fn)
{
	unsigned long addr = (unsigned long)fn, start, end, pgoff;
	char line[512], perms[8];
	long off = -ENOENT;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perms, &pgoff) != 4)
			continue;
		if (addr >= start && addr < end && perms[2] == 'x') {
			off = (long)(addr - start + pgoff);
			break;
		}
	}
	fclose(f);
	return off;
}

static pthread_mutex_t detect_lock = PTHREAD_MUTEX_INITIALIZER;
static int detected; /* 0 unknown, 1 yes, negative errno */
static char detected_reason[160];
static int fault;

static int try_link(char *reason, size_t len)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)BPFTEL_TRACE_UPROBE_MULTI);
	unsigned long off;
	long where = bpftel_uprobe_self_offset((const void *)&bpftel_uprobe_multi_target);
	int prog, link, err;

	if (where < 0) {
		snprintf(reason, len, "cannot find a function of our own to probe: %s",
			 strerror((int)-where));
		return (int)where;
	}
	off = (unsigned long)where;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "bpftel_umulti", "GPL", insns, 2, &opts);
	if (prog < 0) {
		err = -errno;
		snprintf(reason, len, "kernel refuses multi-uprobe programs (load: %s)",
			 strerror(-err));
		return err;
	}
	link = bpftel_uprobe_multi_attach(prog, "/proc/self/exe", &off, NULL, 1, false, getpid());
	close(prog);
	if (link < 0) {
		snprintf(reason, len, "kernel refuses multi-uprobe links (link_create: %s)",
			 strerror(-link));
		return link;
	}
	close(link);
	return 0;
}

int bpftel_uprobe_multi_detect(char *reason, size_t len)
{
	int ret;

	pthread_mutex_lock(&detect_lock);
	if (fault) {
		snprintf(detected_reason, sizeof(detected_reason),
			 "multi-uprobe links turned off by an injected fault (%s)",
			 strerror(-fault));
		ret = fault;
	} else {
		ret = detected ? detected : try_link(detected_reason, sizeof(detected_reason));
		/* Kept only when it is the kernel's verdict: a failure of the moment (out of
		 * fds or memory, /proc/self/maps unreadable) is asked again next time, not
		 * turned into per-probe links, ~80 ms a detach each, for the process's life. */
		if (!detected && (ret >= 0 || ret == -EINVAL || ret == -EOPNOTSUPP ||
				  ret == -EPERM || ret == -ENOENT || ret == -524 /* ENOTSUPP */))
			detected = ret ?: 1;
		ret = ret < 0 ? ret : 0;
	}
	if (reason && len)
		snprintf(reason, len, "%s", ret ? detected_reason : "");
	pthread_mutex_unlock(&detect_lock);
	return ret;
}

void bpftel_uprobe_multi_set_fault(int err)
{
	pthread_mutex_lock(&detect_lock);
	fault = err < 0 ? err : 0;
	pthread_mutex_unlock(&detect_lock);
}
