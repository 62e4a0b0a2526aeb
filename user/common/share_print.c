// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The CLI's lines of who holds the most of the tables shared out by user, and who was
 * refused the most (share_print.h). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "jsonfmt.h"
#include "share_print.h"

/* An owner of a holders or refused_by array, and its count (field). */
static void print_owner(json_t *o, const char *field, bool first)
{
	bool container = !strcmp(jstr(o, "kind"), "container");

	printf("%s %s %lld %lld", first ? "" : ",", container ? "container cgroup" : "uid",
	       jint(o, container ? "cgroup_id" : "uid"), jint(o, field));
}

void bpftel_print_shares(json_t *resp, const struct bpftel_share_label *tables, size_t n)
{
	json_t *shares = json_object_get(resp, "shares"), *t, *h;
	const char *sep = "";
	size_t i, j;

	for (i = 0; i < n; i++) {
		t = json_object_get(shares, tables[i].key);
		if (!json_array_size(json_object_get(t, "holders")))
			continue;
		if (!*sep)
			printf("Kernel tables' biggest holders but root "
			       "(user_share_percent = %lld)",
			       jint(resp, "user_share_percent"));
		printf("%s %s (share ", *sep ? ";" : ":", tables[i].label);
		if (json_is_integer(json_object_get(t, "share")))
			printf("%lld", jint(t, "share"));
		else
			printf("none");
		printf(" of %lld):", jint(t, "entries"));
		json_array_foreach(json_object_get(t, "holders"), j, h)
			print_owner(h, "entries", !j);
		sep = ";";
	}
	if (*sep)
		printf("\n");
	sep = "";
	for (i = 0; i < n; i++) {
		t = json_object_get(shares, tables[i].key);
		if (!json_array_size(json_object_get(t, "refused_by")))
			continue;
		if (!*sep)
			printf("Refused the most since the module started");
		printf("%s %s:", *sep ? ";" : ":", tables[i].label);
		json_array_foreach(json_object_get(t, "refused_by"), j, h)
			print_owner(h, "refused", !j);
		sep = ";";
	}
	if (*sep)
		printf("\n");
}
