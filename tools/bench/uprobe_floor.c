// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * uprobe_floor: attach uprobe_floor.bpf.c's empty programs to SYMBOL of LIB (entry, and
 * return too with --ret), print "ready", hold them until stdin closes. SYMBOL+N puts
 * the entry probe N bytes into the function (what a probe past the prologue costs:
 * user/manager/prologue.h). A configuration of tools/bench/bench_cuda.py.
 *
 *   uprobe_floor LIB SYMBOL[+N] [--ret]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "uprobe_floor.skel.h"

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct uprobe_floor *skel;
	struct bpf_link *entry = NULL, *ret = NULL;
	int with_ret = argc > 3 && !strcmp(argv[3], "--ret");
	char name[256], *plus, c;
	size_t off = 0;

	if (argc < 3 || (argc > 3 && !with_ret)) {
		fprintf(stderr, "usage: uprobe_floor LIB SYMBOL[+N] [--ret]\n");
		return 2;
	}
	snprintf(name, sizeof(name), "%s", argv[2]);
	plus = strchr(name, '+');
	if (plus) {
		*plus = '\0';
		off = strtoul(plus + 1, NULL, 0);
	}
	skel = uprobe_floor__open_and_load();
	if (!skel) {
		fprintf(stderr, "uprobe_floor: cannot load: %s\n", strerror(errno));
		return 1;
	}
	opts.func_name = name;
	entry = bpf_program__attach_uprobe_opts(skel->progs.floor_entry, -1, argv[1], off, &opts);
	if (entry && with_ret) {
		opts.retprobe = true; /* on the entry itself: the return address is on top */
		ret = bpf_program__attach_uprobe_opts(skel->progs.floor_return, -1, argv[1], 0,
						      &opts);
	}
	if (!entry || (with_ret && !ret)) {
		fprintf(stderr, "uprobe_floor: cannot attach to %s:%s: %s\n", argv[1], argv[2],
			strerror(errno));
		bpf_link__destroy(entry);
		uprobe_floor__destroy(skel);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	bpf_link__destroy(ret);
	bpf_link__destroy(entry);
	uprobe_floor__destroy(skel);
	return 0;
}
