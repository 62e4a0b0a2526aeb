// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "escape.h"

enum bpftel_ctl_frame_state bpftel_ctl_frame__feed(struct bpftel_ctl_frame *f, const char *data,
						   size_t n)
{
	const char *nl = memchr(data, '\n', n);
	size_t take = nl ? (size_t)(nl - data) : n;

	if (take > sizeof(f->buf) - f->len)
		return BPFTEL_CTL_FRAME_TOO_BIG;
	memcpy(f->buf + f->len, data, take);
	f->len += take;
	if (nl)
		return BPFTEL_CTL_FRAME_DONE;
	return f->len == sizeof(f->buf) ? BPFTEL_CTL_FRAME_TOO_BIG : BPFTEL_CTL_FRAME_MORE;
}

json_t *bpftel_ctl_parse_request(const char *buf, size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *req, *cmd;

	req = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req) {
		snprintf(err, errlen, "malformed request: %s (column %d)", jerr.text, jerr.column);
		return NULL;
	}
	if (!json_is_object(req)) {
		snprintf(err, errlen, "malformed request: expected a JSON object");
		goto fail;
	}
	cmd = json_object_get(req, "cmd");
	if (!json_is_string(cmd) || !json_string_length(cmd)) {
		snprintf(err, errlen, "malformed request: \"cmd\" must be a non-empty string");
		goto fail;
	}
	return req;
fail:
	json_decref(req);
	return NULL;
}

json_t *bpftel_json_str(const char *s)
{
	json_t *str;
	char *esc;

	if (!bpftel_escape_needed(s, BPFTEL_ESC_BACKSLASH))
		return json_string(s);
	esc = bpftel_escape_dup(s, BPFTEL_ESC_BACKSLASH);
	if (!esc)
		return NULL;
	str = json_string(esc);
	free(esc);
	return str;
}

json_t *bpftel_ctl_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:b, s:o}", "ok", 0, "error", bpftel_json_str(msg));
}

__u64 bpftel_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

long long bpftel_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline; 0 when ready, -ETIMEDOUT or -errno otherwise. */
static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	long long left;
	int n;

	for (;;) {
		left = deadline - bpftel_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const char *buf, size_t len, long long deadline)
{
	ssize_t n;
	int err;

	while (len) {
		err = wait_fd(fd, POLLOUT, deadline);
		if (err)
			return err;
		n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* Read until '\n' or EOF into a growing buffer; returns length or -errno. */
static ssize_t recv_line(int fd, char **out, long long deadline)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *tmp;
	ssize_t n;
	int err;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap >= BPFTEL_CTL_RESP_MAX) {
				free(buf);
				return -EMSGSIZE;
			}
			tmp = realloc(buf, cap * 2);
			if (!tmp) {
				free(buf);
				return -ENOMEM;
			}
			buf = tmp;
			cap *= 2;
		}
		err = wait_fd(fd, POLLIN, deadline);
		if (err) {
			free(buf);
			return err;
		}
		n = recv(fd, buf + len, cap - len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			err = -errno;
			free(buf);
			return err;
		}
		if (n == 0 || memchr(buf + len, '\n', n)) {
			len += n;
			break;
		}
		len += n;
	}
	*out = buf;
	return len;
}

/*
 * Connect by the deadline. A listening socket whose backlog is full (an agent stopped,
 * or not accepting) would keep a blocking connect() waiting for ever: the wait for
 * room is bounded by SO_SNDTIMEO, which AF_UNIX connect() honours (then EAGAIN).
 */
static int connect_by(int fd, const struct sockaddr_un *addr, long long deadline)
{
	struct timeval tv = {0}, none = {0};
	long long left;
	int ret;

	do {
		left = deadline - bpftel_mono_ms(); /* again after a signal: what is left */
		if (left < 1)
			left = 1;
		tv.tv_sec = left / 1000;
		tv.tv_usec = (left % 1000) * 1000;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
			return -errno;
		ret = connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) ? -errno : 0;
		if (ret == -EAGAIN)
			ret = -ETIMEDOUT;
	} while (ret == -EINTR && bpftel_mono_ms() < deadline);
	if (!ret && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)))
		ret = -errno;
	return ret;
}

int bpftel_ctl_call(const char *path, json_t *req, int timeout_ms, json_t **resp, char *err,
		    size_t errlen)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	long long deadline = bpftel_mono_ms() + timeout_ms;
	char *line = NULL, *reply = NULL;
	json_error_t jerr;
	int fd, ret, sent;
	ssize_t n;

	*resp = NULL;
	if (strlen(path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "socket path '%s' is longer than %zu bytes", path,
			 sizeof(addr.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, path);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return ret;
	}
	ret = connect_by(fd, &addr, deadline);
	if (ret) {
		if (ret == -ETIMEDOUT)
			snprintf(err, errlen,
				 "cannot connect to %s: timed out (the agent is not taking clients)",
				 path);
		else
			snprintf(err, errlen, "cannot connect to %s: %s", path, strerror(-ret));
		goto out;
	}

	line = json_dumps(req, JSON_COMPACT);
	if (!line) {
		ret = -ENOMEM;
		snprintf(err, errlen, "cannot encode request");
		goto out;
	}
	ret = send_all(fd, line, strlen(line), deadline);
	if (!ret)
		ret = send_all(fd, "\n", 1, deadline);
	/* Closed before our request went: an agent refusing a client says why first
	 * (too many), and that answer is read as any other. */
	if (ret && ret != -EPIPE && ret != -ECONNRESET) {
		snprintf(err, errlen, "sending to %s: %s", path, strerror(-ret));
		goto out;
	}
	sent = ret;
	n = recv_line(fd, &reply, deadline);
	if (sent && n <= 0) {
		ret = sent;
		snprintf(err, errlen, "sending to %s: %s", path, strerror(-ret));
		goto out;
	}
	if (n < 0) {
		ret = n;
		snprintf(err, errlen, "reading answer from %s: %s", path, strerror(-ret));
		goto out;
	}
	*resp = json_loadb(reply, n, 0, &jerr);
	if (!*resp || !json_is_object(*resp)) {
		json_decref(*resp);
		*resp = NULL;
		ret = -EPROTO;
		snprintf(err, errlen, "malformed answer from %s: %s", path,
			 n ? jerr.text : "connection closed without an answer");
		goto out;
	}
	ret = 0;
out:
	free(reply);
	free(line);
	close(fd);
	return ret;
}
