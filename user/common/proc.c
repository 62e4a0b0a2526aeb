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
