// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* NAT copies of plaintext requests (nat_copies.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nat_copies.h"

#define WAYS 4

/* What was counted of a request's exchange, by whichever copy counted it first. */
enum outcome {
	OUTCOME_NONE,
	OUTCOME_RECORDED, /* a copy's response recorded it */
	OUTCOME_LOST,	  /* a copy left without its response: counted unanswered */
};

struct group {
	uint64_t seg;	/* 0: empty (a segment with both numbers 0 is not grouped) */
	uint64_t t_ns;	/* when its first copy was seen */
	struct usm_conn_addr conn[2];
	uint8_t nconn;	 /* sets of addresses held: 1 or 2 */
	uint8_t copies;	 /* sets of addresses seen (a third: NAT twice), up to 255 */
	uint8_t answered; /* copies done with (answered, or left unanswered), up to copies */
	bool claimed;	 /* a copy with no known end asked first */
	uint8_t outcome; /* enum outcome */
	bool interim;	 /* an interim response's segment (usm_nat_copies_interim), not a
			  * request's: never answered, kept until replaced */
};

struct usm_nat_copies {
	pthread_mutex_t lock;
	struct group *groups; /* nsets x WAYS */
	size_t set_mask;
	uint64_t forgotten;
};

struct usm_nat_copies *usm_nat_copies_new(size_t groups)
{
	struct usm_nat_copies *n = calloc(1, sizeof(*n));
	size_t sets = 1;

	if (!n)
		return NULL;
	while (sets * WAYS < groups)
		sets <<= 1;
	n->groups = calloc(sets * WAYS, sizeof(*n->groups));
	if (!n->groups) {
		free(n);
		return NULL;
	}
	n->set_mask = sets - 1;
	pthread_mutex_init(&n->lock, NULL);
	return n;
}

void usm_nat_copies_free(struct usm_nat_copies *n)
{
	if (!n)
		return;
	pthread_mutex_destroy(&n->lock);
	free(n->groups);
	free(n);
}

/* The set of a segment: its numbers mixed (they are random per connection already). */
static struct group *set_of(struct usm_nat_copies *n, uint64_t seg)
{
	seg ^= seg >> 29;
	seg *= 0xbf58476d1ce4e5b9ull;
	seg ^= seg >> 32;
	return &n->groups[(seg & n->set_mask) * WAYS];
}

/* The same addresses and ports (seg aside). */
static bool same_addrs(const struct usm_conn_addr *a, const struct usm_conn_addr *b)
{
	return a->family == b->family && a->client_port == b->client_port &&
	       a->server_port == b->server_port && !memcmp(a->client_addr, b->client_addr, 16) &&
	       !memcmp(a->server_addr, b->server_addr, 16);
}

static struct group *find_kind(struct group *set, uint64_t seg, bool interim)
{
	int i;

	for (i = 0; i < WAYS; i++) {
		if (set[i].seg == seg && set[i].interim == interim)
			return &set[i];
	}
	return NULL;
}

/* A request's group. */
static struct group *find(struct group *set, uint64_t seg)
{
	return find_kind(set, seg, false);
}

/* A new group for the segment seen under conn at now_ns, in the room of the set's
 * oldest (counted forgotten if it held a request's copies not all answered). */
static struct group *add(struct usm_nat_copies *n, struct group *set,
			 const struct usm_conn_addr *conn, uint64_t now_ns)
{
	struct group *old = &set[0];
	int i;

	for (i = 1; i < WAYS && old->seg; i++) {
		if (!set[i].seg || set[i].t_ns < old->t_ns)
			old = &set[i];
	}
	if (old->seg && !old->interim && old->copies > 1 && old->answered < old->copies)
		n->forgotten++;
	memset(old, 0, sizeof(*old));
	old->seg = conn->seg;
	old->t_ns = now_ns;
	old->conn[0] = *conn;
	old->nconn = 1;
	old->copies = 1;
	return old;
}

void usm_nat_copies_note(struct usm_nat_copies *n, const struct usm_conn_addr *conn,
			 uint64_t now_ns)
{
	struct group *set, *g;

	if (!conn->seg)
		return;
	pthread_mutex_lock(&n->lock);
	set = set_of(n, conn->seg);
	g = find(set, conn->seg);
	if (g) {
		/* Another copy of it: its addresses differ, or it is the same segment again
		 * (a retransmission the kernel let through: not a copy). */
		if (!same_addrs(&g->conn[0], conn) &&
		    (g->nconn == 1 || !same_addrs(&g->conn[1], conn)) && g->copies < UINT8_MAX) {
			g->copies++;
			if (g->nconn == 1)
				g->conn[g->nconn++] = *conn;
		}
		pthread_mutex_unlock(&n->lock);
		return;
	}
	add(n, set, conn, now_ns);
	pthread_mutex_unlock(&n->lock);
}

bool usm_nat_copies_interim(struct usm_nat_copies *n, const struct usm_conn_addr *conn,
			    uint64_t now_ns)
{
	struct group *set, *g;
	bool copy = false;

	if (!conn->seg)
		return false;
	pthread_mutex_lock(&n->lock);
	set = set_of(n, conn->seg);
	g = find_kind(set, conn->seg, true);
	if (!g)
		add(n, set, conn, now_ns)->interim = true;
	else
		copy = !same_addrs(&g->conn[0], conn);
	pthread_mutex_unlock(&n->lock);
	return copy;
}

enum usm_nat_verdict usm_nat_copies_answer(struct usm_nat_copies *n,
					   const struct usm_conn_addr *conn, bool known,
					   struct usm_conn_addr *other)
{
	enum usm_nat_verdict v = USM_NAT_ALONE;
	struct group *g;

	if (!conn->seg)
		return USM_NAT_ALONE;
	pthread_mutex_lock(&n->lock);
	g = find(set_of(n, conn->seg), conn->seg);
	if (g)
		g->answered++;
	if (g && !known && g->nconn == 2) {
		if (g->claimed) {
			v = USM_NAT_CLAIMED;
		} else if (g->outcome == OUTCOME_LOST) {
			/* The other copy left unanswered: this one is all that can record it. */
			g->claimed = true;
			g->outcome = OUTCOME_RECORDED;
		} else {
			/* Recorded by the caller, or left to the other copy (usm_nat_copies_settle
			 * says which). */
			g->claimed = true;
			*other = same_addrs(&g->conn[0], conn) ? g->conn[1] : g->conn[0];
			v = USM_NAT_OTHER;
		}
	} else if (g) {
		g->outcome = OUTCOME_RECORDED; /* on its known sides, or alone */
	}
	/* Done with: every copy answered (a request with no copy: its own; copies cross
	 * the host within microseconds, before any response). Its room goes to the
	 * requests still waiting. */
	if (g && g->answered >= g->copies)
		memset(g, 0, sizeof(*g));
	pthread_mutex_unlock(&n->lock);
	return v;
}

bool usm_nat_copies_unanswered(struct usm_nat_copies *n, const struct usm_conn_addr *conn)
{
	struct group *g;
	bool copy = false;

	if (!conn->seg)
		return false;
	pthread_mutex_lock(&n->lock);
	g = find(set_of(n, conn->seg), conn->seg);
	if (g) {
		copy = g->outcome != OUTCOME_NONE;
		if (!copy)
			g->outcome = OUTCOME_LOST;
		if (++g->answered >= g->copies)
			memset(g, 0, sizeof(*g));
	}
	pthread_mutex_unlock(&n->lock);
	return copy;
}

void usm_nat_copies_settle(struct usm_nat_copies *n, const struct usm_conn_addr *conn)
{
	struct group *g;

	if (!conn->seg)
		return;
	pthread_mutex_lock(&n->lock);
	g = find(set_of(n, conn->seg), conn->seg);
	if (g && g->outcome == OUTCOME_NONE)
		g->outcome = OUTCOME_RECORDED;
	pthread_mutex_unlock(&n->lock);
}

uint64_t usm_nat_copies_forgotten(struct usm_nat_copies *n)
{
	uint64_t forgotten;

	pthread_mutex_lock(&n->lock);
	forgotten = n->forgotten;
	pthread_mutex_unlock(&n->lock);
	return forgotten;
}
