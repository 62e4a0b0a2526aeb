// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "usm.h"
#include "h2_sessions.h"
#include "h2c.h"
#include "nat_copies.h"
#include "series.h"
#include "tls_retry.h"
#include "bpf/fair_share_defs.h"
#include "fair_share.h"
#include "user/manager/subuid.h"
#include "usm.skel.h"
#include "user/common/ctl.h"
#include "user/common/fd.h"
#include "user/common/log.h"
#include "user/common/proc.h"
#include "user/manager/manager.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"

_Static_assert(sizeof(struct usm_event) <= BPFTEL_RINGBUF_MAX_RECORD &&
		       USM_H2_RECORD_HDR + USM_H2_CAP <= BPFTEL_RINGBUF_MAX_RECORD,
	       "a USM record larger than the consumer's largest record");

/* Bounds of the endpoint table (see endpoints.h). */
#define USM_MAX_PENDING	 4096
#define USM_MAX_ROWS	 4096
#define USM_ROWS_PER_PROC 64 /* per process and side */

struct bpftel_usm {
	struct bpftel_module_ops ops;
	struct bpftel_module *module;
	struct bpftel_sharedlibs *sl;
	struct usm_endpoints *endpoints;
	struct usm_h2_sessions *h2;
	struct usm_h2c *h2c;
	struct usm_nat_copies *nat; /* plaintext requests seen under two sets of addresses */
	struct usm_procs *procs;
	__u64 shares_due_ns; /* the next correction of the users' shares (usm_shares_sweep) */
	bool shares_warned;  /* a correction failed, and the log said so */
	unsigned int shares_full_said; /* by table: an owner held its whole share, said */
	/* Who holds the most of each shared table, as the last correction found (under
	 * lock; none while the module is not loaded). */
	struct fair_share_holders share_holders[USM_SHARE__COUNT];
	struct fair_share_refusers share_refusers[USM_SHARE__COUNT]; /* likewise */
	/* The uid ranges granted to users as the programs have them (under lock). */
	struct fair_share_uid_ranges subuid;
	struct usm_series_set *series; /* /metrics' */
	pthread_mutex_t lock; /* skel, loaded, opens, retired, settings */
	struct usm *skel;     /* while the module is open */
	__u64 opens;	      /* objects opened: which one a sweep's duplicated fds are of */
	/* Its maps are read only once loaded: the load writes their fds and maps .bss
	 * (libbpf, without our lock), while housekeeping and reports run. */
	bool loaded;
	__u64 retired[USM_CNT__COUNT];
	__u64 live_last[USM_CNT__COUNT]; /* the loaded object's, as last read */
	/* The workers' counts, atomic (count()). */
	__u64 unparsed, malformed, unattributed, nat_copies, tls_no_conn, tls_conn_reused, own;
	__u64 ends_reversed;
	__u64 rejected[USM_HTTP__REJECT_COUNT];
	__u32 self; /* the agent's own pid: its sockets' messages are not recorded */
	/* The agent's network namespace (its inode): the socket filter's packets are of
	 * it, and their connections' owners are looked up in it. */
	__u32 netns;
	struct bpftel_usm_settings settings;
};

static const char *const counter_names[USM_CNT__COUNT] = {
	[USM_CNT_TLS_CALLS] = "tls_calls", [USM_CNT_TLS_HTTP] = "tls_http",
	[USM_CNT_PACKETS] = "packets",	   [USM_CNT_PACKETS_HTTP] = "packets_http",
	[USM_CNT_LOST] = "lost",	   [USM_CNT_TRUNCATED] = "truncated",
	[USM_CNT_H2_CALLS] = "h2_calls",   [USM_CNT_H2_TRUNCATED] = "h2_truncated",
	[USM_CNT_H2_UNFRAMED] = "h2_unframed", [USM_CNT_H2_LOST] = "h2_lost",
	[USM_CNT_H2_MIDSTREAM] = "h2_midstream", [USM_CNT_H2C_PACKETS] = "h2c_packets",
	[USM_CNT_GO_UNPAIRED] = "go_read_unpaired", [USM_CNT_PACKETS_DUPLICATE] = "packets_duplicate",
	[USM_CNT_H2_RECORDS] = "h2_records", [USM_CNT_TLS_RETRIES] = "tls_write_retries",
	[USM_CNT_PACKETS_IP6_DEEP] = "packets_ipv6_deep", [USM_CNT_H2_NESTED] = "h2_nested",
	[USM_CNT_H2_START_REFUSED] = "h2_starts_refused", [USM_CNT_H2_OVER_SHARE] = "h2_over_share",
	[USM_CNT_TLS_SESS_OVER_SHARE] = "tls_sessions_over_share",
	[USM_CNT_TLS_RETRY_OVER_SHARE] = "tls_retry_marks_over_share",
	[USM_CNT_GO_READS_OVER_SHARE] = "go_reads_over_share",
	[USM_CNT_PACKETS_UNREAD] = "packets_unread",
	[USM_CNT_TLS_WRITE_RESTS] = "tls_write_rests",
	[USM_CNT_TLS_READS_UNSEEN] = "tls_reads_unseen",
};

static void usm_housekeeping(struct bpftel_module *m);

/*
 * The TLS sessions' table outlives a restart (bpftel_module__restart): a session set
 * up (SSL_set_fd) before it keeps its socket, and its HTTP/1 mark, after it, as the
 * watcher keeps the sockets' owners; and with it its users' counts (usm_load drops
 * those of the other tables). The rest starts afresh: an HTTP/2 session's kernel state
 * is of no use without the HPACK tables the stream cannot give back mid-way, and the
 * restart's gap loses calls anyway. An SSL_free in that gap goes unseen: its entry
 * stays until the LRU evicts it, or a correction finds its process gone (while a user
 * but root holds TLS sessions), for a session made at the same address without
 * SSL_set_fd to find.
 */
static const char *const usm_restart_keeps[] = {"usm_tls_fds", "fair_share", "fair_share_adj",
						NULL};

const char *bpftel_usm_counter_name(enum usm_counter c)
{
	return (unsigned)c < USM_CNT__COUNT ? counter_names[c] : "unknown";
}

/*
 * The TLS uprobes: one entry and one return program, the function in the cookie. A
 * write is captured whole at its entry (bpf/lib/usm_tls.h says why and what a failed
 * write does then): no return probe, and since it reads only (session, buffer, size),
 * past the prologue where that saves the single-step (user/manager/prologue.h). A
 * read's bytes exist only at its return: entry (where is the buffer) and return (how
 * much came), both on the function's first instruction; or, for SSL_read_ex where it
 * and SSL_read both wrap one internal read that starts with an instruction the kernel
 * emulates (OpenSSL 3: ssl_read_internal), both on that function's, once for the two
 * (TLS_READ_SHARED: SSL_read's own probes are then not attached); or, for
 * gnutls_record_recv, which hands its reads to internal functions of (session, type,
 * data, size), on theirs, keeping type 23, application data (TLS_READ_TYPED;
 * user/manager/tailread.h).
 */
#define TLS_WRITE(lib, sym, fn) {lib, "usm_tls_uprobe", sym, false, fn, 3}
#define TLS_READ(lib, sym, fn)                                     \
	{lib, "usm_tls_uprobe", sym, false, fn},                   \
	{                                                          \
		lib, "usm_tls_uretprobe", sym, true, fn            \
	}
#define TLS_READ_SHARED(l, sym, fn, other)                                                 \
	{.lib = l, .prog = "usm_tls_uprobe", .symbol = sym, .cookie = fn,                   \
	 .shares_callee = other},                                                           \
	{                                                                                  \
		.lib = l, .prog = "usm_tls_uretprobe", .symbol = sym, .retprobe = true,     \
		.cookie = fn, .shares_callee = other                                        \
	}

#define TLS_READ_TYPED(l, sym, fn, type)                                                   \
	{.lib = l, .prog = "usm_tls_uprobe", .symbol = sym, .cookie = fn, .typed_read = type}, \
	{                                                                                  \
		.lib = l, .prog = "usm_tls_uretprobe", .symbol = sym, .retprobe = true,     \
		.cookie = fn, .typed_read = type                                            \
	}

#define GO_PROBE(sym, fn, rets, opt)                                                     \
	{                                                                                \
		.lib = SHLIB_LIB_GO, .prog = "usm_go_uprobe", .symbol = sym, .cookie = fn, \
		.at_rets = rets, .optional = opt                                         \
	}

static const struct bpftel_uprobe_spec uprobe_specs[] = {
	/* Which socket a session runs on: its connection's addresses. */
	{SHLIB_LIB_SSL, "usm_tls_uprobe", "SSL_set_fd", false, USM_TLS_SSL_SET_FD},
	{SHLIB_LIB_GNUTLS, "usm_tls_uprobe", "gnutls_transport_set_int2", false,
	 USM_TLS_GNUTLS_SET_INT2},
	/* Sessions freed: what the kernel keeps by them goes (bpf/lib/usm_tls.h). Past the
	 * prologue, as the writes: their one argument is kept there. */
	{SHLIB_LIB_SSL, "usm_tls_uprobe", "SSL_free", false, USM_TLS_SSL_FREE, 1},
	{SHLIB_LIB_GNUTLS, "usm_tls_uprobe", "gnutls_deinit", false, USM_TLS_GNUTLS_DEINIT, 1},
	/* Why a call failed: a write to be retried, seen once (bpf/lib/usm_tls_retry.h). Called
	 * after failures only, by most applications; past the prologue, as the writes. */
	{SHLIB_LIB_SSL, "usm_tls_uprobe", "SSL_get_error", false, USM_TLS_SSL_GET_ERROR, 2},
	TLS_WRITE(SHLIB_LIB_SSL, "SSL_write", USM_TLS_SSL_WRITE),
	TLS_READ(SHLIB_LIB_SSL, "SSL_read", USM_TLS_SSL_READ),
	TLS_WRITE(SHLIB_LIB_SSL, "SSL_write_ex", USM_TLS_SSL_WRITE_EX),
	TLS_READ_SHARED(SHLIB_LIB_SSL, "SSL_read_ex", USM_TLS_SSL_READ_EX, "SSL_read"),
	TLS_WRITE(SHLIB_LIB_GNUTLS, "gnutls_record_send", USM_TLS_GNUTLS_SEND),
	TLS_READ_TYPED(SHLIB_LIB_GNUTLS, "gnutls_record_recv", USM_TLS_GNUTLS_RECV,
		       USM_GNUTLS_APP_DATA),
	/* Go's crypto/tls, in Go executables (bpf/lib/usm_go.h): plain uprobes only, the
	 * entries on the stack check's JBE, Read's returns on its RET instructions. */
	GO_PROBE("crypto/tls.(*Conn).Write", USM_GO_WRITE, false, false),
	GO_PROBE("crypto/tls.(*Conn).Read", USM_GO_READ, false, false),
	GO_PROBE("crypto/tls.(*Conn).Read", USM_GO_READ_RET, true, false),
	/* The session's end; a program that never closes a Conn may not have it (the
	 * linker drops what nothing calls). */
	GO_PROBE("crypto/tls.(*Conn).Close", USM_GO_CLOSE, false, true),
};

/* Plaintext HTTP: the socket filter on a packet socket of every interface, a probe of
 * the manager's like any other (`bpftel probes` shows its socket). */
static const struct bpftel_probe_spec socket_probe = {
	.name = "http-packets",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_SOCKET_FILTER, "usm_http_socket", "any"}},
};

/* A TLS session whose BIO reads its socket with recv(2) (curl's) gets its fd from the
 * recvfrom inside its read (bpf/lib/usm_tls.h, usm_tls_recv_fd). Only with tls_recv_fd
 * = on: every recvfrom(2) of the host runs it. Best effort: without it such sessions'
 * messages have no connection (tls_connection_unknown). */
static const struct bpftel_probe_spec recv_probe = {
	.name = "tls-recv-fd",
	.policy = BPFTEL_PROBE_BEST_EFFORT,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_TRACEPOINT, "usm_tls_recv", "syscalls/sys_enter_recvfrom"}},
};

/* The workers' counters: atomic, not under u->lock, which the housekeeping sweep holds
 * across its walk of the retry marks (a worker waiting there lets the ring fill). */
static void count(__u64 *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static __u64 counted(const __u64 *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static bool other_pid(uint32_t pid, void *ctx)
{
	return pid != *(const uint32_t *)ctx;
}

/*
 * The process of a message, learned if new. Rows are keyed by pid: when the pid was a
 * process that is gone and is now another's, what is under it (rows, pending
 * requests) is the old process's, folded into "(exited)" before the new one's first
 * message counts, so that the two are not added together under the new one's name.
 * True when it was new and already gone: nothing read of it (name_gone()).
 */
static bool note_proc(struct bpftel_usm *u, uint32_t pid)
{
	uint32_t evicted;
	bool gone;

	if (usm_procs_note_gone(u->procs, pid, &gone, &evicted))
		usm_endpoints_sweep(u->endpoints, other_pid, &pid);
	if (evicted) /* its grace cut short: folded now, before its pid is another's */
		usm_endpoints_sweep(u->endpoints, other_pid, &evicted);
	return gone;
}

/*
 * A process gone before its first plaintext message was read (a short-lived client),
 * noted as "?": named as the kernel named the thread that made the connect or accept
 * the watcher saw (owner, whose pid the message is recorded under). (A TLS one is
 * named at the report, after its open of the library: bpftel_usm__proc().)
 */
static void name_gone(struct bpftel_usm *u, const struct shlib_sock_owner *owner)
{
	usm_procs_name(u->procs, owner->pid, owner->comm);
}

/* A message into the endpoint table; a response that pairs there is counted in its
 * /metrics series too, at once: a series only grows (series.h). */
static void record(struct bpftel_usm *u, const struct usm_conn_key *key, enum usm_proto proto,
		   uint64_t t_ns, const struct usm_http_start *msg, const struct usm_conn_addr *conn)
{
	char ckey[BPFTEL_CONTAINER_KEY_MAX];
	struct usm_paired paired;
	struct usm_proc p;
	const char *container = NULL;

	if (!usm_endpoints_pair(u->endpoints, key, proto, t_ns, msg, conn, &paired))
		return;
	if (usm_series_set_containers(u->series) && usm_procs_get(u->procs, paired.pid, &p))
		container = bpftel_cgroup_container_key(&p.cgroup, ckey, sizeof(ckey));
	usm_series_set_add(u->series, &paired, container);
}

/* A watcher key's connection as client and server. */
static void conn_of(const struct shlib_sock_key *k, bool local_is_server, struct usm_conn_addr *c)
{
	c->family = k->family;
	if (local_is_server) {
		memcpy(c->server_addr, k->local, 16);
		memcpy(c->client_addr, k->remote, 16);
		c->server_port = k->lport;
		c->client_port = k->rport;
	} else {
		memcpy(c->client_addr, k->local, 16);
		memcpy(c->server_addr, k->remote, 16);
		c->client_port = k->lport;
		c->server_port = k->rport;
	}
}

/*
 * The connection of a TLS message stamped at_ns on process pid's fd, as its side sees
 * it (the fd's, or the one it held before, when it was given this one after the
 * message): false, counted, when the watcher knows none for the fd, or only ones it was
 * given after the message (closed and its number reused twice: not the message's), or
 * only an earlier process's of the pid (a connect or accept before the process
 * started: the fd is one it was given, by inetd, systemd, over a UNIX socket). The
 * caller noted the process (note_proc()): its start is the table's.
 */
static bool fd_conn(struct bpftel_usm *u, __u32 pid, int fd, __u64 at_ns, bool server,
		    struct usm_conn_addr *conn)
{
	struct shlib_sock_key k;
	int err = -ENOENT;

	if (fd >= 0)
		err = bpftel_sharedlibs__fd_sock(
			u->sl, pid, fd, at_ns,
			bpftel_proc_start_mono_ns(usm_procs_start(u->procs, pid)), &k);
	if (!err) {
		conn_of(&k, server, conn);
		return true;
	}
	count(err == -ESTALE ? &u->tls_conn_reused : &u->tls_no_conn);
	return false;
}

/*
 * A TLS message: the process's own call says the side (a request it read, or a
 * response it wrote: server; the reverse: client), the session names the connection,
 * and the session's fd (SSL_set_fd & co.) leads to its addresses through the watcher.
 */
static void tls_message(struct bpftel_usm *u, const struct usm_event *ev,
			const struct usm_http_start *msg)
{
	bool read = ev->dir == USM_DIR_READ, known;
	struct usm_conn_addr conn = {};
	struct usm_conn_key key;

	memset(&key, 0, sizeof(key));
	key.pid = ev->pid;
	key.source = ev->source;
	key.conn = ev->conn;
	key.side = (msg->kind == USM_HTTP_REQUEST) == read ? USM_SIDE_SERVER : USM_SIDE_CLIENT;
	note_proc(u, ev->pid);
	known = fd_conn(u, ev->pid, ev->fd, ev->ktime_ns, key.side == USM_SIDE_SERVER, &conn);
	record(u, &key, USM_PROTO_HTTPS, ev->ktime_ns, msg,
			      known ? &conn : NULL);
}

/*
 * An HTTP/2 message (h2_sessions.c), its side and stream in the key: named like any
 * TLS message, through the session's fd, looked up once per session (a session has
 * many messages; the lookup is a syscall). Or a stream whose request will not be
 * answered in a way that can be paired: withdrawn, nothing to name.
 */
static void h2_message(const struct usm_h2_message *m, void *ctx)
{
	struct bpftel_usm *u = ctx;
	struct usm_conn_addr conn = m->addr;
	bool known = m->addr_known;

	if (m->msg.kind == USM_HTTP_NONE) {
		usm_endpoints_withdraw(u->endpoints, &m->key);
		return;
	}
	if (m->msg.kind == USM_HTTP_ANSWERING) {
		usm_endpoints_answering(u->endpoints, &m->key);
		return;
	}

	note_proc(u, m->key.pid);
	if (!known && fd_conn(u, m->key.pid, m->fd, m->t_ns, m->key.side == USM_SIDE_SERVER,
			      &conn)) {
		known = true;
		usm_h2_sessions_set_addr(u->h2, &m->key, &conn);
	}
	record(u, &m->key, USM_PROTO_HTTPS, m->t_ns, &m->msg,
			      known ? &conn : NULL);
}

/* Ring-buffer callback for usm_h2_events, on a pipeline worker. */
static int handle_h2_record(void *ctx, void *data, size_t size)
{
	struct bpftel_usm *u = ctx;

	if (usm_h2_sessions_record(u->h2, data, size)) {
		count(&u->malformed);
		return -EINVAL;
	}
	return 0;
}

/*
 * The process that owns conn's end on side (USM_SIDE_SERVER: its server's), as the
 * watcher saw it connect or accept: a connection of the agent's namespace first, then
 * of any (0): another namespace's cannot take a 4-tuple the agent's own has. 0, or
 * -ENOENT.
 */
static int end_owner(struct bpftel_usm *u, const struct usm_conn_addr *c, int side,
		     struct shlib_sock_owner *owner)
{
	struct shlib_sock_key k = {.family = c->family};
	bool server = side == USM_SIDE_SERVER;

	memcpy(k.local, server ? c->server_addr : c->client_addr, 16);
	memcpy(k.remote, server ? c->client_addr : c->server_addr, 16);
	k.lport = server ? c->server_port : c->client_port;
	k.rport = server ? c->client_port : c->server_port;
	k.netns = u->netns;
	if (bpftel_sharedlibs__sock_owner(u->sl, &k, owner)) {
		k.netns = 0;
		if (bpftel_sharedlibs__sock_owner(u->sl, &k, owner))
			return -ENOENT;
	}
	/* The way of a plaintext message is read from its first bytes, which the other
	 * end may have chosen (a body served that begins like a request, in a segment of
	 * its own): an end is a server's when its socket was accepted, a client's when
	 * connected, or the message is not its process's. */
	return owner->accepted == server ? 0 : -EPROTO;
}

/*
 * A response none of whose ends is known, to the request seen under req_conn: is it a
 * NAT copy of an exchange recorded elsewhere (nat_copies.h)? Yes when another copy
 * with no known end claimed it first, or when the copy under other addresses has a
 * known end, and so is recorded on its sides (or is the agent's own).
 */
static bool nat_copy(struct bpftel_usm *u, const struct usm_conn_addr *req_conn)
{
	struct shlib_sock_owner owner;
	struct usm_conn_addr other;

	switch (usm_nat_copies_answer(u->nat, req_conn, false, &other)) {
	case USM_NAT_CLAIMED:
		return true;
	case USM_NAT_OTHER:
		if (!end_owner(u, &other, USM_SIDE_SERVER, &owner) ||
		    !end_owner(u, &other, USM_SIDE_CLIENT, &owner))
			return true;
		usm_nat_copies_settle(u->nat, req_conn);
		return false;
	default:
		return false;
	}
}

/* A request left without its response (endpoints.h's copy hook): a NAT copy of one
 * whose outcome was counted already is counted as such, not unanswered again. */
static bool unanswered_copy(const struct usm_conn_addr *conn, void *ctx)
{
	struct bpftel_usm *u = ctx;

	if (!usm_nat_copies_unanswered(u->nat, conn))
		return false;
	count(&u->nat_copies);
	return true;
}

/* A packet's connection, client first, and its segment's TCP numbers. */
static void packet_conn(const struct usm_event *ev, struct usm_conn_addr *conn)
{
	memset(conn, 0, sizeof(*conn));
	conn->family = ev->family;
	conn->seg = ev->conn;
	memcpy(conn->client_addr, ev->client_addr, 16);
	memcpy(conn->server_addr, ev->server_addr, 16);
	conn->client_port = ev->client_port;
	conn->server_port = ev->server_port;
}

/*
 * A plaintext message from a packet. A request is held, unattributed, until its
 * response: a client often sends it before the server has accepted the connection,
 * when the server's end has no owner yet, and an owner looked up then would miss it
 * (the server's response would then find no request). At the response, each local end
 * whose owner the watcher knows (client: connect; server: accept) records the request
 * and its response on its own side; when neither is known, they are recorded as
 * unattributed (side unknown, no process), never dropped. A request never answered
 * expires unanswered, once (once for all its NAT copies: unanswered_copy). The agent's
 * own end (its /metrics server) is not recorded, only counted (`own`): watching must
 * not add a row to what it watches, once per scrape; the scraper's end is recorded like
 * any other process's. A request's NAT copies are noted here (nat_copies.h), unless
 * noted already (h2c's, when decoded).
 */
static void packet_message(struct bpftel_usm *u, const struct usm_event *ev,
			   const struct usm_http_start *msg, bool noted)
{
	struct usm_conn_addr conn, req_conn, other;
	struct shlib_sock_owner owner;
	struct usm_http_start req;
	struct usm_conn_key key, held;
	int side, found = 0, err;
	uint64_t req_ns = 0;
	bool have_req, own = false, reversed = false;

	packet_conn(ev, &conn);
	memset(&key, 0, sizeof(key));
	key.source = ev->source;
	key.family = ev->family;
	key.client_port = ev->client_port;
	key.server_port = ev->server_port;
	memcpy(key.client_addr, ev->client_addr, 16);
	memcpy(key.server_addr, ev->server_addr, 16);
	key.pid = USM_PID_NONE;
	key.side = USM_SIDE_UNKNOWN;
	held = key;
	/* A request, and an interim response (100 Continue, 103 Early Hints: counted once,
	 * whatever its NAT copies; the request stays held for its final response, which
	 * attributes both). */
	if (msg->kind == USM_HTTP_REQUEST || usm_http_interim(msg->status)) {
		if (msg->kind == USM_HTTP_REQUEST && !noted)
			usm_nat_copies_note(u->nat, &conn, ev->ktime_ns);
		if (msg->kind != USM_HTTP_REQUEST &&
		    usm_nat_copies_interim(u->nat, &conn, ev->ktime_ns)) {
			count(&u->nat_copies);
			return;
		}
		record(u, &held, USM_PROTO_HTTP, ev->ktime_ns, msg, &conn);
		return;
	}
	have_req = usm_endpoints_take(u->endpoints, &held, conn.seg, &req_ns, &req, &req_conn);
	for (side = USM_SIDE_SERVER; side <= USM_SIDE_CLIENT; side++) {
		err = end_owner(u, &conn, side, &owner);
		reversed |= err == -EPROTO;
		if (err)
			continue;
		if (owner.pid == u->self) {
			own = true;
			continue;
		}
		key.pid = owner.pid;
		key.side = side;
		if (note_proc(u, owner.pid))
			name_gone(u, &owner);
		if (have_req)
			record(u, &key, USM_PROTO_HTTP, req_ns, &req,
					      &req_conn);
		record(u, &key, USM_PROTO_HTTP, ev->ktime_ns, msg, &conn);
		found++;
	}
	if (own)
		count(&u->own);
	if (reversed)
		count(&u->ends_reversed);
	if (have_req && (found || own))
		usm_nat_copies_answer(u->nat, &req_conn, true, &other);
	if (found || own)
		return;
	if (have_req && nat_copy(u, &req_conn)) {
		count(&u->nat_copies);
		return;
	}
	if (have_req) {
		count(&u->unattributed);
		record(u, &held, USM_PROTO_HTTP, req_ns, &req, &req_conn);
	}
	record(u, &held, USM_PROTO_HTTP, ev->ktime_ns, msg, &conn);
}

/* An h2c connection's first request, decoded: its NAT copies noted in the order seen
 * (it is handed on with its response, when the copies' responses may be in already). */
static void h2c_request(const struct usm_event *ev, void *ctx)
{
	struct bpftel_usm *u = ctx;
	struct usm_conn_addr conn;

	packet_conn(ev, &conn);
	usm_nat_copies_note(u->nat, &conn, ev->ktime_ns);
}

/* An h2c connection's first request or its response (h2c.c): a plaintext message. */
static void h2c_message(const struct usm_event *ev, const struct usm_http_start *msg, void *ctx)
{
	packet_message(ctx, ev, msg, true); /* its request noted when decoded */
}

/* Ring-buffer callback, on a pipeline worker. */
static int handle_event(void *ctx, void *data, size_t size)
{
	struct bpftel_usm *u = ctx;
	const struct usm_event *ev = data;
	struct usm_http_start msg;

	if (size != sizeof(*ev) || ev->prefix_len > USM_PREFIX || ev->source >= USM_SRC__COUNT ||
	    ev->dir > USM_DIR_READ || ev->kind > USM_KIND_H2C_SERVER ||
	    (ev->kind >= USM_KIND_H2C_CLIENT && ev->source != USM_SRC_SOCKET)) {
		count(&u->malformed);
		return -EINVAL;
	}
	if (ev->kind >= USM_KIND_H2C_CLIENT) {
		usm_h2c_segment(u->h2c, ev);
		return 0;
	}
	/* Parsed here and dropped: no payload byte outlives this call. */
	if (usm_http_parse(ev->prefix, ev->prefix_len, &msg) == USM_HTTP_NONE ||
	    (msg.kind == USM_HTTP_REQUEST) != (ev->kind == USM_KIND_REQUEST)) {
		count(msg.reject && msg.kind == USM_HTTP_NONE ? &u->rejected[msg.reject]
								 : &u->unparsed);
		return 0;
	}
	if (ev->source == USM_SRC_SOCKET)
		packet_message(u, ev, &msg, false);
	else
		tls_message(u, ev, &msg);
	return 0;
}

/* Under u->lock, loaded. */
static void read_kernel_counters(struct bpftel_usm *u, __u64 *out)
{
	bpftel_percpu_counters_read(bpf_map__fd(u->skel->maps.usm_counters), USM_CNT__COUNT, out,
				    u->live_last);
}

/*
 * Users' shares of the kernel's tables (bpf/lib/fair_share.h), from user_share_percent,
 * into the data the programs read where an entry is made: before load, the object's
 * image; loaded, the live map, so that a change applies to the next entry. Not while
 * it loads (u->loaded false): usm_load writes them once it has. Under u->lock.
 */
static void usm_set_share_caps(struct bpftel_usm *u)
{
	int t;

	/* .data is mapped on every kernel the agent runs on (mmapable arrays: 5.5) */
	if (!u->skel || !u->skel->data)
		return;
	for (t = 0; t < USM_SHARE__COUNT; t++)
		u->skel->data->usm_share_cap[t] =
			usm_fair_share_cap(&usm_share_tables[t], u->settings.user_share_percent);
}

/* The uid ranges granted to users (fair_share_read_apply), under u->lock. */
static void usm_apply_ranges(struct bpftel_usm *u, const struct fair_share_read *rd, bool live)
{
	fair_share_read_apply(&u->subuid, "usm", rd,
			      u->skel && u->skel->bss ? u->skel->bss->fair_share_ranges : NULL,
			      u->skel && u->skel->bss ? &u->skel->bss->fair_share_ranges_live
						      : NULL,
			      live);
}

/* Every FAIR_SHARE_RECOUNT_NS, from housekeeping: the files read again if changed. */
static void usm_ranges_refresh(struct bpftel_usm *u, __u64 now)
{
	struct fair_share_read *rd;
	struct subuid_files seen;
	bool due;

	pthread_mutex_lock(&u->lock);
	due = u->loaded && now >= u->subuid.due_ns;
	if (due)
		u->subuid.due_ns = now + FAIR_SHARE_RECOUNT_NS;
	seen = u->subuid.seen;
	pthread_mutex_unlock(&u->lock);
	if (!due || !(rd = fair_share_reread(&seen)))
		return;
	pthread_mutex_lock(&u->lock);
	if (u->loaded)
		usm_apply_ranges(u, rd, true);
	pthread_mutex_unlock(&u->lock);
	free(rd);
}

static int usm_open(struct bpftel_module *m)
{
	struct bpftel_usm *u = bpftel_module__priv(m);
	struct bpf_program *prog;
	struct fair_share_read *rd;
	struct usm *skel;
	unsigned int lo;
	bool recv_fd;

	skel = usm__open();
	if (!skel)
		return -errno;
	/* The registry loads the uprobe programs it attaches; the filter and the recv
	 * tracepoint are ours. */
	bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, false);
	bpf_program__set_autoload(skel->progs.usm_http_socket, true);
	lo = if_nametoindex("lo");
	skel->rodata->usm_lo_ifindex = lo ? lo : 1;
	rd = fair_share_prepare("usm", &skel->rodata->fair_share_pidns_dev,
				&skel->rodata->fair_share_pidns_ino);
	if (!rd) {
		usm__destroy(skel);
		return -ENOMEM;
	}
	pthread_mutex_lock(&u->lock);
	u->skel = skel;
	u->opens++;
	recv_fd = u->settings.tls_recv_fd;
	usm_set_share_caps(u);
	usm_apply_ranges(u, rd, false);
	pthread_mutex_unlock(&u->lock);
	free(rd);
	bpf_program__set_autoload(skel->progs.usm_tls_recv, recv_fd);
	bpftel_module__set_object(m, skel->obj);
	return bpftel_module__add_probe(m, &socket_probe) ?:
	       (recv_fd ? bpftel_module__add_probe(m, &recv_probe) : 0) ?:
	       bpftel_module__add_ringbuf(m, "usm_events", handle_event, u) ?:
	       bpftel_module__add_ringbuf(m, "usm_h2_events", handle_h2_record, u);
}

static int usm_load(struct bpftel_module *m)
{
	struct bpftel_usm *u = bpftel_module__priv(m);

	int err = usm__load(u->skel);
	bool kept = !err && bpftel_module__reused_maps(m);

	if (!err) {
		/* Kept by a restart (usm_restart_keeps): its counts with it, not the
		 * others', whose tables are new. Before the programs run. */
		if (kept && fair_share_keep_tables(bpf_map__fd(u->skel->maps.fair_share),
						   bpf_map__fd(u->skel->maps.fair_share_adj),
						   1ull << USM_SHARE_TLS_FDS))
			pr_warn("usm: the users' counts of the tables not kept stay until the "
				"next correction");
		pthread_mutex_lock(&u->lock);
		if (kept)
			u->shares_due_ns = 0; /* the holders, blanked at close: at once */
		u->loaded = true;
		/* Again: a configuration applied while it loaded was not written
		 * (bpftel_usm__configure waits for loaded). */
		usm_set_share_caps(u);
		pthread_mutex_unlock(&u->lock);
	}
	return err;
}

static void usm_close(struct bpftel_module *m)
{
	struct bpftel_usm *u = bpftel_module__priv(m);
	__u64 last[USM_CNT__COUNT] = {};
	struct usm *skel;
	int i;

	pthread_mutex_lock(&u->lock);
	if (u->loaded) {
		read_kernel_counters(u, last);
		for (i = 0; i < USM_CNT__COUNT; i++)
			u->retired[i] += last[i];
	}
	memset(u->live_last, 0, sizeof(u->live_last)); /* the next object's start at 0 */
	u->loaded = false;
	/* The tables go (a restart's kept ones are recounted at once: usm_load). */
	memset(u->share_holders, 0, sizeof(u->share_holders));
	memset(u->share_refusers, 0, sizeof(u->share_refusers));
	u->subuid.ranges = 0; /* the next open reads the files again */
	memset(&u->subuid.seen, 0, sizeof(u->subuid.seen));
	skel = u->skel;
	u->skel = NULL;
	pthread_mutex_unlock(&u->lock);
	usm__destroy(skel); /* its fds closed, its memory unmapped: not under the lock */
}

int bpftel_usm__new(struct bpftel_manager *mgr, struct bpftel_uprobes *up,
		    struct bpftel_sharedlibs *sl, struct bpftel_usm **out)
{
	struct usm_endpoints_limits limits = {
		.max_pending = USM_MAX_PENDING,
		.max_rows = USM_MAX_ROWS,
		.max_rows_per_proc = USM_ROWS_PER_PROC,
	};
	struct bpftel_usm *u = calloc(1, sizeof(*u));
	struct stat ns;
	int err;

	*out = u;
	if (!u)
		return -ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	u->sl = sl;
	u->self = (__u32)getpid();
	u->netns = stat("/proc/self/ns/net", &ns) ? 0 : (__u32)ns.st_ino;
	u->settings.series_max = 2000;
	u->settings.user_share_percent = FAIR_SHARE_PERCENT_DEFAULT;
	u->endpoints = usm_endpoints_new(&limits);
	u->procs = usm_procs_new();
	u->series = usm_series_set_new();
	u->h2 = usm_h2_sessions_new(h2_message, u);
	u->h2c = usm_h2c_new(h2c_message, u);
	u->nat = usm_nat_copies_new(USM_MAX_PENDING);
	if (u->h2c)
		usm_h2c_on_request(u->h2c, h2c_request);
	if (!u->endpoints || !u->procs || !u->series || !u->h2 || !u->h2c || !u->nat)
		return -ENOMEM;
	usm_endpoints_set_copy_hook(u->endpoints, unanswered_copy, u);
	u->ops.name = BPFTEL_USM_MODULE;
	u->ops.open = usm_open;
	u->ops.load = usm_load;
	u->ops.close = usm_close;
	u->ops.restart_keeps = usm_restart_keeps;
	u->ops.command = "http";
	u->ops.report = usm_report;
	u->ops.metrics = usm_metrics;
	u->ops.housekeeping = usm_housekeeping;
	err = bpftel_manager__register(mgr, &u->ops, u, &u->module);
	if (!err)
		err = bpftel_uprobes__add_module(up, u->module, uprobe_specs,
						 sizeof(uprobe_specs) / sizeof(uprobe_specs[0]));
	if (!err)
		err = bpftel_manager__bind_shared(
			mgr, u->module, BPFTEL_SHAREDLIBS_MODULE,
			SHLIB_LIBSET_BIT(SHLIB_LIBSET_CRYPTO) | SHLIB_SUB_SOCKETS |
				 SHLIB_SUB_EXECS);
	if (err)
		pr_err("usm: cannot register: %s", strerror(-err));
	return err;
}

void bpftel_usm__free(struct bpftel_usm *u)
{
	if (!u)
		return;
	usm_endpoints_free(u->endpoints);
	usm_h2_sessions_free(u->h2);
	usm_h2c_free(u->h2c);
	usm_nat_copies_free(u->nat);
	usm_procs_free(u->procs);
	usm_series_set_free(u->series);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

struct bpftel_module *bpftel_usm__module(struct bpftel_usm *u)
{
	return u->module;
}

size_t bpftel_usm__rows(struct bpftel_usm *u, struct usm_endpoint_row **out)
{
	return usm_endpoints_rows(u->endpoints, out);
}

void bpftel_usm__counters(struct bpftel_usm *u, struct bpftel_usm_counters *out)
{
	__u64 live[USM_CNT__COUNT] = {};
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&u->lock);
	if (u->loaded)
		read_kernel_counters(u, live);
	for (i = 0; i < USM_CNT__COUNT; i++)
		out->kernel[i] = u->retired[i] + live[i];
	pthread_mutex_unlock(&u->lock);
	out->unparsed = counted(&u->unparsed);
	out->malformed = counted(&u->malformed);
	out->unattributed = counted(&u->unattributed);
	out->nat_copies = counted(&u->nat_copies);
	out->nat_copies_forgotten = usm_nat_copies_forgotten(u->nat);
	out->tls_no_conn = counted(&u->tls_no_conn);
	out->tls_conn_reused = counted(&u->tls_conn_reused);
	out->own = counted(&u->own);
	out->ends_reversed = counted(&u->ends_reversed);
	for (i = 0; i < USM_HTTP__REJECT_COUNT; i++)
		out->rejected[i] = counted(&u->rejected[i]);
	out->procs_dropped = usm_procs_dropped(u->procs);
	usm_endpoints_stats(u->endpoints, &out->endpoints);
	usm_h2_sessions_stats(u->h2, &out->h2);
	usm_h2c_stats(u->h2c, &out->h2c);
	/* Joined mid-way: sessions the kernel never sent (they look HTTP/2, started unseen),
	 * beside those the decoder found so. */
	out->h2.undecodable[USM_H2_MIDSTREAM] += out->kernel[USM_CNT_H2_MIDSTREAM];
	/* HTTP/2's :status outside 100-599, over TLS and h2c: rejected as HTTP/1's are. */
	out->rejected[USM_HTTP_REJECT_STATUS] += out->h2.rejected_status + out->h2c.rejected_status;
}

struct sweep_ctx {
	struct bpftel_usm *u;
	__u64 now;
};

static __u64 exit_grace_ns = USM_EXIT_GRACE_NS;
static pthread_once_t exit_grace_once = PTHREAD_ONCE_INIT;

/* BPFTEL_USM_EXIT_GRACE_S (1..86400), a testing knob: a test that reads an exited
 * client's row a minute later on a slow machine (a sanitizer's) keeps it that long. */
static void exit_grace_from_env(void)
{
	const char *v = getenv("BPFTEL_USM_EXIT_GRACE_S");
	unsigned long s;
	char *end;

	if (!v || !*v)
		return;
	errno = 0;
	s = strtoul(v, &end, 10);
	if (!errno && !*end && s >= 1 && s <= 86400)
		exit_grace_ns = s * 1000000000ull;
}

static __u64 exit_grace(void)
{
	pthread_once(&exit_grace_once, exit_grace_from_env);
	return exit_grace_ns;
}

static bool shown(uint32_t pid, void *ctx)
{
	struct sweep_ctx *c = ctx;

	return usm_procs_shown(c->u->procs, pid, c->now, exit_grace());
}

/* Is the process there? (Its pid may be another's by now: then its marks wait.) */
static bool proc_alive(__u32 tgid)
{
	return kill((pid_t)tgid, 0) == 0 || errno != ESRCH;
}

static bool always_alive(__u32 tgid)
{
	(void)tgid;
	return true;
}

/*
 * The maps a sweep reads and deletes from, duplicated under u->lock from the loaded
 * object, so that their walks (bpf(2) calls bounded by the maps, and a kill(2) per
 * process) hold no lock: reports and /metrics wait on it. A close meanwhile frees
 * nothing under them; what the sweep found is applied only to the object it read
 * (opens).
 */
struct usm_sweep_fds {
	int table[USM_SHARE__COUNT]; /* by enum usm_share_table */
	int counts, adj, refused;    /* fair_share, fair_share_adj, fair_share_refused */
	__u64 marks;		     /* usm_tls_retry_marks as read (nothing to walk: 0) */
	__u64 opens;
	bool shares_due;	     /* the owners' counts are to be corrected this round */
};

static void sweep_fds_close(struct usm_sweep_fds *f)
{
	int i;

	for (i = 0; i < USM_SHARE__COUNT; i++)
		bpftel_fd_close(&f->table[i]);
	bpftel_fd_close(&f->counts);
	bpftel_fd_close(&f->adj);
	bpftel_fd_close(&f->refused);
}

static int dup_fd(const struct bpf_map *map)
{
	return bpftel_fd_dup(bpf_map__fd(map));
}

/* Under u->lock, the object loaded: 0, or -errno (out of fds: nothing to close). */
static int sweep_fds_dup(struct bpftel_usm *u, struct usm_sweep_fds *f)
{
	const struct bpf_map *maps[USM_SHARE__COUNT] = {
		[USM_SHARE_H2_CONNS] = u->skel->maps.usm_h2_conns,
		[USM_SHARE_TLS_FDS] = u->skel->maps.usm_tls_fds,
		[USM_SHARE_TLS_RETRY] = u->skel->maps.usm_tls_retry,
		[USM_SHARE_GO_READS] = u->skel->maps.usm_go_reads,
	};
	int i, err = 0;

	for (i = 0; i < USM_SHARE__COUNT; i++) {
		f->table[i] = dup_fd(maps[i]);
		err = f->table[i] < 0 && !err ? -errno : err;
	}
	f->counts = dup_fd(u->skel->maps.fair_share);
	err = f->counts < 0 && !err ? -errno : err;
	f->adj = dup_fd(u->skel->maps.fair_share_adj);
	err = f->adj < 0 && !err ? -errno : err;
	f->refused = dup_fd(u->skel->maps.fair_share_refused);
	err = f->refused < 0 && !err ? -errno : err;
	if (err)
		sweep_fds_close(f);
	return err;
}

/* What a sweep found, applied under u->lock to the object it read. */
struct usm_sweep_result {
	int marks_deleted; /* usm_tls_retry_sweep's */
	int err[USM_SHARE__COUNT];
	struct fair_share_holders holders[USM_SHARE__COUNT];
	int refused_err; /* fair_share_refusers_read's */
	struct fair_share_refusers refused[USM_SHARE__COUNT];
};

/* Users' shares of usm_h2_conns, usm_tls_fds, usm_tls_retry and usm_go_reads corrected
 * (fair_share.h), every FAIR_SHARE_RECOUNT_NS: nothing is read while only root holds
 * entries; else one batched read of each map, made again when an owner's count moved
 * during it (usm_fair_share_sweep), and who was refused the most read. What it corrects (evictions, processes killed
 * mid-session) is rare. No lock held. */
static void usm_shares_sweep(const struct usm_sweep_fds *f, struct usm_sweep_result *r)
{
	struct usm_share_map t;
	__u64 deleted = 0;
	int i;

	for (i = 0; i < USM_SHARE__COUNT; i++) {
		t = usm_share_tables[i];
		t.fd = f->table[i];
		/* Marks of processes gone are usm_tls_retry_sweep's to delete: it keeps
		 * their count. This one only corrects the owners' shares of them. */
		r->err[i] = usm_fair_share_sweep(f->counts, f->adj, &t,
						 i == USM_SHARE_TLS_RETRY ? always_alive : proc_alive,
						 &deleted, &r->holders[i]);
	}
	r->refused_err = fair_share_refusers_read(f->refused, r->refused, USM_SHARE__COUNT);
}

/* Under u->lock: the holders each table's correction found, and what the log says of
 * them. The first time an owner holds its whole share of a table, the log says so
 * once, and names the setting: a host that runs one busy service as one user (nginx's
 * workers) may want no bound. A busy table's walk that did not end (-EAGAIN) is the
 * next round's. Any other failure is said once: the shares then stay as the programs
 * count them, high by what the LRU evicts, until a sweep works again. */
static void usm_shares_apply(struct bpftel_usm *u, const struct usm_sweep_result *r)
{
	char what[64];
	int i;

	if (!r->refused_err)
		memcpy(u->share_refusers, r->refused, sizeof(r->refused));
	for (i = 0; i < USM_SHARE__COUNT; i++) {
		if (!r->err[i]) {
			u->share_holders[i] = r->holders[i];
			snprintf(what, sizeof(what), "the kernel's %s", usm_share_tables[i].label);
			fair_share_say_full(&u->shares_full_said, i, &u->share_holders[i],
					    usm_fair_share_cap(&usm_share_tables[i],
							       u->settings.user_share_percent),
					    usm_share_tables[i].max_entries, "usm", what, "http",
					    "that runs one busy service as one user");
		}
		if (r->err[i] && r->err[i] != -EAGAIN && !u->shares_warned) {
			pr_warn("usm: cannot correct the users' shares of the session tables: %s",
				strerror(-r->err[i]));
			u->shares_warned = true;
		}
	}
}

/* The kernel's side of a sweep: the marks of writes to retry of processes gone or too
 * old, and the users' shares. Usually nothing (no mark, no user's share); else bpf(2)
 * calls bounded by the maps, on duplicated fds, no lock held. */
static void usm_kernel_sweep(struct bpftel_usm *u, __u64 now)
{
	struct usm_sweep_fds f = {.counts = -1, .adj = -1, .refused = -1};
	struct usm_sweep_result r = {};
	__u64 *marks;
	int i, err = 0;

	for (i = 0; i < USM_SHARE__COUNT; i++)
		f.table[i] = -1; /* none duplicated yet: nothing to close */

	pthread_mutex_lock(&u->lock);
	if (u->loaded) {
		f.opens = u->opens;
		f.marks = __atomic_load_n(&u->skel->bss->usm_tls_retry_marks, __ATOMIC_RELAXED);
		f.shares_due = now >= u->shares_due_ns;
		if (f.shares_due)
			u->shares_due_ns = now + FAIR_SHARE_RECOUNT_NS;
		memcpy(r.holders, u->share_holders, sizeof(r.holders));
		memcpy(r.refused, u->share_refusers, sizeof(r.refused));
		if (f.marks || f.shares_due)
			err = sweep_fds_dup(u, &f);
	}
	pthread_mutex_unlock(&u->lock);
	if (err || (!f.marks && !f.shares_due))
		return; /* not loaded, nothing to do, or out of fds: the next sweep's */

	if (f.marks)
		r.marks_deleted = usm_tls_retry_sweep(f.table[USM_SHARE_TLS_RETRY], &f.marks,
						      proc_alive, now);
	if (f.shares_due)
		usm_shares_sweep(&f, &r);
	sweep_fds_close(&f);

	pthread_mutex_lock(&u->lock);
	if (u->loaded && u->opens == f.opens) { /* not a new object's since */
		marks = &u->skel->bss->usm_tls_retry_marks;
		if (r.marks_deleted > 0)
			__atomic_fetch_sub(marks, (__u64)r.marks_deleted, __ATOMIC_SEQ_CST);
		if (f.shares_due)
			usm_shares_apply(u, &r);
	}
	pthread_mutex_unlock(&u->lock);
}

int bpftel_usm__sweep(struct bpftel_usm *u)
{
	struct sweep_ctx c = {.u = u, .now = bpftel_mono_ns()};
	int n = usm_endpoints_sweep(u->endpoints, shown, &c);

	usm_kernel_sweep(u, c.now);
	usm_ranges_refresh(u, c.now);
	usm_h2_sessions_sweep(u->h2, shown, &c);
	usm_h2c_sweep(u->h2c, c.now);

	usm_procs_sweep(u->procs, c.now, exit_grace());
	usm_endpoints_expire(u->endpoints, c.now);
	usm_series_set_expire(u->series, c.now);
	return n;
}

bool bpftel_usm__proc(struct bpftel_usm *u, __u32 pid, struct usm_proc *out)
{
	char comm[SHLIB_COMM_LEN];

	if (!usm_procs_get(u->procs, pid, out))
		return false;
	/* Gone before its first message was read, its connection's owner unknown (a curl
	 * that exited at once; its TLS has no fd the watcher saw): named, at the report,
	 * after its open of the library, which the watcher's own thread may have read after
	 * the message; not after a process given the pid since. */
	if (!out->start && !strcmp(out->comm, "?") &&
	    !bpftel_sharedlibs__comm_of(u->sl, pid, bpftel_proc_start(pid), comm) &&
	    usm_procs_name(u->procs, pid, comm))
		usm_procs_get(u->procs, pid, out);
	return true;
}

void bpftel_usm__configure(struct bpftel_usm *u, const struct bpftel_usm_settings *s)
{
	uint64_t expiry_ns = (uint64_t)s->row_expiry_s * 1000000000ull;
	unsigned int series_max;

	pthread_mutex_lock(&u->lock);
	u->settings = *s;
	if (!u->settings.series_max)
		u->settings.series_max = 2000;
	if (!u->settings.user_share_percent)
		u->settings.user_share_percent = FAIR_SHARE_PERCENT_DEFAULT;
	series_max = u->settings.series_max;
	if (u->loaded)
		usm_set_share_caps(u);
	pthread_mutex_unlock(&u->lock);
	usm_endpoints_set_expiry(u->endpoints, expiry_ns);
	/* Series expire like rows: a series idle that long goes, and frees its place. */
	usm_series_set_configure(u->series, series_max, s->container_labels, expiry_ns);
}

size_t bpftel_usm__series(struct bpftel_usm *u, struct usm_series **out, bool *containers,
			  uint64_t *series_budget)
{
	return usm_series_set_snapshot(u->series, out, containers, series_budget);
}

bool bpftel_usm__recv_fd(struct bpftel_usm *u)
{
	struct bpftel_probe_status st[4];
	size_t n, i;

	n = bpftel_module__probes(u->module, st, sizeof(st) / sizeof(st[0]));
	for (i = 0; i < n; i++) {
		if (!strcmp(st[i].name, recv_probe.name))
			return st[i].winner >= 0;
	}
	return false;
}

void bpftel_usm__shares(struct bpftel_usm *u, struct fair_share_holders *out,
			struct fair_share_refusers *refused_by)
{
	pthread_mutex_lock(&u->lock);
	memcpy(out, u->share_holders, sizeof(u->share_holders));
	if (refused_by)
		memcpy(refused_by, u->share_refusers, sizeof(u->share_refusers));
	pthread_mutex_unlock(&u->lock);
}

void bpftel_usm__ranges(struct bpftel_usm *u, unsigned int *ranges, unsigned int *skipped,
			int *err)
{
	pthread_mutex_lock(&u->lock);
	*ranges = u->subuid.ranges;
	*skipped = u->subuid.skipped;
	*err = u->subuid.err;
	pthread_mutex_unlock(&u->lock);
}

void bpftel_usm__settings(struct bpftel_usm *u, struct bpftel_usm_settings *out)
{
	pthread_mutex_lock(&u->lock);
	*out = u->settings;
	pthread_mutex_unlock(&u->lock);
}

static void usm_housekeeping(struct bpftel_module *m)
{
	bpftel_usm__sweep(bpftel_module__priv(m));
}
