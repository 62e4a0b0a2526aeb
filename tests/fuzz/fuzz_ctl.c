// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libFuzzer target: control-socket requests, framed in arbitrary chunks, then parsed,
 * as the agent's control server does with bytes from a client. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/common/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpftel_ctl_frame f = {0};
	enum bpftel_ctl_frame_state st = BPFTEL_CTL_FRAME_MORE;
	size_t off = 1, chunk;
	char err[256];
	json_t *req;

	if (!size)
		return 0;
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
