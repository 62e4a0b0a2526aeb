// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * uprobe_floor: attach uprobe_floor.bpf.c's empty programs to SYMBOL of LIB (entry, and
 * return too with --ret), print "ready", hold them until stdin closes. SYMBOL+N puts
 * the entry probe N bytes into the function (what a probe past the prologue costs:
 * user/manager/prologue.h). A configuration of tools/bench/bench_cuda.py.
 *
 * --go EXE puts them where the USM module probes a Go executable's crypto/tls, found
 * by the agent's own code (goexe.h): the entries of (*Conn).Write and (*Conn).Read on
 * their stack checks' JBE, and each RET of Read (plain uprobes: Go has no
 * uretprobes). "entries" or "rets" keeps only those: which of the traps costs what.
 * A configuration of tools/bench/bench.py's go_https.
 *
 * --multi attaches them as the agent does where the kernel has them: a multi-uprobe
 * link per direction (user/manager/uprobe_multi.h), whose dispatch is not the
 * perf-event uprobe's. Which floor is which: tools/bench/bench_cuda.py.
 *
 *   uprobe_floor LIB SYMBOL[+N] [--ret|--multi]
 *   uprobe_floor --go EXE [entries|rets]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "uprobe_floor.skel.h"
#include "user/manager/goexe.h"
#include "user/manager/elfsym.h"
#include "user/manager/uprobe_multi.h"

#define GO_MAX_LINKS (2 + BPFTEL_GO_MAX_RETS)

static void hold(void)
{
	char c;

	printf("ready\n");
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
}

static int attach_at(struct uprobe_floor *skel, const char *exe, long off,
		     struct bpf_link **links, int *n)
{
	links[*n] = bpf_program__attach_uprobe(skel->progs.floor_entry, false, -1, exe, off);
	if (!links[*n]) {
		fprintf(stderr, "uprobe_floor: cannot attach to %s at 0x%lx: %s\n", exe, off,
			strerror(errno));
		return -1;
	}
	(*n)++;
	return 0;
}

static int go_floor(const char *exe, const char *only)
{
	struct bpftel_go_func funcs[] = {{.name = "crypto/tls.(*Conn).Write"},
					 {.name = "crypto/tls.(*Conn).Read"}};
	bool entries = !only || !strcmp(only, "entries"), rets = !only || !strcmp(only, "rets");
	struct bpf_link *links[GO_MAX_LINKS];
	struct bpftel_go_exe info;
	struct uprobe_floor *skel;
	int fd, i, n = 0, err = 0;
	size_t r;
	char why[256];

	if (only && !entries && !rets) {
		fprintf(stderr, "uprobe_floor: --go EXE [entries|rets]\n");
		return 2;
	}
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || bpftel_go_inspect_fd(fd, exe, &info, funcs, 2, why, sizeof(why))) {
		fprintf(stderr, "uprobe_floor: %s: %s\n", exe, fd < 0 ? strerror(errno) : why);
		return 1;
	}
	close(fd);
	skel = uprobe_floor__open_and_load();
	if (!skel) {
		fprintf(stderr, "uprobe_floor: cannot load: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < 2 && !err; i++) {
		if (funcs[i].offset < 0) {
			fprintf(stderr, "uprobe_floor: %s: no %s\n", exe, funcs[i].name);
			err = -1;
			break;
		}
		if (entries)
			err = attach_at(skel, exe, funcs[i].check >= 0 ? funcs[i].check
								      : funcs[i].offset,
					links, &n);
		for (r = 0; i == 1 && rets && !err && r < funcs[i].nrets; r++)
			err = attach_at(skel, exe, funcs[i].rets[r], links, &n);
	}
	if (!err) {
		fprintf(stderr, "uprobe_floor: %s (%s): %d uprobes\n", exe, info.version, n);
		hold();
	}
	while (n--)
		bpf_link__destroy(links[n]);
	uprobe_floor__destroy(skel);
	return err ? 1 : 0;
}

/* Entry and return on name's entry in lib, each its own multi-uprobe link. */
static int multi_floor(const char *lib, const char *name)
{
	unsigned long off;
	struct uprobe_floor *skel;
	int entry = -1, ret = -1;
	char err[256];
	long at;
	__u64 cookie = 0;

	at = bpftel_elf_sym_offset(lib, name, err, sizeof(err));
	if (at < 0) {
		fprintf(stderr, "uprobe_floor: %s\n", err);
		return 1;
	}
	off = at;
	skel = uprobe_floor__open();
	if (!skel || bpftel_uprobe_multi_prepare(skel->progs.floor_entry) ||
	    bpftel_uprobe_multi_prepare(skel->progs.floor_return) || uprobe_floor__load(skel)) {
		fprintf(stderr, "uprobe_floor: cannot load for multi-uprobe links: %s\n",
			strerror(errno));
		uprobe_floor__destroy(skel);
		return 1;
	}
	ret = bpftel_uprobe_multi_attach(bpf_program__fd(skel->progs.floor_return), lib, &off,
					 &cookie, 1, true, -1);
	if (ret >= 0)
		entry = bpftel_uprobe_multi_attach(bpf_program__fd(skel->progs.floor_entry), lib,
						   &off, &cookie, 1, false, -1);
	if (entry < 0 || ret < 0) {
		fprintf(stderr, "uprobe_floor: cannot attach to %s:%s: %s\n", lib, name,
			strerror(-(ret < 0 ? ret : entry)));
		if (ret >= 0)
			close(ret);
		uprobe_floor__destroy(skel);
		return 1;
	}
	hold();
	close(entry);
	close(ret);
	uprobe_floor__destroy(skel);
	return 0;
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct uprobe_floor *skel;
	struct bpf_link *entry = NULL, *ret = NULL;
	int with_ret = argc > 3 && !strcmp(argv[3], "--ret");
	char name[256], *plus;
	size_t off = 0;

	if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "--go"))
		return go_floor(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc == 4 && !strcmp(argv[3], "--multi"))
		return multi_floor(argv[1], argv[2]);
	if (argc < 3 || (argc > 3 && !with_ret)) {
		fprintf(stderr, "usage: uprobe_floor LIB SYMBOL[+N] [--ret|--multi]\n");
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
	hold();
	bpf_link__destroy(ret);
	bpf_link__destroy(entry);
	uprobe_floor__destroy(skel);
	return 0;
}
