// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* How often the watcher may scan /proc (scan_pace.h). */
#include "scan_pace.h"

bool bpftel_scan_pace_take(struct bpftel_scan_pace *p, long long now)
{
	if (p->scans && now - p->last_ms < p->gap_ms)
		return false;
	if (!p->scans || now - p->last_ms >= 2 * p->gap_ms)
		p->gap_ms = BPFTEL_SCAN_GAP_MIN_MS;
	else if (p->gap_ms < BPFTEL_SCAN_GAP_MAX_MS)
		p->gap_ms *= 2;
	p->last_ms = now;
	p->scans++;
	return true;
}

bool bpftel_budget_pace_take(struct bpftel_budget_pace *p, __u64 refused, long long now)
{
	if (refused == p->seen)
		return false;
	if (!p->pending) {
		p->pending = true;
		p->since_ms = now;
	}
	if (now - p->since_ms < BPFTEL_BUDGET_SCAN_GAP_MS)
		return false;
	p->seen = refused;
	p->pending = false;
	return true;
}
