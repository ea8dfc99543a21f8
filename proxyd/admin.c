#include "admin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/queue.h>	/* before libevent's stand-ins for it */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "bucket.h"
#include "config.h"
#include "conntrack.h"
#include "log.h"
#include "listener.h"
#include "tls.h"
#include "worker.h"

static struct evhttp *px_http;
/* The admin listener out of descriptors: its reserve one, the pause, and
 * the failures since the last warning (main thread only). */
static struct evconnlistener *px_admin_lev;
static struct event *px_admin_pause;
static int px_admin_reserve = -1;
static uint64_t px_admin_fail_n, px_admin_fail_logged_ms;
static atomic_uint_fast64_t px_admin_accept_failures;
static const struct px_reload_stats *px_reloads;
static time_t px_started;
static char *px_ha_file;	/* admin/@ha-state-file: NULL = no HA */

struct px_metric {
	const char	*name;
	const char	*labels;
	const char	*type;
	const char	*help;
	size_t		 offset;	/* in struct px_counters */
};

#define PX_M(n, l, t, h, f) { n, l, t, h, offsetof(struct px_counters, f) }
static const struct px_metric px_metrics[] = {
	PX_M("proxyd_sessions_accepted_total", "", "counter",
	    "Connections accepted, before ACL and limits.", accepted),
	PX_M("proxyd_sessions_active", "", "gauge", "Live sessions.", active),
	PX_M("proxyd_sessions_denied_total", "reason=\"acl\"", "counter",
	    "Connections refused.", denied_acl),
	PX_M("proxyd_sessions_denied_total", "reason=\"max-sessions\"", NULL,
	    NULL, denied_max),
	PX_M("proxyd_sessions_denied_total", "reason=\"direct\"", NULL, NULL,
	    denied_direct),
	PX_M("proxyd_sessions_denied_total", "reason=\"server\"", NULL, NULL,
	    denied_server),
	PX_M("proxyd_sessions_denied_total", "reason=\"no-service\"", NULL,
	    NULL, denied_dispatch),
	PX_M("proxyd_connect_failures_total", "", "counter",
	    "Server connects that failed or timed out.", connect_failures),
	PX_M("proxyd_idle_timeouts_total", "", "counter",
	    "Sessions closed by the idle timer.", idle_timeouts),
	PX_M("proxyd_bytes_total", "direction=\"to-server\"", "counter",
	    "Bytes relayed.", bytes_to_server),
	PX_M("proxyd_bytes_total", "direction=\"to-client\"", NULL, NULL,
	    bytes_to_client),
	PX_M("proxyd_splice_sessions_total", "", "counter",
	    "Sessions relayed with splice(2).", splice_sessions),
	PX_M("proxyd_upstream_connections_total", "kind=\"new\"", "counter",
	    "Server connections used by pooling analysers (http), new or "
	    "reused from the worker's pool.", upstream_new),
	PX_M("proxyd_upstream_connections_total", "kind=\"reused\"", NULL, NULL,
	    upstream_reused),
	PX_M("proxyd_upstream_pool_stale_total", "", "counter",
	    "Pooled server connections found closed by the server.", pool_stale),
	PX_M("proxyd_accept_failures_total", "", "counter",
	    "accept() failures for want of descriptors or memory (the "
	    "listener pauses 100 ms).", accept_failures),
	PX_M("proxyd_accept_refused_total", "", "counter",
	    "Connections accepted on the reserve descriptor and closed at "
	    "once, for want of descriptors.", refused_no_fd),
	PX_M("proxyd_conntrack_lookups_total", "result=\"conntrack\"", "counter",
	    "Original destinations of redirected connections, by source.",
	    origdst_conntrack),
	PX_M("proxyd_conntrack_lookups_total", "result=\"original-dst\"", NULL,
	    NULL, origdst_sockopt),
	PX_M("proxyd_conntrack_lookups_total", "result=\"failed\"", NULL, NULL,
	    origdst_failed),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"protocol-version\"", "counter",
	    "TLS handshakes (or records) that failed, by side and reason.",
	    tls.failures[0][PX_TLS_FAIL_PROTOCOL]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"no-shared-cipher\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_CIPHER]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"no-application-protocol\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_ALPN]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"not-tls\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_NOT_TLS]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"unknown-ca\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_UNKNOWN_CA]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"host-name-mismatch\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_HOSTNAME]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"expired\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_EXPIRED]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"no-certificate\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_NO_CERT]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"other\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_OTHER]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"protocol-version\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_PROTOCOL]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"no-shared-cipher\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_CIPHER]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"no-application-protocol\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_ALPN]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"not-tls\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_NOT_TLS]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"unknown-ca\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_UNKNOWN_CA]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"host-name-mismatch\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_HOSTNAME]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"expired\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_EXPIRED]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"no-certificate\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_NO_CERT]),
	PX_M("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"other\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_OTHER]),
	PX_M("proxyd_tls_handshakes_total", "side=\"client\",resumed=\"no\"",
	    "counter", "TLS handshakes done, by side, full or resumed.",
	    tls.handshakes[0][0]),
	PX_M("proxyd_tls_handshakes_total", "side=\"client\",resumed=\"yes\"",
	    NULL, NULL, tls.handshakes[0][1]),
	PX_M("proxyd_tls_handshakes_total", "side=\"server\",resumed=\"no\"",
	    NULL, NULL, tls.handshakes[1][0]),
	PX_M("proxyd_tls_handshakes_total", "side=\"server\",resumed=\"yes\"",
	    NULL, NULL, tls.handshakes[1][1]),
	PX_M("proxyd_tls_passthrough_total", "verdict=\"accept\"", "counter",
	    "ClientHellos read by mode=\"passthrough\", by verdict.",
	    tls.passthrough[1]),
	PX_M("proxyd_tls_passthrough_total", "verdict=\"deny\"", NULL, NULL,
	    tls.passthrough[0]),
	PX_M("proxyd_tls_keybridge_leaves_total", "result=\"minted\"",
	    "counter", "Keybridge leaves, minted or from the worker's cache.",
	    tls.keybridge[0]),
	PX_M("proxyd_tls_keybridge_leaves_total", "result=\"cached\"", NULL,
	    NULL, tls.keybridge[1]),
	PX_M("proxyd_tls_keybridge_ca_total", "ca=\"trusted\"", "counter",
	    "Keybridge leaves served, by the CA that signed them.",
	    tls.keybridge_ca[0]),
	PX_M("proxyd_tls_keybridge_ca_total", "ca=\"untrusted\"", NULL, NULL,
	    tls.keybridge_ca[1]),
	PX_M("proxyd_tls_server_unverified_total", "", "counter",
	    "Server certificates that did not verify, let through by "
	    "verify=\"optional\".", tls.unverified),
};

static uint64_t
px_counter(const struct px_worker *w, size_t offset)
{
	const atomic_uint_fast64_t *c = (const atomic_uint_fast64_t *)
	    ((const char *)&w->counters + offset);

	return atomic_load_explicit(c, memory_order_relaxed);
}

static void
px_admin_analyser_metrics(struct evbuffer *b, unsigned nw)
{
	unsigned a, c, k;

	evbuffer_add_printf(b, "# HELP proxyd_analyser_events_total "
	    "Events counted by the analysers.\n"
	    "# TYPE proxyd_analyser_events_total counter\n");
	for (a = 0; px_analysers[a] != NULL; a++) {
		const char *const *names = px_analysers[a]->counters;

		for (c = 0; names != NULL && names[c] != NULL; c++) {
			uint64_t sum = 0;

			for (k = 0; k < nw; k++)
				sum += atomic_load_explicit(
				    &px_worker_get(k)->counters.analyser[a][c],
				    memory_order_relaxed);
			evbuffer_add_printf(b, "proxyd_analyser_events_total"
			    "{analyser=\"%s\",event=\"%s\"} %llu\n",
			    px_analysers[a]->name, names[c],
			    (unsigned long long)sum);
		}
	}
}

/* The VRRP state keepalived's notify script wrote (deploy/ha/): its first
 * word, and the file's mtime as the time of the last transition. Read at
 * scrape time on the admin thread; a FIFO or a missing file must not block
 * it, so O_NONBLOCK and regular files only. */
static const char *const px_ha_states[] = {
	"master", "backup", "fault", "stop", "unknown",
};
#define PX_HA_UNKNOWN	4

static unsigned
px_admin_ha_read(time_t *since)
{
	char buf[64];
	struct stat st;
	ssize_t n;
	size_t len;
	unsigned i;
	int fd;

	*since = 0;
	if ((fd = open(px_ha_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return PX_HA_UNKNOWN;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (n = read(fd, buf, sizeof(buf) - 1)) <= 0) {
		close(fd);
		return PX_HA_UNKNOWN;
	}
	close(fd);
	buf[n] = '\0';
	len = strcspn(buf, " \t\r\n");
	for (i = 0; i < PX_HA_UNKNOWN; i++)
		if (strlen(px_ha_states[i]) == len &&
		    strncasecmp(buf, px_ha_states[i], len) == 0) {
			*since = st.st_mtime;
			return i;
		}
	return PX_HA_UNKNOWN;
}

static void
px_admin_ha_metrics(struct evbuffer *b)
{
	time_t since;
	unsigned i, cur;

	if (px_ha_file == NULL)
		return;
	cur = px_admin_ha_read(&since);
	evbuffer_add_printf(b, "# HELP proxyd_ha_state VRRP state reported by "
	    "keepalived's notify script (1: the current one).\n"
	    "# TYPE proxyd_ha_state gauge\n");
	for (i = 0; i <= PX_HA_UNKNOWN; i++)
		evbuffer_add_printf(b, "proxyd_ha_state{state=\"%s\"} %d\n",
		    px_ha_states[i], i == cur);
	evbuffer_add_printf(b, "# HELP proxyd_ha_last_transition_timestamp_seconds "
	    "When the notify script last wrote the state (0: unknown).\n"
	    "# TYPE proxyd_ha_last_transition_timestamp_seconds gauge\n"
	    "proxyd_ha_last_transition_timestamp_seconds %lld\n",
	    (long long)since);
}

static void
px_admin_ha_json(struct evbuffer *b)
{
	time_t since;
	unsigned cur;

	if (px_ha_file == NULL)
		return;
	cur = px_admin_ha_read(&since);
	evbuffer_add_printf(b, ",\"ha\":{\"state\":\"%s\",\"since\":%lld}",
	    px_ha_states[cur], (long long)since);
}

static void
px_admin_metrics(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	size_t i;
	unsigned k, nw = px_workers_count();

	(void)arg;
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	for (i = 0; i < sizeof(px_metrics) / sizeof(px_metrics[0]); i++) {
		const struct px_metric *m = &px_metrics[i];
		uint64_t sum = 0;

		for (k = 0; k < nw; k++)
			sum += px_counter(px_worker_get(k), m->offset);
		if (m->type != NULL)
			evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n",
			    m->name, m->help, m->name, m->type);
		evbuffer_add_printf(b, "%s%s%s%s %llu\n", m->name,
		    m->labels[0] ? "{" : "", m->labels, m->labels[0] ? "}" : "",
		    (unsigned long long)sum);
		for (k = 0; k < nw; k++)
			evbuffer_add_printf(b, "%s{%s%sworker=\"%u\"} %llu\n",
			    m->name, m->labels, m->labels[0] ? "," : "", k,
			    (unsigned long long)px_counter(px_worker_get(k),
			    m->offset));
	}
	px_admin_analyser_metrics(b, nw);
	evbuffer_add_printf(b,
	    "# HELP proxyd_log_dropped_total Log lines lost to a full ring.\n"
	    "# TYPE proxyd_log_dropped_total counter\n"
	    "proxyd_log_dropped_total %llu\n"
	    "# HELP proxyd_config_reloads_total SIGHUP reloads.\n"
	    "# TYPE proxyd_config_reloads_total counter\n"
	    "proxyd_config_reloads_total{result=\"ok\"} %llu\n"
	    "proxyd_config_reloads_total{result=\"failed\"} %llu\n"
	    "# HELP proxyd_workers Worker threads.\n"
	    "# TYPE proxyd_workers gauge\nproxyd_workers %u\n"
	    "# HELP proxyd_admin_accept_failures_total accept() failures of "
	    "the admin listener.\n"
	    "# TYPE proxyd_admin_accept_failures_total counter\n"
	    "proxyd_admin_accept_failures_total %llu\n",
	    (unsigned long long)px_log_dropped(),
	    (unsigned long long)px_reloads->ok,
	    (unsigned long long)px_reloads->failed, nw,
	    (unsigned long long)atomic_load(&px_admin_accept_failures));
	px_admin_ha_metrics(b);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void
px_admin_status(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	unsigned k, nw = px_workers_count();

	(void)arg;
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add_printf(b, "{\"version\":\"%s\",\"pid\":%ld,\"uptime\":%lld,"
	    "\"live_sessions\":%llu,\"workers\":[", PROXYD_VERSION, (long)getpid(),
	    (long long)(time(NULL) - px_started),
	    (unsigned long long)atomic_load(&px_live_sessions));
	for (k = 0; k < nw; k++) {
		const struct px_worker *w = px_worker_get(k);

		evbuffer_add_printf(b, "%s{\"id\":%u,\"active\":%llu,"
		    "\"accepted\":%llu,\"to_server\":%llu,\"to_client\":%llu}",
		    k ? "," : "", k,
		    (unsigned long long)PX_COUNT_GET(w, active),
		    (unsigned long long)PX_COUNT_GET(w, accepted),
		    (unsigned long long)PX_COUNT_GET(w, bytes_to_server),
		    (unsigned long long)PX_COUNT_GET(w, bytes_to_client));
	}
	evbuffer_add_printf(b, "]");
	px_admin_ha_json(b);
	evbuffer_add_printf(b, "}\n");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static struct px_conntrack *px_admin_ct;
static bool px_admin_ct_tried;

static void
px_admin_flow(struct evbuffer *b, const char *side, const struct px_flow *f,
    bool *first)
{
	if (!f->found)
		return;
	evbuffer_add_printf(b, "%s{\"side\":\"%s\",\"tuple\":\"%s\","
	    "\"state\":\"%s\",\"mark\":%u}", *first ? "" : ",", side, f->tuple,
	    f->state, f->mark);
	*first = false;
}

static void
px_admin_session_json(struct evbuffer *b, const struct px_session_snap *p,
    bool first)
{
	char c[PX_ADDRSTRLEN], d[PX_ADDRSTRLEN], sv[PX_ADDRSTRLEN];
	char l[PX_ADDRSTRLEN];
	struct px_flow flow;
	bool ffirst = true;

	evbuffer_add_printf(b, "%s\n{\"id\":%llu,\"worker\":%u,\"service\":\"%s\","
	    "\"state\":\"%s\",\"client\":\"%s\",\"dst\":\"%s\",\"server\":\"%s\","
	    "\"local\":\"%s\",\"to_server\":%llu,\"to_client\":%llu,"
	    "\"age\":%.3f,\"flows\":[", first ? "" : ",",
	    (unsigned long long)p->id, p->worker, p->service, p->state,
	    px_sockaddr_str((const struct sockaddr *)&p->client, c, sizeof(c)),
	    px_sockaddr_str((const struct sockaddr *)&p->dst, d, sizeof(d)),
	    px_sockaddr_str((const struct sockaddr *)&p->server, sv, sizeof(sv)),
	    px_sockaddr_str((const struct sockaddr *)&p->upstream_local, l,
	    sizeof(l)), (unsigned long long)p->to_server,
	    (unsigned long long)p->to_client, p->age);
	/* The kernel's view: the client's flow answers from our end to the
	 * client (whatever NAT did); the server's flow starts at our end. */
	if (px_admin_ct != NULL) {
		if (px_conntrack_flow(px_admin_ct, true, 0,
		    (const struct sockaddr *)&p->local,
		    (const struct sockaddr *)&p->client, &flow) == 0)
			px_admin_flow(b, "client", &flow, &ffirst);
		if (p->upstream_local.ss_family != AF_UNSPEC &&
		    px_conntrack_flow(px_admin_ct, false, p->ct_zone,
		    (const struct sockaddr *)&p->upstream_local,
		    (const struct sockaddr *)&p->server, &flow) == 0)
			px_admin_flow(b, "server", &flow, &ffirst);
	}
	evbuffer_add_printf(b, "]}");
}

/* Runs on the main thread, never a worker: it may wait (bounded) for the
 * workers' snapshots and query conntrack synchronously. */
static void
px_admin_sessions(struct evhttp_request *req, void *arg)
{
	struct px_snap_req *sr;
	struct evbuffer *b;
	struct pollfd pfd;
	struct timespec t0, t1;
	unsigned asked, k;
	uint64_t v;
	bool first = true;
	long waited = 0;

	(void)arg;
	if ((sr = calloc(1, sizeof(*sr))) == NULL ||
	    (b = evbuffer_new()) == NULL) {
		free(sr);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	if (!px_admin_ct_tried) {
		px_admin_ct_tried = true;
		px_admin_ct = px_conntrack_open();
	}
	atomic_init(&sr->refs, 1);		/* the admin's own */
	sr->done_fd = eventfd(0, EFD_CLOEXEC);
	asked = sr->done_fd == -1 ? 0 : px_workers_snapshot(sr);
	pfd.fd = sr->done_fd;
	pfd.events = POLLIN;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (asked != 0 && atomic_load(&sr->pending) != 0 && waited < 1000) {
		if (poll(&pfd, 1, (int)(1000 - waited)) > 0 &&
		    read(sr->done_fd, &v, sizeof(v)) < 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		waited = (t1.tv_sec - t0.tv_sec) * 1000 +
		    (t1.tv_nsec - t0.tv_nsec) / 1000000;
	}
	if (asked != 0 && atomic_load(&sr->pending) != 0) {
		/* A late worker still holds its reference: it frees sr if
		 * it answers last. */
		px_log(LOG_WARNING, 0, "admin: /sessions: %u worker(s) did not "
		    "answer within 1s", atomic_load(&sr->pending));
		px_snap_req_unref(sr);
		evbuffer_free(b);
		evhttp_send_error(req, 503, "workers busy");
		return;
	}
	evbuffer_add_printf(b, "{\"sessions\":[");
	for (k = 0; k < sizeof(sr->snaps) / sizeof(sr->snaps[0]); k++) {
		size_t i;

		for (i = 0; i < sr->nsnaps[k]; i++) {
			px_admin_session_json(b, &sr->snaps[k][i], first);
			first = false;
		}
	}
	evbuffer_add_printf(b, "\n],\"conntrack\":%s}\n",
	    px_admin_ct != NULL ? "true" : "false");
	px_snap_req_unref(sr);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void
px_admin_other(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, 404, "try /metrics, /status or /sessions");
}

static void
px_admin_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	if (px_admin_reserve == -1)
		px_admin_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (px_admin_lev != NULL)
		evconnlistener_enable(px_admin_lev);
}

/* libevent's own listener would retry accept() at once, forever, with a
 * log line each time (a million a second, filling the disk). Instead: the
 * reserve descriptor goes so that the next accept gets the operator an
 * answer, workers that ran out too leave what frees up to the admin for a
 * second, and it pauses 100 ms while it has no reserve; one warning a
 * second. */
static void
px_admin_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct timeval pause = { 0, 100 * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	uint64_t now = px_clock_ms();

	(void)arg;
	atomic_fetch_add(&px_admin_accept_failures, 1);
	px_admin_fail_n++;
	if (now - px_admin_fail_logged_ms >= 1000) {
		px_log(LOG_WARNING, 0, "admin: accept failed: %s (%llu times "
		    "since the last warning)", strerror(err),
		    (unsigned long long)px_admin_fail_n);
		px_admin_fail_n = 0;
		px_admin_fail_logged_ms = now;
	}
	if (err == EMFILE || err == ENFILE) {
		/* The operator first: paused workers stay paused a while,
		 * so the descriptors that free up come here. */
		px_workers_hold_accepts(1000);
		if (px_admin_reserve != -1) {
			close(px_admin_reserve);
			px_admin_reserve = -1;
			return;	/* the listener tries again at once */
		}
	}
	evconnlistener_disable(lev);
	evtimer_add(px_admin_pause, &pause);
}

int
px_admin_start(struct event_base *base, const struct px_config *cfg,
    const struct px_reload_stats *reloads)
{
	char a[PX_ADDRSTRLEN];
	int fd;

	px_started = time(NULL);
	px_reloads = reloads;
	if (!cfg->admin_enabled)
		return 0;
	/* Like the admin address, a change takes a restart. */
	if (cfg->ha_state_file != NULL &&
	    (px_ha_file = strdup(cfg->ha_state_file)) == NULL)
		return -1;
	px_sockaddr_str((const struct sockaddr *)&cfg->admin, a, sizeof(a));
	/* No SO_REUSEPORT: a second daemon must not share the admin port. */
	if ((fd = px_listener_socket((const struct sockaddr *)&cfg->admin,
	    cfg->admin_len, 64, false, false)) == -1) {
		fprintf(stderr, "proxyd: %s: admin: cannot listen on %s: %s\n",
		    cfg->path, a, strerror(errno));
		return -1;
	}
	if ((px_http = evhttp_new(base)) == NULL ||
	    (px_admin_pause = evtimer_new(base, px_admin_resume_cb,
	    NULL)) == NULL ||
	    (px_admin_lev = evconnlistener_new(base, NULL, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd)) == NULL) {
		close(fd);
		return -1;
	}
	/* evhttp sets the accept callback; the error one stays ours. */
	if (evhttp_bind_listener(px_http, px_admin_lev) == NULL)
		return -1;
	evconnlistener_set_error_cb(px_admin_lev, px_admin_accept_error_cb);
	px_admin_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	evhttp_set_allowed_methods(px_http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	/* It runs on the main thread with signals and reloads: an endless
	 * header line must not eat memory and CPU there. */
	evhttp_set_max_headers_size(px_http, 8192);
	evhttp_set_max_body_size(px_http, 0);
	evhttp_set_timeout(px_http, 10);
	evhttp_set_cb(px_http, "/metrics", px_admin_metrics, NULL);
	evhttp_set_cb(px_http, "/status", px_admin_status, NULL);
	evhttp_set_cb(px_http, "/sessions", px_admin_sessions, NULL);
	evhttp_set_gencb(px_http, px_admin_other, NULL);
	px_log(LOG_INFO, 0, "admin endpoint on http://%s/metrics", a);
	return 0;
}

void
px_admin_stop(void)
{
	if (px_http != NULL)
		evhttp_free(px_http);	/* and its bound listener */
	px_http = NULL;
	px_admin_lev = NULL;
	if (px_admin_pause != NULL)
		event_free(px_admin_pause);
	px_admin_pause = NULL;
	if (px_admin_reserve != -1)
		close(px_admin_reserve);
	px_admin_reserve = -1;
	px_conntrack_close(px_admin_ct);
	px_admin_ct = NULL;
	free(px_ha_file);
	px_ha_file = NULL;
}
