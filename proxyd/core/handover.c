/* A rolling upgrade's hand-over of live sessions from the old process to
 * the new one on the same machine (handover.h): the old side's socket,
 * the records and the passing of quiet sessions by its workers; the new
 * side's connect and the adoption of each session by one of its workers. */
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "log.h"
#include "metrics.h"
#include "session.h"
#include "session_int.h"
#include "worker.h"

/* New session ids start this far past the old process's next one: it
 * accepts until the new one said READY, a few sessions at most. */
#define PX_HO_ID_GAP		(1u << 20)

/* ---- records ---------------------------------------------------------- */

static void
px_ho_head_set(struct px_ho_head *h, enum px_ho_type type, size_t len)
{
	h->magic = PX_HO_MAGIC;
	h->version = PX_HO_VERSION;
	h->type = (uint16_t)type;
	h->len = (uint32_t)len;
	h->pad = 0;
}

/* A record with up to two descriptors; 0, or -1 with errno. */
static int
px_ho_send(int fd, const void *rec, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr	cm;
		char		buf[CMSG_SPACE(2 * sizeof(int))];
	} u;
	struct iovec iov = { .iov_base = (void *)rec, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t n;

	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	if ((size_t)n != len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

/* A record into buf (size) and up to two descriptors into fds (-1 where
 * none came; extra ones are closed). Its length, 0 at the end, -1 with
 * errno. */
static ssize_t
px_ho_recv(int fd, void *buf, size_t size, int fds[2])
{
	union {
		struct cmsghdr	cm;
		char		buf[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;
	ssize_t n;
	size_t i, k;

	fds[0] = fds[1] = -1;
	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
		int got[4];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (k > 4)
			k = 4;
		memcpy(got, CMSG_DATA(cm), k * sizeof(int));
		for (i = 0; i < k; i++) {
			if (i < 2 && fds[i] == -1)
				fds[i] = got[i];
			else
				close(got[i]);
		}
	}
	if (n != 0 && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
		for (i = 0; i < 2; i++)
			if (fds[i] != -1)
				close(fds[i]);
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

static bool
px_ho_valid(const void *buf, ssize_t n, enum px_ho_type type, size_t len)
{
	const struct px_ho_head *h = buf;

	return n >= (ssize_t)sizeof(*h) && h->magic == PX_HO_MAGIC &&
	    h->version == PX_HO_VERSION && h->type == type &&
	    (size_t)n == len && h->len == len;
}

static void
px_ho_abort_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd == -1)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static socklen_t
px_ho_addr(long pid, struct sockaddr_un *sun)
{
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	/* Abstract (sun_path[0] is '\0'): the daemon runs as <user> and
	 * could neither make nor remove a file in root's run directory;
	 * the name dies with the process, and it is per network namespace,
	 * as the daemon's addresses are. */
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
	    "proxyd-handover.%ld", pid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    (size_t)n);
}

/* ---- the old process --------------------------------------------------- */

static struct {
	struct event_base	*base;
	int			 lfd;
	struct event		*lev;
	int			 admin_fd;
	void			(*ready)(void *);
	void			(*gone)(void *);
	int			 retired;	/* a dead successor's socket */
	void			*arg;
	int			 cfd;		/* the successor, or -1 */
	struct event		*cev;
	uid_t			 own_uid_ok;	/* besides root; 0: root only */
	pid_t			 peer_pid;	/* cfd's, by SO_PEERCRED */
	uint64_t		 pid;
	bool			 is_ready;
	bool			 done_sent;	/* DONE: nothing more comes */
	bool			 acked;		/* its DONE back: it has them */
} px_ho_srv = { .lfd = -1, .cfd = -1, .retired = -1 };

/* What workers send on; -1 once the successor is gone. */
static atomic_int px_ho_out = -1;

static void
px_ho_srv_drop(const char *why)
{
	if (px_ho_srv.cev != NULL) {
		event_free(px_ho_srv.cev);
		px_ho_srv.cev = NULL;
	}
	if (!px_ho_srv.is_ready) {
		px_log(LOG_WARNING, 0, "handover failed: %s; serving on", why);
		close(px_ho_srv.cfd);
		px_ho_srv.cfd = -1;
		return;
	}
	/* It went away after it listened: this process accepts again (the
	 * sessions it took are lost with it). A worker may be inside a
	 * send on the descriptor: it stays open until the next successor's
	 * failure or px_handover_serve_end(). */
	atomic_store(&px_ho_out, -1);
	if (px_ho_srv.retired != -1)
		close(px_ho_srv.retired);
	px_ho_srv.retired = px_ho_srv.cfd;
	px_ho_srv.cfd = -1;
	px_ho_srv.is_ready = false;
	px_ho_srv.done_sent = px_ho_srv.acked = false;
	px_log(LOG_WARNING, 0, "handover failed: %s after it listened; this "
	    "process takes over again", why);
	px_ho_srv.gone(px_ho_srv.arg);
}

static void
px_ho_srv_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_ho_hello msg, out;
	int fds[2], afd[1];
	ssize_t n;

	(void)what; (void)arg;
	n = px_ho_recv((int)fd, &msg, sizeof(msg), fds);
	if (fds[0] != -1)
		close(fds[0]);
	if (fds[1] != -1)
		close(fds[1]);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		px_ho_srv_drop(px_ho_srv.is_ready ? "the new process went away" :
		    "the new process went away before it listened");
		return;
	}
	if (n >= (ssize_t)sizeof(struct px_ho_head) &&
	    msg.h.magic == PX_HO_MAGIC && msg.h.version != PX_HO_VERSION) {
		memset(&out, 0, sizeof(out));
		px_ho_head_set(&out.h, PX_HO_REFUSE, sizeof(out));
		(void)px_ho_send((int)fd, &out, sizeof(out), NULL, 0);
		px_log(LOG_WARNING, 0, "handover refused: the new process "
		    "speaks version %u, this one %u", (unsigned)msg.h.version,
		    (unsigned)PX_HO_VERSION);
		px_ho_srv_drop("another version");
		return;
	}
	if (px_ho_srv.pid == 0 && px_ho_valid(&msg, n, PX_HO_HELLO,
	    sizeof(msg))) {
		if (msg.pid != (uint64_t)px_ho_srv.peer_pid) {
			px_ho_srv_drop("its HELLO names another pid");
			return;
		}
		px_ho_srv.pid = msg.pid;
		memset(&out, 0, sizeof(out));
		px_ho_head_set(&out.h, PX_HO_WELCOME, sizeof(out));
		out.pid = (uint64_t)getpid();
		out.next_id = px_session_ids_next();
		afd[0] = px_ho_srv.admin_fd;
		if (px_ho_send((int)fd, &out, sizeof(out), afd,
		    afd[0] != -1 ? 1 : 0) == -1) {
			px_ho_srv_drop(strerror(errno));
			return;
		}
		px_log(LOG_INFO, 0, "handover: pid %llu connected; waiting for "
		    "it to listen", (unsigned long long)msg.pid);
		return;
	}
	if (px_ho_srv.is_ready && px_ho_srv.done_sent &&
	    px_ho_valid(&msg, n, PX_HO_DONE, sizeof(msg))) {
		px_ho_srv.acked = true;
		return;
	}
	if (px_ho_srv.pid != 0 && !px_ho_srv.is_ready &&
	    px_ho_valid(&msg, n, PX_HO_READY, sizeof(msg))) {
		px_ho_srv.is_ready = true;
		atomic_store(&px_ho_out, (int)fd);
		px_log(LOG_INFO, 0, "handover: pid %llu listens; no longer "
		    "accepting, passing the quiet sessions to it",
		    (unsigned long long)px_ho_srv.pid);
		px_ho_srv.ready(px_ho_srv.arg);
		return;
	}
	px_ho_srv_drop("a record out of turn");
}

/* pid runs a proxyd binary, as far as /proc tells: its executable's name
 * (readable when we are root), else its command name (an unprivileged
 * process may not read a root process's exe link); true when /proc says
 * nothing. Root could fake either: this guards against a mistake (some
 * root tool on the socket), the uid check against an attack. */
static void
px_ho_copy(char *dst, size_t size, const char *src)
{
	size_t k = strlen(src);

	if (k >= size)
		k = size - 1;
	memcpy(dst, src, k);
	dst[k] = '\0';
}

static bool
px_ho_peer_is_proxyd(pid_t pid, char *name, size_t size)
{
	char path[64], buf[PATH_MAX];
	const char *base;
	ssize_t n;
	int fd;

	px_ho_copy(name, size, "?");
	snprintf(path, sizeof(path), "/proc/%ld/exe", (long)pid);
	if ((n = readlink(path, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		base = strrchr(buf, '/') != NULL ? strrchr(buf, '/') + 1 : buf;
		px_ho_copy(name, size, buf);
		return strncmp(base, "proxyd", 6) == 0;
	}
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	px_ho_copy(name, size, buf);
	return strncmp(buf, "proxyd", 6) == 0;
}

static void
px_ho_srv_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char exe[128];
	int c;

	(void)what; (void)arg;
	if ((c = accept4((int)fd, NULL, NULL, SOCK_NONBLOCK |
	    SOCK_CLOEXEC)) == -1)
		return;
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) == -1) {
		px_log(LOG_WARNING, 0, "handover: connection refused: "
		    "SO_PEERCRED: %s", strerror(errno));
		close(c);
		return;
	}
	/* Root: the new process connects before it drops to <user>. Our
	 * own uid only if we never were root (then no one else could
	 * follow us); once we dropped root, a process of our <user> is
	 * anybody who got that uid, and would get the admin listener and
	 * every client's socket. */
	if (cr.uid != 0 && (px_ho_srv.own_uid_ok == 0 ||
	    cr.uid != px_ho_srv.own_uid_ok)) {
		px_log(LOG_WARNING, 0, "handover: connection refused: pid %ld "
		    "runs as uid %ld, not root", (long)cr.pid, (long)cr.uid);
		close(c);
		return;
	}
	if (!px_ho_peer_is_proxyd(cr.pid, exe, sizeof(exe))) {
		px_log(LOG_WARNING, 0, "handover: connection refused: pid %ld "
		    "runs %s, not a proxyd", (long)cr.pid, exe);
		close(c);
		return;
	}
	/* One successor at a time. */
	if (px_ho_srv.cfd != -1) {
		px_log(LOG_WARNING, 0, "handover: connection refused (one is "
		    "under way)");
		close(c);
		return;
	}
	px_ho_srv.cfd = c;
	px_ho_srv.peer_pid = cr.pid;
	px_ho_srv.pid = 0;
	if ((px_ho_srv.cev = event_new(px_ho_srv.base, c, EV_READ | EV_PERSIST,
	    px_ho_srv_read_cb, NULL)) == NULL ||
	    event_add(px_ho_srv.cev, NULL) == -1)
		px_ho_srv_drop("out of memory");
}

int
px_handover_serve(struct event_base *base, int admin_fd, bool was_root,
    void (*ready)(void *arg), void (*gone)(void *arg), void *arg)
{
	struct sockaddr_un sun;
	socklen_t len = px_ho_addr((long)getpid(), &sun);

	px_ho_srv.base = base;
	px_ho_srv.own_uid_ok = was_root ? 0 : geteuid();
	px_ho_srv.admin_fd = admin_fd;
	px_ho_srv.ready = ready;
	px_ho_srv.gone = gone;
	px_ho_srv.arg = arg;
	if ((px_ho_srv.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1 ||
	    bind(px_ho_srv.lfd, (struct sockaddr *)&sun, len) == -1 ||
	    listen(px_ho_srv.lfd, 4) == -1 ||
	    (px_ho_srv.lev = event_new(base, px_ho_srv.lfd,
	    EV_READ | EV_PERSIST, px_ho_srv_accept_cb, NULL)) == NULL ||
	    event_add(px_ho_srv.lev, NULL) == -1) {
		px_log(LOG_WARNING, 0, "handover socket: %s; upgrades will "
		    "drain instead", strerror(errno));
		return -1;
	}
	return 0;
}

void
px_handover_drain(void)
{
	px_workers_command(PX_CMD_HANDOVER);
}

static void
px_ho_counts(uint64_t *handed, uint64_t *drained)
{
	unsigned i;

	*handed = *drained = 0;
	for (i = 0; i < px_workers_count(); i++) {
		*handed += atomic_load(&px_worker_get(i)->ho_handed);
		*drained += atomic_load(&px_worker_get(i)->ho_drained);
	}
}

/* DONE with the counts: after every session's record (each was sent
 * before its session ended here). */
static void
px_ho_send_done(void)
{
	struct px_ho_hello done;

	if (px_ho_srv.done_sent || atomic_load(&px_ho_out) == -1)
		return;
	memset(&done, 0, sizeof(done));
	px_ho_head_set(&done.h, PX_HO_DONE, sizeof(done));
	done.pid = (uint64_t)getpid();
	px_ho_counts(&done.handed, &done.drained);
	if (px_ho_send(px_ho_srv.cfd, &done, sizeof(done), NULL, 0) == 0)
		px_ho_srv.done_sent = true;
}

bool
px_handover_finished(void)
{
	px_ho_send_done();
	return px_ho_srv.acked;
}

void
px_handover_resume(void)
{
	px_workers_command(PX_CMD_RESUME);
}

void
px_handover_serve_end(void)
{
	uint64_t handed, drained;

	if (px_ho_srv.lev != NULL)
		event_free(px_ho_srv.lev);
	if (px_ho_srv.lfd != -1)
		close(px_ho_srv.lfd);
	px_ho_srv.lev = NULL;
	px_ho_srv.lfd = -1;
	if (px_ho_srv.retired != -1)
		close(px_ho_srv.retired);
	px_ho_srv.retired = -1;
	if (!px_ho_srv.is_ready) {
		if (px_ho_srv.cfd != -1)
			px_ho_srv_drop("this process stops");
		return;
	}
	/* (The grace ran out with sessions left: they ended here.) */
	px_ho_send_done();
	px_ho_counts(&handed, &drained);
	px_log(LOG_INFO, 0, "handover sessions=%llu drained=%llu (to pid %llu)",
	    (unsigned long long)handed, (unsigned long long)drained,
	    (unsigned long long)px_ho_srv.pid);
	if (px_ho_srv.cev != NULL)
		event_free(px_ho_srv.cev);
	px_ho_srv.cev = NULL;
	close(px_ho_srv.cfd);
	px_ho_srv.cfd = -1;
	atomic_store(&px_ho_out, -1);
}

/* ---- the old process's workers ------------------------------------------ */

/* A driver analyser's client conn holds no byte and no TLS. */
static bool
px_ho_client_quiet(const struct px_session *s)
{
	const struct px_conn *c = &s->dconn[0];

	return s->dconn_open[0] && c->tf == NULL && c->tf_next == NULL &&
	    !c->shut && !c->shut_pending && c->in != NULL &&
	    evbuffer_get_length(c->in) == 0 && c->out != NULL &&
	    evbuffer_get_length(c->out) == 0;
}

/* The session can change processes now: its relay holds no byte, its
 * analyser is at a point it can leave (its state is its relay alone, or
 * handover_save wrote it into r), and nothing else is attached (TLS, an
 * open data channel, a final reply). A kept data
 * listener (FTP passive) closes with the session here: the analyser
 * opens another for its next channel. */
static bool
px_ho_quiet(struct px_session *s, struct px_ho_session *r)
{
	const struct px_analyser *a = s->svc->analyser;
	const struct px_service *svc = s->svc;
	bool driver = a->driver != NULL;
	ssize_t n;

	if (s->state != PX_SS_RELAY || !a->handover || s->finishing ||
	    s->chan_host.list != NULL ||
	    (s->chan_host.listeners != NULL && a->handover_save == NULL) ||
	    s->hello_rest != NULL || svc->tls_client != NULL ||
	    svc->tls_server != NULL || s->relay_on == driver ||
	    (driver ? !px_ho_client_quiet(s) || a->handover_save == NULL :
	    s->dconn_open[0] || s->dconn_open[1] || !px_relay_quiet(s->relay)))
		return false;
	r->an_len = 0;
	r->nsock = driver ? 1 : 2;
	if (a->handover_save == NULL)
		return true;
	if ((n = a->handover_save(s, s->an_state, r->an_state,
	    sizeof(r->an_state))) < 0 || (size_t)n > sizeof(r->an_state) ||
	    s->state != PX_SS_RELAY || (driver && px_drv_server_fd(s) != -1))
		return false;
	r->an_len = (uint32_t)n;
	return true;
}

/* The record of s, all but the analyser's part (px_ho_quiet's). */
static void
px_ho_record(const struct px_session *s, struct px_ho_session *r)
{
	uint32_t an_len = r->an_len;
	uint8_t nsock = r->nsock;

	memset(r, 0, offsetof(struct px_ho_session, an_len));
	r->an_len = an_len;
	r->nsock = nsock;
	px_ho_head_set(&r->h, PX_HO_SESSION, sizeof(*r));
	snprintf(r->service, sizeof(r->service), "%s", s->svc->name);
	snprintf(r->analyser, sizeof(r->analyser), "%s",
	    s->svc->analyser->name);
	r->id = s->id;
	r->bytes[0] = s->bytes[0];
	r->bytes[1] = s->bytes[1];
	r->age_ms = px_now_ms(s->w) - s->start_ms;
	r->start_sec = (int64_t)s->start_tv.tv_sec;
	r->start_usec = (int64_t)s->start_tv.tv_usec;
	r->client = s->client;
	r->local = s->local;
	r->dst = s->dst;
	r->server = s->server;
	r->client_zone = s->client_zone;
	r->server_zone = s->server_zone;
	r->svc_chosen = s->svc_chosen;
}

/* Closed on the next tick: the event base takes the sockets out of epoll
 * at its next pass (a changelist), and the new process holds the same
 * open files, so a close now would leave them in our epoll set. */
static void
px_ho_close_later(struct px_worker *w, int fd)
{
	int *n;

	if (w->ho_nclose == w->ho_cap) {
		size_t cap = w->ho_cap != 0 ? w->ho_cap * 2 : 64;

		if ((n = realloc(w->ho_close, cap * sizeof(*n))) == NULL) {
			close(fd);	/* rare: a spurious wakeup at worst */
			return;
		}
		w->ho_close = n;
		w->ho_cap = cap;
	}
	w->ho_close[w->ho_nclose++] = fd;
}

static void
px_ho_close_pending(struct px_worker *w)
{
	size_t i;

	for (i = 0; i < w->ho_nclose; i++)
		close(w->ho_close[i]);
	w->ho_nclose = 0;
}

static void
px_ho_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_worker *w = arg;
	struct timeval tick = { 0, PX_HO_TICK_MS * 1000 };
	struct px_session *s, *next;
	static _Thread_local struct px_ho_session rec;	/* 8 KB: not on the stack */
	int out = atomic_load(&px_ho_out), fds[2];

	(void)fd; (void)what;
	px_ho_close_pending(w);
	if (out == -1)
		return;		/* the successor is gone: drain */
	for (s = TAILQ_FIRST(&w->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, link);
		if (!px_ho_quiet(s, &rec))
			continue;
		px_ho_record(s, &rec);
		fds[0] = s->cfd;
		fds[1] = s->sfd;
		if (px_ho_send(out, &rec, sizeof(rec), fds, rec.nsock) == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == ENOBUFS)
				break;	/* it is slow: next tick */
			px_log(LOG_WARNING, 0, "handover: worker %u: %s; its "
			    "sessions drain here", w->id, strerror(errno));
			atomic_store(&px_ho_out, -1);
			return;
		}
		px_ho_close_later(w, s->cfd);
		if (rec.nsock == 2)
			px_ho_close_later(w, s->sfd);
		s->cfd = s->sfd = -1;
		s->handed = true;
		PX_HO_COUNT(w, ho_handed);
		px_session_end(s, PX_END_SHUTDOWN, "handed over");
	}
	if (!TAILQ_EMPTY(&w->sessions) || w->ho_nclose != 0)
		evtimer_add(w->ho_ev, &tick);
}

void
px_handover_begin(struct px_worker *w)
{
	struct timeval now = { 0, 0 };

	w->handing = true;
	if (w->ho_ev == NULL &&
	    (w->ho_ev = evtimer_new(w->base, px_ho_tick_cb, w)) == NULL) {
		px_log(LOG_WARNING, 0, "handover: worker %u: out of memory; "
		    "its sessions drain here", w->id);
		return;
	}
	evtimer_add(w->ho_ev, &now);
}

void
px_handover_end(struct px_worker *w)
{
	px_ho_close_pending(w);
	free(w->ho_close);
	w->ho_close = NULL;
	w->ho_cap = 0;
	if (w->ho_ev != NULL)
		event_free(w->ho_ev);
	w->ho_ev = NULL;
}

/* ---- the new process ---------------------------------------------------- */

/* The socket we reached is pid's, and pid runs as root or as uid: any
 * local user may bind the abstract name first (after the old process
 * died, leaving its pidfile; or when its own bind failed), and would be
 * handed our sessions' sockets. */
static bool
px_ho_peer_ok(int fd, long pid, uid_t uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char also[32] = "";

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == -1) {
		fprintf(stderr, "proxyd: upgrade: SO_PEERCRED: %s\n",
		    strerror(errno));
		return false;
	}
	if ((long)cr.pid == pid && (cr.uid == 0 || cr.uid == uid))
		return true;
	if (uid != 0)
		snprintf(also, sizeof(also), " or %ld", (long)uid);
	fprintf(stderr, "proxyd: upgrade: refused: the hand-over socket of "
	    "pid %ld is held by pid %ld, uid %ld (expected pid %ld, uid 0%s): "
	    "another process took its name; not starting\n", pid,
	    (long)cr.pid, (long)cr.uid, pid, also);
	return false;
}

int
px_handover_connect(long pid, uid_t uid, int *admin_fd)
{
	struct sockaddr_un sun;
	socklen_t len = px_ho_addr(pid, &sun);
	struct px_ho_hello msg;
	struct pollfd pfd;
	const char *v = getenv("PROXYD_TEST_HANDOVER_VERSION");
	int fd, fds[2];
	ssize_t n;

	*admin_fd = -1;
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, len) == -1) {
		fprintf(stderr, "proxyd: upgrade: cannot reach pid %ld's "
		    "hand-over socket: %s\n", pid, strerror(errno));
		goto fail;
	}
	if (!px_ho_peer_ok(fd, pid, uid))
		goto fail;
	memset(&msg, 0, sizeof(msg));
	px_ho_head_set(&msg.h, PX_HO_HELLO, sizeof(msg));
	/* The tests' way to be a binary of another protocol version. */
	if (v != NULL)
		msg.h.version = (uint16_t)atoi(v);
	msg.pid = (uint64_t)getpid();
	if (px_ho_send(fd, &msg, sizeof(msg), NULL, 0) == -1) {
		fprintf(stderr, "proxyd: upgrade: %s\n", strerror(errno));
		goto fail;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1) {
		fprintf(stderr, "proxyd: upgrade: pid %ld does not answer\n",
		    pid);
		goto fail;
	}
	n = px_ho_recv(fd, &msg, sizeof(msg), fds);
	if (fds[1] != -1)
		close(fds[1]);
	if (n >= (ssize_t)sizeof(msg.h) && msg.h.magic == PX_HO_MAGIC &&
	    msg.h.type == PX_HO_REFUSE) {
		fprintf(stderr, "proxyd: upgrade: pid %ld refuses the "
		    "hand-over: it speaks version %u, this binary %u\n", pid,
		    (unsigned)msg.h.version, v != NULL ? (unsigned)atoi(v) :
		    (unsigned)PX_HO_VERSION);
		goto fail_fd;
	}
	if (!px_ho_valid(&msg, n, PX_HO_WELCOME, sizeof(msg))) {
		fprintf(stderr, "proxyd: upgrade: pid %ld: no welcome (%s)\n",
		    pid, n == -1 ? strerror(errno) : "a bad record");
		goto fail_fd;
	}
	px_session_ids_from(msg.next_id + PX_HO_ID_GAP);
	*admin_fd = fds[0];
	return fd;
fail_fd:
	if (fds[0] != -1)
		close(fds[0]);
fail:
	if (fd != -1)
		close(fd);
	return -1;
}

static struct {
	struct px_config *const	*cfg;
	struct event		*ev;
	uint64_t		 taken, lost;
	bool			 done;
} px_ho_new;

/* One SESSION record: to the least loaded worker, or closed with a
 * reset when no service of ours can take it. */
static void
px_ho_new_session(const struct px_ho_session *r, int cfd, int sfd)
{
	struct px_config *cfg = *px_ho_new.cfg;
	struct px_ho_session *copy;
	size_t i;

	for (i = 0; i < cfg->nservices; i++)
		if (strncmp(cfg->services[i].name, r->service,
		    sizeof(r->service)) == 0)
			break;
	/* The same analyser: its saved state means nothing to another. */
	if (i == cfg->nservices || !cfg->services[i].analyser->handover ||
	    strncmp(cfg->services[i].analyser->name, r->analyser,
	    sizeof(r->analyser)) != 0) {
		px_log(LOG_WARNING, r->id, "handover: no service %.*s of "
		    "analyser %.*s that takes sessions over here: closed",
		    (int)sizeof(r->service), r->service,
		    (int)sizeof(r->analyser), r->analyser);
		goto lost;
	}
	if ((copy = malloc(sizeof(*copy))) == NULL)
		goto lost;
	*copy = *r;
	if (px_workers_adopt(px_config_ref(cfg), i, cfd, sfd, copy)) {
		px_ho_new.taken++;
		return;
	}
	px_config_unref(cfg);
	free(copy);
lost:
	px_ho_new.lost++;
	px_ho_abort_close(cfd);
	px_ho_abort_close(sfd);
}

static void
px_ho_new_read_cb(evutil_socket_t fd, short what, void *arg)
{
	static union {
		struct px_ho_head	h;
		struct px_ho_hello	hello;
		struct px_ho_session	s;
	} u;	/* the main thread's alone */
	int fds[2], k;
	ssize_t n;

	(void)what; (void)arg;
	for (k = 0; k < 256; k++) {
		n = px_ho_recv((int)fd, &u, sizeof(u), fds);
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n > 0 && px_ho_valid(&u, n, PX_HO_SESSION, sizeof(u.s)) &&
		    fds[0] != -1 && (u.s.nsock == 1 ? fds[1] == -1 :
		    u.s.nsock == 2 && fds[1] != -1)) {
			px_ho_new_session(&u.s, fds[0], fds[1]);
			continue;
		}
		px_ho_abort_close(fds[0]);
		px_ho_abort_close(fds[1]);
		if (n > 0 && px_ho_valid(&u, n, PX_HO_DONE, sizeof(u.hello))) {
			px_ho_new.done = true;
			/* Back: every session before it is ours. */
			u.hello.h.type = PX_HO_DONE;
			(void)px_ho_send((int)fd, &u.hello, sizeof(u.hello),
			    NULL, 0);
			px_log(LOG_INFO, 0, "handover sessions=%llu drained=%llu "
			    "(from pid %llu%s)", (unsigned long long)
			    px_ho_new.taken, (unsigned long long)u.hello.drained,
			    (unsigned long long)u.hello.pid, px_ho_new.lost != 0 ||
			    u.hello.handed != px_ho_new.taken ?
			    ", some lost" : "");
			continue;
		}
		if (n > 0) {
			px_log(LOG_WARNING, 0, "handover: a bad record (%zd "
			    "bytes): ignored", n);
			continue;
		}
		if (!px_ho_new.done)
			px_log(LOG_INFO, 0, "handover sessions=%llu (the old "
			    "process left without its count)",
			    (unsigned long long)px_ho_new.taken);
		event_free(px_ho_new.ev);
		px_ho_new.ev = NULL;
		close((int)fd);
		return;
	}
}

int
px_handover_take(struct event_base *base, int fd,
    struct px_config *const *cfg)
{
	struct px_ho_hello msg;

	px_ho_new.cfg = cfg;
	memset(&msg, 0, sizeof(msg));
	px_ho_head_set(&msg.h, PX_HO_READY, sizeof(msg));
	msg.pid = (uint64_t)getpid();
	if (px_ho_send(fd, &msg, sizeof(msg), NULL, 0) == -1) {
		px_log(LOG_ERR, 0, "handover: %s", strerror(errno));
		return -1;
	}
	/* The tests' way to be a new process that dies once it listens. */
	if (getenv("PROXYD_TEST_HANDOVER_DIE") != NULL)
		_exit(3);
	if ((px_ho_new.ev = event_new(base, fd, EV_READ | EV_PERSIST,
	    px_ho_new_read_cb, NULL)) == NULL ||
	    event_add(px_ho_new.ev, NULL) == -1) {
		px_log(LOG_ERR, 0, "handover: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void
px_handover_take_end(void)
{
	if (px_ho_new.ev == NULL)
		return;
	close((int)event_get_fd(px_ho_new.ev));
	event_free(px_ho_new.ev);
	px_ho_new.ev = NULL;
}

/* As px_session_connected, the analyser opened from its saved state
 * when it saved one. */
static void
px_ho_open(struct px_session *s, const struct px_ho_session *r)
{
	const struct px_analyser *a = s->svc->analyser;
	int rc;

	if (a->handover_save == NULL) {
		px_session_connected(s);
		return;
	}
	s->state = PX_SS_RELAY;
	px_session_touch(s);
	s->tcp_progress_ms = s->last_active_ms;
	if (s->cfg->idle_timeout_ms != 0)
		px_session_arm_timer(s, s->cfg->idle_timeout_ms);
	if ((a->state_size != 0 &&
	    (s->an_state = calloc(1, a->state_size)) == NULL) ||
	    (a->driver != NULL && px_drv_open(s) == -1)) {
		px_session_end(s, PX_END_PROXY, "error: out of memory");
		return;
	}
	rc = a->handover_load != NULL && r->an_len <= sizeof(r->an_state) ?
	    a->handover_load(s, s->an_state, r->an_state, r->an_len) : -1;
	if (rc == -1 && s->state != PX_SS_CLOSED)
		px_session_end(s, PX_END_PROXY, "error: analyser refused "
		    "the state handed over");
}

void
px_handover_adopt(struct px_worker *w, struct px_config *cfg,
    size_t svc_idx, int cfd, int sfd, struct px_ho_session *r, bool closing)
{
	const struct px_service *svc = &cfg->services[svc_idx];
	struct px_session *s;

	if (closing || w->draining || (s = calloc(1, sizeof(*s))) == NULL) {
		px_ho_abort_close(cfd);
		px_ho_abort_close(sfd);
		free(r);
		return;
	}
	s->id = r->id;
	s->w = w;
	s->cfg = px_config_ref(cfg);
	s->svc = svc;
	s->cfd = cfd;
	s->sfd = sfd;
	s->client = r->client;
	s->local = r->local;
	s->dst = r->dst;
	s->server = r->server;
	s->client_zone = r->client_zone;
	s->server_zone = r->server_zone;
	s->svc_chosen = r->svc_chosen != 0;
	s->admitted = true;
	s->state = PX_SS_CONNECTING;	/* px_session_connected: relaying */
	s->start_tv.tv_sec = (time_t)r->start_sec;
	s->start_tv.tv_usec = (suseconds_t)r->start_usec;
	s->start_ms = px_now_ms(w) - r->age_ms;
	/* Counted by the old process: only what moves from now on is ours. */
	s->bytes[0] = s->credited[0] = r->bytes[0];
	s->bytes[1] = s->credited[1] = r->bytes[1];
	evtimer_assign(&s->timer, w->base, px_session_timer_cb, s);
	TAILQ_INSERT_TAIL(&w->sessions, s, link);
	px_worker_load_add(w, 1);
	s->m = px_metrics_block(w->id, svc);
	s->m_final = true;		/* accepted in the old process */
	PX_SC_ADD(s->m, active, 1);
	atomic_fetch_add_explicit(&px_live_sessions, 1, memory_order_relaxed);
	PX_HO_COUNT(w, ho_adopted);
	px_ho_open(s, r);
	free(r);
}
