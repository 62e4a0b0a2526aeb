/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Uprobe registry internals, shared by uprobes.c (the tables, processes, sweep, scan,
 * module hooks) and uprobe_attach.c (opening, parsing and attaching one file).
 *
 * Locking: u->lock guards everything below; it is never held across slow work. A
 * thread that works on a file outside the lock marks it busy (f->busy), and a module
 * whose object it uses (me->busy); a file is freed only when neither it is busy nor
 * any of its links is still with the reaper (f->releasing), and a module's stop waits
 * on u->idle until its busy count drops to 0 before it takes its links back.
 */
#ifndef BPFTEL_UPROBES_INTERNAL_H
#define BPFTEL_UPROBES_INTERNAL_H

#include <pthread.h>

#include "bpf/uprobe_hits.h"
#include "file_budget.h"
#include "uprobes.h"

/* Modules with probes in the registry: the GPU and USM modules, and room for two more.
 * Every known file holds an entry per module, links included (below): 4 x ~4.4 KiB. */
#define MAX_MODS  4
/* Probe points per module: the GPU module has 158 (30 runtime and 49 driver functions,
 * entry and return). Each file's entry for a module holds this many links (16 bytes
 * each) while the file is known. */
#define MAX_SPECS 192
#define MAX_FILES 1024
/* A quarter of them: one user's copies of a library, each probed and held while its
 * process lives, cannot keep every other user's new library out. */
#define OWNER_SHARE_DEFAULT (MAX_FILES / 4)

_Static_assert(MAX_FILES <= UPROBE_HITS_FILES, "a hits slot for every file");

struct bpf_link;
struct bpf_object;

/* A libbpf link, or the fd of a raw multi-uprobe link. */
struct ulink {
	struct bpf_link *link;
	int fd;
};

enum fm_state {
	FM_NONE = 0, /* nothing attached, nothing tried for this instance */
	FM_BUSY,     /* a thread is attaching */
	FM_DONE,     /* tried: links and failures below */
};

struct file_mod {
	enum fm_state st;
	bool multi;
	size_t nlinks;
	struct ulink links[MAX_SPECS];
	size_t attached; /* probe points */
	unsigned char entry_kind; /* its entry points' instructions: ENTRY_EMULATED | ENTRY_STEPPED */
	size_t nfail;
	size_t nskipped; /* optional specs whose symbol the file lacks */
	struct {
		char symbol[64];
		int err;
	} fail[BPFTEL_UPROBE_MAX_FAIL];
	size_t nfolded;
	struct bpftel_uprobe_folded folded[BPFTEL_UPROBE_MAX_FOLDED];
	size_t nmoved;
	struct bpftel_uprobe_moved moved[BPFTEL_UPROBE_MAX_MOVED];
};

/* How a process reaches the file: a procfile target (path as it named it). */
/* The processes of a file that keep the path they named it by (struct proc_ref). */
#define BPFTEL_REOPEN_PATHS 8

struct proc_ref {
	__u32 pid;
	__u64 start_time; /* /proc/<pid>/stat's, clock ticks since boot */
	/* The kernel's start time of the process (ns), as the watcher's events carry it;
	 * 0 until one does. An event of the pid that carries another is of a process that
	 * reused the pid: known without /proc. */
	__u64 kstart;
	int dirfd;
	char *path; /* NULL but for the file's BPFTEL_REOPEN_PATHS newest processes */
	dev_t dev;  /* the identity this access leads to */
	__u64 ino;
	/* The sweep (u->sweeps + 1) in whose period an event of this pid without the
	 * kernel's start time last had /proc's read: once per period at most (0: never). */
	__u64 checked;
};

struct lib_file {
	dev_t dev; /* what the kernel maps and probes: the key */
	__u64 ino;
	/* With it, on btrfs, the subvolume's device (bpftel_procfile_open_mapped()): inode
	 * numbers repeat across subvolumes under the one device the kernel gives (a
	 * snapshot's files have its source's), so (dev, ino) alone can be two files, each
	 * probed on its own. Elsewhere, and where it is not known, dev (same_sdev()). */
	dev_t sdev;
	/* Times a process's use of it was answered by opening the file (its first, a
	 * scan's, one the kernel's identity could not name alone), not from the row. */
	__u64 opens;
	dev_t alias_dev; /* what a path reached (overlayfs: the overlay's inode) */
	__u64 alias_ino;
	enum shlib_lib lib;
	char path[256];
	size_t nprocs, cap;
	struct proc_ref *procs;
	long long idle_since_ms; /* 0 while a process uses it */
	/* Per module, the calls its probes had counted when the file was last seen idle,
	 * and the module's instance then (mod_entry.gen): more since, and a process the
	 * watcher never reported uses it (uprobes.c: sweep_idle_locked) */
	__u64 idle_calls[MAX_MODS], idle_gen[MAX_MODS];
	bool idle_used; /* ... seen this idle stretch (one /proc scan asked) */
	bool idle_scan; /* its grace over, its release waits for a /proc scan (asked) */
	long long scan_seen_ms; /* the registry's scan_from_ms when it asked */
	int refused;		 /* enum bpftel_refusal, or -1 */
	char refused_detail[128];
	__u64 owner; /* whose new file it was (file_budget.h's owner): its share */
	unsigned int busy;
	size_t releasing; /* its links the reaper has not destroyed yet */
	unsigned int slot; /* its calls' counters in uprobe_hits (bpf/uprobe_hits.h) */
	unsigned int shed; /* bit per module: detached by bpftel_uprobes__shed */
	/* The inotify watch on the inode the registry opened (uprobe_watch.c), from before
	 * its first attach until it holds no link and no attach is in flight; -1: none.
	 * Another row may hold the same (an overlay's inode, the layer's row opened
	 * through it and its copy-up's). */
	int wd;
	__u64 written_mark; /* the last write event that released it (uprobe_watch.c) */
	bool unwatched;	   /* the watch could not be added: a short grace instead */
	__u64 writes;	   /* writes seen in place: an attach that began before one is stale */
	/* Sweeps' reopens that reached the file through none of its live processes, in a
	 * row, and when the sweep tries again (backing off: REOPEN_BACKOFF_MAX_MS) */
	unsigned int reopen_fails;
	long long reopen_at_ms;
	struct file_mod mods[MAX_MODS];
};

/* The longest a sweep waits to reopen a file its processes no longer reach. */
#define REOPEN_BACKOFF_MAX_MS 60000

struct mod_entry {
	struct bpftel_uprobes *u;
	char name[64];
	const struct bpftel_uprobe_spec *specs;
	size_t nspecs;
	struct bpf_object *obj; /* between before_start and before_stop */
	__u64 gen;		/* bumped by each stop */
	unsigned int busy;	/* attaches in flight with obj */
	bool multi;		/* this instance's programs were loaded for multi links */
	char mode_reason[160];
	/* Per spec, what its entry points' instructions have been in the files attached
	 * so far (ENTRY_EMULATED, ENTRY_STEPPED; atomic: attaches run unlocked): what a
	 * run of the program costs in trap (bpftel_uprobes__programs). */
	unsigned char entry_kind[MAX_SPECS];
};

#define ENTRY_EMULATED 1
#define ENTRY_STEPPED  2

/*
 * Files refused for what they are (not ELF, too large, tables over their caps, not a
 * regular file, on a slow filesystem), by the identity the kernel reported for the open:
 * a process that opens such a file again and again (a flood) is refused from here,
 * without touching /proc or the file. Entries live REFUSED_TTL_S, so a file rewritten
 * in place is looked at again; the oldest entry makes room for a new one. A file
 * refused over its user's budget is kept too, for that user only (by_owner), until the
 * budget has room again: a process opening it in a loop costs a lookup, not an open.
 */
#define REFUSED_CACHE 64
#define REFUSED_TTL_S 10

struct refused_file {
	dev_t dev;
	__u64 ino; /* 0: a free entry */
	__u64 until_ns;
	enum bpftel_refusal why;
	int err; /* what the first refusal returned (< 0) */
	bool by_owner; /* a refusal of owner's, not of the file's own */
	__u64 owner;
	char detail[128];
};

/*
 * Executables the /proc scan and the execs looked into: Go or not, by the identity the
 * kernel maps and the change time of the file read, so that each is read once (its
 * headers and .go.buildinfo), not once per process or per scan, and read again once
 * rewritten in place (same inode, new ctime). One entry per file; the oldest entry
 * makes room for a new file.
 */
#define EXE_VERDICTS 1024

struct exe_verdict {
	dev_t dev;
	__u64 ino; /* 0: a free entry */
	struct timespec ctime; /* the file's when it was read */
	bool go;
};

struct bpftel_uprobes {
	pthread_mutex_t lock;
	pthread_cond_t idle; /* a busy count dropped */
	size_t nmods;
	struct mod_entry mods[MAX_MODS];
	size_t nfiles;
	struct lib_file *files[MAX_FILES];
	bool slot_used[MAX_FILES];
	__u64 stale;
	__u64 sweeps;
	/* When the last /proc scan done began (bpftel_uprobes__scan): a file idle since
	 * before it would have been found by it if a process mapped it. */
	long long scan_from_ms;
	unsigned int grace_ms;
	struct bpftel_file_budget budget; /* new files per owner and minute */
	/* Rows one owner but root may hold with links (or an attach in flight) at once:
	 * the budget bounds a rate, this what one user keeps (OWNER_SHARE_DEFAULT). */
	unsigned int owner_share;
	struct bpftel_uprobes_refusals ref;
	struct refused_file refused[REFUSED_CACHE];
	size_t refused_next; /* the entry a new refusal takes when none is free */
	struct exe_verdict verdicts[EXE_VERDICTS];
	size_t verdict_next;
	/* Files written in place while probed (uprobe_watch.c): an inotify instance, and
	 * the thread that reads it, stopped through an eventfd. -1: none. */
	int watch_fd, watch_stop;
	pthread_t watch_thread;
	__u64 write_events; /* the watch thread's own: each write event's mark */
	bool watch_running;
	bool warned_written; /* the first release of a written file is logged as a warning */
};

/* Module mi on a file, for the instance gen of its object obj. */
struct attach_job {
	size_t mi;
	__u64 gen;
	struct bpf_object *obj;
	bool multi;
};

/*
 * uprobe_attach.c: without u->lock, with f and each job's module marked busy: open f
 * (fd if >= 0, else through its processes), parse it once for every job's symbols,
 * attach each job, then under the lock store the results and drop the busy marks.
 */
void attach_run(struct bpftel_uprobes *u, struct lib_file *f, const struct attach_job *jobs,
		size_t njobs, int fd);
/* Destroy links: through the reaper when their programs are inert (gated), else here. */
void links_drop(struct ulink *links, size_t n, bool gated);

/* uprobes.c, with u->lock: the file of (dev, ino, sdev), or NULL; does module me attach
 * to files of lib; mark the attaches f lacks busy (module `only`, or all with MAX_MODS)
 * and describe them in jobs. */
struct lib_file *find_file(struct bpftel_uprobes *u, dev_t dev, __u64 ino, dev_t sdev);
bool wants(const struct mod_entry *me, enum shlib_lib lib);
/* uprobes.c: can f be the file of subvolume device sdev? Yes when it is f's, or either
 * is not known (dev itself: a btrfs file reached through an overlay, whose fd says
 * overlayfs, not which subvolume), so that one inode reached both ways is one file,
 * probed once. */
bool same_sdev(const struct lib_file *f, dev_t sdev);
size_t collect_jobs(struct bpftel_uprobes *u, struct lib_file *f, size_t only,
		    struct attach_job *jobs);

/* uprobes.c: a link of f handed to the reaper with release_done(ctx) is gone; the last
 * one lifts the file's guard (f->releasing), and frees it if nobody uses it. */
struct release_ctx {
	struct bpftel_uprobes *u;
	struct lib_file *f;
};
void release_account(struct bpftel_uprobes *u, struct lib_file *f);
/* The calls f's probes counted, by kind, in the module's uprobe_hits map (fd): an
 * array lookup each, with u->lock held so the object cannot close. */
void file_hits(int fd, const struct lib_file *f, __u64 hit[UPROBE_HITS_KINDS]);
void release_done(void *arg);

/* uprobes.c, with u->lock: move every link of f (all modules) to rel (room for
 * MAX_MODS * MAX_SPECS), its modules back to FM_NONE but those an attach is in flight
 * for (FM_BUSY: theirs to end), and count them in its guard (f->releasing). Returns how
 * many. */
size_t take_links_locked(struct lib_file *f, struct ulink *rel);
/* uprobes.c, unlocked: hand n links of f, taken by take_links_locked, to the reaper;
 * first: ahead of the links already queued. */
void hand_links(struct bpftel_uprobes *u, struct lib_file *f, struct ulink *rel, size_t n,
		bool first);
size_t file_links(const struct lib_file *f);

/*
 * uprobe_watch.c: a file the registry attaches to is watched for writes (IN_MODIFY:
 * write(2), truncate, copy_file_range, fallocate) on the inode it opened, from before
 * its first link until its last; a write releases its links at once (uprobes.h).
 * watch_start: at bpftel_uprobes__new (the registry works without: files are then
 * unwatched); watch_stop: at free, before the reaper settles (the thread hands links
 * to it). watch_file: unlocked, fd the file being attached; then, under u->lock, the
 * file's wd, and the writes count an attach compares at its end. watch_drop_locked:
 * remove f's watch once it holds no link and no attach is in flight.
 */
int watch_start(struct bpftel_uprobes *u);
void watch_stop(struct bpftel_uprobes *u);
__u64 watch_file(struct bpftel_uprobes *u, struct lib_file *f, int fd);
void watch_drop_locked(struct bpftel_uprobes *u, struct lib_file *f);

/* uprobes.c: with u->lock, count a refusal and remember it among the recent ones. */
enum bpftel_refusal refusal_of(int err);
void refusal_locked(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib, const char *path,
		    enum bpftel_refusal why, const char *detail);

#endif /* BPFTEL_UPROBES_INTERNAL_H */
