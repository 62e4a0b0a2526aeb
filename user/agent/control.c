// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "user/common/ctl.h"
#include "user/common/log.h"

struct ctl_client {
	int fd;
	int slot; /* index in clients[] and pending[] */
	bool writing;
	__u64 ticket; /* non-zero while deferred: waiting for __complete() */
	long long deadline_ms;
	char *out;
	size_t out_len, out_off;
	struct bpftel_ctl_frame frame;
};

struct bpftel_ctl_server {
	char *path;
	dev_t dev;
	ino_t ino;
	int listen_fd;
	int epoll_fd;
	bpftel_ctl_handler_fn fn;
	void *ctx;
	struct ctl_client *clients[BPFTEL_CTL_MAX_CLIENTS];
	__u64 next_ticket;
	/* Deferred answers, indexed like clients[]. __complete() fills them from any thread,
	 * so they live apart from clients[] (the loop's alone), under a lock held only to
	 * look at or fill slots: never across I/O or the handler. */
	pthread_mutex_t lock;
	struct ctl_pending {
		__u64 ticket; /* 0: nobody waits in this slot */
		bool done;    /* resp is the answer, for the loop to send */
		json_t *resp;
	} pending[BPFTEL_CTL_MAX_CLIENTS];
	int wake_fd; /* eventfd in epoll_fd: __complete() posted an answer */
	/* accept() failed for want of descriptors or memory: the listening socket is out
	 * of epoll_fd's events until the next tick, since it stays readable with the
	 * connection still queued and would wake the loop at once, for ever. */
	bool accept_paused;
	long long resume_at_ms; /* paused: the tick from which accepting is tried again */
	long long accept_retry_ms;
	bool accept_failing; /* said in the log: not again until an accept succeeds */
};

struct bpftel_ctl_request {
	struct bpftel_ctl_server *srv;
	struct ctl_client *c;
	json_t *req;
	__u64 ticket;
};

static int mkdir_parents(const char *path)
{
	char *dir = strdup(path), *p;
	int err = 0;

	if (!dir)
		return -ENOMEM;
	for (p = dir + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST) {
			err = -errno;
			break;
		}
		*p = '/';
	}
	free(dir);
	return err;
}

int bpftel_ctl_lock(const char *path)
{
	char lock[PATH_MAX];
	int fd, err;

	if (snprintf(lock, sizeof(lock), "%s.lock", path) >= (int)sizeof(lock))
		return -ENAMETOOLONG;
	err = mkdir_parents(path);
	if (err)
		return err;
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		err = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* A socket file at path: live agent -> -EADDRINUSE; stale -> removed; other file -> -EEXIST. */
static int clear_stale(const char *path, const struct sockaddr_un *addr)
{
	struct stat st;
	int fd, err;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	/* Non-blocking: a live agent that is not accepting (its backlog full) would keep a
	 * blocking connect() waiting; it says EAGAIN, and is live. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	err = connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) ? errno : 0;
	close(fd);
	if (!err || err == EAGAIN)
		return -EADDRINUSE;
	if (err != ECONNREFUSED)
		return -err;
	return unlink(path) ? -errno : 0;
}

int bpftel_ctl_server__new(const char *path, bpftel_ctl_handler_fn fn, void *ctx,
			   struct bpftel_ctl_server **out)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct epoll_event ev = {.events = EPOLLIN};
	struct bpftel_ctl_server *srv;
	struct stat st;
	mode_t old_umask;
	int err;

	*out = NULL;
	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);

	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	err = -pthread_mutex_init(&srv->lock, NULL);
	if (err) {
		free(srv);
		return err;
	}
	srv->listen_fd = srv->epoll_fd = srv->wake_fd = -1;
	srv->accept_retry_ms = 1000;
	srv->fn = fn;
	srv->ctx = ctx;

	err = mkdir_parents(path);
	if (!err)
		err = clear_stale(path, &addr);
	if (err)
		goto fail;
	srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->listen_fd < 0) {
		err = -errno;
		goto fail;
	}
	/* Never visible with wider permissions than 0600, not even between bind and chmod. */
	old_umask = umask(0177);
	err = bind(srv->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) ? -errno : 0;
	umask(old_umask);
	if (err)
		goto fail;
	srv->path = strdup(path);
	if (!srv->path || chmod(path, 0600) || stat(path, &st) ||
	    listen(srv->listen_fd, BPFTEL_CTL_MAX_CLIENTS)) {
		err = srv->path ? -errno : -ENOMEM;
		goto fail;
	}
	srv->dev = st.st_dev;
	srv->ino = st.st_ino;

	srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epoll_fd < 0) {
		err = -errno;
		goto fail;
	}
	ev.data.ptr = NULL; /* NULL marks the listening socket */
	if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->listen_fd, &ev)) {
		err = -errno;
		goto fail;
	}
	/* Non-blocking, so that __complete() never waits: a full counter is still readable. */
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ev.data.ptr = srv; /* the server itself marks the wake-up eventfd */
	if (srv->wake_fd < 0 || epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->wake_fd, &ev)) {
		err = -errno;
		goto fail;
	}
	*out = srv;
	return 0;
fail:
	bpftel_ctl_server__free(srv);
	return err;
}

/* Forget the slot's deferred request: a later __complete() for it is -ENOENT. */
static void pending_cancel(struct bpftel_ctl_server *srv, int slot)
{
	struct ctl_pending *p = &srv->pending[slot];
	json_t *resp;

	pthread_mutex_lock(&srv->lock);
	resp = p->done ? p->resp : NULL;
	*p = (struct ctl_pending){0};
	pthread_mutex_unlock(&srv->lock);
	json_decref(resp);
}

static void client_close(struct bpftel_ctl_server *srv, struct ctl_client *c)
{
	if (c->ticket)
		pending_cancel(srv, c->slot);
	srv->clients[c->slot] = NULL;
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	free(c);
}

void bpftel_ctl_server__free(struct bpftel_ctl_server *srv)
{
	struct stat st;
	int i;

	if (!srv)
		return;
	for (i = 0; i < BPFTEL_CTL_MAX_CLIENTS; i++) {
		if (srv->clients[i])
			client_close(srv, srv->clients[i]);
	}
	if (srv->epoll_fd >= 0)
		close(srv->epoll_fd);
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	if (srv->wake_fd >= 0)
		close(srv->wake_fd);
	pthread_mutex_destroy(&srv->lock);
	/* Remove the socket only if it is still ours, not a successor's. */
	if (srv->path && !stat(srv->path, &st) && st.st_dev == srv->dev && st.st_ino == srv->ino)
		unlink(srv->path);
	free(srv->path);
	free(srv);
}

int bpftel_ctl_server__fd(const struct bpftel_ctl_server *srv)
{
	return srv->epoll_fd;
}

/* Queue the answer and switch the client to writing. Takes the reference of resp. */
static void client_answer(struct bpftel_ctl_server *srv, struct ctl_client *c, json_t *resp)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
	char *text;

	if (!resp)
		resp = bpftel_ctl_error("internal error: command produced no answer");
	if (!json_object_get(resp, "ok"))
		json_object_set_new(resp, "ok", json_true());
	text = json_dumps(resp, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(resp);
	if (!text) {
		client_close(srv, c);
		return;
	}
	c->out_len = strlen(text) + 1;
	c->out = text;
	c->out[c->out_len - 1] = '\n'; /* replaces the NUL; out is not a C string any more */
	c->out_off = 0;
	c->writing = true;
	/* A fresh window to read the answer: a command may take longer than the request's
	 * (a module restart loads programs), and the answer must not be dropped for it. */
	c->deadline_ms = bpftel_mono_ms() + BPFTEL_CTL_TIMEOUT_MS;
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

const char *bpftel_ctl_request__cmd(const struct bpftel_ctl_request *r)
{
	return json_string_value(json_object_get(r->req, "cmd"));
}

json_t *bpftel_ctl_request__json(const struct bpftel_ctl_request *r)
{
	return r->req;
}

__u64 bpftel_ctl_request__defer(struct bpftel_ctl_request *r)
{
	struct bpftel_ctl_server *srv = r->srv;

	if (r->ticket)
		return r->ticket;
	r->ticket = ++srv->next_ticket;
	/* Waiting from now on, not from the handler's return: its worker may answer first. */
	pthread_mutex_lock(&srv->lock);
	srv->pending[r->c->slot] = (struct ctl_pending){.ticket = r->ticket};
	pthread_mutex_unlock(&srv->lock);
	return r->ticket;
}

/*
 * Park the client until its answer comes. An empty event mask: epoll still reports
 * EPOLLHUP (the peer closed; AF_UNIX reports it only when both directions are shut) and
 * EPOLLERR. Not EPOLLRDHUP nor a read of 0: shutting the write side after the request
 * is how a client may end it (user/common/ctl.h), and it then waits for the answer.
 */
static void client_defer(struct bpftel_ctl_server *srv, struct ctl_client *c, __u64 ticket)
{
	struct epoll_event ev = {.events = 0, .data.ptr = c};

	c->ticket = ticket;
	c->deadline_ms = bpftel_mono_ms() + BPFTEL_CTL_DEFER_TIMEOUT_MS;
	if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev))
		client_close(srv, c);
}

static void client_request(struct bpftel_ctl_server *srv, struct ctl_client *c)
{
	struct bpftel_ctl_request r = {.srv = srv, .c = c};
	char err[256];
	json_t *resp;

	r.req = bpftel_ctl_parse_request(c->frame.buf, c->frame.len, err, sizeof(err));
	if (!r.req) {
		pr_debug("control: %s", err);
		client_answer(srv, c, bpftel_ctl_error("%s", err));
		return;
	}
	resp = srv->fn(&r, srv->ctx);
	json_decref(r.req);
	if (r.ticket && !resp) {
		client_defer(srv, c, r.ticket);
		return;
	}
	if (r.ticket)
		pending_cancel(srv, c->slot); /* deferred, then answered after all */
	client_answer(srv, c, resp);
}

static void client_read(struct bpftel_ctl_server *srv, struct ctl_client *c)
{
	char buf[4096];
	ssize_t n;

	for (;;) {
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				client_close(srv, c);
			return;
		}
		if (n == 0) {
			/* Write side shut: what came so far is the request. */
			if (c->frame.len)
				client_request(srv, c);
			else
				client_close(srv, c);
			return;
		}
		switch (bpftel_ctl_frame__feed(&c->frame, buf, n)) {
		case BPFTEL_CTL_FRAME_MORE:
			continue;
		case BPFTEL_CTL_FRAME_DONE:
			client_request(srv, c);
			return;
		case BPFTEL_CTL_FRAME_TOO_BIG:
			client_answer(srv, c,
				      bpftel_ctl_error("request larger than %d bytes",
						       BPFTEL_CTL_REQ_MAX));
			return;
		}
	}
}

static void client_write(struct bpftel_ctl_server *srv, struct ctl_client *c)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				client_close(srv, c);
			return;
		}
		c->out_off += n;
	}
	client_close(srv, c);
}

/* The clients wait in the listen queue (their own timeouts run) until a tick a second
 * later tries again: the loop ticks after every wake-up, and a tick that resumed at
 * once would have the queued client wake it again at once, a loop spinning for as
 * long as the agent is out of fds. */
static void pause_accepting(struct bpftel_ctl_server *srv, int err)
{
	struct epoll_event ev = {.events = 0};

	if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, srv->listen_fd, &ev))
		return;
	srv->accept_paused = true;
	srv->resume_at_ms = bpftel_mono_ms() + srv->accept_retry_ms;
	if (!srv->accept_failing) /* once until a client is taken again */
		pr_warn("control: cannot accept a client (%s): trying again every second",
			strerror(err));
	srv->accept_failing = true;
}

static void resume_accepting(struct bpftel_ctl_server *srv, long long now)
{
	struct epoll_event ev = {.events = EPOLLIN};

	if (srv->accept_paused && now >= srv->resume_at_ms &&
	    !epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, srv->listen_fd, &ev))
		srv->accept_paused = false;
}

static void accept_clients(struct bpftel_ctl_server *srv)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct ctl_client *c;
	int fd, slot;

	for (;;) {
		fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			       errno == ENOMEM)) {
			pause_accepting(srv, errno);
			return;
		}
		if (fd < 0)
			return;
		srv->accept_failing = false;
		for (slot = 0; slot < BPFTEL_CTL_MAX_CLIENTS && srv->clients[slot]; slot++)
			;
		c = slot < BPFTEL_CTL_MAX_CLIENTS ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			/* Said, not only closed: the client reads it (bpftel_ctl_call),
			 * whether or not its request went. One non-blocking send, which
			 * an empty socket's buffer takes whole. */
			bool full = slot == BPFTEL_CTL_MAX_CLIENTS;
			char busy[96];
			int len = full ? snprintf(busy, sizeof(busy),
						  "{\"ok\": false, \"error\": \"the agent serves "
						  "%d clients at once: try again\"}\n",
						  BPFTEL_CTL_MAX_CLIENTS)
				       : snprintf(busy, sizeof(busy),
						  "{\"ok\": false, \"error\": \"the agent is out "
						  "of memory: try again\"}\n");

			if (send(fd, busy, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				pr_debug("control: cannot tell a refused client why: %s",
					 strerror(errno));
			pr_warn("control: %s, connection refused",
				full ? "too many clients" : "out of memory");
			close(fd);
			continue;
		}
		c->fd = fd;
		c->slot = slot;
		c->deadline_ms = bpftel_mono_ms() + BPFTEL_CTL_TIMEOUT_MS;
		ev.data.ptr = c;
		if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(c);
			continue;
		}
		srv->clients[slot] = c;
	}
}

/* Send the answers __complete() posted since the last wake-up. */
static void send_completed(struct bpftel_ctl_server *srv)
{
	json_t *resp[BPFTEL_CTL_MAX_CLIENTS];
	bool done[BPFTEL_CTL_MAX_CLIENTS];
	struct ctl_pending *p;
	eventfd_t count;
	int i;

	/* Reset the wake-up before looking: an answer posted after the look wakes us again. */
	eventfd_read(srv->wake_fd, &count);
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < BPFTEL_CTL_MAX_CLIENTS; i++) {
		p = &srv->pending[i];
		done[i] = p->done;
		resp[i] = p->resp;
		if (p->done)
			*p = (struct ctl_pending){0};
	}
	pthread_mutex_unlock(&srv->lock);
	/* Each taken answer's client is still connected: closing a deferred client clears
	 * its slot first, under lock. */
	for (i = 0; i < BPFTEL_CTL_MAX_CLIENTS; i++) {
		if (!done[i])
			continue;
		srv->clients[i]->ticket = 0;
		client_answer(srv, srv->clients[i], resp[i]);
	}
}

void bpftel_ctl_server__process(struct bpftel_ctl_server *srv)
{
	struct epoll_event evs[16];
	struct ctl_client *c;
	bool woken = false;
	int n, i;

	n = epoll_wait(srv->epoll_fd, evs, 16, 0);
	for (i = 0; i < n; i++) {
		c = evs[i].data.ptr;
		if (!c) {
			accept_clients(srv);
		} else if ((void *)c == srv) {
			woken = true;
		} else if (c->ticket) {
			pr_debug("control: client hung up before its deferred answer");
			client_close(srv, c);
		} else if (c->writing) {
			client_write(srv, c);
		} else {
			client_read(srv, c);
		}
	}
	/* After the batch: sending may close a client whose event is still in evs[]. */
	if (woken)
		send_completed(srv);
}

int bpftel_ctl_server__complete(struct bpftel_ctl_server *srv, __u64 ticket, json_t *resp)
{
	struct ctl_pending *p;
	int i, err = -ENOENT;

	pthread_mutex_lock(&srv->lock);
	for (i = 0; ticket && i < BPFTEL_CTL_MAX_CLIENTS; i++) {
		p = &srv->pending[i];
		if (p->ticket == ticket && !p->done) {
			p->done = true;
			p->resp = resp;
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	if (err) {
		json_decref(resp);
		return err;
	}
	/* Cannot block (EFD_NONBLOCK); EAGAIN leaves it readable, which is all we need. */
	eventfd_write(srv->wake_fd, 1);
	return 0;
}

bool bpftel_ctl_server__waiting(struct bpftel_ctl_server *srv, __u64 ticket)
{
	bool waiting = false;
	int i;

	pthread_mutex_lock(&srv->lock);
	for (i = 0; ticket && i < BPFTEL_CTL_MAX_CLIENTS; i++)
		waiting |= srv->pending[i].ticket == ticket && !srv->pending[i].done;
	pthread_mutex_unlock(&srv->lock);
	return waiting;
}

void bpftel_ctl_server__set_accept_retry_ms(struct bpftel_ctl_server *srv, long long ms)
{
	srv->accept_retry_ms = ms;
	if (srv->accept_paused)
		srv->resume_at_ms = bpftel_mono_ms() + ms;
}

void bpftel_ctl_server__tick(struct bpftel_ctl_server *srv)
{
	long long now = bpftel_mono_ms();
	int i;

	resume_accepting(srv, now);
	for (i = 0; i < BPFTEL_CTL_MAX_CLIENTS; i++) {
		if (srv->clients[i] && now > srv->clients[i]->deadline_ms) {
			pr_debug("control: client timed out%s",
				 srv->clients[i]->ticket ? " waiting for a deferred answer" : "");
			client_close(srv, srv->clients[i]);
		}
	}
}
