// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tp_floor: attach one of tp_floor.bpf.c's empty programs (sys_exit_openat's, or with
 * --recvfrom sys_enter_recvfrom's), print "ready", and hold it until stdin closes or a
 * signal arrives. A configuration of tools/bench/bench_open.py and bench.py's recv_loop.
 *
 *   tp_floor [--run-stats] [--recvfrom]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "tp_floor.skel.h"

int main(int argc, char **argv)
{
	struct tp_floor *skel;
	bool recvfrom = false;
	int stats_fd = -1, i;
	char c;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--recvfrom")) {
			recvfrom = true;
		} else if (!strcmp(argv[i], "--run-stats") && stats_fd < 0) {
			stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
			if (stats_fd < 0) {
				fprintf(stderr, "tp_floor: BPF_ENABLE_STATS: %s\n", strerror(errno));
				return 1;
			}
		} else {
			fprintf(stderr, "usage: tp_floor [--run-stats] [--recvfrom]\n");
			return 2;
		}
	}
	skel = tp_floor__open();
	if (skel) {
		bpf_program__set_autoload(skel->progs.floor_exit_openat, !recvfrom);
		bpf_program__set_autoload(skel->progs.floor_enter_recvfrom, recvfrom);
	}
	if (!skel || tp_floor__load(skel) || tp_floor__attach(skel)) {
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
