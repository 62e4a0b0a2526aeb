// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A connection's memory: every allocation of its decoder, nghttp2's through its
 * allocator hooks included, is counted against USM_H2_MEM_MAX and refused beyond it, so
 * the bound holds whatever a peer makes its HPACK encoder do.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "http2_priv.h"

/* Each allocation carries its size in front, so that frees and reallocs count exactly. */
union alloc_hdr {
	size_t size;
	max_align_t align;
};

static bool mem_fits(const struct usm_h2_conn *c, size_t more)
{
	return more <= USM_H2_MEM_MAX && c->used <= USM_H2_MEM_MAX - more;
}

static void mem_account(struct usm_h2_conn *c, size_t old, size_t now)
{
	c->used = c->used - old + now;
	if (c->used > c->st.mem_peak)
		c->st.mem_peak = c->used;
}

void *h2_alloc(struct usm_h2_conn *c, size_t size)
{
	union alloc_hdr *h;

	if (size > USM_H2_MEM_MAX || !mem_fits(c, size + sizeof(*h)))
		return NULL;
	h = malloc(size + sizeof(*h));
	if (!h)
		return NULL;
	h->size = size + sizeof(*h);
	mem_account(c, 0, h->size);
	return h + 1;
}

void h2_free(struct usm_h2_conn *c, void *ptr)
{
	union alloc_hdr *h;

	if (!ptr)
		return;
	h = (union alloc_hdr *)ptr - 1;
	mem_account(c, h->size, 0);
	free(h);
}

void *h2_realloc(struct usm_h2_conn *c, void *ptr, size_t size)
{
	union alloc_hdr *h, *n;
	size_t total = size + sizeof(*h);

	if (!ptr)
		return h2_alloc(c, size);
	if (!size) {
		h2_free(c, ptr);
		return NULL;
	}
	h = (union alloc_hdr *)ptr - 1;
	if (size > USM_H2_MEM_MAX || (total > h->size && !mem_fits(c, total - h->size)))
		return NULL;
	n = realloc(h, total);
	if (!n)
		return NULL;
	mem_account(c, n->size, total);
	n->size = total;
	return n + 1;
}

/* nghttp2's allocator interface, on the counting allocator. */
static void *mem_malloc(size_t size, void *ud)
{
	return h2_alloc(ud, size);
}

static void mem_free(void *ptr, void *ud)
{
	h2_free(ud, ptr);
}

static void *mem_calloc(size_t nmemb, size_t size, void *ud)
{
	void *p;

	if (size && nmemb > USM_H2_MEM_MAX / size)
		return NULL;
	p = h2_alloc(ud, nmemb * size);
	if (p)
		memset(p, 0, nmemb * size);
	return p;
}

static void *mem_realloc(void *ptr, size_t size, void *ud)
{
	return h2_realloc(ud, ptr, size);
}

void h2_mem_init(struct usm_h2_conn *c)
{
	c->mem = (nghttp2_mem){
		.mem_user_data = c,
		.malloc = mem_malloc,
		.free = mem_free,
		.calloc = mem_calloc,
		.realloc = mem_realloc,
	};
	mem_account(c, 0, sizeof(*c)); /* the connection itself counts too */
}
