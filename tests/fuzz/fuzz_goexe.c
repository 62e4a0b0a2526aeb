// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the Go function table parser and the RET finder (user/manager/
 * gopclntab.c, goret.c) on bytes from a file anyone may have crafted. The input is
 * the table; its bytes are also decoded as code.
 */
#include <stdint.h>
#include <stdlib.h>

#include "user/manager/goexe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpftel_go_func f[] = {{.name = "a.F"}, {.name = "b.G"}, {.name = "main.main"}};
	long rets[BPFTEL_GO_MAX_RETS], check;
	uint32_t magic;
	char err[128];
	int i, n;

	if (!bpftel_go_pclntab_find(data, size, &magic, f, 3, err, sizeof(err))) {
		for (i = 0; i < 3; i++)
			if (f[i].addr && f[i].end <= f[i].addr)
				abort();
	}
	n = bpftel_go_find_rets(data, size, 0, rets, BPFTEL_GO_MAX_RETS, &check);
	if (n < -1000 || n > BPFTEL_GO_MAX_RETS || check < -1 || (check >= 0 && (size_t)check >= size))
		abort();
	/* A RET is a whole instruction that starts with c3 (ret) or c2 (ret imm16), maybe
	 * after prefixes: its offset is inside the input. */
	for (i = 0; i < n; i++)
		if (rets[i] < 0 || (size_t)rets[i] >= size)
			abort();
	return 0;
}
