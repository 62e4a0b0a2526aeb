// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * bench_telemetry: the success-path cost of the telemetry wrappers. Two socket
 * programs do the same BENCH_UPDATES (64) array-map updates, one through
 * tlm_map_update, one raw; BPF_PROG_TEST_RUN with `repeat` gives the kernel's
 * average ns per run. Replicates alternate wrapped/raw so drift hits both alike.
 *
 *   bench_telemetry [REPLICATES] [REPEAT]     (default 10 x 200000)
 *
 * Target: wrapped - raw <= 2 ns per wrapped call.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "telemetry_test.skel.h"

#define UPDATES 64

static double run_ns(struct bpf_program *prog, int repeat)
{
	char pkt[64] = {};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = repeat);

	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &opts)) {
		fprintf(stderr, "bench_telemetry: test_run: %s\n", strerror(errno));
		exit(1);
	}
	return opts.duration; /* average ns per run */
}

static void mean_ci90(const double *v, int n, double *mean, double *half)
{
	/* Student t, 90 % two-sided, for n - 1 degrees of freedom (n <= 31). */
	static const double t90[] = {0,	    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895,
				     1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
				     1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714,
				     1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697};
	double s = 0, ss = 0;
	int i;

	for (i = 0; i < n; i++)
		s += v[i];
	*mean = s / n;
	for (i = 0; i < n; i++)
		ss += (v[i] - *mean) * (v[i] - *mean);
	*half = n > 1 ? t90[n - 1 < 30 ? n - 1 : 30] * sqrt(ss / (n - 1)) / sqrt(n) : 0;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10, repeat = argc > 2 ? atoi(argv[2]) : 200000;
	double *wrapped, *raw, *diff, mw, hw, mr, hr, md, hd;
	struct telemetry_test *skel;
	int i;

	if (reps < 2 || reps > 31 || repeat <= 0) {
		fprintf(stderr, "usage: %s [REPLICATES 2..31] [REPEAT > 0]\n", argv[0]);
		return 2;
	}
	skel = telemetry_test__open();
	if (!skel)
		return 1;
	/* Only the two bench programs: the rest needs no loading here. */
	bpf_program__set_autoload(skel->progs.tt_getppid, false);
	if (telemetry_test__load(skel)) {
		fprintf(stderr, "bench_telemetry: cannot load (root needed)\n");
		return 1;
	}
	wrapped = calloc(reps, sizeof(double));
	raw = calloc(reps, sizeof(double));
	diff = calloc(reps, sizeof(double));
	run_ns(skel->progs.tt_bench_wrapped, repeat / 10); /* warm up */
	run_ns(skel->progs.tt_bench_raw, repeat / 10);
	for (i = 0; i < reps; i++) {
		if (i % 2) {
			raw[i] = run_ns(skel->progs.tt_bench_raw, repeat);
			wrapped[i] = run_ns(skel->progs.tt_bench_wrapped, repeat);
		} else {
			wrapped[i] = run_ns(skel->progs.tt_bench_wrapped, repeat);
			raw[i] = run_ns(skel->progs.tt_bench_raw, repeat);
		}
		diff[i] = (wrapped[i] - raw[i]) / UPDATES;
	}
	mean_ci90(wrapped, reps, &mw, &hw);
	mean_ci90(raw, reps, &mr, &hr);
	mean_ci90(diff, reps, &md, &hd);
	printf("telemetry wrapper, success path: %d map updates per run, %d runs x %d replicates\n",
	       UPDATES, repeat, reps);
	printf("  raw      %8.1f ns/run  (90%% CI +/- %.1f)\n", mr, hr);
	printf("  wrapped  %8.1f ns/run  (90%% CI +/- %.1f)\n", mw, hw);
	printf("  added    %8.2f ns per wrapped call (90%% CI +/- %.2f)  target <= 2 ns: %s\n", md,
	       hd, md + hd <= 2.0 ? "met" : (md <= 2.0 ? "met (CI crosses)" : "MISSED"));
	free(wrapped);
	free(raw);
	free(diff);
	telemetry_test__destroy(skel);
	return 0;
}
