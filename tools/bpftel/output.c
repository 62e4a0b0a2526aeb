// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The CLI's output written, or said not to be: scripts read the exit status. */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "print.h"
#include "user/common/escape.h"

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

/* The agent escapes what other processes chose, but the CLI may be pointed at any
 * socket (--socket): what reaches the terminal is escaped here too. An escaped string
 * passes unchanged (it is printable ASCII and valid UTF-8, its backslashes kept). */
void bpftel_cli_escape_strings(json_t *v)
{
	const char *key;
	json_t *item;
	void *tmp;
	size_t i;
	char *e;

	if (json_is_object(v)) {
		json_object_foreach_safe (v, tmp, key, item) {
			if (bpftel_escape_needed(key, 0)) {
				json_object_del(v, key); /* a key no agent sends */
				continue;
			}
			bpftel_cli_escape_strings(item);
		}
	} else if (json_is_array(v)) {
		json_array_foreach (v, i, item)
			bpftel_cli_escape_strings(item);
	} else if (json_is_string(v) && bpftel_escape_needed(json_string_value(v), 0)) {
		e = bpftel_escape_dup(json_string_value(v), 0);
		json_string_set(v, e ? e : "?");
		free(e);
	}
}

void bpftel_cli_connect_reason(int err, const char *path, const char *msg, char *buf,
			       size_t size)
{
	switch (-err) {
	case ENOENT:
	case ECONNREFUSED:
		snprintf(buf, size, "no agent is running at %s (%s; start one with: bpftel-agent)",
			 path, strerror(-err));
		break;
	case EACCES:
	case EPERM:
		snprintf(buf, size,
			 "permission denied on %s: the control socket is root-only, run as root",
			 path);
		break;
	default: /* it may quote what answered at path: escaped, as the answers are */
		bpftel_escape(buf, size, msg, strlen(msg), 0);
	}
}
