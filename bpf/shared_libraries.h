/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared-libraries watcher: the types that cross the kernel/user boundary.
 *
 * Included by bpf/shared_libraries.bpf.c (after vmlinux.h) and by userspace (after
 * <linux/types.h>). Every layout here is checked by _Static_assert on both sides.
 *
 * Kernel -> user: struct shlib_event through the ring buffer `shlib_events` (execs:
 * `shlib_exec_events`, their own), sized to
 * the path it carries (header + path_len + 1 bytes), with the opened file's identity
 * (device, inode) so that userspace checks it resolved the path to that very file. User -> kernel:
 * struct shlib_config in the array map `shlib_config`, read on every candidate open.
 */
#ifndef BPFTEL_SHARED_LIBRARIES_H
#define BPFTEL_SHARED_LIBRARIES_H

/* The kernel refuses paths of PATH_MAX bytes or more (NUL included), so 4096 holds
 * every path an open can succeed with. A power of two: BPF code masks indexes with it. */
#define SHLIB_PATH_MAX 4096
/* Basenames are at most NAME_MAX (255) bytes. */
#define SHLIB_NAME_MAX 255
/* Longest version suffix accepted after ".so." ("12.1.105" is 8). */
#define SHLIB_VERSION_MAX 32
#define SHLIB_COMM_LEN	  16

/* Which library a path names. Values are stable: they travel in events. */
enum shlib_lib {
	SHLIB_LIB_SSL = 0,
	SHLIB_LIB_CRYPTO = 1,
	SHLIB_LIB_GNUTLS = 2,
	SHLIB_LIB_CUDART = 3,
	SHLIB_LIB_CUDA = 4,
	/* Not a library and never matched by name: a Go executable, found by what it holds
	 * (.go.buildinfo) when the /proc scan meets it (user/sharedlibs/uprobes.c). */
	SHLIB_LIB_GO = 5,
	SHLIB_LIB__COUNT,
};

/* Groups of libraries a module subscribes to. */
enum shlib_libset {
	SHLIB_LIBSET_CRYPTO = 0, /* libssl, libcrypto, libgnutls */
	SHLIB_LIBSET_GPU = 1,	 /* libcudart, libcuda */
	SHLIB_LIBSET__COUNT,
};

#define SHLIB_LIBSET_BIT(set) (1u << (set))
#define SHLIB_LIBSET_ALL      ((1u << SHLIB_LIBSET__COUNT) - 1)

/*
 * Not a libset: a subscriber whose mask has this bit (USM) asks the watcher to record
 * which process holds each TCP socket it sees connected or accepted, since both read
 * a task's fd table the same way (and need the kernel's BTF, which the watcher has).
 */
#define SHLIB_SUB_SOCKETS (1u << 16)
/* Not a libset either: a subscriber whose mask has this bit (USM, for Go programs) asks
 * for every exec of an executable not yet known not to be Go (bpf/lib/shlib_exec.h). */
#define SHLIB_SUB_EXECS (1u << 17)

/* Which probe saw the open; stable values. */
enum shlib_syscall {
	SHLIB_SYS_OPEN = 0,
	SHLIB_SYS_OPENAT = 1,
	SHLIB_SYS_OPENAT2 = 2,
	SHLIB_SYS_ANY = 3, /* fexit on do_sys_openat2, which all three reach */
	SHLIB_SYS_EXEC = 4, /* an exec (lib SHLIB_LIB_GO: a candidate), not an open */
};

/* Counters in the per-CPU array `shlib_counters`; only matched opens touch them. */
enum shlib_counter {
	SHLIB_CNT_MATCHED = 0,	/* the opened file's name matched an enabled libset, or an
				 * exec to report (SHLIB_SUB_EXECS): each ends below */
	SHLIB_CNT_EMITTED = 1,	/* event written to the ring buffer */
	SHLIB_CNT_NO_PATH = 2,	/* matched, but the path the process passed was unreadable */
	SHLIB_CNT_LOST = 3,	/* ring buffer full, a library open's event lost */
	SHLIB_CNT_TOO_LONG = 4, /* matched, but the path was PATH_MAX bytes or longer */
	SHLIB_CNT_EXEC_LOST = 5, /* the execs' ring buffer full, an exec's event lost */
	SHLIB_CNT_NESTED = 6,	/* an open or exec not looked at: its CPU's event slots
				 * were all held by programs it preempted (a preemptible
				 * kernel); the /proc scan after a loss finds its library */
	SHLIB_CNT_USERNS_SOCKETS = 7, /* a connect or accept in a network namespace that a
				       * user namespace other than the initial one owns
				       * (one any user can make): kept under its namespace
				       * only, not as any namespace's (netns 0) */
	SHLIB_CNT__COUNT,
};

#define SHLIB_MAX_STEMS 8
#define SHLIB_STEM_MAX	16 /* "libcudart" and the like, NUL not stored */

/* A library name: basename "<name>.so" or "<name>.so.<version>". */
struct shlib_stem {
	char name[SHLIB_STEM_MAX];
	__u8 len;
	__u8 lib;    /* enum shlib_lib reported for it */
	__u8 libset; /* enum shlib_libset it belongs to */
	__u8 __pad[5];
};

#define SHLIB_CFG_SOCKETS 1u /* shlib_config.flags: record socket owners */
#define SHLIB_CFG_EXECS	  2u /* ... report execs (SHLIB_SYS_EXEC events) */

/* Written by userspace whenever subscriptions change; read by every candidate open. */
struct shlib_config {
	__u32 libsets; /* SHLIB_LIBSET_BIT()s that match; 0 = watcher idle */
	__u32 nstems;
	struct shlib_stem stems[SHLIB_MAX_STEMS];
	__u32 flags; /* SHLIB_CFG_* */
	__u32 __pad;
};

/*
 * Socket owners: maps the watcher keeps when a subscriber asks (SHLIB_SUB_SOCKETS).
 * `shlib_sock_owners`: a TCP connection as one end sees it -> the process that
 * connected or accepted it there (LRU; see bpf/lib/shlib_sockets.h). `shlib_fd_socks`:
 * (process, fd) -> that connection, for uprobes that know a socket only by its fd.
 * Addresses in network order, IPv4 (and IPv4-mapped IPv6) in the first 4 bytes with
 * family 4; ports in host order. A connection is of a network namespace: its inode
 * (/proc/<pid>/ns/net) is in the key, so that a user's namespace (`unshare -rn`) that
 * connects over the same 4-tuples as the host cannot take the host's connections; and
 * it is recorded under netns 0 too, the last of any namespace, for the connections of
 * other namespaces whose packets the agent sees (a container's, over a bridge). Only
 * for namespaces of the initial user namespace (root's: a container runtime's): a
 * namespace any user can make (`unshare -Urn`) could connect over a container's
 * 4-tuple and be taken for the owner of the container's packets.
 */
struct shlib_sock_key {
	__u8 local[16];
	__u8 remote[16];
	__u16 lport;
	__u16 rport;
	__u8 family; /* 4 or 6 */
	__u8 __pad[3];
	__u32 netns; /* the network namespace's inode */
};

struct shlib_sock_owner {
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 cgroup_id; /* bpf_get_current_cgroup_id(): the cgroup v2 id, 0 without v2 */
	char comm[SHLIB_COMM_LEN];
	__u8 accepted; /* its end was accepted (a server's), else connected (a client's) */
	__u8 __pad[7];
};

struct shlib_fd_key {
	__u32 pid;
	__s32 fd;
};

/*
 * What `shlib_fd_socks` holds for a (process, fd): the connection, since when, and the
 * one the fd held before. Messages are read from the ring buffer up to ~50 ms after
 * the call (BPFTEL_EVENTS_POLL_MS), and a server that closes a connection and accepts
 * the next is given the same fd number at once: a message stamped before since_ns is
 * of the connection before (prev, if it is not older still), never of this one.
 */
struct shlib_fd_sock {
	struct shlib_sock_key conn;
	__u64 since_ns; /* bpf_ktime_get_ns() at the exit of the connect or accept */
	struct shlib_sock_key prev;
	__u64 prev_since_ns; /* 0: none known */
};

/* An executable the watcher is not to report at exec again: userspace found it is no
 * Go program (`shlib_exe_skip`, bpf/lib/shlib_exec.h). Kernel dev_t encoding. */
struct shlib_file_key {
	__u64 ino;
	__u32 dev;
	__u32 __pad;
};

/* The file's change time (inode ctime) when userspace read it: a file rewritten in
 * place keeps its (dev, ino) but any write, truncate or chmod moves its ctime, so the
 * verdict holds only while the ctime is this one. nsec without the kernel's flag bits
 * (I_CTIME_QUERIED, 6.13+), as stat() reports it. */
struct shlib_exe_skip_val {
	__s64 ctime_sec;
	__u32 ctime_nsec;
	__u32 __pad;
};

/* nsec < 10^9 < 2^30: the bits above are the kernel's flags, never time. */
#define SHLIB_CTIME_NSEC_MASK 0x3fffffffU

struct shlib_event {
	__u64 ktime_ns;
	__u32 pid; /* tgid */
	__u32 tid;
	__u16 lib;     /* enum shlib_lib */
	__u16 libset;  /* enum shlib_libset */
	__u16 syscall; /* enum shlib_syscall */
	__u16 __pad;
	__u32 path_len;	  /* bytes in path, NUL not counted; path[path_len] == 0 */
	__s32 dirfd;	  /* a relative path starts there (AT_FDCWD: the cwd) */
	__u64 ino;	  /* the opened file: inode number ... */
	__u32 dev;	  /* ... and device, kernel encoding (major << 20 | minor) */
	__u32 ctime_nsec; /* execs: the file's ctime as the kernel ran it; opens: 0 */
	__s64 ctime_sec;
	/* The process's start (its leader's start_boottime, ns): with pid, which process
	 * this is, so that a pid reused since an earlier event is known as another one. */
	__u64 start_ns;
	/* On btrfs, the file's subvolume device (kernel encoding: what stat() gives as
	 * st_dev, where dev is the file system's); 0 elsewhere (lib/btrfs_subvol.h). */
	__u32 sdev;
	__u32 __pad2;
	char comm[SHLIB_COMM_LEN];
	char path[SHLIB_PATH_MAX]; /* as the process passed it to open */
};

#define SHLIB_EVENT_HDR_SIZE 88 /* offsetof(struct shlib_event, path) */

_Static_assert(sizeof(struct shlib_stem) == 24, "shlib_stem layout");
_Static_assert(sizeof(struct shlib_config) == 16 + 24 * SHLIB_MAX_STEMS, "shlib_config layout");
_Static_assert(sizeof(struct shlib_sock_key) == 44, "shlib_sock_key layout");
_Static_assert(sizeof(struct shlib_sock_owner) == 40, "shlib_sock_owner layout");
_Static_assert(__builtin_offsetof(struct shlib_event, path_len) == 24, "shlib_event layout");
_Static_assert(__builtin_offsetof(struct shlib_event, ino) == 32, "shlib_event layout");
_Static_assert(__builtin_offsetof(struct shlib_event, ctime_sec) == 48, "shlib_event layout");
_Static_assert(__builtin_offsetof(struct shlib_event, start_ns) == 56, "shlib_event layout");
_Static_assert(__builtin_offsetof(struct shlib_event, sdev) == 64, "shlib_event layout");
_Static_assert(__builtin_offsetof(struct shlib_event, comm) == 72, "shlib_event layout");
_Static_assert(sizeof(struct shlib_exe_skip_val) == 16, "shlib_exe_skip_val layout");
_Static_assert(__builtin_offsetof(struct shlib_event, path) == SHLIB_EVENT_HDR_SIZE,
	       "shlib_event layout");
_Static_assert(sizeof(struct shlib_event) == SHLIB_EVENT_HDR_SIZE + SHLIB_PATH_MAX,
	       "shlib_event layout");
_Static_assert((SHLIB_PATH_MAX & (SHLIB_PATH_MAX - 1)) == 0, "SHLIB_PATH_MAX power of two");

#endif /* BPFTEL_SHARED_LIBRARIES_H */
