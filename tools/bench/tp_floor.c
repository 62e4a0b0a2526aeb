// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tp_floor: attach tp_floor.bpf.c's empty program, print "ready", and hold it until
 * stdin closes or a signal arrives. A configuration of tools/bench/bench_open.py.
 *
 *   tp_floor [--run-stats]
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "tp_floor.skel.h"

int main(int argc, char **argv)
{
	struct tp_floor *skel;
	int stats_fd = -1;
	char c;

	if (argc > 1 && !strcmp(argv[1], "--run-stats")) {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0) {
			fprintf(stderr, "tp_floor: BPF_ENABLE_STATS: %s\n", strerror(errno));
			return 1;
		}
	} else if (argc > 1) {
		fprintf(stderr, "usage: tp_floor [--run-stats]\n");
		return 2;
	}
	skel = tp_floor__open_and_load();
	if (!skel || tp_floor__attach(skel)) {
		fprintf(stderr, "tp_floor: cannot load or attach: %s\n", strerror(errno));
		tp_floor__destroy(skel);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	tp_floor__destroy(skel);
	if (stats_fd >= 0)
		close(stats_fd);
	return 0;
}
