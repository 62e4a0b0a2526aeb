/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The watcher's socket owners (shared_libraries.h, SHLIB_SUB_SOCKETS): at the exit of
 * connect(2) and accept(2)/accept4(2), the socket behind the fd is read from the task's
 * fd table and its TCP connection recorded with the process, both by the connection
 * (for packets) and by (process, fd) (for TLS uprobes, which know the fd).
 *
 * Entries are not deleted when the socket closes (only when a connect or accept gives
 * the fd something else: shlib_on_sock): the last messages of a short
 * connection (curl's) are still in the ring buffer or the pipeline when it closes, and
 * must still find their owner. An fd's entry says since when it holds its connection,
 * and keeps the one before, so that the last messages of a closed one whose number
 * went to a new one find theirs, not the new one (struct shlib_fd_sock). A
 * connection's 4-tuple is recorded again by the connect or accept that reuses it, and
 * the maps are LRU: old entries go first.
 *
 * Include after lib/shlib_probe.h (its fd-table walk and config map).
 */
#ifndef BPFTEL_LIB_SHLIB_SOCKETS_H
#define BPFTEL_LIB_SHLIB_SOCKETS_H

#define SHLIB_AF_INET	  2
#define SHLIB_AF_INET6	  10
#define SHLIB_IPPROTO_TCP 6
#define SHLIB_S_IFMT	  00170000
#define SHLIB_S_IFSOCK	  0140000
#define SHLIB_EINPROGRESS 115

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct shlib_sock_key);
	__type(value, struct shlib_sock_owner);
} shlib_sock_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct shlib_fd_key);
	__type(value, struct shlib_fd_sock);
} shlib_fd_socks SEC(".maps");

TLM_MAP_KEY(shlib_sock_owners);
TLM_MAP_KEY(shlib_fd_socks);

static __always_inline bool shlib_sockets_on(void)
{
	struct shlib_config *cfg;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	return cfg && (cfg->flags & SHLIB_CFG_SOCKETS);
}

/* IPv6 ::ffff:a.b.c.d is the IPv4 connection a packet shows: key it so. */
static __always_inline void shlib_addr6(__u8 *out, const __u8 *in6, bool *mapped)
{
	__u32 w[4];

	__builtin_memcpy(w, in6, 16);
	*mapped = !w[0] && !w[1] && w[2] == bpf_htonl(0xffff);
	if (*mapped)
		__builtin_memcpy(out, &w[3], 4);
	else
		__builtin_memcpy(out, in6, 16);
}

/*
 * The TCP connection of the socket behind task's fd, as this end sees it; *by_root: its
 * network namespace belongs to the initial user namespace (the host's, a container
 * runtime's), not to one a user made.
 */
static __always_inline bool shlib_fd_conn(struct task_struct *task, long fd,
					  struct shlib_sock_key *k, bool *by_root)
{
	struct file *file = shlib_fd_file(task, fd);
	struct user_namespace *user_ns;
	struct socket *sock;
	struct net *net;
	struct sock *sk;
	bool mapped;

	if (!file)
		return false;
	file = bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file));
	if ((file->f_inode->i_mode & SHLIB_S_IFMT) != SHLIB_S_IFSOCK)
		return false;
	sock = bpf_rdonly_cast(file->private_data, bpf_core_type_id_kernel(struct socket));
	sk = bpf_rdonly_cast(sock->sk, bpf_core_type_id_kernel(struct sock));
	if (!sk || sk->sk_protocol != SHLIB_IPPROTO_TCP)
		return false;
	__builtin_memset(k, 0, sizeof(*k));
	net = bpf_rdonly_cast(sk->__sk_common.skc_net.net, bpf_core_type_id_kernel(struct net));
	k->netns = net ? net->ns.inum : 0;
	user_ns = net ? bpf_rdonly_cast(net->user_ns, bpf_core_type_id_kernel(struct user_namespace))
		      : NULL;
	*by_root = user_ns && user_ns->level == 0;
	k->lport = sk->__sk_common.skc_num;
	k->rport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (sk->__sk_common.skc_family == SHLIB_AF_INET) {
		k->family = 4;
		__builtin_memcpy(k->local, &sk->__sk_common.skc_rcv_saddr, 4);
		__builtin_memcpy(k->remote, &sk->__sk_common.skc_daddr, 4);
		return true;
	}
	if (sk->__sk_common.skc_family != SHLIB_AF_INET6)
		return false;
	shlib_addr6(k->local, sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8, &mapped);
	shlib_addr6(k->remote, sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8, &mapped);
	k->family = mapped ? 4 : 6;
	return true;
}

/* Is a the same connection as b? (Keys are whole structs, padding zeroed.) */
static __always_inline bool shlib_same_conn(const struct shlib_sock_key *a,
					    const struct shlib_sock_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;
	int i;

	_Static_assert(sizeof(*a) % 4 == 0, "compared in words");
	for (i = 0; i < (int)(sizeof(*a) / 4); i++) {
		if (x[i] != y[i])
			return false;
	}
	return true;
}

/*
 * A connect or accept by the current task left fd connected: record who holds it, and
 * which it was (an accepted socket is a server's end: usm.c checks that the messages
 * agree). One
 * that left fd holding anything else (a UNIX socket, a TCP socket not connected after
 * all) says that fd no longer holds the connection an entry may remember for it (the
 * number reused after a close): the entry goes, or a TLS message on the fd would be
 * given that old connection.
 */
static __always_inline int shlib_on_sock(TLM_PARAM, long fd, bool accepted)
{
	struct shlib_sock_owner owner = {};
	struct shlib_fd_sock fs = {}, *was;
	struct shlib_sock_key k;
	struct shlib_fd_key fk;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	bool by_root;

	if (fd < 0 || !shlib_sockets_on())
		return 0;
	fk.pid = pid_tgid >> 32;
	fk.fd = (__s32)fd;
	if (!shlib_fd_conn(bpf_get_current_task_btf(), fd, &k, &by_root) || !k.rport) {
		if (bpf_map_lookup_elem(&shlib_fd_socks, &fk))
			tlm_map_take(shlib_fd_socks, &fk); /* the LRU may have taken it first */
		return 0;
	}
	owner.pid = pid_tgid >> 32;
	owner.tid = (__u32)pid_tgid;
	owner.cgroup_id = bpf_get_current_cgroup_id();
	owner.accepted = accepted;
	bpf_get_current_comm(owner.comm, sizeof(owner.comm));
	/* Packets are looked up under the agent's namespace and netns 0 (below), never a
	 * user-made one's: its entries would only take room a user could churn. */
	if (by_root)
		tlm_map_update(shlib_sock_owners, &k, &owner, BPF_ANY);
	was = bpf_map_lookup_elem(&shlib_fd_socks, &fk);
	/* A connect again on a socket connected already (a non-blocking one's, asking how
	 * it went) returns 0: the same connection, whose entry, and the one before, stay. */
	if (!was || !shlib_same_conn(&was->conn, &k)) {
		if (was) { /* the fd's connection before: its last messages may be on the way */
			fs.prev = was->conn;
			fs.prev_since_ns = was->since_ns;
		}
		fs.conn = k;
		fs.since_ns = bpf_ktime_get_ns();
		tlm_map_update(shlib_fd_socks, &fk, &fs, BPF_ANY);
	}
	/* And under no namespace (0): the last of any namespace to use the 4-tuple, for
	 * packets of connections in other namespaces that cross the agent's (a
	 * container's, over a bridge), where the agent's finds none. Not a namespace a
	 * user made: it could connect over a container's 4-tuple (addresses and ports are
	 * its own to choose there) and be taken for the owner of the container's packets. */
	if (!by_root) {
		shlib_count(SHLIB_CNT_USERNS_SOCKETS);
		return 0;
	}
	k.netns = 0;
	tlm_map_update(shlib_sock_owners, &k, &owner, BPF_ANY);
	return 0;
}

#endif /* BPFTEL_LIB_SHLIB_SOCKETS_H */
