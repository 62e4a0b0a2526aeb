// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The NAT copies of plaintext requests (user/modules/usm/nat_copies.h): a request seen
 * under two sets of addresses with the same TCP numbers is one exchange; the first
 * copy with no known end to ask claims it, later ones are told; a copy with a known
 * end does not claim; the same addresses again are no copy; a group goes once every
 * copy was answered; sets of 4 ways replace their oldest group, counting one
 * forgotten before its copies were all answered; a request never answered is lost
 * once, whatever its copies, and not after another copy was answered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "user/modules/usm/nat_copies.h"

/* Addresses: the client 10.0.0.c:cport, the server 10.0.1.2:80; seg the numbers. */
static struct usm_conn_addr addr(uint8_t c, uint16_t cport, uint64_t seg)
{
	struct usm_conn_addr a = {.family = 4, .client_port = cport, .server_port = 80,
				  .seg = seg};

	memcpy(a.client_addr, (uint8_t[]){10, 0, 0, c}, 4);
	memcpy(a.server_addr, (uint8_t[]){10, 0, 1, 2}, 4);
	return a;
}

static void test_copy_claimed_once(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 0x1111222233334444ull);
	struct usm_conn_addr b = addr(9, 51000, a.seg), other;

	(void)state;
	assert_non_null(n);
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	/* b answered first with no known end: it claims, and is told where a is. */
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_OTHER);
	assert_int_equal(other.client_addr[3], 2);
	assert_int_equal(other.client_port, 40000);
	/* a, with no known end either: claimed already. */
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_CLAIMED);
	assert_int_equal(usm_nat_copies_forgotten(n), 0);
	usm_nat_copies_free(n);
}

static void test_other_way_round(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 77), b = addr(9, 51000, 77), other;

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	/* a asks first: told of b. */
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_OTHER);
	assert_int_equal(other.client_addr[3], 9);
	assert_int_equal(other.client_port, 51000);
	usm_nat_copies_free(n);
}

/* A copy with a known end never claims: the other, asking after it, is told of it. */
static void test_known_does_not_claim(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 78), b = addr(9, 51000, 78), other;

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	assert_int_equal(usm_nat_copies_answer(n, &a, true, &other), USM_NAT_ALONE);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_OTHER);
	assert_int_equal(other.client_port, 40000);
	usm_nat_copies_free(n);
}

/* One set of addresses (seen once, or the same again: a retransmission), no numbers,
 * or numbers never noted: no copy. A group is freed once its one request is answered:
 * a request noted after (never a copy: copies cross the host before any response) is
 * a group of its own. */
static void test_alone(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 79), b = addr(9, 51000, 79);
	struct usm_conn_addr z = addr(3, 40001, 0), never = addr(4, 40002, 80), other;

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &a, 2);
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_ALONE);
	usm_nat_copies_note(n, &b, 3);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_ALONE);
	usm_nat_copies_note(n, &z, 4);
	usm_nat_copies_note(n, &z, 5);
	assert_int_equal(usm_nat_copies_answer(n, &z, false, &other), USM_NAT_ALONE);
	assert_int_equal(usm_nat_copies_answer(n, &never, false, &other), USM_NAT_ALONE);
	usm_nat_copies_free(n);
}

/* Two copies never answered: the first to leave counts, the second is a copy; then
 * the group is gone (a request with those numbers later is a group of its own). */
static void test_unanswered_once(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 90), b = addr(9, 51000, 90), other;

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	assert_false(usm_nat_copies_unanswered(n, &b));
	assert_true(usm_nat_copies_unanswered(n, &a));
	/* Freed: both gone, nothing more to say of them. */
	assert_false(usm_nat_copies_unanswered(n, &a));
	usm_nat_copies_note(n, &a, 3);
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_ALONE);
	assert_int_equal(usm_nat_copies_forgotten(n), 0);
	usm_nat_copies_free(n);
}

/* One copy answered (recorded where its end is known), the other never: that one is a
 * copy of an exchange counted already, not a request lost. The other order too: the
 * lost one first counts; the answered one, with no known end, is told to record as if
 * alone (the other will never record it), not to leave it to the other. */
static void test_unanswered_after_answer(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 91), b = addr(9, 51000, 91), other;
	struct usm_conn_addr c = addr(2, 40001, 92), d = addr(9, 51001, 92);

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	assert_int_equal(usm_nat_copies_answer(n, &a, true, &other), USM_NAT_ALONE);
	assert_true(usm_nat_copies_unanswered(n, &b));

	usm_nat_copies_note(n, &c, 3);
	usm_nat_copies_note(n, &d, 4);
	assert_false(usm_nat_copies_unanswered(n, &d));
	assert_int_equal(usm_nat_copies_answer(n, &c, false, &other), USM_NAT_ALONE);
	/* Both done with: the group is gone. */
	assert_false(usm_nat_copies_unanswered(n, &c));
	usm_nat_copies_free(n);
}

/* A copy with no known end told of the other (USM_NAT_OTHER) and leaving the exchange
 * to it (its end known) has counted nothing: the other's loss counts, once. Recorded
 * by the caller instead (settled), the other's loss is a copy's. */
static void test_unanswered_after_other(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 94), b = addr(9, 51000, 94), other;
	struct usm_conn_addr c = addr(2, 40001, 95), d = addr(9, 51001, 95);

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_OTHER);
	assert_false(usm_nat_copies_unanswered(n, &b));

	usm_nat_copies_note(n, &c, 3);
	usm_nat_copies_note(n, &d, 4);
	assert_int_equal(usm_nat_copies_answer(n, &c, false, &other), USM_NAT_OTHER);
	usm_nat_copies_settle(n, &c);
	assert_true(usm_nat_copies_unanswered(n, &d));
	usm_nat_copies_free(n);
}

/* A request alone, lost: counted (its group freed); no numbers: never a copy. */
static void test_unanswered_alone(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 40000, 93), z = addr(3, 40001, 0);

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	assert_false(usm_nat_copies_unanswered(n, &a));
	usm_nat_copies_note(n, &a, 2); /* the same numbers later: a request of its own */
	assert_false(usm_nat_copies_unanswered(n, &a));
	usm_nat_copies_note(n, &z, 3);
	assert_false(usm_nat_copies_unanswered(n, &z));
	assert_false(usm_nat_copies_unanswered(n, &z));
	usm_nat_copies_free(n);
}

/* A third copy (NAT twice): two sets kept; every copy asks like the others, and the
 * group stays until the third has. */
static void test_third_copy(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(64);
	struct usm_conn_addr a = addr(2, 1, 81), b = addr(3, 2, 81), c = addr(4, 3, 81), other;

	(void)state;
	usm_nat_copies_note(n, &a, 1);
	usm_nat_copies_note(n, &b, 2);
	usm_nat_copies_note(n, &c, 3);
	usm_nat_copies_note(n, &b, 4); /* b again: a retransmission, not a fourth copy */
	assert_int_equal(usm_nat_copies_answer(n, &c, false, &other), USM_NAT_OTHER);
	assert_int_equal(other.client_port, 1);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_CLAIMED);
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_CLAIMED);
	/* All three answered: freed. */
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_ALONE);
	usm_nat_copies_free(n);
}

/* A table of one set (4 groups): a fifth request replaces the oldest group; one that
 * held copies not all answered is counted forgotten, and its copies are alone after.
 * A group whose copies were all answered is freed, and its room taken first. */
static void test_replaced_oldest(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(4);
	struct usm_conn_addr a, b, other;
	uint64_t seg;

	(void)state;
	for (seg = 1; seg <= 4; seg++) {
		a = addr(2, (uint16_t)seg, seg);
		b = addr(9, (uint16_t)seg, seg);
		usm_nat_copies_note(n, &a, seg * 10);
		usm_nat_copies_note(n, &b, seg * 10 + 1);
	}
	a = addr(2, 5, 5);
	usm_nat_copies_note(n, &a, 50); /* replaces group 1, the oldest */
	assert_int_equal(usm_nat_copies_forgotten(n), 1);
	a = addr(2, 1, 1);
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_ALONE);
	/* Group 2 answered on both copies: freed; the next request takes its room. */
	a = addr(2, 2, 2);
	b = addr(9, 2, 2);
	assert_int_equal(usm_nat_copies_answer(n, &a, true, &other), USM_NAT_ALONE);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_OTHER);
	a = addr(2, 6, 6);
	usm_nat_copies_note(n, &a, 60);
	assert_int_equal(usm_nat_copies_forgotten(n), 1);
	b = addr(9, 3, 3);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_OTHER);
	b = addr(9, 4, 4);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_OTHER);
	usm_nat_copies_free(n);
}

/* Interim responses, grouped by their own segment's numbers: the first seen counts, a
 * copy under other addresses does not, the same addresses again (a retransmission)
 * do; their groups are not requests' (a request with the same numbers is its own
 * group), and replacing one counts nothing forgotten. */
static void test_interim_copies(void **state)
{
	struct usm_nat_copies *n = usm_nat_copies_new(4); /* one set of 4 ways */
	struct usm_conn_addr a = addr(2, 40000, 90), b = addr(9, 51000, 90), other;
	int i;

	(void)state;
	assert_false(usm_nat_copies_interim(n, &a, 1));
	assert_true(usm_nat_copies_interim(n, &b, 2));
	assert_true(usm_nat_copies_interim(n, &b, 3)); /* a third look, NATed twice */
	assert_false(usm_nat_copies_interim(n, &a, 4));
	/* A request's group of the same numbers is apart from it. */
	usm_nat_copies_note(n, &a, 5);
	usm_nat_copies_note(n, &b, 6);
	assert_int_equal(usm_nat_copies_answer(n, &a, false, &other), USM_NAT_OTHER);
	assert_int_equal(usm_nat_copies_answer(n, &b, false, &other), USM_NAT_CLAIMED);
	/* Interim groups of two copies replaced by newer ones: none forgotten. */
	for (i = 0; i < 8; i++) {
		struct usm_conn_addr x = addr(2, 40000, 100 + i), y = addr(9, 51000, 100 + i);

		assert_false(usm_nat_copies_interim(n, &x, 10 + i));
		assert_true(usm_nat_copies_interim(n, &y, 10 + i));
	}
	assert_int_equal(usm_nat_copies_forgotten(n), 0);
	usm_nat_copies_free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_claimed_once),
		cmocka_unit_test(test_interim_copies),
		cmocka_unit_test(test_other_way_round),
		cmocka_unit_test(test_known_does_not_claim),
		cmocka_unit_test(test_alone),
		cmocka_unit_test(test_third_copy),
		cmocka_unit_test(test_replaced_oldest),
		cmocka_unit_test(test_unanswered_once),
		cmocka_unit_test(test_unanswered_after_answer),
		cmocka_unit_test(test_unanswered_after_other),
		cmocka_unit_test(test_unanswered_alone),
	};

	return cmocka_run_group_tests_name("usm_nat_copies", tests, NULL, NULL);
}
