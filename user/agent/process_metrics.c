// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The agent's own process on /metrics (process_metrics.h). */
#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "process_metrics.h"
#include "user/common/proc.h"

/* What /proc/self/stat says of this process. */
struct self_stat {
	unsigned long long utime, stime, starttime; /* clock ticks */
	unsigned long long vsize;		    /* bytes */
	unsigned long long rss;			    /* pages */
};

static int read_self_stat(struct self_stat *st)
{
	unsigned long long t[2], v[3];
	__u32 self = (__u32)getpid();

	/* utime stime (14-15); starttime vsize rss (22-24). */
	if (!bpftel_proc_stat(self, 14, 2, t) || !bpftel_proc_stat(self, 22, 3, v))
		return -1;
	st->utime = t[0];
	st->stime = t[1];
	st->starttime = v[0];
	st->vsize = v[1];
	st->rss = v[2];
	return 0;
}

/* The boot time, seconds since the epoch: /proc/stat's btime. */
static long long boot_time(void)
{
	char line[256];
	long long btime = -1;
	FILE *f;

	f = fopen("/proc/stat", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "btime %lld", &btime) == 1)
			break;
	}
	fclose(f);
	return btime;
}

static long long open_fds(void)
{
	struct dirent *de;
	long long n = 0;
	DIR *dir;

	dir = opendir("/proc/self/fd");
	if (!dir)
		return -1;
	while ((de = readdir(dir)))
		n += de->d_name[0] != '.';
	closedir(dir);
	return n - 1; /* the directory's own */
}

int bpftel_process_usage(double *cpu_s, __u64 *rss_bytes)
{
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct self_stat st;

	if (ticks <= 0 || page <= 0 || read_self_stat(&st))
		return -1;
	*cpu_s = (double)(st.utime + st.stime) / (double)ticks;
	*rss_bytes = (__u64)st.rss * page;
	return 0;
}

void bpftel_process_metrics(struct bpftel_prom *w)
{
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	long long btime = boot_time(), fds = open_fds();
	struct self_stat st;
	struct rlimit rl;

	if (ticks > 0 && page > 0 && !read_self_stat(&st)) {
		bpftel_prom_family(w, "process_cpu_seconds_total", "counter",
				   "Total user and system CPU time spent in seconds.");
		bpftel_prom_sample(w, "", NULL, 0, (double)(st.utime + st.stime) / (double)ticks);
		bpftel_prom_family(w, "process_resident_memory_bytes", "gauge",
				   "Resident memory size in bytes.");
		bpftel_prom_sample_u64(w, "", NULL, 0, (__u64)st.rss * page);
		bpftel_prom_family(w, "process_virtual_memory_bytes", "gauge",
				   "Virtual memory size in bytes.");
		bpftel_prom_sample_u64(w, "", NULL, 0, st.vsize);
		if (btime > 0) {
			bpftel_prom_family(w, "process_start_time_seconds", "gauge",
					   "Start time of the process since unix epoch in seconds.");
			bpftel_prom_sample(w, "", NULL, 0,
					   (double)btime + (double)st.starttime / (double)ticks);
		}
	}
	if (fds >= 0) {
		bpftel_prom_family(w, "process_open_fds", "gauge",
				   "Number of open file descriptors.");
		bpftel_prom_sample_u64(w, "", NULL, 0, (__u64)fds);
	}
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY) {
		bpftel_prom_family(w, "process_max_fds", "gauge",
				   "Maximum number of open file descriptors.");
		bpftel_prom_sample_u64(w, "", NULL, 0, rl.rlim_cur);
	}
}
