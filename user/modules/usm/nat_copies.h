/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NAT copies of plaintext requests (usm.c, packet_message).
 *
 * The socket filter sees a segment on every interface it crosses. Copies with the same
 * addresses are dropped in the kernel (usm_pkt_seen), but a segment NATed on the way
 * is seen again under other addresses: a container's request masqueraded out of the
 * host, a request to a published port DNATed to a container, traffic routed between
 * namespaces with masquerading. Each copy pairs with its own copy of the response, and
 * the exchange would be recorded once per copy: where its ends are known (the
 * container's process) and again, with neither end known, unattributed; or twice
 * unattributed. The copies share what NAT leaves alone: TCP's sequence and
 * acknowledgment numbers (struct usm_conn_addr's seg).
 *
 * A request's addresses are noted by its segment's numbers when it is seen; two sets
 * kept per group (a third copy, NAT twice, is counted, not kept). At the response of each copy, the
 * group is told; for a copy whose ends are both unknown it says whether a copy under
 * other addresses exists: the first such copy to ask claims the group, and any later
 * one is told a copy was taken. Copies with a known end are recorded on their known
 * sides as always: between two of the host's namespaces each copy knows one end (the
 * client's connect, the server's accept), and the two sides are counted once each.
 *
 * The copies of a request cross the host within microseconds of each other, before
 * any response, and the module's events are handled in the order they were seen (one
 * worker by default; h2c notes a first request when it is decoded, before handing it
 * on with its response, and not again then): every copy is noted before the first is
 * answered. A group is freed once every copy noted was answered or left unanswered
 * (usm_nat_copies_unanswered: a request never answered is lost once, not once per copy).
 *
 * Bounded: a set-associative table (4 ways), the oldest group of a set replaced. A
 * group replaced with two sets of addresses before both copies' responses came is
 * counted (usm_nat_copies_forgotten()): a copy answered after it, with neither end
 * known, is recorded unattributed as if it had no copy. Thread-safe.
 */
#ifndef BPFTEL_USM_NAT_COPIES_H
#define BPFTEL_USM_NAT_COPIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "endpoints.h"

struct usm_nat_copies;

/* A table of about `groups` groups (rounded up to whole sets); NULL: no memory. */
struct usm_nat_copies *usm_nat_copies_new(size_t groups);
void usm_nat_copies_free(struct usm_nat_copies *n);

/* A request seen under conn (conn->seg: its segment's TCP numbers) at now_ns. */
void usm_nat_copies_note(struct usm_nat_copies *n, const struct usm_conn_addr *conn,
			 uint64_t now_ns);

enum usm_nat_verdict {
	USM_NAT_ALONE,	 /* no copy of the request under other addresses (or an end known) */
	USM_NAT_OTHER,	 /* a copy under *other: this one claimed the group */
	USM_NAT_CLAIMED, /* another copy with no known end claimed it first */
};

/*
 * The response to the request seen under conn. known: an end of it is known, and it
 * is recorded on its sides whatever this says (USM_NAT_ALONE). Else, USM_NAT_OTHER:
 * the caller records it unattributed (and says so: usm_nat_copies_settle) unless an
 * end of *other is known (that copy is recorded on its sides, or counted unanswered if
 * its response never comes); USM_NAT_CLAIMED: a copy was (or is being) recorded
 * unattributed, not this one; USM_NAT_ALONE: recorded as if it had no copy (none, or
 * the other left unanswered already: this one is all that can record the exchange).
 */
enum usm_nat_verdict usm_nat_copies_answer(struct usm_nat_copies *n,
					   const struct usm_conn_addr *conn, bool known,
					   struct usm_conn_addr *other);

/*
 * The request seen under conn leaves without its response (expired, replaced by the
 * next, evicted): true when another copy's outcome was counted already (its response
 * recorded, or its own loss), so that this one's must not be counted again. The first
 * copy of a request to be recorded or lost counts it; an unanswered request seen under
 * two addresses is unanswered once. A copy whose response was left to the other copy
 * (USM_NAT_OTHER, not settled) has counted nothing: the other's loss counts.
 */
bool usm_nat_copies_unanswered(struct usm_nat_copies *n, const struct usm_conn_addr *conn);

/* After USM_NAT_OTHER: the caller records the copy seen under conn (the other copy's
 * ends are unknown too), so that the other, if it never gets its response, is a copy
 * of a recorded exchange and not a request lost. */
void usm_nat_copies_settle(struct usm_nat_copies *n, const struct usm_conn_addr *conn);

/*
 * An interim response (100 Continue, 103 Early Hints) seen under conn (conn->seg: its
 * own segment's numbers): true when it is a NAT copy of one seen already under other
 * addresses, not to be counted again. An interim is not the answer, so its copies are
 * not paired with the request's: its segment is kept in a group of its own until the
 * set's room goes to a newer one. The same addresses again (a retransmission the
 * kernel let through) are no copy, as for requests.
 */
bool usm_nat_copies_interim(struct usm_nat_copies *n, const struct usm_conn_addr *conn,
			    uint64_t now_ns);
/* Groups replaced holding copies under other addresses before all were answered. */
uint64_t usm_nat_copies_forgotten(struct usm_nat_copies *n);

#endif /* BPFTEL_USM_NAT_COPIES_H */
