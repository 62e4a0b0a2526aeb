/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The marks of OpenSSL writes to be retried (bpf/lib/usm_tls_retry.h) that the kernel
 * side cannot take away: those of processes that died between a failed write and its
 * retry or SSL_free, and those never retried (a failure that was not the write's, a
 * session left as it was). Left there, each would make every TLS write on the host
 * look its session up in the map, a full map could hold no new marks, and a mark could
 * wait for ever for a write of the same bytes to take for its retry.
 */
#ifndef BPFTEL_USM_TLS_RETRY_H
#define BPFTEL_USM_TLS_RETRY_H

#include <stdbool.h>
#include <linux/types.h>

/*
 * Delete from the map (usm_tls_retry's fd) every mark whose process alive() says is
 * gone, or older at now_ns (CLOCK_MONOTONIC, the programs' clock) than
 * USM_TLS_RETRY_MAX_AGE_NS, and take each one deleted off *marks (usm_tls_retry_marks
 * in the object's .bss, shared with the programs: atomically). Nothing is read while
 * *marks is 0. Returns how many were deleted, or a negative errno when the map could
 * not be read.
 */
int usm_tls_retry_sweep(int map_fd, __u64 *marks, bool (*alive)(__u32 tgid), __u64 now_ns);

#endif /* BPFTEL_USM_TLS_RETRY_H */
