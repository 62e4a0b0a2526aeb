/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Control-socket protocol between bpftel-agent and the bpftel CLI.
 *
 * A Unix stream socket (default BPFTEL_CTL_SOCKET_DEFAULT, mode 0600). One exchange per
 * connection: the client writes one JSON object followed by '\n' (or shuts down its
 * write side), the agent answers with one JSON object followed by '\n' and closes.
 * Requests are {"cmd": "<name>", ...}; answers are {"ok": true, ...} or
 * {"ok": false, "error": "<one line>"}. Requests over BPFTEL_CTL_REQ_MAX bytes are
 * refused. Keeping to one object each way keeps the protocol stable and scriptable
 * (socat, python) without a client library.
 */
#ifndef BPFTEL_CTL_H
#define BPFTEL_CTL_H

#include <stddef.h>
#include <jansson.h>
#include <linux/types.h>

#define BPFTEL_CTL_SOCKET_DEFAULT "/run/bpftel/bpftel.sock"
#define BPFTEL_CTL_REQ_MAX	  (64 * 1024)
#define BPFTEL_CTL_RESP_MAX	  (16 * 1024 * 1024)
#define BPFTEL_CTL_TIMEOUT_MS	  5000
/* The CLI's wait for commands that load BPF programs (module start/restart): seconds,
 * more under sanitizers or a loaded machine. */
#define BPFTEL_CTL_SLOW_TIMEOUT_MS 120000

/* CLOCK_MONOTONIC in milliseconds: deadlines of the control socket and the agent. */
long long bpftel_mono_ms(void);
/* The same in nanoseconds: bpf_ktime_get_ns()'s clock, what BPF records stamp. */
__u64 bpftel_mono_ns(void);

/* Request framing, fed bytes as they arrive (server side). */
struct bpftel_ctl_frame {
	char buf[BPFTEL_CTL_REQ_MAX];
	size_t len;
};

enum bpftel_ctl_frame_state {
	BPFTEL_CTL_FRAME_MORE = 0,    /* no '\n' yet: feed more */
	BPFTEL_CTL_FRAME_DONE = 1,    /* a full line is in buf[0..len) */
	BPFTEL_CTL_FRAME_TOO_BIG = 2, /* over BPFTEL_CTL_REQ_MAX without a '\n' */
};

/* Append n bytes; stops at the first '\n'. Bytes after it are ignored. */
enum bpftel_ctl_frame_state bpftel_ctl_frame__feed(struct bpftel_ctl_frame *f, const char *data,
						   size_t n);

/*
 * Parse a framed request. Returns the command name's JSON object (new reference) or
 * NULL with a one-line reason in err.
 */
json_t *bpftel_ctl_parse_request(const char *buf, size_t len, char *err, size_t errlen);

/*
 * A JSON string from bytes another process chose (paths, comms, client input), escaped
 * as escape.h says (invalid UTF-8 and control characters as \xNN, backslash as \\).
 * Never NULL unless out of memory.
 */
json_t *bpftel_json_str(const char *s);

/* Build {"ok": false, "error": msg}. */
json_t *bpftel_ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Client: connect to path, send req, wait for the answer (timeout_ms for the whole
 * exchange). Returns 0 and *resp (new reference), or a negative errno with a one-line
 * reason in err: -ENOENT/-ECONNREFUSED no agent, -EACCES no permission, -ETIMEDOUT,
 * -EPROTO malformed answer.
 */
int bpftel_ctl_call(const char *path, json_t *req, int timeout_ms, json_t **resp, char *err,
		    size_t errlen);

#endif /* BPFTEL_CTL_H */
