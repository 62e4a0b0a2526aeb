// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the Go function table parser and the RET finder (user/manager/
 * gopclntab.c, goret.c) on bytes from a file anyone may have crafted. The input is
 * the table; its bytes are also decoded as code: a Go function's, and a read
 * function's whose typed tail reads are looked for (user/manager/tailread.c).
 */
#include <stdint.h>
#include <stdlib.h>

#include "user/manager/goexe.h"
#include "user/manager/tailread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpftel_go_func f[] = {{.name = "a.F"}, {.name = "b.G"}, {.name = "main.main"}};
	long rets[BPFTEL_GO_MAX_RETS], check, t[BPFTEL_TAIL_READS_MAX];
	uint32_t magic;
	char err[128];
	int i, j, n;

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
	/* At most the targets asked for, each once; -1 when refused. */
	n = bpftel_tail_reads(data, size, 23, t, BPFTEL_TAIL_READS_MAX);
	if (n < -1 || n > BPFTEL_TAIL_READS_MAX)
		abort();
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (t[i] == t[j])
				abort();
	return 0;
}
