// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The marks of writes to be retried, of processes gone (tls_retry.h). */
#include <errno.h>
#include <stdlib.h>
#include <bpf/bpf.h>

#include "bpf/usm.h"
#include "tls_retry.h"

int usm_tls_retry_sweep(int map_fd, __u64 *marks, bool (*alive)(__u32 tgid))
{
	struct usm_fd_key *dead, key, next;
	int n = 0, i, deleted = 0, err = 0;
	void *prev = NULL;

	/* Read first, delete after: a hash walk resumed from a deleted key starts over.
	 * The map holds at most USM_TLS_RETRY_MAX. */
	dead = calloc(USM_TLS_RETRY_MAX, sizeof(*dead));
	if (!dead)
		return -ENOMEM;
	while (n < USM_TLS_RETRY_MAX) {
		if (bpf_map_get_next_key(map_fd, prev, &next)) {
			err = errno == ENOENT ? 0 : -errno;
			break;
		}
		key = next;
		prev = &key;
		if (!alive(key.tgid))
			dead[n++] = key;
	}
	for (i = 0; i < n; i++) {
		/* The programs may have taken it meanwhile (and counted that). */
		if (!bpf_map_delete_elem(map_fd, &dead[i])) {
			__atomic_fetch_sub(marks, 1, __ATOMIC_SEQ_CST);
			deleted++;
		}
	}
	free(dead);
	return err ? err : deleted;
}
