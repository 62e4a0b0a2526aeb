// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The CLI's output written, or said not to be: scripts read the exit status. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "print.h"

int bpftel_cli_flushed(int dumped)
{
	int err = fflush(stdout) ? errno : 0;

	if (!err && (dumped || ferror(stdout)))
		err = EIO;
	if (!err)
		return 0;
	fprintf(stderr, "bpftel: cannot write the output: %s\n", strerror(err));
	return 1;
}
