/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* events_test.bpf.c <-> test_events_ringbuf.c: the program's input and its records. */
#ifndef BPFTEL_EVENTS_TEST_H
#define BPFTEL_EVENTS_TEST_H

struct events_test_args {
	__u32 count;
	__u32 source;
	__u64 flags; /* bpf_ringbuf_output's: BPF_RB_NO_WAKEUP leaves the consumer asleep */
};

struct events_test_record {
	__u32 source;
	__u32 seq;
	__u8 payload[56];
};

_Static_assert(sizeof(struct events_test_record) == 64, "record layout");

#endif /* BPFTEL_EVENTS_TEST_H */
