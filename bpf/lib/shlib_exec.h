/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The watcher's execs, for subscribers that ask (SHLIB_SUB_EXECS): Go programs carry
 * their TLS in the executable and open no library for the watcher to see, so a new
 * Go process is found when it starts. At sched_process_exec the new image is the
 * task's mm->exe_file: an exec of a file userspace already found not to be Go
 * (`shlib_exe_skip`, written by user/sharedlibs/sharedlibs.c) costs a map lookup;
 * any other is reported (SHLIB_SYS_EXEC, lib SHLIB_LIB_GO as a candidate) with the
 * file's identity and the path given to exec, for userspace to look into once and
 * the uprobe registry to attach to if it is Go.
 *
 * Include after lib/shlib_probe.h.
 */
#ifndef BPFTEL_LIB_SHLIB_EXEC_H
#define BPFTEL_LIB_SHLIB_EXEC_H

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct shlib_file_key);
	__type(value, __u8);
} shlib_exe_skip SEC(".maps");

static __always_inline int shlib_on_exec(TLM_PARAM, struct task_struct *task, const char *filename,
					 __u64 pid_tgid)
{
	struct shlib_file_key key = {};
	struct shlib_config *cfg;
	struct shlib_event *ev;
	struct inode *inode;
	__u32 zero = 0;
	long n;

	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	if (!cfg || !(cfg->flags & SHLIB_CFG_EXECS) || (pid_tgid >> 32) == shlib_self_tgid)
		return 0;
	inode = BPF_CORE_READ(task, mm, exe_file, f_inode);
	if (!inode)
		return 0;
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	if (bpf_map_lookup_elem(&shlib_exe_skip, &key))
		return 0;
	ev = bpf_map_lookup_elem(&shlib_scratch, &zero);
	if (!ev)
		return 0;
	shlib_count(SHLIB_CNT_MATCHED); /* emitted, lost or path_unreadable below */
	n = tlm_probe_read_kernel_str(ev->path, SHLIB_PATH_MAX, filename);
	if (n <= 0) {
		shlib_count(SHLIB_CNT_NO_PATH);
		return 0;
	}
	shlib_emit(TLM_ARG, ev, n - 1, pid_tgid, SHLIB_LIB_GO, SHLIB_LIBSET_CRYPTO, SHLIB_SYS_EXEC,
		   AT_FDCWD, key.ino, key.dev);
	return 0;
}

#endif /* BPFTEL_LIB_SHLIB_EXEC_H */
