// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * bpftel-agent: the root daemon. Reads like opensnoop: configure -> load -> attach ->
 * poll -> clean up in reverse. This thread runs one epoll loop over signals and the
 * control socket; the threads it starts and what each may do are in agent.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "config.h"
#include "control.h"
#include "faults.h"
#include "housekeeping.h"
#include "lifecycle.h"
#include "metrics.h"
#include "module_table.h"
#include "system.h"
#include "throttle.h"
#include "telemetry/telemetry.h"
#include "user/common/ctl.h"
#include "user/common/log.h"
#include "user/manager/manager.h"
#include "user/sharedlibs/uprobes.h"

/* The command line; what it sets wins over the configuration file. */
static struct env {
	const char *config_path;
	bool config_explicit;	  /* -c given: its absence is an error */
	const char *socket_path;  /* NULL: from the configuration */
	const char *metrics_addr; /* likewise; "" for --no-metrics */
	bool no_run_stats;
	int verbosity; /* enum bpftel_log_level shown at most */
} env = {
	.config_path = BPFTEL_CONFIG_DEFAULT,
	.verbosity = BPFTEL_LOG_INFO,
};

static const char usage_text[] =
	"Usage: bpftel-agent [-c FILE] [--socket PATH] [--metrics-addr HOST:PORT | --no-metrics]\n"
	"                    [--no-run-stats] [-v] [-q] [-h] [-V]\n"
	"\n"
	"eBPF telemetry agent. Runs in the foreground as root until SIGINT or SIGTERM, then\n"
	"detaches every program it attached and closes every BPF object it loaded.\n"
	"\n"
	"Options:\n"
	"  -c, --config FILE   configuration file (default " BPFTEL_CONFIG_DEFAULT "; absent:\n"
	"                      defaults); SIGHUP reads it again and applies what changed.\n"
	"                      The options below override it. Keys: see README\n"
	"  -s, --socket PATH   control socket for the bpftel CLI "
	"(default " BPFTEL_CTL_SOCKET_DEFAULT ",\n"
	"                      created mode 0600, parent directories as needed)\n"
	"  -m, --metrics-addr HOST:PORT\n"
	"                      serve Prometheus metrics at http://HOST:PORT/metrics\n"
	"                      (default " BPFTEL_METRICS_ADDR_DEFAULT "; [::1]:PORT for IPv6;\n"
	"                      port 0 picks a free one, shown by bpftel stats)\n"
	"      --no-metrics    no metrics endpoint\n"
	"      --no-run-stats  never turn on the kernel's per-program run counts and times\n"
	"                      (BPF_ENABLE_STATS, as run_stats = off): while on they add two\n"
	"                      clock reads to every run of every BPF program on the host, so\n"
	"                      by default they are on 1 s of every 10 s and the counts are\n"
	"                      estimated (run_stats = sampled; always: exact)\n"
	"  -v, --verbose       more output; twice adds libbpf's debug log\n"
	"  -q, --quiet         errors and warnings only\n"
	"  -h, --help          this text\n"
	"  -V, --version       print the version and exit\n"
	"\n"
	"Environment:\n"
	"  BPFTEL_FAULTS       a test aid: MODULE.STEP=ERRNO[*COUNT],... makes the next\n"
	"                      COUNT starts of MODULE fail at STEP (open, load, start),\n"
	"                      or its stops report ERRNO (stop), e.g.\n"
	"                      usm.load=ENOMEM*2; uprobe_multi=ERRNO\n"
	"                      acts as a kernel without multi-uprobe links\n"
	"\n"
	"Examples:\n"
	"  bpftel-agent                          # defaults\n"
	"  bpftel-agent --socket /tmp/bpftel.sock -v\n"
	"  bpftel stats                          # from another shell\n";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static void log_stderr(enum bpftel_log_level level, const char *msg)
{
	if ((int)level > env.verbosity)
		return;
	fprintf(stderr, "bpftel-agent: %s: %s\n", level_names[level], msg);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && env.verbosity <= BPFTEL_LOG_DEBUG)
		return 0;
	if (level == LIBBPF_INFO && env.verbosity < BPFTEL_LOG_DEBUG)
		return 0;
	fputs("bpftel-agent: libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"socket", required_argument, NULL, 's'},
		{"verbose", no_argument, NULL, 'v'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"no-run-stats", no_argument, NULL, 'S'},
		{"metrics-addr", required_argument, NULL, 'm'},
		{"no-metrics", no_argument, NULL, 'M'},
		{},
	};
	int c, verbose = 0;

	while ((c = getopt_long(argc, argv, "c:s:m:vqhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			env.config_path = optarg;
			env.config_explicit = true;
			break;
		case 's':
			/* Said now, not once every module is loaded and attached. */
			if (!bpftel_config_socket_ok(optarg)) {
				fprintf(stderr, "bpftel-agent: --socket '%s' is not an absolute path "
						"shorter than 108 bytes\n", optarg);
				return 2;
			}
			env.socket_path = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 'q':
			env.verbosity = BPFTEL_LOG_WARN;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case 'S':
			env.no_run_stats = true;
			break;
		case 'm': {
			/* As the configuration file's: taken whole, never cut to fit. */
			if (strlen(optarg) >= sizeof(((struct bpftel_config *)0)->metrics_addr)) {
				fprintf(stderr,
					"bpftel-agent: --metrics-addr: %zu bytes, longer than %zu\n",
					strlen(optarg),
					sizeof(((struct bpftel_config *)0)->metrics_addr) - 1);
				return 2;
			}
			if (bpftel_metrics_check_addr(optarg)) {
				fprintf(stderr,
					"bpftel-agent: --metrics-addr '%s': expected HOST:PORT, "
					"e.g. "
					"127.0.0.1:9464 or [::1]:9464\n",
					optarg);
				return 2;
			}
			env.metrics_addr = optarg;
			break;
		}
		case 'M':
			env.metrics_addr = "";
			break;
		case 'V':
			printf("bpftel-agent %s\n", BPFTEL_VERSION);
			exit(0);
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bpftel-agent: unexpected argument '%s'\n\n%s", argv[optind],
			usage_text);
		return 2;
	}
	if (verbose)
		env.verbosity = BPFTEL_LOG_DEBUG + (verbose > 1);
	return 0;
}

static int setup_signals(void)
{
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

enum loop_src { SRC_SIGNAL = 1, SRC_CONTROL };

static int epoll_add(int epfd, int fd, enum loop_src src)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = src};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* The command line's settings over the file's. */
static void cli_overrides(struct bpftel_config *cfg)
{
	if (env.socket_path)
		snprintf(cfg->socket, sizeof(cfg->socket), "%s", env.socket_path);
	if (env.metrics_addr)
		snprintf(cfg->metrics_addr, sizeof(cfg->metrics_addr), "%s", env.metrics_addr);
	if (env.no_run_stats)
		cfg->run_stats = BPFTEL_RUN_STATS_OFF;
}

/* The configuration file, or the defaults when the default file does not exist
 * (*defaults set then). */
static int load_config(struct bpftel_config *cfg, char *err, size_t errlen, bool *defaults)
{
	int e = bpftel_config_load(env.config_path, cfg, err, errlen);

	*defaults = e == -ENOENT && !env.config_explicit;
	if (*defaults) {
		bpftel_config_defaults(cfg);
		e = 0;
	}
	if (!e)
		cli_overrides(cfg);
	return e;
}

/* SIGHUP: a configuration that does not parse changes nothing. The file is read here
 * (it is ours, small, capped); applying it starts and stops modules, which the
 * lifecycle thread does. */
static void reload(struct bpftel_agent *agent)
{
	struct bpftel_config next;
	bool defaults;
	char err[512];

	if (load_config(&next, err, sizeof(err), &defaults)) {
		pr_err("SIGHUP: config %s; keeping the running configuration", err);
		return;
	}
	if (bpftel_lifecycle__reload(agent->lc, &next))
		pr_err("SIGHUP: cannot queue the reload");
	else if (defaults) /* the file gone since: said, what it set undone */
		pr_warn("SIGHUP: %s does not exist: applying the defaults", env.config_path);
	else
		pr_info("SIGHUP: applying configuration %s", env.config_path);
}

/*
 * Descriptors: each probed file's links are fds (a multi-uprobe link per module and
 * kind), and the registry holds up to 1024 files, which any local user can make by
 * loading copies of a library: past systemd's soft limit of 1024. The soft limit goes
 * up to the hard one (nothing here uses select()); what is still refused for want of
 * fds is counted where it happens (attach failures, the control socket's pause).
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		pr_warn("cannot raise the open files limit to %llu: %s",
			(unsigned long long)rl.rlim_max, strerror(errno));
}

/*
 * Signals while the agent starts (calibration, every module's load and attach, the
 * /proc scan: seconds): SIGTERM or SIGINT cancels the start (the manager's shutdown
 * unwinds a module start in progress at its next step), SIGHUP is kept for once it
 * runs. A thread of its own: the main thread is busy starting.
 */
struct startup_signals {
	pthread_t thread;
	int sigfd, pipe[2];
	struct bpftel_manager *mgr;
	int stop_sig, hup; /* __atomic: the main thread looks while it runs */
};

static void *startup_signals_run(void *arg)
{
	struct startup_signals *s = arg;
	struct pollfd pfd[2] = {{.fd = s->sigfd, .events = POLLIN},
				{.fd = s->pipe[0], .events = POLLIN}};
	struct signalfd_siginfo si;

	while (poll(pfd, 2, -1) >= 0 || errno == EINTR) {
		if (pfd[1].revents)
			break; /* started: run_loop takes the signals from here */
		if (!(pfd[0].revents & POLLIN) || read(s->sigfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo == SIGHUP) {
			__atomic_store_n(&s->hup, 1, __ATOMIC_RELAXED);
			continue;
		}
		__atomic_store_n(&s->stop_sig, (int)si.ssi_signo, __ATOMIC_RELAXED);
		bpftel_manager__shutdown(s->mgr);
		break;
	}
	return NULL;
}

static int startup_signals_start(struct startup_signals *s, int sigfd,
				 struct bpftel_manager *mgr)
{
	int err;

	*s = (struct startup_signals){.sigfd = sigfd, .pipe = {-1, -1}, .mgr = mgr};
	if (pipe2(s->pipe, O_CLOEXEC)) {
		s->pipe[0] = s->pipe[1] = -1;
		return -errno;
	}
	err = pthread_create(&s->thread, NULL, startup_signals_run, s);
	if (err) {
		close(s->pipe[0]);
		close(s->pipe[1]);
		s->pipe[0] = s->pipe[1] = -1;
		return -err;
	}
	return 0;
}

/* The start is over: the watcher ends; the signal that cancelled it, or 0. */
static int startup_signals_end(struct startup_signals *s)
{
	if (s->pipe[1] < 0)
		return 0;
	if (write(s->pipe[1], "x", 1) != 1)
		pr_warn("start-up signals: cannot end the watcher: %s", strerror(errno));
	pthread_join(s->thread, NULL);
	close(s->pipe[0]);
	close(s->pipe[1]);
	s->pipe[0] = s->pipe[1] = -1;
	return s->stop_sig;
}

/* Returns the signal that ended the loop, or -errno. */
static int run_loop(struct bpftel_agent *agent, int sigfd)
{
	struct signalfd_siginfo si;
	struct epoll_event evs[8];
	int epfd, n, i, err;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	err = epoll_add(epfd, sigfd, SRC_SIGNAL);
	if (!err)
		err = epoll_add(epfd, bpftel_ctl_server__fd(agent->ctl), SRC_CONTROL);
	while (!err) {
		n = epoll_wait(epfd, evs, 8, 1000);
		if (n < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		for (i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case SRC_SIGNAL:
				if (read(sigfd, &si, sizeof(si)) != sizeof(si))
					break;
				if (si.ssi_signo == SIGHUP) {
					reload(agent);
					break;
				}
				close(epfd);
				return si.ssi_signo;
			case SRC_CONTROL:
				bpftel_ctl_server__process(agent->ctl);
				break;
			}
		}
		bpftel_ctl_server__tick(agent->ctl);
	}
	close(epfd);
	return err;
}

/* Every module of the table, registered and instrumented; not started. A selectable
 * module that cannot register is left out (logged); the others are needed. */
static int create_modules(struct bpftel_agent *agent)
{
	struct bpftel_agent_env mod_env = {.mgr = agent->mgr, .uprobes = agent->uprobes};
	const struct bpftel_agent_module *am;
	struct bpftel_module *m;
	size_t i;
	int err;

	for (i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++) {
		am = &bpftel_agent_modules[i];
		err = am->create(&mod_env, &agent->priv[i]);
		m = err ? NULL : bpftel_manager__find(agent->mgr, am->name);
		if (m)
			err = bpftel_telemetry__instrument(agent->tlm, m);
		if (!err)
			continue;
		if (!am->selectable) {
			pr_err("cannot set up '%s': %s", am->name, strerror(-err));
			return err;
		}
		pr_warn("module '%s' unavailable: %s", am->name, strerror(-err));
	}
	return 0;
}

static void destroy_modules(struct bpftel_agent *agent)
{
	size_t i;

	for (i = bpftel_agent_nmodules; i-- > 0;) {
		if (i < BPFTEL_CFG_MAX_MODULES && agent->priv[i])
			bpftel_agent_modules[i].destroy(agent->priv[i]);
	}
}

int main(int argc, char **argv)
{
	struct bpftel_agent agent = {.cfg_lock = PTHREAD_MUTEX_INITIALIZER};
	struct startup_signals starting = {.pipe = {-1, -1}};
	struct bpftel_config cfg;
	char errbuf[512];
	int sigfd = -1, lock_fd = -1, err, ret = 1, stop_sig;
	bool defaults;

	err = parse_args(argc, argv);
	if (err)
		return err;
	if (load_config(&cfg, errbuf, sizeof(errbuf), &defaults)) {
		fprintf(stderr, "bpftel-agent: config %s\n", errbuf);
		return 2;
	}
	bpftel_log_set_callback(log_stderr);
	libbpf_set_print(libbpf_print);
	/* One agent per socket, decided before anything is loaded (control.h). */
	lock_fd = bpftel_ctl_lock(cfg.socket);
	if (lock_fd < 0) {
		pr_err("cannot lock %s.lock: %s%s", cfg.socket, strerror(-lock_fd),
		       lock_fd == -EADDRINUSE ? " (another bpftel-agent is running)" : "");
		return 1;
	}
	agent.started = time(NULL);
	clock_gettime(CLOCK_MONOTONIC, &agent.mono_start);

	sigfd = setup_signals();
	if (sigfd < 0) {
		pr_err("cannot set up signals: %s", strerror(-sigfd));
		close(lock_fd);
		return 1;
	}
	if (geteuid() != 0)
		pr_warn("not running as root: loading BPF will likely fail");
	/* libbpf >= 1.0 raises RLIMIT_MEMLOCK itself on kernels without memcg accounting. */
	raise_nofile();
	if (bpftel_system_ensure_mounts())
		goto cleanup;

	agent.mgr = bpftel_manager__new();
	if (!agent.mgr)
		goto cleanup;
	err = bpftel_telemetry__new(&agent.tlm);
	if (!err)
		err = bpftel_uprobes__new(&agent.uprobes);
	if (err) {
		pr_err("cannot set up errors telemetry or the uprobe registry: %s", strerror(-err));
		goto cleanup;
	}
	/* From here, SIGTERM cancels the start (the manager exists). */
	err = startup_signals_start(&starting, sigfd, agent.mgr);
	if (err) {
		pr_err("cannot watch signals while starting: %s", strerror(-err));
		goto cleanup;
	}
	/* Modules are registered whatever the configuration runs: `bpftel module start`
	 * and SIGHUP can start them later. */
	if (create_modules(&agent))
		goto cleanup;
	if (getenv("BPFTEL_FAULTS") && *getenv("BPFTEL_FAULTS")) {
		/* A test aid (faults.h): refuse a spec that does not parse, arm nothing. */
		if (bpftel_faults_apply(agent.mgr, getenv("BPFTEL_FAULTS"), errbuf,
					sizeof(errbuf))) {
			pr_err("BPFTEL_FAULTS: %s", errbuf);
			ret = 2;
			goto cleanup;
		}
		pr_warn("BPFTEL_FAULTS set: injecting faults %s", getenv("BPFTEL_FAULTS"));
	}
	/* Before the modules attach anything, with the faults in force (a kernel without
	 * multi-uprobe links is calibrated with what it has). */
	if (bpftel_trap_cost_calibrate(&agent.trap))
		pr_warn("uprobe trap cost unknown: %s", agent.trap.error);
	else
		pr_info("uprobe trap cost: %.1f us at entry (%.1f us on an emulated instruction), "
			"%.1f us with return (%s links, calibrated in %.0f ms)",
			agent.trap.uprobe_ns / 1e3, agent.trap.uprobe_emulated_ns / 1e3,
			agent.trap.uretprobe_ns / 1e3, agent.trap.link, agent.trap.took_ms);
	/* Before apply starts /metrics, which reads it: never seen half made. */
	err = bpftel_throttle__new(&agent, &agent.throttle);
	if (err) {
		pr_err("cannot set up the modules' CPU budgets: %s", strerror(-err));
		goto cleanup;
	}
	if (__atomic_load_n(&starting.stop_sig, __ATOMIC_RELAXED) ||
	    bpftel_agent_apply(&agent, &cfg, true))
		goto cleanup;
	/* Libraries mapped before the watcher ran are in /proc/<pid>/maps. */
	if (!__atomic_load_n(&starting.stop_sig, __ATOMIC_RELAXED))
		pr_info("start-up scan: %d processes with watched libraries",
			bpftel_uprobes__scan(agent.uprobes));
	stop_sig = startup_signals_end(&starting);
	if (stop_sig) {
		pr_info("%s while starting: stopping", strsignal(stop_sig));
		ret = 0;
		goto cleanup;
	}
	err = bpftel_ctl_server__new(agent.cfg.socket, bpftel_agent_command, &agent, &agent.ctl);
	if (err) {
		pr_err("cannot serve control socket %s: %s%s", agent.cfg.socket, strerror(-err),
		       err == -EADDRINUSE ? " (another bpftel-agent is running)"
		       : err == -EEXIST	  ? " (a file that is not a socket is in the way)"
					  : "");
		goto cleanup;
	}
	err = bpftel_lifecycle__start(&agent, &agent.lc);
	if (!err)
		err = bpftel_lifecycle__start(&agent, &agent.reports);
	if (!err)
		err = bpftel_housekeeping__start(agent.mgr, bpftel_throttle__tick, agent.throttle,
						 &agent.hk);
	if (err) {
		pr_err("cannot start the agent's threads: %s", strerror(-err));
		goto cleanup;
	}

	pr_info("running (version %s, pid %d), control socket %s", BPFTEL_VERSION, getpid(),
		agent.cfg.socket);
	pr_info("try: bpftel%s%s stats",
		strcmp(agent.cfg.socket, BPFTEL_CTL_SOCKET_DEFAULT) ? " --socket " : "",
		strcmp(agent.cfg.socket, BPFTEL_CTL_SOCKET_DEFAULT) ? agent.cfg.socket : "");
	if (starting.hup) /* the file may have changed since it was read */
		reload(&agent);

	err = run_loop(&agent, sigfd);
	if (err < 0) {
		pr_err("event loop failed: %s", strerror(-err));
		goto cleanup;
	}
	pr_info("%s: stopping", strsignal(err));
	ret = 0;
cleanup:
	/* A start in progress unwinds at its next step; nothing new starts. */
	if (agent.mgr)
		bpftel_manager__shutdown(agent.mgr);
	stop_sig = startup_signals_end(&starting);
	if (stop_sig && ret) { /* a start cancelled on purpose: no failure */
		pr_info("%s while starting: stopping", strsignal(stop_sig));
		ret = 0;
	}
	bpftel_lifecycle__stop(agent.lc);
	bpftel_lifecycle__stop(agent.reports);
	bpftel_housekeeping__stop(agent.hk);
	bpftel_metrics__stop(agent.metrics);
	bpftel_ctl_server__free(agent.ctl);
	/* Its last readers (the metrics thread, the control server) are gone. */
	bpftel_throttle__free(agent.throttle);
	agent.throttle = NULL;
	bpftel_manager__free(agent.mgr); /* stops every module, waits for the reaper */
	bpftel_uprobes__free(agent.uprobes);
	destroy_modules(&agent);
	bpftel_telemetry__free(agent.tlm);
	if (sigfd >= 0)
		close(sigfd);
	/* Last: a new agent may start once nothing of this one's is loaded. */
	close(lock_fd);
	if (!ret)
		pr_info("stopped: programs detached, BPF objects closed");
	return ret;
}
