// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Probes: feature detection of attach candidates before load, attach with fallback
 * after it. Detection decides autoload, so a candidate the kernel refuses (fentry
 * here: EPERM) never reaches bpf_object__load and cannot fail the whole object.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>

#include "elfsym.h"
#include "internal.h"
#include "user/common/log.h"

#define TRACEFS "/sys/kernel/tracing"
#define DEBUGFS "/sys/kernel/debug/tracing"

static const char *const attach_names[] = {
	[BPFTEL_ATTACH_FENTRY] = "fentry",
	[BPFTEL_ATTACH_FEXIT] = "fexit",
	[BPFTEL_ATTACH_KPROBE] = "kprobe",
	[BPFTEL_ATTACH_KRETPROBE] = "kretprobe",
	[BPFTEL_ATTACH_TRACEPOINT] = "tracepoint",
	[BPFTEL_ATTACH_RAW_TRACEPOINT] = "raw_tracepoint",
	[BPFTEL_ATTACH_UPROBE] = "uprobe",
	[BPFTEL_ATTACH_URETPROBE] = "uretprobe",
	[BPFTEL_ATTACH_SOCKET_FILTER] = "socket_filter",
};

const char *bpftel_attach_type_name(enum bpftel_attach_type type)
{
	return (unsigned)type <= BPFTEL_ATTACH_SOCKET_FILTER ? attach_names[type] : "unknown";
}

const char *bpftel_probe_policy_name(enum bpftel_probe_policy policy)
{
	switch (policy) {
	case BPFTEL_PROBE_REQUIRED:
		return "required";
	case BPFTEL_PROBE_BEST_EFFORT:
		return "best-effort";
	case BPFTEL_PROBE_ONE_OF_GROUP:
		return "one-of-group";
	}
	return "unknown";
}

/* Can this kernel load fentry/fexit programs at all? Load a two-instruction one. */
/* *kernels: whether a failure is the kernel's verdict on fentry programs, to be cached
 * (its refusal of the load), not a failure of the moment (BTF or memory). */
static int detect_tracing(const char *func, char *reason, size_t len, bool *kernels)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY);
	struct btf *btf = btf__load_vmlinux_btf();
	int id, fd, err;

	if (!btf) {
		err = -errno;
		snprintf(reason, len, "no kernel BTF: %s", strerror(-err));
		return err;
	}
	id = btf__find_by_name_kind(btf, func, BTF_KIND_FUNC);
	btf__free(btf);
	if (id < 0) {
		snprintf(reason, len, "function %s not in kernel BTF", func);
		return -ENOENT;
	}
	opts.attach_btf_id = id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "bpftel_feat", "GPL", insns, 2, &opts);
	if (fd < 0) {
		err = -errno;
		snprintf(reason, len, "kernel refuses fentry/fexit programs (load: %s)",
			 strerror(-err));
		*kernels = err == -EINVAL || err == -EPERM || err == -EOPNOTSUPP ||
			   err == -524 /* ENOTSUPP */;
		return err;
	}
	close(fd);
	return 0;
}

static int detect_kprobe(char *reason, size_t len)
{
	if (!access("/sys/bus/event_source/devices/kprobe/type", R_OK) ||
	    !access(TRACEFS "/kprobe_events", W_OK) || !access(DEBUGFS "/kprobe_events", W_OK))
		return 0;
	snprintf(reason, len, "kernel has no kprobe support (no kprobe PMU, no kprobe_events)");
	return -EOPNOTSUPP;
}

static int detect_tracepoint(const char *target, char *reason, size_t len)
{
	char path[256];

	if (!strchr(target, '/')) {
		snprintf(reason, len, "tracepoint '%s' is not 'category/name'", target);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), TRACEFS "/events/%s/id", target);
	if (!access(path, R_OK))
		return 0;
	snprintf(path, sizeof(path), DEBUGFS "/events/%s/id", target);
	if (!access(path, R_OK))
		return 0;
	snprintf(reason, len, "no tracepoint %s in tracefs", target);
	return -ENOENT;
}

/*
 * Whether the kernel loads fentry/fexit at all, and has kprobes, does not change while
 * we run: the first negative answer is kept, so later loads skip the probe (and, for
 * fentry, parsing the kernel's BTF).
 */
static int cached_verdict(struct bpftel_manager *mgr, int *slot)
{
	int v;

	pthread_mutex_lock(&mgr->feat_lock);
	v = *slot;
	pthread_mutex_unlock(&mgr->feat_lock);
	return v < 0 ? v : 0;
}

static void cache_verdict(struct bpftel_manager *mgr, int *slot, int err)
{
	pthread_mutex_lock(&mgr->feat_lock);
	*slot = err;
	pthread_mutex_unlock(&mgr->feat_lock);
}

static int detect(struct bpftel_module *m, struct probe *p, size_t i, char *reason, size_t len)
{
	const struct bpftel_attach_candidate *c = &p->spec.cand[i];
	bool kernels = false;
	long off;
	int err;

	switch (c->type) {
	case BPFTEL_ATTACH_FENTRY:
	case BPFTEL_ATTACH_FEXIT:
		err = cached_verdict(m->mgr, &m->mgr->fentry_ok);
		if (err) {
			snprintf(reason, len, "kernel refuses fentry/fexit programs (load: %s)",
				 strerror(-err));
			return err;
		}
		err = detect_tracing(c->target, reason, len, &kernels);
		if (err && kernels)
			cache_verdict(m->mgr, &m->mgr->fentry_ok, err);
		return err;
	case BPFTEL_ATTACH_KPROBE:
	case BPFTEL_ATTACH_KRETPROBE:
		err = cached_verdict(m->mgr, &m->mgr->kprobe_ok);
		if (!err)
			err = detect_kprobe(reason, len);
		if (err) {
			snprintf(reason, len,
				 "kernel has no kprobe support (no kprobe PMU, no kprobe_events)");
			cache_verdict(m->mgr, &m->mgr->kprobe_ok, err);
		}
		return err;
	case BPFTEL_ATTACH_TRACEPOINT:
		return detect_tracepoint(c->target, reason, len);
	case BPFTEL_ATTACH_RAW_TRACEPOINT:
		return 0;
	case BPFTEL_ATTACH_SOCKET_FILTER:
		if (strcmp(c->target, "any") && !if_nametoindex(c->target)) {
			snprintf(reason, len, "no interface '%s'", c->target);
			return -ENODEV;
		}
		return 0;
	case BPFTEL_ATTACH_UPROBE:
	case BPFTEL_ATTACH_URETPROBE:
		off = bpftel_elf_sym_offset(c->target, c->symbol, reason, len);
		if (off < 0)
			return (int)off;
		p->uprobe_offset[i] = off;
		return 0;
	}
	snprintf(reason, len, "unknown attach type %d", c->type);
	return -EINVAL;
}

void probe_publish(struct bpftel_module *m, struct probe *p, const struct bpftel_probe_status *st)
{
	pthread_mutex_lock(&m->report_lock);
	p->status = *st;
	pthread_mutex_unlock(&m->report_lock);
}

/* Detection is slow work (BTF, ELF): done on a copy, published once per probe. */
/* What a probe is before detection: named, none of its candidates tried. Its status is
 * listed (bpftel probes, a module's report) from the moment it is added: a start that
 * fails before detection leaves it so. */
void probe_status_init(struct probe *p)
{
	size_t j;

	memset(&p->status, 0, sizeof(p->status));
	p->status.name = p->spec.name;
	p->status.policy = p->spec.policy;
	p->status.group = p->spec.group;
	p->status.winner = -1;
	p->status.ncand = p->spec.ncand;
	for (j = 0; j < p->spec.ncand; j++)
		p->status.cand[j].cand = p->spec.cand[j];
}

void probes_detect(struct bpftel_module *m)
{
	struct bpftel_probe_status st;
	struct bpf_program *prog;
	struct probe *p;
	size_t i, j;
	int err;

	for (i = 0; i < m->nprobes; i++) {
		p = &m->probes[i];
		memset(&st, 0, sizeof(st));
		st.name = p->spec.name;
		st.policy = p->spec.policy;
		st.group = p->spec.group;
		st.winner = -1;
		st.ncand = p->spec.ncand;
		for (j = 0; j < p->spec.ncand; j++) {
			st.cand[j].cand = p->spec.cand[j];
			prog = bpf_object__find_program_by_name(m->obj, p->spec.cand[j].prog);
			if (!prog) {
				st.cand[j].result = BPFTEL_CAND_REJECTED;
				st.cand[j].err = -ENOENT;
				snprintf(st.cand[j].reason, sizeof(st.cand[j].reason),
					 "no program '%s' in the object", p->spec.cand[j].prog);
				continue;
			}
			err = cand_injected(m, p->spec.name, j);
			if (err)
				snprintf(st.cand[j].reason, sizeof(st.cand[j].reason),
					 "injected fault");
			else
				err = detect(m, p, j, st.cand[j].reason, sizeof(st.cand[j].reason));
			if (!err && (p->spec.cand[j].type == BPFTEL_ATTACH_FENTRY ||
				     p->spec.cand[j].type == BPFTEL_ATTACH_FEXIT))
				err = bpf_program__set_attach_target(prog, 0,
								     p->spec.cand[j].target);
			if (err && !st.cand[j].reason[0])
				snprintf(st.cand[j].reason, sizeof(st.cand[j].reason),
					 "attach target %s: %s", p->spec.cand[j].target,
					 strerror(-err));
			bpf_program__set_autoload(prog, !err);
			st.cand[j].result = err ? BPFTEL_CAND_REJECTED : BPFTEL_CAND_VIABLE;
			st.cand[j].err = err;
			if (err)
				pr_debug("module '%s': probe '%s': %s:%s rejected: %s",
					 m->ops->name, p->spec.name,
					 bpftel_attach_type_name(p->spec.cand[j].type),
					 p->spec.cand[j].target, st.cand[j].reason);
		}
		probe_publish(m, p, &st);
	}
}

/*
 * A packet socket for every protocol on target ("any": every interface), carrying prog.
 * The program decides what it looks at and returns 0, so nothing is ever queued on the
 * socket. Its fd, or -errno.
 */
static int socket_filter_open(int prog_fd, const char *target, char *what, size_t len)
{
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	char link[64];
	ssize_t n;
	int fd, err;

	if (strcmp(target, "any")) {
		/* Gone since detect() saw it: index 0 would bind every interface, their
		 * packets counted as this one's. */
		sll.sll_ifindex = (int)if_nametoindex(target);
		if (!sll.sll_ifindex)
			return -ENODEV;
	}
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_BPF, &prog_fd, sizeof(prog_fd)) ||
	    bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		err = -errno;
		close(fd);
		return err;
	}
	/* Named as `ss -p` and /proc/<pid>/fd show it. */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, what, len - 1);
	what[n > 0 ? n : 0] = '\0';
	return fd;
}

static struct bpf_link *attach_one(struct bpftel_module *m, struct probe *p, size_t i)
{
	const struct bpftel_attach_candidate *c = &p->spec.cand[i];
	struct bpf_program *prog = bpf_object__find_program_by_name(m->obj, c->prog);
	char cat[128];
	const char *slash;
	pid_t pid = c->pid > 0 ? c->pid : -1;

	if (!prog) {
		errno = ENOENT;
		return NULL;
	}
	switch (c->type) {
	case BPFTEL_ATTACH_FENTRY:
	case BPFTEL_ATTACH_FEXIT:
		return bpf_program__attach_trace(prog);
	case BPFTEL_ATTACH_KPROBE:
	case BPFTEL_ATTACH_KRETPROBE:
		return bpf_program__attach_kprobe(prog, c->type == BPFTEL_ATTACH_KRETPROBE,
						  c->target);
	case BPFTEL_ATTACH_TRACEPOINT:
		slash = strchr(c->target, '/');
		if (!slash || (size_t)(slash - c->target) >= sizeof(cat)) {
			errno = EINVAL;
			return NULL;
		}
		snprintf(cat, sizeof(cat), "%.*s", (int)(slash - c->target), c->target);
		return bpf_program__attach_tracepoint(prog, cat, slash + 1);
	case BPFTEL_ATTACH_RAW_TRACEPOINT:
		return bpf_program__attach_raw_tracepoint(prog, c->target);
	case BPFTEL_ATTACH_UPROBE:
	case BPFTEL_ATTACH_URETPROBE:
		return bpf_program__attach_uprobe(prog, c->type == BPFTEL_ATTACH_URETPROBE, pid,
						  c->target, p->uprobe_offset[i]);
	case BPFTEL_ATTACH_SOCKET_FILTER:
		break; /* attach_candidate: a socket, not a link */
	}
	errno = EINVAL;
	return NULL;
}

/* Attach candidate i of p: a link, or for a socket filter its socket. 0 or -errno. */
static int attach_candidate(struct bpftel_module *m, struct probe *p, size_t i,
			    struct bpftel_probe_status *st)
{
	const struct bpftel_attach_candidate *c = &p->spec.cand[i];
	struct bpf_program *prog;

	if (c->type == BPFTEL_ATTACH_SOCKET_FILTER) {
		prog = bpf_object__find_program_by_name(m->obj, c->prog);
		p->sock = prog ? socket_filter_open(bpf_program__fd(prog), c->target,
						    st->attached_to, sizeof(st->attached_to))
			       : -ENOENT;
		return p->sock < 0 ? p->sock : 0;
	}
	p->link = attach_one(m, p, i);
	return p->link ? 0 : -errno;
}

static __u32 prog_id(struct bpftel_module *m, const char *name)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(m->obj, name);
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (!prog || bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
		return 0;
	return info.id;
}

static bool group_attached(struct bpftel_module *m, const char *group)
{
	size_t i;

	for (i = 0; i < m->nprobes; i++) {
		if (m->probes[i].spec.policy == BPFTEL_PROBE_ONE_OF_GROUP &&
		    !strcmp(m->probes[i].spec.group, group) && probe_attached(&m->probes[i]))
			return true;
	}
	return false;
}

/* Is p covered by an earlier probe's winner (spec.covered_by)? */
static bool covered(struct bpftel_module *m, const struct probe *p)
{
	size_t i;

	if (!p->spec.covered_by)
		return false;
	for (i = 0; i < m->nprobes && &m->probes[i] != p; i++) {
		if (!strcmp(m->probes[i].spec.name, p->spec.covered_by))
			return probe_attached(&m->probes[i]) &&
			       m->probes[i].status.winner == p->spec.covered_by_cand;
	}
	return false;
}

/* Attach is slow work: each probe's status is worked on in a copy, then published. */
int probes_attach(struct bpftel_module *m)
{
	struct bpftel_probe_status st;
	struct probe *p;
	int err, last;
	size_t i, j;

	for (i = 0; i < m->nprobes; i++) {
		p = &m->probes[i];
		st = p->status; /* only this thread writes it */
		last = -ENOENT;
		st.covered_by = NULL;
		if (covered(m, p)) {
			st.covered_by = p->spec.covered_by;
			for (j = 0; j < p->spec.ncand; j++) {
				if (st.cand[j].result == BPFTEL_CAND_VIABLE)
					st.cand[j].result = BPFTEL_CAND_COVERED;
			}
			probe_publish(m, p, &st);
			continue;
		}
		for (j = 0; j < p->spec.ncand; j++) {
			if (st.cand[j].result != BPFTEL_CAND_VIABLE)
				continue;
			if (probe_attached(p)) {
				st.cand[j].result = BPFTEL_CAND_UNTRIED;
				continue;
			}
			last = attach_candidate(m, p, j, &st);
			if (!last) {
				st.cand[j].result = BPFTEL_CAND_ATTACHED;
				st.winner = (int)j;
				st.prog_id = prog_id(m, p->spec.cand[j].prog);
				continue;
			}
			st.cand[j].result = BPFTEL_CAND_REJECTED;
			st.cand[j].err = last;
			snprintf(st.cand[j].reason, sizeof(st.cand[j].reason),
				 "attach failed: %s", strerror(-last));
		}
		probe_publish(m, p, &st);
		if (probe_attached(p) || p->spec.policy != BPFTEL_PROBE_REQUIRED) {
			if (!probe_attached(p))
				pr_info("module '%s': probe '%s' (%s) not attached", m->ops->name,
					p->spec.name, bpftel_probe_policy_name(p->spec.policy));
			continue;
		}
		/* Why: the last attach's error, or where none was tried (detection
		 * rejected them all), the first candidate's rejection. */
		for (j = 0; last == -ENOENT && j < p->spec.ncand; j++) {
			if (st.cand[j].result == BPFTEL_CAND_REJECTED && st.cand[j].err < 0)
				last = st.cand[j].err;
		}
		pr_err("module '%s': required probe '%s': no candidate attached: %s", m->ops->name,
		       p->spec.name, strerror(-last));
		for (j = 0; j < p->spec.ncand; j++)
			pr_err("module '%s': probe '%s': %s:%s: %s", m->ops->name, p->spec.name,
			       bpftel_attach_type_name(p->spec.cand[j].type),
			       p->spec.cand[j].target, st.cand[j].reason);
		return last;
	}
	for (i = 0; i < m->nprobes; i++) {
		p = &m->probes[i];
		if (p->spec.policy == BPFTEL_PROBE_ONE_OF_GROUP &&
		    !group_attached(m, p->spec.group)) {
			pr_err("module '%s': no probe of group '%s' attached", m->ops->name,
			       p->spec.group);
			err = -ENOENT;
			return err;
		}
	}
	return 0;
}

/* Close the socket filters' sockets: their programs stop at once (no grace period to
 * wait, and no stop gate: a packet's program does not read it). */
void probes_close_sockets(struct bpftel_module *m)
{
	size_t i;

	for (i = 0; i < m->nprobes; i++) {
		if (m->probes[i].sock >= 0)
			close(m->probes[i].sock);
		m->probes[i].sock = -1;
	}
}

void probes_detach(struct bpftel_module *m, bool in_background)
{
	size_t i;

	for (i = 0; i < m->nprobes; i++) {
		if (in_background)
			bpftel_link_release(m->probes[i].link);
		else
			bpf_link__destroy(m->probes[i].link);
		m->probes[i].link = NULL;
		pthread_mutex_lock(&m->report_lock);
		m->probes[i].status.prog_id = 0;
		m->probes[i].status.attached_to[0] = '\0';
		pthread_mutex_unlock(&m->report_lock);
	}
	/* A socket filter goes with its socket, at once (no grace period to wait). */
	probes_close_sockets(m);
}
