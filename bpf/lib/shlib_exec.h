/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The watcher's execs, for subscribers that ask (SHLIB_SUB_EXECS): Go programs carry
 * their TLS in the executable and open no library for the watcher to see, so a new
 * Go process is found when it starts. At sched_process_exec the new image is the
 * task's mm->exe_file: an exec of a file userspace already found not to be Go
 * (`shlib_exe_skip`, written by user/sharedlibs/sharedlibs.c) costs a map lookup;
 * any other is reported (SHLIB_SYS_EXEC, lib SHLIB_LIB_GO as a candidate) with the
 * file's identity, its change time and the path given to exec, for userspace to look
 * into once and the uprobe registry to attach to if it is Go.
 *
 * A verdict is on the file's content, which can change under the same (dev, ino): a
 * binary overwritten in place (`cat go_tool > /usr/local/bin/tool`, an installer's
 * truncate and write) is the same inode. Every such write moves the inode's ctime,
 * so the skip entry holds the ctime of the file userspace read, and an exec of the
 * file with another ctime is reported again (and the entry rewritten).
 *
 * Include after lib/shlib_probe.h.
 */
#ifndef BPFTEL_LIB_SHLIB_EXEC_H
#define BPFTEL_LIB_SHLIB_EXEC_H

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct shlib_file_key);
	__type(value, struct shlib_exe_skip_val);
} shlib_exe_skip SEC(".maps");

/* struct inode before 6.11 kept the ctime as a timespec64: `__i_ctime` from 6.6 (read
 * through inode_get_ctime()), `i_ctime` before. libbpf matches these flavours to the
 * kernel's struct inode by the name before "___"; the field that exists is read. */
struct inode___ctime_66 {
	struct timespec64 __i_ctime;
} __attribute__((preserve_access_index));

struct inode___ctime_old {
	struct timespec64 i_ctime;
} __attribute__((preserve_access_index));

/* The inode's ctime as stat() reports it. From 6.13 i_ctime_nsec also carries
 * I_CTIME_QUERIED (multigrain timestamps: a stat() sets it), which is no time. */
static __always_inline void shlib_inode_ctime(struct inode *inode, __s64 *sec, __u32 *nsec)
{
	struct inode___ctime_66 *i66 = (void *)inode;
	struct inode___ctime_old *old = (void *)inode;

	if (bpf_core_field_exists(inode->i_ctime_sec)) {
		*sec = BPF_CORE_READ(inode, i_ctime_sec);
		*nsec = BPF_CORE_READ(inode, i_ctime_nsec);
	} else if (bpf_core_field_exists(i66->__i_ctime)) {
		*sec = BPF_CORE_READ(i66, __i_ctime.tv_sec);
		*nsec = BPF_CORE_READ(i66, __i_ctime.tv_nsec);
	} else {
		*sec = BPF_CORE_READ(old, i_ctime.tv_sec);
		*nsec = BPF_CORE_READ(old, i_ctime.tv_nsec);
	}
	*nsec &= SHLIB_CTIME_NSEC_MASK;
}

static __always_inline int shlib_on_exec(TLM_PARAM, struct task_struct *task, const char *filename,
					 __u64 pid_tgid)
{
	struct shlib_file_key key = {};
	struct shlib_exe_skip_val *skip;
	struct shlib_config *cfg;
	struct shlib_event *ev;
	struct inode *inode;
	__u32 zero = 0, nsec;
	__s64 sec;
	long n;

	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	if (!cfg || !(cfg->flags & SHLIB_CFG_EXECS) || (pid_tgid >> 32) == shlib_self_tgid)
		return 0;
	inode = BPF_CORE_READ(task, mm, exe_file, f_inode);
	if (!inode)
		return 0;
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	shlib_inode_ctime(inode, &sec, &nsec);
	skip = bpf_map_lookup_elem(&shlib_exe_skip, &key);
	if (skip && skip->ctime_sec == sec && skip->ctime_nsec == nsec)
		return 0; /* not Go, and not written since userspace read it */
	ev = shlib_scratch_get();
	if (!ev)
		return 0;
	shlib_count(SHLIB_CNT_MATCHED); /* emitted, lost or path_unreadable below */
	n = tlm_probe_read_kernel_str(ev->path, SHLIB_PATH_MAX, filename);
	if (n <= 0)
		shlib_count(SHLIB_CNT_NO_PATH);
	else
		shlib_emit(TLM_ARG, ev, n - 1, pid_tgid, SHLIB_LIB_GO, SHLIB_LIBSET_CRYPTO,
			   SHLIB_SYS_EXEC, AT_FDCWD, key.ino, key.dev, btrfs_subvol_dev(inode),
			   sec, nsec);
	shlib_scratch_put(ev);
	return 0;
}

#endif /* BPFTEL_LIB_SHLIB_EXEC_H */
