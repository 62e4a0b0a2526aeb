/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Uprobe registry: attaches each module's uprobes once per library file (identified by
 * the device and inode the kernel maps, the file underneath on overlayfs), for all
 * processes; counts the live processes using the file; and detaches a file's uprobes
 * once no process has used it for a grace period (bpftel_uprobes__sweep, on the
 * agent's housekeeping thread), through the reaper. A process that maps the file
 * within the grace period reuses the links; one that maps it while they are being
 * destroyed waits for that (a per-file guard) and then gets one new set, never two.
 *
 * Links: where the kernel has them (bpftel_uprobe_multi_detect), a module's probes on
 * one file are one multi-uprobe link per program (two: entries and returns), each
 * probe point carrying its spec's cookie; else one perf-event link per probe point,
 * with the same cookies. The choice is made per module instance before its object is
 * loaded, and `bpftel libs` shows it, with the reason for the fallback.
 *
 * Hostile files: every file is opened through procfile.h (no blocking, nothing outside
 * the process's root, only the regular file the kernel saw) and parsed once per attach
 * pass for every module's symbols, under the ELF reader's caps (elfsym.h). A file
 * refused for any reason is remembered as refused (no retry storm), counted by reason,
 * and listed with the most recent refusals.
 *
 * Files written in place: the kernel copies each probed instruction once, when the
 * probe is installed on (inode, offset), and runs that copy whenever the probe is hit,
 * in any process that maps the inode, also one that maps it after the file was written
 * over in place (`cp new lib.so`: the same inode, truncated and written). So every file
 * the registry holds links on is watched (inotify IN_MODIFY on the inode it opened,
 * uprobe_watch.c) from before its first link until its last; a write releases its links
 * at once, ahead of the reaper's queue (released_modified, logged once as a warning),
 * and the file is attached again, from what it then holds, when a process maps it. A
 * file that cannot be watched (fs.inotify.max_user_watches reached: counted as
 * unwatched) is released at the first sweep after its last process exits, with no
 * grace. What remains unsafe:
 *   - between the write and the links' end (the event, then ~45 ms a multi link, ~80 ms
 *     a perf-event one; those behind one being destroyed wait for it), a process that
 *     maps the file and hits a probe runs the old instruction. A process that maps a file
 *     while it is being written is broken anyway: it maps a half-written file;
 *   - the same after a re-attach made while a long write goes on: each later write
 *     releases again;
 *   - writes the inode's watch does not see: through a shared writable mapping (mmap
 *     writes raise no inotify event), from another host (network filesystems), to the
 *     lower layer of an overlayfs mount from outside it (the watch is on the file the
 *     process's path reached); and an unwatched file while a process still uses it;
 *   - the inotify queue overflowing: every watched file is then released.
 *
 * Inputs: the shared-libraries watcher's detections (bpftel_uprobes__listener), and
 * bpftel_uprobes__scan(), which reads /proc/<pid>/maps of every process for libraries
 * loaded before the watcher ran (at start, and after lost events).
 *
 * Locking: one mutex guards the tables and is never held across slow work (/proc
 * reads, opening or parsing a file, attaching or destroying a link): that work runs
 * on the calling thread with the file marked busy, so readers (bpftel_uprobes__files)
 * never wait for it. A module's stop waits for that module's attaches in flight.
 */
#ifndef BPFTEL_UPROBES_H
#define BPFTEL_UPROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <sys/types.h>
#include <linux/types.h>

#include "procfile.h"
#include "sharedlibs.h"

struct bpftel_uprobes;
struct bpftel_module;

struct bpftel_uprobe_spec {
	enum shlib_lib lib; /* attach on files of this library */
	const char *prog;   /* program in the module's object */
	const char *symbol; /* versioned allowed */
	bool retprobe;
	__u64 cookie; /* what bpf_get_attach_cookie() gives the program at this probe */
	/* An entry probe that reads only its first past_prologue integer arguments: put it
	 * on the function's first branch if the prologue before it keeps them
	 * (user/manager/prologue.h: one trap instead of two). 0: on the entry. */
	unsigned char past_prologue;
	/* A read whose function is a wrapper: a prologue that keeps its 4 integer
	 * arguments, then a call. If the function named here calls that callee too, and
	 * the callee's first instruction is one the kernel emulates, this probe goes on
	 * the callee's entry (no single-step, and a return probe still finds the return
	 * address on top of the stack there), and the named function's probes of the same
	 * program are not attached: its calls are seen in the callee (OpenSSL 3's SSL_read
	 * and SSL_read_ex both enter ssl_read_internal, with SSL_read_ex's arguments and
	 * its return; user/manager/prologue.h). */
	const char *shares_callee;
	/* A read whose function hands every read to internal functions taking (session,
	 * record type, data, size), with this record type (user/manager/tailread.h:
	 * GnuTLS's gnutls_record_recv and _gnutls_recv_int, type 23). Where the code
	 * proves it and the first instruction of one of them is emulated, this probe goes
	 * on their entries instead, flagged UPROBE_TYPED_READ; 0: never moves. */
	unsigned char typed_read;
	/* Go executables (lib SHLIB_LIB_GO, symbol as Go names it): entry probes go on
	 * the JBE of the function's stack check (UPROBE_GO_STACK_CHECK); at_rets puts this one on each of the function's RET
	 * instructions instead (no uretprobe on Go code: user/manager/goexe.h). */
	bool at_rets;
	/* A function some versions of the library lack: where the file has no such
	 * symbol, the spec is skipped, not counted among the file's failures. */
	bool optional;
};

/* A file stays attached this long after its last process exited, by default, unless it
 * is written in place meanwhile (released at once) or not watched for writes (none). */
#define BPFTEL_UPROBES_GRACE_MS 30000

int bpftel_uprobes__new(struct bpftel_uprobes **out);
/* After the modules are stopped. NULL is a no-op. */
void bpftel_uprobes__free(struct bpftel_uprobes *u);
/*
 * A program the registry attaches, and how: at function entry (a uprobe) or at its
 * return (a uretprobe), which the program's name says only by convention. A return
 * probe costs more: its entry trap arms the return, then the return traps.
 */
struct bpftel_uprobe_prog {
	char module[64];
	char prog[64];
	bool entry, ret; /* attached at entries, at returns (both: some of each) */
	/* Every return it is attached at has an entry probe of the module on the same
	 * function: the entry's trap arms the return, which then adds little. */
	bool ret_paired;
	/* Its entry points' instructions in the files attached so far: 1 all emulated by
	 * the kernel (one trap each), 2 all single-stepped, 3 some of each, 0 none yet
	 * (user/manager/prologue.h). */
	unsigned char entry_kind;
	__u32 entry_libs; /* 1 << enum shlib_lib of each of its entry probes' libraries */
};
/* Every (module, program) of the registry's modules' specs: count, at most max. */
size_t bpftel_uprobes__programs(struct bpftel_uprobes *u, struct bpftel_uprobe_prog *out,
				size_t max);

/* How long an unused file keeps its links (0: detached at the next sweep). */
void bpftel_uprobes__set_grace_ms(struct bpftel_uprobes *u, unsigned int ms);

/* New files one owner's processes may bring a minute (file_budget.h); 0: no budget. */
void bpftel_uprobes__set_file_budget(struct bpftel_uprobes *u, unsigned int per_min);
unsigned int bpftel_uprobes__file_budget(struct bpftel_uprobes *u);
/* Files one owner but root may hold probed at once (default a quarter of the
 * registry's 1024); 0: no bound. Past it, its next new file is refused (registry_full). */
void bpftel_uprobes__set_owner_share(struct bpftel_uprobes *u, unsigned int files);
/* Files refused for their user's sake so far, over its budget or, at an open, at its
 * share (a mapped one is looked for again by a later /proc scan: scan_pace.h's budget
 * pace). */
__u64 bpftel_uprobes__refused_for_user(struct bpftel_uprobes *u);

/* specs must outlive the registry; at most 16. */
int bpftel_uprobes__add_module(struct bpftel_uprobes *u, struct bpftel_module *m,
			       const struct bpftel_uprobe_spec *specs, size_t n);

/* A process uses a library file: `path` as that process named it (absolute, or
 * relative to its cwd). */
int bpftel_uprobes__process_seen(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib,
				 const char *path);
/* The watcher saw d->pid open d->path (relative to d->dirfd): attach if the path still
 * leads to the file opened, (d->dev, d->ino); else -ESTALE (counted as stale and as an
 * identity_changed refusal). Other refusals return their errno. */
int bpftel_uprobes__detected(struct bpftel_uprobes *u, const struct bpftel_shlib_detection *d);
/* The watcher saw d->pid exec d->path, the file (d->dev, d->ino) with change time
 * d->ctime: if it is a Go executable, attach to it as to a library (lib SHLIB_LIB_GO).
 * Returns 1 (Go: seen or refused, like a library), 0 (not Go: the caller need not
 * report this file again while its ctime is *ctime) or a negative errno (not known
 * now: the file could not be read). On 0 or 1, *ctime is the change time of the file
 * the verdict is on: the one read, which a write after the exec may have moved. */
int bpftel_uprobes__exec(struct bpftel_uprobes *u, const struct bpftel_shlib_detection *d,
			 struct timespec *ctime);
/* For bpftel_sharedlibs__set_listener(): bpftel_uprobes__detected. */
void bpftel_uprobes__listener(void *ctx, const struct bpftel_shlib_detection *d);
/* Detections whose path no longer led to the file opened, idle files found in use
 * (bpftel_uprobes_refusals.idle_used), idle files whose release waits for a scan
 * (idle_scans), and opens by a relative path that climbs above its directory
 * (climbing_scans): a rise means a /proc scan is due. */
__u64 bpftel_uprobes__stale(struct bpftel_uprobes *u);

/* Forget exited processes; detach files unused for the grace period (through the
 * reaper) once a scan begun since they went idle found no process mapping them (else
 * ask for one: bpftel_uprobes__stale); attach what a running module still lacks.
 * Returns files dropped or handed to the reaper. */
int bpftel_uprobes__sweep(struct bpftel_uprobes *u);
/* Read /proc/<pid>/maps of every process for libraries; returns processes found. */
int bpftel_uprobes__scan(struct bpftel_uprobes *u);
/* When the last scan done began (CLOCK_MONOTONIC ms), 0 before any. */
long long bpftel_uprobes__scanned_from_ms(struct bpftel_uprobes *u);

#define BPFTEL_UPROBE_MAX_FAIL 4
#define BPFTEL_UPROBE_MAX_FOLDED 4
#define BPFTEL_UPROBE_MAX_MOVED	 4
#define BPFTEL_UPROBE_MOVED_AT	 4 /* BPFTEL_TAIL_READS_MAX */

struct bpftel_uprobe_file_info {
	char path[256]; /* first path it was seen under, as that process named it */
	enum shlib_lib lib;
	__u64 dev, ino, sdev; /* sdev: as bpftel_uprobe_file_load's */
	__u64 opens; /* uses answered by opening the file, not from the row (lib_file) */
	size_t nprocs;
	__u32 pids[8];	  /* the first min(nprocs, 8) processes */
	const char *state; /* "in_use", "idle" (within its grace), "releasing", "refused" */
	long idle_s;	  /* idle: seconds since its last process exited */
	int refused;	  /* enum bpftel_refusal, or -1 */
	char refused_detail[128];
	char module[64];   /* one row per (file, module) */
	size_t attached;   /* probe points attached for this module on this file */
	/* Calls its probes saw since the module started (bpf/uprobe_hits.h): entries, of
	 * which on single-stepped instructions, returns; counted false without counts. */
	bool counted;
	__u64 entries, stepped_entries, returns;
	bool throttled;	   /* detached for the module's overhead budget (bpftel_uprobes__shed) */
	size_t links;	   /* links they take */
	const char *link_mode;	  /* "multi", "single", or NULL before any attach */
	char mode_reason[160];	  /* "single": why not multi */
	size_t failed;
	struct {
		char symbol[64];
		int err;
	} fail[BPFTEL_UPROBE_MAX_FAIL];
	/* Points covered by another spec's probe, on a shared callee or at the same address
	 * (an alias), all counted, the first BPFTEL_UPROBE_MAX_FOLDED listed. */
	size_t nfolded;
	size_t skipped; /* points of optional functions the file does not have */
	struct bpftel_uprobe_folded {
		char symbol[64]; /* the function whose probe is not attached ("SSL_read") */
		char with[64];	 /* the one whose probe covers it ("SSL_read_ex") */
		bool retprobe;
		long callee; /* file offset of the function both call, where the probe is */
	} folded[BPFTEL_UPROBE_MAX_FOLDED];
	size_t nmoved; /* points moved to the internal reads their function hands reads to */
	struct bpftel_uprobe_moved {
		char symbol[64]; /* "gnutls_record_recv" */
		bool retprobe;
		unsigned int type; /* the record type kept */
		size_t n;
		long at[BPFTEL_UPROBE_MOVED_AT]; /* file offsets of the internal reads */
	} moved[BPFTEL_UPROBE_MAX_MOVED];
};

/* One row per (file, module), plus one per file no module wants. Malloc'd. */
int bpftel_uprobes__files(struct bpftel_uprobes *u, struct bpftel_uprobe_file_info **out);

/*
 * Shedding load (the agent's self-overhead budget): detach one module's links on one
 * file (as bpftel_uprobes__file_loads gives it) and keep that file off for
 * the module, also for processes that map it later, until bpftel_uprobes__unshed. The
 * links go to the reaper, the file's guard (as for an idle file) makes a re-attach
 * wait for them, then one new set is attached. A module's stop forgets what it shed.
 * -ENOENT: no such file or module; -EBUSY: an attach is in flight, try later.
 */
struct bpftel_uprobe_file_load;
int bpftel_uprobes__shed(struct bpftel_uprobes *u, const char *module,
			 const struct bpftel_uprobe_file_load *file);
int bpftel_uprobes__unshed(struct bpftel_uprobes *u, const char *module,
			   const struct bpftel_uprobe_file_load *file);

#define BPFTEL_UPROBE_LOAD_PIDS 16

/* A module's file, with the calls counted on it (bpf/uprobe_hits.h). */
struct bpftel_uprobe_file_load {
	/* The file: what the kernel maps, and on btrfs its subvolume's device (sdev: two
	 * subvolumes' files can have the same dev and ino); elsewhere sdev is dev. */
	__u64 dev, ino, sdev;
	char path[256];
	enum shlib_lib lib;
	bool counted;	/* the module's object counts calls per file */
	__u64 calls[2]; /* entries, returns: since this module instance started */
	__u64 calls_stepped; /* of the entries, those on single-stepped instructions */
	/* The module's entry points here: 1 all on instructions the kernel emulates, 2
	 * all single-stepped, 3 some of each, 0 none attached */
	unsigned char entry_kind;
	bool shed;	/* detached by bpftel_uprobes__shed */
	bool attached;	/* links in place */
	size_t nprocs;
	__u32 pids[BPFTEL_UPROBE_LOAD_PIDS]; /* the first ones */
};

/* The running module's files (refused ones left out): count and a malloc'd array in
 * *out, or a negative errno. 0 when the module is not running. */
int bpftel_uprobes__file_loads(struct bpftel_uprobes *u, const char *module,
			       struct bpftel_uprobe_file_load **out);

#define BPFTEL_UPROBES_RECENT 32

struct bpftel_uprobe_refusal {
	time_t when;	/* the last time */
	__u64 times;	/* refused so far, this process this file for this reason */
	__u32 pid;
	enum shlib_lib lib;
	enum bpftel_refusal why;
	char path[256];	  /* as the process named it */
	char detail[128]; /* the reader's message, e.g. "too large: 4294967296 bytes" */
};

struct bpftel_uprobes_refusals {
	__u64 sweeps;			    /* sweeps done so far */
	__u64 count[BPFTEL_REFUSED__COUNT]; /* since start, by reason */
	__u64 cached;			    /* of those, answered by the refused-file cache */
	__u64 evicted; /* refused files' rows that gave way to a new file, the registry full */
	/* rows of files no probe point attached to that gave way (ELF files named like a
	 * library, without its functions) */
	__u64 unprobed_evicted;
	/* Releases of a file's links because it was written in place (same inode) */
	__u64 released_modified;
	/* Files attached without a watch for writes (the inotify watch limit, ENOSPC) */
	__u64 unwatched;
	/* Stretches of files without a known process whose probes fired meanwhile: used by
	 * a process the watcher did not report (a child forked after its parent loaded the
	 * file, the parent gone). Kept attached; each asks for one /proc scan. */
	__u64 idle_used;
	/* Files whose grace ended with no process known and no call seen: their release
	 * waited for a /proc scan, which lists a quiet process that maps the file (a
	 * forked child that never opened it, making no call yet); each asks for one. */
	__u64 idle_scans;
	/* Opens by a relative path that climbs above its directory ("../lib/x.so"): not
	 * walked (beneath that directory only), the file reached by a /proc scan instead,
	 * through the process's mapping. Each asks for one. */
	__u64 climbing_scans;
	/* Opens whose path led nowhere when the agent walked it, by a process still
	 * running (the file renamed or removed since, a walk raced by renames): not
	 * refusals. Each asks for one, which reaches the file through the mapping. */
	__u64 unreached_scans;
	/* Processes whose maps a /proc scan read only the first BPFTEL_MAPS_MAX_LINES
	 * lines or BPFTEL_MAPS_MAX_BYTES of (procmap.h): what they map beyond is unseen. */
	__u64 scan_maps_cut;
	/* Of registry_full, opens refused because their owner held its share already
	 * (bpftel_uprobes__set_owner_share); not those of /proc scans. */
	__u64 over_share;
	size_t nrecent;			    /* the last ones, newest first */
	struct bpftel_uprobe_refusal recent[BPFTEL_UPROBES_RECENT];
};

/* Refusals so far, and how many sweeps ran (tests wait on them). */
void bpftel_uprobes__refusals(struct bpftel_uprobes *u, struct bpftel_uprobes_refusals *out);

/* Is path's basename a library of a known stem? Returns enum shlib_lib or -1. The same
 * rules as the BPF matcher (bpf/lib/shlib_match.h), for /proc/<pid>/maps lines. */
int bpftel_shlib_match_name(const char *path);

#endif /* BPFTEL_UPROBES_H */
