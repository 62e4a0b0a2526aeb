// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* What /proc says of another process (proc.h). */
#include <stdio.h>
#include <string.h>

#include "proc.h"

void bpftel_proc_comm(__u32 pid, char *comm, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	if (!f || !fgets(comm, (int)size, f))
		snprintf(comm, size, "?");
	if (f)
		fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
}

__u64 bpftel_proc_start(__u32 pid)
{
	unsigned long long st = 0;
	char path[64], buf[1024], *p;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	/* Field 22 is within the first 1 KiB: a 16-byte comm and 21 numbers before it. */
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL; /* comm may hold ')' */
	fclose(f);
	for (i = 0; p && i < 20; i++) /* to the space before field 22 */
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &st) != 1)
		return 0;
	return st;
}
