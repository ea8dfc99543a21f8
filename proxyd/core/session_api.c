/* What an analyser may ask of its session (analyser.h), apart from its
 * life: where it goes, what it may read and count, a driver analyser's
 * client conn, timer and the server connections it owns (taken from the
 * worker's pool or connected as the service says, parked again), the
 * tunnel hand-off, data channels, and the admin listing's copy of a
 * session. */
#include "session.h"
#include "snapshot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "rules.h"
#include "tls.h"
#include "upflush.h"
#include "upstream.h"
#include "worker.h"

const void *
px_session_policy(const struct px_session *s)
{
	return s->svc->analyser_policy;
}

const struct px_scan_policy *
px_session_scan(const struct px_session *s)
{
	return &s->svc->scan;
}

const struct px_auth_use *
px_session_auth(const struct px_session *s)
{
	return s->svc->auth;
}

struct px_auth_box *
px_session_auth_box(struct px_session *s)
{
	return &s->w->auth_box;
}

void
px_session_zones(const struct px_session *s, const struct sockaddr *server,
    const char **client_zone, const char **server_zone)
{
	int32_t sz = s->server_zone;

	/* Fixed mode never needed the server's zone: looked up here. */
	if (sz < 0 && server != NULL && server->sa_family != 0) {
		struct px_zone_path zp;
		struct px_key k;

		px_key_from_sockaddr(&k, server);
		px_zones_path(&s->cfg->zones, &k, &zp);
		sz = px_zone_path_zone(&zp);
	}
	*client_zone = px_zone_name(&s->cfg->zones, s->client_zone);
	*server_zone = px_zone_name(&s->cfg->zones, sz);
}

const char *
px_session_service(const struct px_session *s)
{
	return s->svc->name;
}

bool
px_session_config_stale(const struct px_session *s)
{
	return s->cfg != s->w->cfg;
}

uint64_t
px_session_id(const struct px_session *s)
{
	return s->id;
}

void
px_session_set_rule(struct px_session *s, const char *rule)
{
	/* Allocated: most sessions never name a rule (a deny does). On
	 * failure the end line says rule=builtin. */
	free(s->rule);
	s->rule = rule != NULL && rule[0] != '\0' ? strdup(rule) : NULL;
}

const char *
px_session_rule(const struct px_session *s)
{
	return s->rule != NULL ? s->rule : "";
}

const char *
px_session_policy_file(const struct px_session *s)
{
	const char *slash;

	if (s->svc->file == NULL)
		return "-";
	slash = strrchr(s->svc->file, '/');
	return slash != NULL ? slash + 1 : s->svc->file;
}

const struct sockaddr *
px_session_client(const struct px_session *s)
{
	return (const struct sockaddr *)&s->client;
}

const struct sockaddr *
px_session_server(const struct px_session *s)
{
	return (const struct sockaddr *)&s->server;
}

void
px_session_audit_info(const struct px_session *s, const char *analyser,
    const struct sockaddr *server, struct px_audit_info *in)
{
	in->service = px_session_service(s);
	in->analyser = analyser;
	in->session = px_session_id(s);
	in->client = px_session_client(s);
	in->server = server;
	px_session_zones(s, server, &in->client_zone, &in->server_zone);
	in->ja4 = px_session_ja4(s)[0] != '\0' ? s->ja4 : NULL;
	in->ja4s = px_session_ja4s(s)[0] != '\0' ? px_session_ja4s(s) : NULL;
}

struct event_base *
px_session_base(struct px_session *s)
{
	return s->w->base;
}

void
px_session_log(struct px_session *s, int level, const char *fmt, ...)
{
	va_list ap;

	if (!px_log_enabled(level))
		return;
	va_start(ap, fmt);
	px_logv(level, s->id, fmt, ap);
	va_end(ap);
}

void
px_session_count(struct px_session *s, unsigned index, uint64_t n)
{
	const char *const *names = s->svc->analyser->counters;

	if (index >= PX_AN_COUNTERS_MAX)
		return;
	PX_SC_ADD(s->m, analyser[index], n);
	/* The analyser's refusals also count by zone pair. */
	if (names != NULL && names[index] != NULL &&
	    strncmp(names[index], "denied", 6) == 0)
		px_metrics_denied(s, PX_DENY_ANALYSER, n);
}

const struct sockaddr *
px_session_dst(const struct px_session *s)
{
	return (const struct sockaddr *)&s->dst;
}

bool
px_session_is_transparent(const struct px_session *s)
{
	return s->svc->mode == PX_MODE_TRANSPARENT ||
	    s->svc->mode == PX_MODE_REDIRECT;
}

size_t
px_session_buffer(const struct px_session *s)
{
	return s->cfg->buffer;
}

uint64_t
px_session_idle_timeout(const struct px_session *s)
{
	return s->cfg->idle_timeout_ms;
}

/* The name the server side's TLS sends and checks; NULL: none. */
static const char *
px_session_tls_name(const struct px_session *s)
{
	const char *sni = s->client_sni != NULL ? s->client_sni :
	    s->dconn_open[0] ? px_tls_client_sni(&s->dconn[0]) : NULL;

	/* Forward mode: the client named the proxy, the server is the one
	 * its login named (by address). */
	if (px_session_server_later(s))
		sni = NULL;

	return s->svc->tls_server != NULL ?
	    px_tls_server_name(s->svc->tls_server, sni) : NULL;
}

/* A server connection to dst: pooled (connected, its TLS too) or a new
 * connect under way (*reused false). 0, or -1 with *stage. */
static int
px_session_upstream_fd(struct px_session *s, const struct sockaddr *dst,
    bool pooled_ok, bool *reused, const char **stage, struct px_pooled *out)
{
	const struct px_service *svc = s->svc;
	const struct sockaddr *src = svc->spoof_source ?
	    (const struct sockaddr *)&s->client : NULL;
	struct px_pool_key key;
	bool in_progress;

	px_pool_key_init(&key, svc->has_mark ? &svc->mark : NULL,
	    svc->tls_server, dst, src, px_session_tls_name(s), s->kb_untrusted);
	if (pooled_ok && px_pool_take(&s->w->pool, &key, out) == 0) {
		*reused = true;
		PX_SC_ADD(s->m, upstream_reused, 1);
		return 0;
	}
	if (pooled_ok)
		PX_SC_ADD(s->m, pool_misses, 1);
	*reused = false;
	out->tf = NULL;
	out->tf_state = NULL;
	out->held = NULL;
	out->fd = px_upstream_connect(svc->has_mark ? &svc->mark : NULL, dst,
	    px_sockaddr_len(dst), src, &in_progress, stage);
	PX_SC_ADD(s->m, upstream_connects, 1);
	if (out->fd == -1) {
		PX_SC_ADD(s->m, connect_failures, 1);
		return -1;
	}
	PX_SC_ADD(s->m, upstream_new, 1);
	return 0;
}

int
px_session_upstream_socket(struct px_session *s, const struct sockaddr *dst,
    const char **stage)
{
	const struct px_service *svc = s->svc;
	bool in_progress;
	int fd;

	*stage = "connect";
	fd = px_upstream_connect(svc->has_mark ? &svc->mark : NULL, dst,
	    px_sockaddr_len(dst), NULL, &in_progress, stage);
	PX_SC_ADD(s->m, upstream_connects, 1);
	if (fd == -1) {
		PX_SC_ADD(s->m, connect_failures, 1);
		return -1;
	}
	PX_SC_ADD(s->m, upstream_new, 1);
	return fd;
}

bool
px_session_tls_originates(const struct px_session *s)
{
	return s->svc->tls_server != NULL;
}

int
px_session_tls_originate(struct px_session *s, struct px_conn *c,
    const struct sockaddr *dst, const char *alpn)
{
	struct px_tls_peer peer = px_session_tls_peer(s);
	unsigned char wire[128];
	size_t n = 0;
	const char *p = alpn, *e;

	if (s->svc->tls_server == NULL) {
		errno = EINVAL;
		return -1;
	}
	while (*p != '\0') {
		size_t len;

		e = strchr(p, ',');
		len = e != NULL ? (size_t)(e - p) : strlen(p);
		if (len == 0 || len > 255 || n + 1 + len > sizeof(wire)) {
			errno = EINVAL;
			return -1;
		}
		wire[n++] = (unsigned char)len;
		memcpy(wire + n, p, len);
		n += len;
		p += len + (e != NULL);
	}
	peer.addr = dst;
	peer.name = px_session_tls_name(s);
	/* Allowed what the session's first server connection was. */
	peer.verify_later = s->kb_untrusted;
	/* c outlives s and its service's counters (a reload frees them). */
	peer.n = NULL;
	peer.fp = NULL;
	peer.ja4 = NULL;
	peer.ja4s = NULL;	/* the session's buffer: c outlives it */
	peer.alpn = wire;
	peer.alpn_len = n;
	return px_tls_attach(c, s->svc->tls_server, &peer);
}

uint64_t
px_session_upstream_tls(const struct px_session *s)
{
	return s->svc->tls_server != NULL ?
	    px_tls_ctx_id(s->svc->tls_server) : 0;
}

int64_t
px_session_upstream_mark(const struct px_session *s)
{
	return s->svc->has_mark ? (int64_t)s->svc->mark : -1;
}

bool
px_session_upstream_unverified(const struct px_session *s)
{
	return s->kb_untrusted;
}

const char *
px_session_tls_server_name(const struct px_session *s)
{
	return px_session_tls_name(s);
}

bool
px_conn_alpn_is(const struct px_conn *c, const char *proto)
{
	return px_tls_alpn_is(c, proto);
}

int
px_upstream_error(int fd)
{
	return px_upstream_result(fd);
}

/* ---- driver analysers (struct px_driver) ------------------------------ */

int
px_session_dconn(struct px_session *s)
{
	if (s->dconn == NULL && (s->dconn = calloc(2, sizeof(*s->dconn))) ==
	    NULL)
		return -1;
	return 0;
}

static void
px_drv_readable(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;

	(void)c;
	s->svc->analyser->driver->on_readable(s, s->an_state);
}

static void
px_drv_writable(struct px_conn *c, void *arg)
{
	struct px_session *s = arg;

	(void)c;
	s->svc->analyser->driver->on_writable(s, s->an_state);
}

/* The timer is lazy (px_session_timer): the event stays where it is
 * while the deadline only moves later, and re-arms itself for the rest
 * when it fires before it. */
static void
px_an_timer_add(struct px_drv *t, uint64_t now, uint64_t us)
{
	struct timeval tv = { .tv_sec = (time_t)(us / 1000000),
	    .tv_usec = (suseconds_t)(us % 1000000) };

	evtimer_add(&t->ev, &tv);
	t->pending = true;
	t->fire_us = now + us;
}

static void
px_drv_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_session *s = arg;
	struct px_drv *t = s->drv;
	uint64_t now;

	(void)fd; (void)what;
	t->pending = false;
	if (t->deadline_us == 0)
		return;		/* stopped since it was added */
	now = px_metrics_now_us();
	if (now < t->deadline_us) {
		/* Moved later since it was added: the rest. */
		px_an_timer_add(t, now, t->deadline_us - now);
		return;
	}
	t->deadline_us = 0;
	if (s->state == PX_SS_RELAY && s->an_timer_set)
		s->svc->analyser->driver->on_timer(s, s->an_state);
}

/* The keybridge's server connection, parked for a driver analyser's
 * first request: room for it, and long enough to be taken. */
#define PX_KEYBRIDGE_POOL_MAX		64
#define PX_KEYBRIDGE_POOL_IDLE_MS	10000

static void px_session_pool_put(struct px_session *s, struct px_conn *c,
    const struct sockaddr *dst, bool reusable, unsigned max,
    uint64_t idle_ms);

/* Before on_open: the client's conn and the analyser's timer. */
int
px_drv_open(struct px_session *s)
{
	struct px_conn kept = { .tf = NULL };
	bool handshaken = s->dconn_open[0];

	/* Keybridge did both handshakes first: the client's TLS carries
	 * over, and the server's connection waits in the pool for the
	 * analyser's first request. */
	if (handshaken) {
		px_conn_move_transform(&kept, &s->dconn[0]);
		px_conn_close(&s->dconn[0]);
		s->dconn_open[0] = false;
	}
	if (s->dconn_open[1]) {
		px_session_pool_put(s, &s->dconn[1],
		    (struct sockaddr *)&s->server, true, PX_KEYBRIDGE_POOL_MAX,
		    PX_KEYBRIDGE_POOL_IDLE_MS);
		s->dconn_open[1] = false;
		s->sfd = -1;
	}
	/* The client's conn alone (the server conns are the analyser's
	 * own), unless a handshake before made both. */
	if (s->dconn == NULL && (s->dconn = calloc(1, sizeof(*s->dconn))) ==
	    NULL)
		return -1;
	if (px_conn_open(&s->dconn[0], s->w->base, s->cfd, px_drv_readable,
	    px_drv_writable, s) == -1)
		return -1;
	s->dconn_open[0] = true;
	if (handshaken)
		px_conn_move_transform(&s->dconn[0], &kept);
	else if (s->svc->tls_client != NULL) {
		struct px_tls_peer peer = px_session_tls_peer(s);

		if (px_tls_attach(&s->dconn[0], s->svc->tls_client,
		    &peer) == -1)
			return -1;
	}
	if ((s->drv = calloc(1, sizeof(*s->drv))) == NULL ||
	    evtimer_assign(&s->drv->ev, s->w->base, px_drv_timer_cb,
	    s) == -1)
		return -1;
	LIST_INIT(&s->drv->ups);
	s->an_timer_set = true;
	return 0;
}

struct px_conn *
px_session_client_conn(struct px_session *s)
{
	return s->dconn_open[0] ? &s->dconn[0] : NULL;
}

/* Lazy, as HAProxy's and nginx's timeouts: an HTTP keep-alive
 * connection sets and stops its timer a few times per request, and each
 * evtimer_add or _del of a pending event is a min-heap operation. Only a
 * deadline earlier than the pending event's moves the event; a stopped
 * timer's event fires for nothing. */
void
px_session_timer(struct px_session *s, uint64_t ms)
{
	struct px_drv *t = s->drv;
	uint64_t now, deadline;

	if (!s->an_timer_set)
		return;
	if (ms == 0) {
		t->deadline_us = 0;
		return;
	}
	now = px_metrics_now_us();
	deadline = now + ms * 1000;
	t->deadline_us = deadline;
	if (t->pending && t->fire_us <= deadline)
		return;
	px_an_timer_add(t, now, ms * 1000);
}

/* The timer stops for good (the session relays a tunnel now, or ends). */
static void
px_drv_timer_stop(struct px_session *s)
{
	if (s->drv != NULL && s->an_timer_set)
		event_del(&s->drv->ev);
	s->an_timer_set = false;
}

void
px_drv_free(struct px_session *s)
{
	struct px_upconn *u;

	px_drv_timer_stop(s);
	if (s->drv == NULL)
		return;
	/* Those the analyser did not park in its on_close: closed. */
	while ((u = LIST_FIRST(&s->drv->ups)) != NULL) {
		int fd = u->c.fd;

		LIST_REMOVE(u, link);
		px_session_log_tls_failure(s, &u->c, "server");
		px_conn_close(&u->c);
		if (fd != -1)
			close(fd);
		free(u);
	}
	free(s->drv);
	s->drv = NULL;
}

int
px_drv_server_fd(const struct px_session *s)
{
	return s->drv != NULL && !LIST_EMPTY(&s->drv->ups) ?
	    LIST_FIRST(&s->drv->ups)->c.fd : -1;
}

static void
px_session_pool_release(void *held)
{
	px_pool_release(held);
}

struct px_conn *
px_session_upstream_take(struct px_session *s, const struct sockaddr *dst,
    bool pooled_ok, void (*on_readable)(struct px_conn *, void *),
    void (*on_writable)(struct px_conn *, void *), void *arg, bool *reused,
    const char **stage)
{
	struct px_tls_peer peer = px_session_tls_peer(s);
	struct px_pooled pc;
	struct px_upconn *u;
	int err;

	peer.addr = dst;
	/* Under keybridge the client saw the server's chain fail (a leaf of
	 * the untrusted CA) and went on: its next connections may too. */
	peer.verify_later = s->kb_untrusted;

	*stage = "connect";
	if (s->drv == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		*stage = "buffers";
		return NULL;
	}
	u->c.fd = -1;
	if (px_session_upstream_fd(s, dst, pooled_ok, reused, stage, &pc) ==
	    -1) {
		free(u);
		return NULL;
	}
	if (!*reused)
		u->connect_start_us = px_metrics_now_us();
	if (px_conn_open(&u->c, s->w->base, pc.fd, on_readable, on_writable,
	    arg) == -1)
		goto fail;
	/* The pool's read event watches the socket until the conn's does. */
	if (pc.held != NULL)
		px_conn_adopt(&u->c, px_session_pool_release, pc.held);
	pc.held = NULL;
	if (pc.tf != NULL) {
		px_conn_set_transform(&u->c, pc.tf, pc.tf_state);
		/* A pooled TLS connection: its server's answer was read by
		 * another session; the JA4S is the same server's. */
		if (peer.ja4s != NULL && peer.ja4s[0] == '\0')
			memcpy(peer.ja4s, px_tls_ja4s(&u->c),
			    strlen(px_tls_ja4s(&u->c)) + 1);
	} else if (s->svc->tls_server != NULL) {
		peer.name = px_session_tls_name(s);
		if (px_tls_attach(&u->c, s->svc->tls_server, &peer) == -1)
			goto fail;
	}
	LIST_INSERT_HEAD(&s->drv->ups, u, link);
	px_session_set_server(s, dst);
	return &u->c;
fail:
	err = errno;
	px_pool_release(pc.held);
	if (u->c.tf == NULL && pc.tf != NULL && pc.tf->free != NULL)
		pc.tf->free(pc.tf_state);
	px_conn_close(&u->c);
	close(pc.fd);
	free(u);
	*stage = "buffers";
	errno = err != 0 ? err : ENOMEM;
	return NULL;
}

int
px_session_upstream_result(struct px_session *s, struct px_conn *c)
{
	struct px_upconn *u = (struct px_upconn *)c;
	int err = px_upstream_result(c->fd);

	if (err != 0)
		PX_SC_ADD(s->m, connect_failures, 1);
	else if (u->connect_start_us != 0)
		px_hist_observe(&s->m->connect_duration,
		    px_metrics_now_us() - u->connect_start_us);
	u->connect_start_us = 0;
	return err;
}

/* A driver analyser answers a failed server conn its own way (http: a
 * 502); the TLS cause is said here, once, for all of them. */
void
px_session_log_tls_failure(struct px_session *s, const struct px_conn *c,
    const char *side)
{
	enum px_tls_failure f = px_tls_failure(c);

	if (f == PX_TLS_OK)
		return;
	px_session_log(s, LOG_NOTICE, "tls-error side=%s reason=%s detail=\"%s\"",
	    side, px_tls_failure_name(f), px_conn_strerror(c, EPROTO));
}

/* c's socket and its transform state (taken off c) go to the worker's
 * pool when reusable (not while it drains), or are closed; c is closed
 * either way. */
static void
px_session_pool_put(struct px_session *s, struct px_conn *c,
    const struct sockaddr *dst, bool reusable, unsigned max,
    uint64_t idle_ms)
{
	struct px_pool_key key;
	struct px_conn kept = { .tf = NULL };
	/* A pooled connection found dead counts for the service parking it. */
	struct px_pooled pc = { .fd = c->fd, .stale = &s->m->pool_stale };

	px_session_log_tls_failure(s, c, "server");
	if (!reusable || s->w->draining) {
		px_conn_close(c);
		close(pc.fd);
		return;
	}
	pc.quiet = px_conn_quiet(c);	/* its transform's buffer too */
	px_conn_move_transform(&kept, c);
	pc.tf = kept.tf;
	pc.tf_state = kept.tf_state;
	px_pool_key_init(&key, s->svc->has_mark ? &s->svc->mark : NULL,
	    s->svc->tls_server, dst, s->svc->spoof_source ?
	    (const struct sockaddr *)&s->client : NULL,
	    px_session_tls_name(s), s->kb_untrusted);
	/* Parked while the conn's read event still watches the socket: the
	 * pool's takes over with no epoll change. (Not parked: closed, and
	 * the conn's delete below meets a closed socket, as any close.) */
	px_pool_put(&s->w->pool, &key, &pc, max, idle_ms);
	px_conn_close(c);
}

void
px_session_upstream_park(struct px_session *s, struct px_conn *c,
    const struct sockaddr *dst, bool reusable, unsigned max,
    uint64_t idle_ms)
{
	struct px_upconn *u = (struct px_upconn *)c;

	LIST_REMOVE(u, link);
	px_session_pool_put(s, c, dst, reusable, max, idle_ms);
	free(u);
}

void
px_session_upstream_flush(struct px_session *s, struct px_conn *c,
    uint64_t idle_ms)
{
	struct px_upconn *u = (struct px_upconn *)c;

	LIST_REMOVE(u, link);
	px_upflush_take(s->w, u, idle_ms);
}

void
px_session_set_server(struct px_session *s, const struct sockaddr *server)
{
	memcpy(&s->server, server, px_sockaddr_len(server));
}

bool
px_session_server_later(const struct px_session *s)
{
	return s->svc->mode == PX_MODE_FORWARD &&
	    s->svc->analyser->driver == NULL;
}


void
px_session_account(struct px_session *s, enum px_dir dir, uint64_t n)
{
	s->bytes[dir] += n;
	PX_COUNT_BYTES(s, dir, n);
}

void
px_session_unsent(struct px_session *s, enum px_dir dir, uint64_t n)
{
	s->bytes[dir] -= n < s->bytes[dir] ? n : s->bytes[dir];
}

void
px_session_channel_bytes(struct px_session *s, enum px_dir dir, uint64_t n)
{
	s->bytes[dir] += n;
	PX_COUNT_BYTES(s, dir, n);
	px_session_touch(s);
}

void
px_session_active(struct px_session *s)
{
	px_session_touch(s);
}

int
px_session_tunnel(struct px_session *s, struct px_conn *server)
{
	struct px_upconn *u = (struct px_upconn *)server;
	struct px_conn kept[2] = { { .tf = NULL }, { .tf = NULL } };
	int d;

	if (!s->dconn_open[0] || s->sfd != -1) {
		errno = ENOTCONN;
		return -1;
	}
	/* Each side's TLS (terminated, originated) goes on in the tunnel:
	 * its state, with what it decrypted already, moves to the relay's
	 * conns (px_session_prepare takes it from dconn[side]). Closing it
	 * made the relay start a new handshake with a server in the middle
	 * of its session, or relay a TLS client in clear. */
	px_conn_move_transform(&kept[0], &s->dconn[0]);
	px_conn_move_transform(&kept[1], server);
	/* The sockets stay; the relay takes them over, and the session
	 * closes them at its end. */
	LIST_REMOVE(u, link);
	s->sfd = server->fd;
	px_conn_close(server);
	free(u);
	px_conn_close(&s->dconn[0]);
	s->dconn_open[0] = false;
	px_drv_timer_stop(s);
	/* Only the client's was allocated (px_drv_open): two slots now, no
	 * event in them, only a transform each, until the relay's prepare. */
	if (kept[1].tf != NULL) {
		free(s->dconn);
		if ((s->dconn = calloc(2, sizeof(*s->dconn))) == NULL) {
			for (d = 0; d < 2; d++)
				px_conn_close(&kept[d]);
			return -1;
		}
	}
	for (d = 0; d < 2; d++)
		if (kept[d].tf != NULL) {
			s->dconn[d].fd = -1;
			px_conn_move_transform(&s->dconn[d], &kept[d]);
			s->dconn_open[d] = true;
		}
	return px_session_relay(s, PX_RELAY_SPLICE, true);
}

struct evbuffer *
px_session_output(struct px_session *s, enum px_dir dir)
{
	return s->relay_on ? px_relay_output(s->relay, dir) : NULL;
}

void
px_session_resume(struct px_session *s, enum px_dir dir)
{
	if (s->relay_on && s->state == PX_SS_RELAY)
		px_relay_resume(s->relay, dir, false);
}

void
px_session_hold_end(struct px_session *s, enum px_dir dir, bool hold)
{
	if (s->relay_on)
		px_relay_hold_end(s->relay, dir, hold);
}

bool
px_session_input_closed(const struct px_session *s, enum px_dir dir)
{
	return s->relay_on && px_relay_input_closed(s->relay, dir);
}

bool
px_session_pass(struct px_session *s, enum px_dir dir, uint64_t n,
    size_t head)
{
	return s->relay_on && px_relay_pass(s->relay, dir, n, head);
}

void
px_session_read_head(struct px_session *s, enum px_dir dir, size_t head)
{
	if (s->relay_on)
		px_relay_read_head(s->relay, dir, head);
}

uint64_t
px_session_pass_left(const struct px_session *s, enum px_dir dir)
{
	return s->relay_on ? px_relay_pass_left(s->relay, dir) : 0;
}

static const char *
px_session_state_name(const struct px_session *s)
{
	switch (s->state) {
	case PX_SS_CONNECTING: return "connecting";
	case PX_SS_RELAY: return !s->relay_on ? "analysing" :
	    s->relay->mode == PX_RELAY_SPLICE ? "relay-splice" :
	    "relay-buffered";
	default: return "closing";
	}
}

void
px_session_snapshot(const struct px_session *s, uint64_t now,
    struct px_session_snap *p)
{
	socklen_t len;
	int fd;

	memset(p, 0, sizeof(*p));
	p->id = s->id;
	p->worker = s->w->id;
	snprintf(p->service, sizeof(p->service), "%s", s->svc->name);
	p->analyser = s->svc->analyser->name;
	if (s->an_state != NULL && s->svc->analyser->describe != NULL)
		s->svc->analyser->describe(s, s->an_state, p->detail,
		    sizeof(p->detail));
	p->ct_zone = s->svc->ct_zone;
	p->state = px_session_state_name(s);
	p->client = s->client;
	p->local = s->local;
	len = sizeof(p->local);
	if (p->local.ss_family == AF_UNSPEC)
		(void)getsockname(s->cfd, (struct sockaddr *)&p->local, &len);
	p->dst = s->dst;
	p->server = s->server;
	len = sizeof(p->upstream_local);
	fd = s->sfd != -1 ? s->sfd : px_drv_server_fd(s);
	if (fd == -1 || getsockname(fd,
	    (struct sockaddr *)&p->upstream_local, &len) == -1)
		p->upstream_local.ss_family = AF_UNSPEC;
	p->to_server = s->bytes[PX_TO_SERVER];
	p->to_client = s->bytes[PX_TO_CLIENT];
	p->age = (double)(now - s->start_ms) / 1000.0;
}

/* ---- data channels: what they need of their session ------------------ */

static struct px_chan_host *
px_session_chan_host(struct px_session *s)
{
	struct px_chan_host *h = &s->chan_host;

	if (h->owner == NULL) {
		h->owner = s;
		h->base = s->w->base;
		h->pipes = &s->w->pipes;
		h->id = s->id;
		h->buffer = s->cfg->buffer;
		h->idle_ms = s->cfg->idle_timeout_ms;
		h->transparent = s->svc->mode == PX_MODE_TRANSPARENT;
		h->has_mark = s->svc->has_mark;
		h->mark = s->svc->mark;
		h->bytes = px_session_channel_bytes;
		h->touch = px_session_touch;
	}
	return h;
}

struct px_channel *
px_channel_new(struct px_session *s, uint64_t timeout_ms, px_channel_cb cb,
    void *arg)
{
	return px_chan_new(px_session_chan_host(s), timeout_ms, cb, arg);
}

struct px_data_listener *
px_data_listener_new(struct px_session *s, const struct sockaddr *local,
    uint16_t lo, uint16_t hi, const struct sockaddr *peer, uint64_t idle_ms)
{
	return px_chan_listener_new(px_session_chan_host(s), local, lo, hi,
	    peer, idle_ms);
}

int
px_session_local(struct px_session *s, enum px_chan_end end,
    struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);
	int fd = end == PX_CHAN_CLIENT ? s->cfd : s->sfd;

	if (fd == -1) {
		errno = ENOTCONN;
		return -1;
	}
	return getsockname(fd, (struct sockaddr *)ss, &len);
}

static const uint8_t px_key_zero[16];

int
px_session_server_allowed(struct px_session *s, const struct sockaddr *dst,
    char *zones, size_t zlen)
{
	const struct px_group *g = s->svc->group;
	int16_t spec[PX_GROUP_MAX];
	struct px_zone_path zp;
	struct px_key k;
	char ref[PX_RULE_REF_MAX];

	px_key_from_sockaddr(&k, dst);
	px_zones_path(&s->cfg->zones, &k, &zp);
	s->server_zone = px_zone_path_zone(&zp);
	snprintf(zones, zlen, "client-zone=%s server-zone=%s",
	    px_zone_name(&s->cfg->zones, s->client_zone),
	    px_zone_name(&s->cfg->zones, s->server_zone));
	px_group_specs(g, &s->cfg->zones, PX_DIM_SERVER, &k, &zp, spec);
	/* 0.0.0.0 and :: (v4-mapped too) are no server: connect() takes
	 * them for this host, which the lists judge as another address. */
	if (spec[s->svc->group_idx] >= 0 && memcmp(k.addr, px_key_zero,
	    k.v6 ? 16 : 4) != 0) {
		uint16_t port = px_sockaddr_port(dst);
		size_t used = zlen > 0 ? strlen(zones) : 0;

		if (px_addrlist_port_ok(&s->svc->servers, port))
			return 0;
		/* The address is in, its port is not: say which decided. */
		snprintf(zones + used, zlen - used, " port=%u refused-by=ports",
		    (unsigned)port);
	}
	px_session_set_rule(s, px_rule_ref_at(s->svc->servers.line, NULL,
	    px_session_policy_file(s), ref, sizeof(ref)));
	px_metrics_denied(s, PX_DENY_SERVER, 1);
	return -1;
}

bool
px_session_server_host_allowed(struct px_session *s,
    const struct sockaddr *dst)
{
	int16_t spec[PX_GROUP_MAX];
	struct px_zone_path zp;
	struct px_key k;

	px_key_from_sockaddr(&k, dst);
	px_zones_path(&s->cfg->zones, &k, &zp);
	px_group_specs(s->svc->group, &s->cfg->zones, PX_DIM_SERVER, &k, &zp,
	    spec);
	if (spec[s->svc->group_idx] >= 0 && memcmp(k.addr, px_key_zero,
	    k.v6 ? 16 : 4) != 0)
		return true;
	px_metrics_denied(s, PX_DENY_SERVER, 1);
	return false;
}

/* ---- TLS started by the analyser --------------------------------------- */

static const struct px_tls_ctx *
px_session_tls_ctx(const struct px_session *s, enum px_chan_end side)
{
	const struct px_service *svc = s->svc;

	if (side == PX_CHAN_CLIENT)
		return svc->tls_client != NULL ? svc->tls_client :
		    svc->starttls_client;
	return svc->tls_server != NULL ? svc->tls_server : svc->starttls_server;
}

enum px_tls_use
px_session_tls_use(const struct px_session *s, enum px_chan_end side)
{
	if ((side == PX_CHAN_CLIENT ? s->svc->tls_client : s->svc->tls_server) !=
	    NULL)
		return PX_TLS_USE_IMPLICIT;
	return px_session_tls_ctx(s, side) != NULL ? PX_TLS_USE_EXPLICIT :
	    PX_TLS_USE_NONE;
}

bool
px_session_tls_optional(const struct px_session *s, enum px_chan_end side)
{
	const struct px_tls_ctx *t = px_session_tls_ctx(s, side);

	return t != NULL && px_tls_auth_optional(t);
}

bool
px_session_tls_on(const struct px_session *s, enum px_chan_end side)
{
	const struct px_conn *c = s->relay_on ? px_relay_conn(s->relay,
	    side == PX_CHAN_CLIENT ? 0 : 1) : NULL;

	return c != NULL && (c->tf != NULL || c->tf_next != NULL);
}

bool
px_session_tls_peer_subject(const struct px_session *s,
    enum px_chan_end side, char *buf, size_t len)
{
	const struct px_conn *c = s->relay_on ? px_relay_conn(s->relay,
	    side == PX_CHAN_CLIENT ? 0 : 1) : NULL;

	if (c == NULL) {
		if (len > 0)
			buf[0] = '\0';
		return false;
	}
	return px_tls_peer_subject(c, buf, len);
}

bool
px_session_client_identity(const struct px_session *s, char *buf,
    size_t len)
{
	const struct px_conn *c = NULL;

	/* A relayed session's client conn, or a driver analyser's. */
	if (s->relay_on)
		c = px_relay_conn(s->relay, 0);
	else if (s->dconn != NULL && s->dconn_open[0])
		c = &s->dconn[0];
	if (c == NULL) {
		if (len > 0)
			buf[0] = '\0';
		return false;
	}
	return px_tls_identity(c, buf, len);
}

bool
px_session_client_via_tls(const struct px_session *s)
{
	return s->dconn != NULL && s->dconn_open[0] && s->dconn[0].tf != NULL;
}

bool
px_session_client_alpn_is(const struct px_session *s, const char *proto)
{
	return s->dconn != NULL && s->dconn_open[0] &&
	    px_tls_alpn_is(&s->dconn[0], proto);
}

int
px_session_starttls(struct px_session *s, enum px_chan_end side)
{
	const struct px_tls_ctx *t = side == PX_CHAN_CLIENT ?
	    s->svc->starttls_client : s->svc->starttls_server;
	struct px_tls_peer peer = px_session_tls_peer(s);
	int i = side == PX_CHAN_CLIENT ? 0 : 1;
	struct px_conn *c;

	if (t == NULL || !s->relay_on || s->relay->mode != PX_RELAY_BUFFERED ||
	    !s->relay->conn_open[i] || px_session_tls_on(s, side))
		return -1;
	c = &s->relay->conn[i];
	if (side == PX_CHAN_SERVER) {
		peer.name = px_tls_server_name(t, NULL);
		peer.addr = (const struct sockaddr *)&s->server;
	}
	if (px_tls_attach(c, t, &peer) == -1)
		return -1;
	/* We speak first to the server: the ClientHello. Its answer may be
	 * read in the same call (the worker preempted between the two) and
	 * fail the handshake there: the server's failure, said as the relay
	 * says one it reads. */
	if (side == PX_CHAN_SERVER && c->tf_next == NULL &&
	    px_conn_handshake(c) == -1 && errno != EAGAIN) {
		px_session_server_tls_failed(s, c, errno);
		return -1;
	}
	return 0;
}

int
px_channel_tls(struct px_session *s, struct px_channel *ch,
    enum px_chan_end end)
{
	const struct px_tls_ctx *t = px_session_tls_ctx(s, end);
	struct px_tls_peer peer = px_session_tls_peer(s);

	if (t == NULL)
		return -1;
	if (end == PX_CHAN_SERVER) {
		peer.name = px_session_tls_name(s);
		if (peer.name == NULL)
			peer.name = px_tls_server_name(t, NULL);
		peer.addr = (const struct sockaddr *)&s->server;
		peer.resume = s->relay_on ? px_relay_conn(s->relay, 1) : NULL;
		if (peer.resume != NULL && peer.resume->tf == NULL)
			peer.resume = NULL;
	} else {
		/* A data connection's hello is fingerprinted (into the
		 * channel: px_chan_tls) but not judged: the session's was,
		 * the data connection comes from the same client (the peer
		 * check), and clients resume the control connection's TLS
		 * session there, whose pre_shared_key makes another JA4 that
		 * an accept list would not name. */
		peer.fp = NULL;
	}
	return px_chan_tls(ch, end, t, &peer);
}
