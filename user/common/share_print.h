/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The CLI's lines of who holds the most of the kernel's tables shared out by user, and
 * who was refused the most. */
#ifndef BPFTEL_COMMON_SHARE_PRINT_H
#define BPFTEL_COMMON_SHARE_PRINT_H

#include <stddef.h>
#include <jansson.h>

/* One table: its key in a report's "shares", and how the line names it. */
struct bpftel_share_label {
	const char *key;
	const char *label;
};

/*
 * For the tables of resp's "shares" (a module's report: user/manager/fair_share.h's
 * JSON) that anyone but root holds entries of, one line: "Kernel tables' biggest
 * holders but root (user_share_percent = N): LABEL (share S of E): uid U N, container
 * cgroup C N; ...". Nothing when none does. Likewise, for the tables whose owners
 * were refused entries over their share, "Refused the most since the module started:
 * LABEL: uid U N, ...".
 */
void bpftel_print_shares(json_t *resp, const struct bpftel_share_label *tables, size_t n);

#endif /* BPFTEL_COMMON_SHARE_PRINT_H */
