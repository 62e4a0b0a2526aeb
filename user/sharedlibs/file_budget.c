// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* New library files per owner and minute (file_budget.h). */
#include <stddef.h>

#include "file_budget.h"

/* One file, in the unit of left: a millisecond refills per_min of them, exactly. */
#define ONE_FILE 60000ull

static __u64 full(const struct bpftel_file_budget *b)
{
	return (__u64)b->per_min * ONE_FILE;
}

/* o's files left at now: per_min a minute since it was last brought up to date, with
 * no rounding (asked every millisecond, a budget of 1 a minute still refills). */
static void refill(const struct bpftel_file_budget *b, struct bpftel_file_budget_owner *o,
		   long long now_ms)
{
	__u64 ms, add;

	if (now_ms <= o->last_ms)
		return;
	/* A minute refills all of it: capped first, the product cannot overflow. */
	ms = (__u64)(now_ms - o->last_ms);
	add = ms >= 60000 ? full(b) : ms * b->per_min;
	o->left = o->left + add > full(b) ? full(b) : o->left + add;
	o->last_ms = now_ms;
}

void bpftel_file_budget_set(struct bpftel_file_budget *b, unsigned int per_min)
{
	size_t i;

	b->per_min = per_min;
	for (i = 0; i < BPFTEL_FILE_BUDGET_OWNERS; i++) {
		if (b->o[i].left > full(b))
			b->o[i].left = full(b);
	}
}

static struct bpftel_file_budget_owner *owner_entry(struct bpftel_file_budget *b, __u64 owner,
						    long long now_ms)
{
	struct bpftel_file_budget_owner *o, *victim = NULL;
	size_t i;

	for (i = 0; i < BPFTEL_FILE_BUDGET_OWNERS; i++) {
		o = &b->o[i];
		if (o->used && o->owner == owner)
			return o;
	}
	for (i = 0; i < BPFTEL_FILE_BUDGET_OWNERS; i++) {
		o = &b->o[i];
		if (!o->used) {
			victim = o;
			break;
		}
		refill(b, o, now_ms);
		if (o->left == full(b)) {
			victim = o; /* forgetting it changes nothing */
			break;
		}
		if (!victim || o->last_seen_ms < victim->last_seen_ms)
			victim = o;
	}
	*victim = (struct bpftel_file_budget_owner){
		.owner = owner, .left = full(b), .last_ms = now_ms, .used = true};
	return victim;
}

bool bpftel_file_budget_take(struct bpftel_file_budget *b, __u64 owner, long long now_ms)
{
	struct bpftel_file_budget_owner *o;

	if (!b->per_min)
		return true;
	o = owner_entry(b, owner, now_ms);
	refill(b, o, now_ms);
	o->last_seen_ms = now_ms;
	if (o->left < ONE_FILE)
		return false;
	o->left -= ONE_FILE;
	return true;
}

long long bpftel_file_budget_wait_ms(struct bpftel_file_budget *b, __u64 owner, long long now_ms)
{
	struct bpftel_file_budget_owner *o;

	if (!b->per_min)
		return 0;
	o = owner_entry(b, owner, now_ms);
	refill(b, o, now_ms);
	/* A millisecond refills per_min: the rest of a file, rounded up. */
	return o->left >= ONE_FILE ? 0
				   : (long long)((ONE_FILE - o->left + b->per_min - 1) / b->per_min);
}
