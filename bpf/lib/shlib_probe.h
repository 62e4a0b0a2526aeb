/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared-libraries watcher: notices successful read-only opens of the libraries that
 * modules care about (libssl, libcudart, ...) and reports them through a ring buffer.
 *
 * One program per open, at its exit (fexit on do_sys_openat2 where the kernel allows,
 * else the sys_exit tracepoints of open, openat and openat2). It looks at the file the
 * open returned, not at the path: the dentry's name is in kernel memory, so rejecting
 * a non-library costs a few loads (no helper call, no user-memory read, no state kept
 * between enter and exit). Only a match reads the path the process passed, and emits
 * it with the file's identity (device, inode).
 *
 * This header holds the watcher's maps and inline code, for bpf/shared_libraries.bpf.c
 * and for the BPF_PROG_TEST_RUN harness (tests/bpf/progs/shared_libraries_harness.bpf.c).
 * Include after vmlinux.h, the libbpf headers (bpf_core_read.h too), shared_libraries.h,
 * lib/shlib_match.h and telemetry/telemetry.bpf.h.
 */
#ifndef BPFTEL_LIB_SHLIB_PROBE_H
#define BPFTEL_LIB_SHLIB_PROBE_H

#include "btrfs_subvol.h"

#define O_ACCMODE 00000003
#define O_RDONLY  00000000
#define O_PATH	  010000000
#define AT_FDCWD  (-100)
/* fs/file.c caps the fd table below this (sysctl fs.nr_open <= 1 << 30). */
#define SHLIB_FD_MASK ((1u << 30) - 1)

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* The agent's own process: it opens libraries to resolve uprobe symbols, and must not
 * see itself as their user. */
const volatile __u32 shlib_self_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} shlib_events SEC(".maps");

/* The execs' own (lib/shlib_exec.h): any user can exec at will, and a flood of them
 * must not take the room of library opens, which decide what gets probed. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} shlib_exec_events SEC(".maps");

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

/*
 * Too large for the BPF stack: the event is built in a per-CPU slot, taken and given
 * back. On a preemptible kernel the fexit on open can be preempted on its CPU, and the
 * program of another task (an open, an exec) run there meanwhile: it takes the other
 * slot, and with none free it looks at nothing (counted), rather than write over the
 * event being built.
 */
#define SHLIB_SCRATCH_SLOTS 2

struct shlib_slot {
	__u64 busy; /* 64 bits: the compare-and-swap the BPF target has */
	struct shlib_event ev;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHLIB_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct shlib_slot);
} shlib_scratch SEC(".maps");

TLM_MAP_KEY(shlib_events);
TLM_MAP_KEY(shlib_exec_events);

static __always_inline void shlib_count(enum shlib_counter counter)
{
	__u32 key = counter;
	__u64 *val;

	val = bpf_map_lookup_elem(&shlib_counters, &key);
	if (val) /* atomic: a program that interrupts this one on its CPU counts too */
		__sync_fetch_and_add(val, 1);
}

/* A free event slot of this CPU, taken (give it back: shlib_scratch_put), or NULL. */
static __always_inline struct shlib_event *shlib_scratch_get(void)
{
	struct shlib_slot *s;
	__u32 k;

	for (k = 0; k < SHLIB_SCRATCH_SLOTS; k++) {
		s = bpf_map_lookup_elem(&shlib_scratch, &k);
		if (s && !__sync_val_compare_and_swap(&s->busy, 0, 1))
			return &s->ev;
	}
	shlib_count(SHLIB_CNT_NESTED);
	return NULL;
}

static __always_inline void shlib_scratch_put(struct shlib_event *ev)
{
	struct shlib_slot *s = (void *)ev - __builtin_offsetof(struct shlib_slot, ev);

	s->busy = 0;
}

#define SHLIB_SHORT_READ 128

/*
 * Copy the path at user address filename into ev->path. Returns its length, or -1 if
 * it is unreadable (counted), empty, or PATH_MAX bytes or longer (counted).
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
	if (n <= 1) {
		shlib_count(SHLIB_CNT_NO_PATH);
		return -1;
	}
	if (n == SHLIB_PATH_MAX) {
		/* Buffer full: the path is PATH_MAX - 1 bytes exactly, or truncated. */
		if (tlm_probe_read_user(&next, 1, filename + SHLIB_PATH_MAX - 1) || next) {
			shlib_count(SHLIB_CNT_TOO_LONG);
			return -1;
		}
	}
	return n - 1;
}

/* The file behind fd in task's table, or NULL. The open that returned fd just ran on
 * this thread, so the slot holds what it installed unless another thread closed it. */
static __always_inline struct file *shlib_fd_file(struct task_struct *task, long fd)
{
	struct fdtable *fdt = task->files->fdt;
	struct file **slots;

	if (fd < 0 || fd >= fdt->max_fds)
		return NULL;
	slots = bpf_rdonly_cast(fdt->fd, 0);
	return slots[fd & SHLIB_FD_MASK];
}

/*
 * The word of the dentry's name (of len bytes) that holds byte i, read from the inline
 * copy that names shorter than DNAME_INLINE_LEN use: no helper call. False when the
 * name lives elsewhere (long names, kernels before d_shortname).
 */
static __always_inline bool shlib_name_word(struct dentry *d, __u32 len, __u32 i,
					    unsigned long *out)
{
	unsigned long w;

	if (!bpf_core_field_exists(d->d_shortname) || i >= len || len >= sizeof(w) * 5)
		return false;
	switch (i / sizeof(w)) {
	case 0:
		w = d->d_shortname.words[0];
		break;
	case 1:
		w = d->d_shortname.words[1];
		break;
	case 2:
		w = d->d_shortname.words[2];
		break;
	case 3:
		w = d->d_shortname.words[3];
		break;
	default:
		w = d->d_shortname.words[4];
		break;
	}
	*out = w;
	return true;
}

/* Byte i of the dentry's name (shlib_name_word), or -1. */
static __always_inline int shlib_name_byte(struct dentry *d, __u32 len, __u32 i)
{
	unsigned long w;

	if (!shlib_name_word(d, len, i, &w))
		return -1;
	return (__u8)(w >> ((i % sizeof(w)) * 8));
}

/* Copy the dentry's name into ev->path. Returns its length or -1. */
static __always_inline long shlib_read_name(TLM_PARAM, struct shlib_event *ev, struct dentry *d,
					    __u32 len)
{
	unsigned long *w = (unsigned long *)ev->path;

	if (len == 0 || len > SHLIB_NAME_MAX)
		return -1;
	if (bpf_core_field_exists(d->d_shortname) && len < sizeof(*w) * 5) {
		w[0] = d->d_shortname.words[0];
		w[1] = d->d_shortname.words[1];
		w[2] = d->d_shortname.words[2];
		w[3] = d->d_shortname.words[3];
		w[4] = d->d_shortname.words[4];
		return len;
	}
	if (tlm_probe_read_kernel_str(ev->path, SHLIB_NAME_MAX + 1, d->d_name.name) != len + 1)
		return -1;
	return len;
}

/* Does the name in ev name a stem of cfg whose libset is enabled? Sets lib and libset. */
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

/* ev holds a path of n bytes: fill the rest and send it, counted as emitted or lost.
 * Shared by the opens (ctime 0) and the execs (lib/shlib_exec.h), each to its own ring
 * buffer. */
static __always_inline void shlib_emit(TLM_PARAM, struct shlib_event *ev, long n, __u64 pid_tgid,
				       __u32 lib, __u32 libset, enum shlib_syscall sys, int dirfd,
				       __u64 ino, __u32 dev, __u32 sdev, __s64 ctime_sec,
				       __u32 ctime_nsec)
{
	__u32 size = SHLIB_EVENT_HDR_SIZE + SHLIB_IDX(n) + 1;
	long err;

	ev->ktime_ns = bpf_ktime_get_ns();
	ev->pid = pid_tgid >> 32;
	ev->tid = (__u32)pid_tgid;
	ev->lib = lib;
	ev->libset = libset;
	ev->syscall = sys;
	ev->path_len = n;
	ev->dirfd = dirfd;
	ev->ino = ino;
	ev->dev = dev;
	ev->sdev = sdev;
	ev->__pad2 = 0;
	ev->ctime_sec = ctime_sec;
	ev->ctime_nsec = ctime_nsec;
	ev->start_ns = BPF_CORE_READ(bpf_get_current_task_btf(), group_leader, start_boottime);
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	if (sys == SHLIB_SYS_EXEC)
		err = tlm_ringbuf_output(shlib_exec_events, ev, size, 0);
	else
		err = tlm_ringbuf_output(shlib_events, ev, size, 0);
	if (!err)
		shlib_count(SHLIB_CNT_EMITTED);
	else
		shlib_count(sys == SHLIB_SYS_EXEC ? SHLIB_CNT_EXEC_LOST : SHLIB_CNT_LOST);
}

/*
 * An open by task returned fd ret: if it opened, read-only, a library of an enabled
 * libset, its name is in the per-CPU event slot, returned with the library, its libset
 * and its dentry; else NULL. Looks only at the kernel's file and config: what the
 * process passed (the path, its registers, its ids) is read after a match, and most
 * opens end here at the name's last byte.
 */
static __always_inline struct shlib_event *shlib_open_match(TLM_PARAM, struct task_struct *task,
							     long ret, int *lib, __u32 *libset,
							     struct dentry **dentry)
{
	struct shlib_config *cfg;
	struct shlib_event *ev;
	struct dentry *d;
	struct file *file;
	__u32 zero = 0, len;
	unsigned long w;
	int last, prev;
	long n;

	file = shlib_fd_file(task, ret);
	if (!file)
		return NULL;
	file = bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file));
	/* O_PATH: its access mode reads as O_RDONLY, but such a file is never mapped (a
	 * runtime walking paths, a symlink opened as itself). One compare for both. */
	if ((file->f_flags & (O_ACCMODE | O_PATH)) != O_RDONLY)
		return NULL;
	d = file->f_path.dentry;
	len = d->d_name.len;
	/* The common case ends here: a library name ends in 'o' or a digit, or in a
	 * digit and one letter (shlib_match.h). The byte before the last is mostly in
	 * the last one's word: a shift, not a second read. */
	if (shlib_name_word(d, len, len - 1, &w)) {
		last = (__u8)(w >> (((len - 1) % sizeof(w)) * 8));
		if (last >= 'a' && last <= 'z' && last != 'o') { /* 'o': ".so", "1.1.1o" */
			prev = (len - 1) % sizeof(w) ? (__u8)(w >> (((len - 2) % sizeof(w)) * 8))
						      : shlib_name_byte(d, len, len - 2);
			if (prev < '0' || prev > '9')
				return NULL;
		} else if (last != 'o' && (last < '0' || last > '9')) {
			return NULL;
		}
	}
	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	if (!cfg || !cfg->libsets)
		return NULL;
	ev = shlib_scratch_get();
	if (!ev)
		return NULL;
	n = shlib_read_name(TLM_ARG, ev, d, len);
	if (n < 0 || !shlib_match_enabled(cfg, ev, n, lib, libset)) {
		shlib_scratch_put(ev);
		return NULL;
	}
	*dentry = d;
	return ev;
}

/*
 * The open of a library shlib_open_match() found, by the process pid_tgid, of the path
 * at user address filename relative to dirfd: emit it, unless the agent itself opened
 * it (to resolve uprobe symbols: it must not see itself as the library's user).
 */
static __always_inline int shlib_open_emit(TLM_PARAM, struct shlib_event *ev, const char *filename,
					   int dirfd, __u64 pid_tgid, int lib, __u32 libset,
					   enum shlib_syscall sys, struct dentry *d)
{
	long n;

	if ((pid_tgid >> 32) == shlib_self_tgid)
		return 0;
	shlib_count(SHLIB_CNT_MATCHED);
	/* The path the process passed: userspace resolves it in the process's root. */
	n = shlib_read_path(TLM_ARG, ev, filename);
	if (n < 0)
		return 0;
	shlib_emit(TLM_ARG, ev, n, pid_tgid, lib, libset, sys, dirfd, d->d_inode->i_ino,
		   d->d_sb->s_dev, btrfs_subvol_dev(d->d_inode), 0, 0);
	return 0;
}

/*
 * An open by task returned ret, for the path at user address filename relative to
 * dirfd. Emit an event if it opened, read-only, a library of an enabled libset. For
 * the fexit program, which has the arguments at hand, and the BPF_PROG_TEST_RUN harness.
 */
static __always_inline int shlib_on_open(TLM_PARAM, struct task_struct *task, long ret,
					 const char *filename, int dirfd, __u64 pid_tgid,
					 enum shlib_syscall sys)
{
	struct shlib_event *ev;
	struct dentry *d = NULL;
	__u32 libset = 0;
	int lib = 0;

	ev = shlib_open_match(TLM_ARG, task, ret, &lib, &libset, &d);
	if (!ev)
		return 0;
	if (d)
		shlib_open_emit(TLM_ARG, ev, filename, dirfd, pid_tgid, lib, libset, sys, d);
	shlib_scratch_put(ev);
	return 0;
}

/*
 * The same at a syscall's exit tracepoint, which passes only the result: the syscall's
 * arguments, as saved at its entry, and the process's ids are looked up after a match.
 * Every other open skips those two helper calls: ~8 of the ~18 ns this program costs
 * above an empty one on a non-library open (BPF run stats, both on the tracepoint).
 */
static __always_inline int shlib_on_sys_exit(TLM_PARAM, long ret, enum shlib_syscall sys)
{
	struct task_struct *task;
	struct shlib_event *ev;
	struct dentry *d = NULL;
	struct pt_regs *regs;
	__u32 libset = 0;
	int lib = 0;

	if (ret < 0)
		return 0;
	task = bpf_get_current_task_btf();
	ev = shlib_open_match(TLM_ARG, task, ret, &lib, &libset, &d);
	if (!ev)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!d)
		; /* matched nothing to report */
	else if (sys == SHLIB_SYS_OPEN) /* open(filename, flags, mode) */
		shlib_open_emit(TLM_ARG, ev, (const char *)PT_REGS_PARM1_SYSCALL(regs), AT_FDCWD,
				bpf_get_current_pid_tgid(), lib, libset, sys, d);
	else /* openat(dfd, filename, ...), openat2(dfd, filename, how, size) */
		shlib_open_emit(TLM_ARG, ev, (const char *)PT_REGS_PARM2_SYSCALL(regs),
				(int)PT_REGS_PARM1_SYSCALL(regs), bpf_get_current_pid_tgid(), lib,
				libset, sys, d);
	shlib_scratch_put(ev);
	return 0;
}

#endif /* BPFTEL_LIB_SHLIB_PROBE_H */
