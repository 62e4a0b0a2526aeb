// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libFuzzer target: control-socket requests, framed in arbitrary chunks, then parsed,
 * as the agent's control server does with bytes from a client; and the escaping of
 * strings from other processes (user/common/escape.h) on the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/common/ctl.h"
#include "user/common/escape.h"

/* Whatever the bytes, the escaped text is valid UTF-8 (jansson takes it) without a
 * control character, every backslash starts an escape, and it fits what was asked. */
static void check_escape(const uint8_t *data, size_t size)
{
	size_t need = bpftel_escape(NULL, 0, (const char *)data, size, BPFTEL_ESC_BACKSLASH), i;
	char *out = malloc(need + 1), small[8];
	json_t *s;

	if (!out)
		return;
	if (bpftel_escape(out, need + 1, (const char *)data, size, BPFTEL_ESC_BACKSLASH) != need ||
	    strlen(out) != need)
		abort();
	for (i = 0; i < need; i++) {
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			abort();
		if (out[i] == '\\' && out[i + 1] != '\\' && out[i + 1] != 'x')
			abort();
		if (out[i] == '\\')
			i++;
	}
	s = json_string(out);
	if (!s)
		abort();
	json_decref(s);
	/* Cut short: a prefix of the whole, on a whole character or escape (valid UTF-8). */
	bpftel_escape(small, sizeof(small), (const char *)data, size, BPFTEL_ESC_BACKSLASH);
	if (strlen(small) >= sizeof(small) || strncmp(small, out, strlen(small)))
		abort();
	s = json_string(small);
	if (!s)
		abort();
	json_decref(s);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpftel_ctl_frame f = {0};
	enum bpftel_ctl_frame_state st = BPFTEL_CTL_FRAME_MORE;
	size_t off = 1, chunk;
	char err[256];
	json_t *req;

	if (!size)
		return 0;
	check_escape(data, size);
	chunk = 1 + data[0] % 64; /* how the client's bytes arrive */
	while (off < size && st == BPFTEL_CTL_FRAME_MORE) {
		size_t n = size - off < chunk ? size - off : chunk;

		st = bpftel_ctl_frame__feed(&f, (const char *)data + off, n);
		off += n;
	}
	if (f.len > sizeof(f.buf))
		abort();
	if (st != BPFTEL_CTL_FRAME_DONE)
		return 0;
	req = bpftel_ctl_parse_request(f.buf, f.len, err, sizeof(err));
	if (req) {
		const char *cmd = json_string_value(json_object_get(req, "cmd"));

		if (!cmd || !*cmd)
			abort();
		json_decref(req);
	} else if (!err[0]) {
		abort();
	}
	return 0;
}
