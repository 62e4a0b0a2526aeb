// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* What the tests of each production program share (prog_common.h). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "prog_common.h"

struct prog_env *prog_env_new(void)
{
	struct prog_env *e = calloc(1, sizeof(*e));
	struct bpftel_module *mods[3];
	int i;

	assert_non_null(e);
	bpftel_test_baseline(&e->base);
	e->mgr = bpftel_manager__new();
	assert_non_null(e->mgr);
	assert_int_equal(bpftel_telemetry__new(&e->tlm), 0);
	assert_int_equal(bpftel_uprobes__new(&e->up), 0);
	assert_int_equal(bpftel_sharedlibs__new(e->mgr, NULL, &e->sl), 0);
	bpftel_sharedlibs__set_registry(e->sl, e->up);
	assert_int_equal(bpftel_gpu__new(e->mgr, e->up, &e->gpu), 0);
	assert_int_equal(bpftel_usm__new(e->mgr, e->up, e->sl, &e->usm), 0);
	/* Every program of usm.bpf.o loaded and run: the recvfrom one too (off by default). */
	bpftel_usm__configure(e->usm, &(struct bpftel_usm_settings){.tls_recv_fd = true});
	e->shlib_mod = bpftel_manager__find(e->mgr, BPFTEL_SHAREDLIBS_MODULE);
	e->gpu_mod = bpftel_gpu__module(e->gpu);
	e->usm_mod = bpftel_usm__module(e->usm);
	mods[0] = e->shlib_mod, mods[1] = e->gpu_mod, mods[2] = e->usm_mod;
	/* As the agent does: errors telemetry on every module. */
	for (i = 0; i < 3; i++)
		assert_int_equal(bpftel_telemetry__instrument(e->tlm, mods[i]), 0);
	return e;
}

void prog_env_free(struct prog_env *e)
{
	struct bpftel_obj_counts now;

	bpftel_manager__free(e->mgr);
	bpftel_uprobes__free(e->up);
	bpftel_gpu__free(e->gpu);
	bpftel_usm__free(e->usm);
	bpftel_sharedlibs__free(e->sl);
	bpftel_telemetry__free(e->tlm);
	bpftel_test_settle_objects(&e->base, &now);
	assert_objects_back(&e->base, &now);
	free(e);
}

static void only_listener(void *ctx, const struct bpftel_shlib_detection *d)
{
	struct prog_env *e = ctx;
	int i;

	for (i = 0; e->only[i]; i++) {
		if (!strcmp(d->path, e->only[i])) {
			bpftel_uprobes__listener(e->up, d);
			return;
		}
	}
}

void prog_env_only(struct prog_env *e, const char *const *paths)
{
	int i;

	for (i = 0; i < 4 && paths[i]; i++)
		e->only[i] = paths[i];
	e->only[i] = NULL;
	bpftel_sharedlibs__set_listener(e->sl, only_listener, e);
}

long long prog_rodata_u32(struct bpf_object *obj, const char *name)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, ".rodata");
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec, *var;
	long long val = -1;
	__u32 zero = 0, v;
	char *buf;
	int id, i;

	if (!map || !btf || bpf_map__fd(map) < 0)
		return -1;
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (id < 0)
		return -1;
	sec = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		var = btf__type_by_id(btf, vs->type);
		if (strcmp(btf__name_by_offset(btf, var->name_off), name) || vs->size != sizeof(v))
			continue;
		buf = calloc(1, bpf_map__value_size(map));
		/* What the kernel holds: the value the programs read. */
		if (buf && !bpf_map_lookup_elem(bpf_map__fd(map), &zero, buf)) {
			memcpy(&v, buf + vs->offset, sizeof(v));
			val = v;
		}
		free(buf);
		break;
	}
	return val;
}

int prog_assert_keys_distinct(struct prog_env *e)
{
	struct bpftel_module *mods[3] = {e->shlib_mod, e->gpu_mod, e->usm_mod};
	long long keys[64];
	struct bpf_program *prog;
	char var[128];
	int n = 0, i, j;

	for (i = 0; i < 3; i++) {
		if (bpftel_module__state(mods[i]) < BPFTEL_MOD_LOADED)
			continue;
		bpf_object__for_each_program(prog, bpftel_module__object(mods[i]))
		{
			snprintf(var, sizeof(var), TLM_KEY_PROG_PREFIX "%s",
				 bpf_program__name(prog));
			assert_true(n < 64);
			keys[n] = prog_rodata_u32(bpftel_module__object(mods[i]), var);
			if (keys[n] <= 0)
				fail_msg("%s: %s is %lld", bpftel_module__name(mods[i]), var,
					 keys[n]);
			for (j = 0; j < n; j++) {
				if (keys[j] == keys[n])
					fail_msg("%s: %s = %lld, another program's key",
						 bpftel_module__name(mods[i]), var, keys[n]);
			}
			n++;
		}
	}
	return n;
}

__u64 prog_errors(struct prog_env *e, const char *module, const char *prog, const char *res,
		  const char *op, int err)
{
	struct bpftel_tlm_error *rows;
	__u64 count = 0;
	int n, i;

	n = bpftel_telemetry__errors(e->tlm, &rows);
	for (i = 0; i < n; i++) {
		if (!strcmp(rows[i].module, module) && !strcmp(rows[i].program, prog) &&
		    !strcmp(rows[i].resource, res) && !strcmp(rows[i].op, op) && rows[i].err == err)
			count += rows[i].count;
	}
	if (n >= 0)
		free(rows);
	return count;
}

__u64 prog_run_cnt(struct bpf_object *obj, const char *prog)
{
	struct bpf_program *p = bpf_object__find_program_by_name(obj, prog);
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (!p || bpf_program__fd(p) < 0 || bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len))
		return 0;
	return info.run_cnt;
}

size_t prog_attached(struct prog_env *e, const char *module, pid_t pid)
{
	struct bpftel_uprobe_file_info *rows;
	size_t got = 0, k;
	int n, i;

	n = bpftel_uprobes__files(e->up, &rows);
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].module, module))
			continue;
		for (k = 0; k < rows[i].nprocs && k < 8; k++) {
			if (rows[i].pids[k] == (__u32)pid)
				got += rows[i].attached;
		}
	}
	if (n >= 0)
		free(rows);
	return got;
}

long prog_map_entries(struct bpf_object *obj, const char *map)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, map);
	char key[64], next[64];
	long n = 0;
	void *prev = NULL;

	if (!m || bpf_map__key_size(m) > sizeof(key))
		return -1;
	while (!bpf_map_get_next_key(bpf_map__fd(m), prev, next)) {
		memcpy(key, next, bpf_map__key_size(m));
		prev = key;
		n++;
	}
	return n;
}

void prog_child_start(struct prog_child *c, char *const argv[])
{
	int in[2], out[2];
	char line[128];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	c->pid = fork();
	if (c->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the test, whatever happens */
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_true(c->pid > 0);
	close(in[0]);
	close(out[1]);
	c->in = in[1];
	c->out = fdopen(out[0], "r");
	assert_non_null(c->out);
	if (!fgets(line, sizeof(line), c->out) || strncmp(line, "loaded ", 7))
		fail_msg("%s did not start: '%s'", argv[0], line);
	assert_int_equal(atoi(line + 7), c->pid);
}

void prog_child_go(struct prog_child *c)
{
	assert_int_equal(write(c->in, "go\n", 3), 3);
}

void prog_child_play(struct prog_child *c, char *last, size_t len)
{
	char line[256];

	prog_child_go(c);
	if (last && len)
		last[0] = '\0';
	while (fgets(line, sizeof(line), c->out)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "done"))
			return;
		if (last)
			snprintf(last, len, "%s", line);
	}
	fail_msg("child %d ended before 'done'", (int)c->pid);
}

void prog_child_stop(struct prog_child *c)
{
	int tries;

	if (c->pid <= 0)
		return;
	close(c->in);
	fclose(c->out);
	/* It ends when its stdin closes; one stuck in a call is killed after 30 s. */
	for (tries = 0; tries < 3000 && waitpid(c->pid, NULL, WNOHANG) == 0; tries++)
		usleep(10000);
	if (tries == 3000) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	c->pid = 0;
}

pid_t prog_run(char *const argv[])
{
	/* Opened before the fork: the child of a threaded process calls only what is
	 * async-signal-safe until it execs (not freopen: an allocator lock). */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), status;
	pid_t pid;

	assert_true(null >= 0);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(null, STDOUT_FILENO) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	close(null);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("%s %s failed: status %#x", argv[0], argv[1], status);
	return pid;
}

static struct prog_case *find_case(struct prog_case *cases, size_t n, const char *prog)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!strcmp(cases[i].prog, prog))
			return &cases[i];
	}
	fail_msg("no case for program %s", prog);
	return NULL;
}

void prog_ran(struct prog_case *cases, size_t n, const char *prog)
{
	find_case(cases, n, prog)->ran = true;
}

void prog_error_counted(struct prog_case *cases, size_t n, const char *prog)
{
	find_case(cases, n, prog)->error_counted = true;
}

void prog_skipped(struct prog_case *cases, size_t n, const char *prog, const char *why)
{
	struct prog_case *c = find_case(cases, n, prog);

	snprintf(c->skipped, sizeof(c->skipped), "%s", why);
	printf("%s: not run: %s\n", prog, why);
}

/* Appends "sep name: what" to line. */
static void add(char *line, size_t len, const char *sep, const char *name, const char *what)
{
	size_t used = strlen(line);

	snprintf(line + used, len - used, "%s%s: %s", used ? sep : "", name, what);
}

void prog_coverage(const char *object, struct bpf_object *obj, struct prog_case *cases, size_t n)
{
	char runs[2048] = "", errs[2048] = "", none[1024] = "", what[256];
	struct bpf_program *prog;
	size_t nprogs = 0, nran = 0, nerr = 0, i;
	bool bad = false;

	bpf_object__for_each_program(prog, obj)
	{
		nprogs++;
		for (i = 0; i < n && strcmp(cases[i].prog, bpf_program__name(prog)); i++)
			;
		if (i == n) {
			printf("%s: program %s has no test that runs it\n", object,
			       bpf_program__name(prog));
			bad = true;
		}
	}
	for (i = 0; i < n; i++) {
		if (!bpf_object__find_program_by_name(obj, cases[i].prog)) {
			printf("%s: no program %s (a stale case)\n", object, cases[i].prog);
			bad = true;
		}
		if (cases[i].ran) {
			nran++;
			add(runs, sizeof(runs), ", ", cases[i].prog, cases[i].how);
		} else {
			snprintf(what, sizeof(what), "NOT RUN: %s",
				 cases[i].skipped[0] ? cases[i].skipped : "its test failed");
			add(runs, sizeof(runs), ", ", cases[i].prog, what);
			bad |= !cases[i].skipped[0];
		}
		if (cases[i].error_counted) {
			nerr++;
			add(errs, sizeof(errs), ", ", cases[i].prog, cases[i].error);
		} else if (!cases[i].error) {
			add(none, sizeof(none), ", ", cases[i].prog, cases[i].no_error);
		} else {
			bad |= !cases[i].skipped[0]; /* its error test failed */
		}
	}
	printf("%s: %zu/%zu programs run (%s)\n", object, nran, nprogs, runs);
	printf("%s: errors induced and counted under %zu/%zu programs (%s%s%s)\n", object, nerr,
	       nprogs, errs, none[0] ? "; none inducible in " : "", none);
	fflush(stdout);
	if (bad)
		fail_msg("%s: a program is not covered (see above)", object);
}
