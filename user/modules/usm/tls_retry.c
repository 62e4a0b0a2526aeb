// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The marks of writes to be retried, of processes gone or too old (tls_retry.h). */
#include <errno.h>
#include <stdlib.h>
#include <bpf/bpf.h>

#include "bpf/usm.h"
#include "tls_retry.h"

int usm_tls_retry_sweep(int map_fd, __u64 *marks, bool (*alive)(__u32 tgid), __u64 now_ns)
{
	struct usm_fd_key *stale, key, next;
	int n = 0, i, steps, deleted = 0, err = 0;
	struct usm_tls_retry_mark m;
	void *prev = NULL;

	if (!__atomic_load_n(marks, __ATOMIC_RELAXED))
		return 0; /* the usual case: nothing to walk */
	/* Read first, delete after: a hash walk resumed from a deleted key starts over.
	 * The map holds at most USM_TLS_RETRY_MAX; one the programs change meanwhile can
	 * make the walk start over: bounded, what is left waits for the next sweep. */
	stale = calloc(USM_TLS_RETRY_MAX, sizeof(*stale));
	if (!stale)
		return -ENOMEM;
	for (steps = 0; n < USM_TLS_RETRY_MAX && steps < 2 * USM_TLS_RETRY_MAX; steps++) {
		if (bpf_map_get_next_key(map_fd, prev, &next)) {
			err = errno == ENOENT ? 0 : -errno;
			break;
		}
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(map_fd, &key, &m))
			continue; /* taken meanwhile */
		/* A mark made after now_ns was read is not old. */
		if (!alive(key.tgid) ||
		    (now_ns > m.at_ns && now_ns - m.at_ns > USM_TLS_RETRY_MAX_AGE_NS))
			stale[n++] = key;
	}
	for (i = 0; i < n; i++) {
		/* The programs may have taken it meanwhile (and counted that). */
		if (!bpf_map_delete_elem(map_fd, &stale[i])) {
			__atomic_fetch_sub(marks, 1, __ATOMIC_SEQ_CST);
			deleted++;
		}
	}
	free(stale);
	return err ? err : deleted;
}
