/* The admin endpoint's status page (/) and its JSON (/status,
 * /api/services, /api/sessions), with the throughput history its chart
 * draws. Main thread only, like the rest of the endpoint (admin.c). */
#include "admin.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/queue.h>	/* before libevent's stand-ins for it */
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "admin_int.h"
#include "config.h"
#include "conntrack.h"
#include "log.h"
#include "metrics.h"
#include "quota.h"
#include "srclimit.h"
#include "snapshot.h"
#include "worker.h"

/* The status page's throughput chart: the daemon's delivered byte totals
 * every second over the last PX_HIST_N samples (5 minutes), so that it
 * has a history as soon as it opens. Sampled at each half second of the
 * wall clock, half a second after the workers credit their sessions'
 * delivered bytes (worker.c): each sample then takes in one second's
 * crediting, and the rates are true to the second. Main thread only. */
#define PX_HIST_N	301
struct px_tput {
	double		t;		/* Unix time */
	uint64_t	bytes[2];	/* delivered, by enum px_dir */
	double		rate[2];	/* per second, from the workers' credits */
};
static struct px_tput px_tput[PX_HIST_N];
static unsigned px_tput_next, px_tput_n;
/* Each slot's last two samples, [1] the newer, for its rates. */
enum px_rate_k {
	PX_RATE_SESSIONS = 0,	/* accepted */
	PX_RATE_TO_SERVER,	/* delivered bytes */
	PX_RATE_TO_CLIENT,
	PX_RATE_ERRORS,		/* connect and TLS failures */
	PX_RATE_DENIALS,	/* refused connections, analyser denials */
	PX_RATE_TLS_FAILURES,
	PX_RATES,
};
struct px_svc_rate {
	double		t[2];
	uint64_t	v[2][PX_RATES];
	/* Delivered bytes: each worker's last credit (its counters, by
	 * px_dir), and the rate they made over the time between its last
	 * two credits. A worker's timer that fires 50 ms late must not read
	 * as 5 % more bytes. */
	uint64_t	(*wbytes)[2];	/* [worker] */
	double		 rate[2];
};
static struct px_svc_rate *px_rates;
static unsigned px_nrates;
/* Each worker's credit time (Unix s) at the last sample. */
static double px_credit_t[256];
static struct event *px_tput_ev;

static void px_tput_rate_json(struct evbuffer *b);

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
	evbuffer_add_printf(b, "{\"version\":\"%s\",\"node\":\"%s\",\"pid\":%ld,"
	    "\"uptime\":%lld,\"live_sessions\":%llu,\"workers\":[",
	    PROXYD_VERSION, px_log_node(), (long)getpid(),
	    (long long)(time(NULL) - px_started),
	    (unsigned long long)atomic_load(&px_live_sessions));
	for (k = 0; k < nw; k++) {
		evbuffer_add_printf(b, "%s{\"id\":%u,\"active\":%llu,"
		    "\"accepted\":%llu,\"to_server\":%llu,\"to_client\":%llu}",
		    k ? "," : "", k,
		    (unsigned long long)px_worker_sum(k,
		    offsetof(struct px_svc_counters, active)),
		    (unsigned long long)px_worker_sum(k,
		    offsetof(struct px_svc_counters, accepted)),
		    (unsigned long long)px_worker_sum(k,
		    offsetof(struct px_svc_counters, bytes[0])),
		    (unsigned long long)px_worker_sum(k,
		    offsetof(struct px_svc_counters, bytes[1])));
	}
	evbuffer_add_printf(b, "]");
	px_tput_rate_json(b);
	px_admin_reload_json(b);
	px_admin_ha_json(b);
	px_members_json(b);
	evbuffer_add_printf(b, "}\n");
	px_admin_reply(req, "application/json", b);
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
	    "\"analyser\":\"%s\",\"state\":\"%s\",\"client\":\"%s\",\"dst\":\"%s\",\"server\":\"%s\","
	    "\"local\":\"%s\",\"to_server\":%llu,\"to_client\":%llu,"
	    "\"age\":%.3f,\"detail\":", first ? "" : ",",
	    (unsigned long long)p->id, p->worker, p->service,
	    p->analyser != NULL ? p->analyser : "", p->state,
	    px_sockaddr_str((const struct sockaddr *)&p->client, c, sizeof(c)),
	    px_sockaddr_str((const struct sockaddr *)&p->dst, d, sizeof(d)),
	    px_sockaddr_str((const struct sockaddr *)&p->server, sv, sizeof(sv)),
	    px_sockaddr_str((const struct sockaddr *)&p->upstream_local, l,
	    sizeof(l)), (unsigned long long)p->to_server,
	    (unsigned long long)p->to_client, p->age);
	px_json_str(b, p->detail);
	evbuffer_add_printf(b, ",\"flows\":[");
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
	px_admin_reply(req, "application/json", b);
}

static double
px_wall_now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

#define PX_SLOT_SUM(i, f, nw) \
	px_svc_sum(i, offsetof(struct px_svc_counters, f), nw)

/* Slot i's counters that its rates are made of, over nw workers. */
static void
px_rate_values(unsigned i, unsigned nw, uint64_t v[PX_RATES])
{
	const size_t one = sizeof(atomic_uint_fast64_t);
	const char *svc, *an;
	const char *const *names;
	unsigned ai, k;

	memset(v, 0, PX_RATES * sizeof(v[0]));
	v[PX_RATE_SESSIONS] = PX_SLOT_SUM(i, accepted, nw);
	v[PX_RATE_TO_SERVER] = PX_SLOT_SUM(i, delivered[PX_TO_SERVER], nw);
	v[PX_RATE_TO_CLIENT] = PX_SLOT_SUM(i, delivered[PX_TO_CLIENT], nw);
	for (k = 0; k < 2 * PX_TLS_FAILURES; k++)
		v[PX_RATE_TLS_FAILURES] += px_svc_sum(i, offsetof(struct
		    px_svc_counters, tls.failures) + k * one, nw);
	v[PX_RATE_ERRORS] = PX_SLOT_SUM(i, connect_failures, nw) +
	    v[PX_RATE_TLS_FAILURES];
	for (k = 0; k < PX_DENIALS; k++)
		v[PX_RATE_DENIALS] += px_svc_sum(i, offsetof(struct
		    px_svc_counters, denied) + k * one, nw);
	/* An analyser's refusals: its counters named denied* (as the page's
	 * denials table reads them). */
	(void)px_metrics_slot(i, &svc, &an, &ai);
	names = px_analysers[ai]->counters;
	for (k = 0; names != NULL && names[k] != NULL &&
	    k < PX_AN_COUNTERS_MAX; k++)
		if (strncmp(names[k], "denied", 6) == 0)
			v[PX_RATE_DENIALS] += px_svc_sum(i, offsetof(struct
			    px_svc_counters, analyser) + k * one, nw);
}

/* Slot i's delivered bytes per second (r->rate): each worker's bytes
 * since its previous credit over the time between the two. */
static void
px_rate_bytes(struct px_svc_rate *r, unsigned i, unsigned nw,
    const double *ct)
{
	const struct px_svc_counters *m;
	unsigned k;
	int d;

	r->rate[0] = r->rate[1] = 0;
	if (r->wbytes == NULL &&
	    (r->wbytes = calloc(nw, sizeof(*r->wbytes))) == NULL)
		return;
	for (k = 0; k < nw; k++) {
		double dt = ct[k] - px_credit_t[k];

		if ((m = px_metrics_get(k, i)) == NULL)
			continue;
		for (d = 0; d < 2; d++) {
			uint64_t v = atomic_load_explicit(&m->delivered[d],
			    memory_order_relaxed);

			if (dt > 0 && px_credit_t[k] > 0 && v >= r->wbytes[k][d])
				r->rate[d] += (double)(v - r->wbytes[k][d]) / dt;
			r->wbytes[k][d] = v;
		}
	}
}

static void
px_tput_sample(void)
{
	struct px_tput *p = &px_tput[px_tput_next];
	unsigned i, k, n = px_metrics_slots(), nw = px_workers_count();
	struct px_svc_rate *r;
	double ct[256];

	p->t = px_wall_now();
	p->bytes[0] = p->bytes[1] = 0;
	p->rate[0] = p->rate[1] = 0;
	if (nw > 256)
		nw = 256;
	for (k = 0; k < nw; k++)
		ct[k] = (double)atomic_load_explicit(&px_worker_get(k)->credit_us,
		    memory_order_relaxed) / 1e6;
	if (n > px_nrates && (r = realloc(px_rates, n * sizeof(*r))) != NULL) {
		memset(r + px_nrates, 0, (n - px_nrates) * sizeof(*r));
		px_rates = r;
		px_nrates = n;
	}
	for (i = 0; i < n; i++) {
		uint64_t v[PX_RATES];

		px_rate_values(i, nw, v);
		p->bytes[0] += v[PX_RATE_TO_SERVER];
		p->bytes[1] += v[PX_RATE_TO_CLIENT];
		if (i >= px_nrates)
			continue;
		r = &px_rates[i];
		r->t[0] = r->t[1];
		memcpy(r->v[0], r->v[1], sizeof(r->v[0]));
		r->t[1] = p->t;
		memcpy(r->v[1], v, sizeof(v));
		px_rate_bytes(r, i, nw, ct);
		p->rate[0] += r->rate[0];
		p->rate[1] += r->rate[1];
	}
	memcpy(px_credit_t, ct, nw * sizeof(ct[0]));
	px_tput_next = (px_tput_next + 1) % PX_HIST_N;
	if (px_tput_n < PX_HIST_N)
		px_tput_n++;
}

/* To the next half second of the wall clock (see px_tput). */
static void
px_tput_arm(void)
{
	struct timespec now;
	struct timeval tv = { 0, 0 };
	long ns;

	clock_gettime(CLOCK_REALTIME, &now);
	ns = 500000000L - now.tv_nsec;
	if (ns < 100000000L)	/* just fired, or close to it: the next one */
		ns += 1000000000L;
	tv.tv_sec = ns / 1000000000L;
	tv.tv_usec = (suseconds_t)(ns % 1000000000L / 1000);
	evtimer_add(px_tput_ev, &tv);
}

static void
px_tput_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	px_tput_sample();
	px_tput_arm();
}

/* Slot i's counts its rates are made of, since the start. */
static void
px_totals_json(struct evbuffer *b, unsigned i, unsigned nw)
{
	uint64_t v[PX_RATES];

	px_rate_values(i, nw, v);
	evbuffer_add_printf(b, "\"errors\":%llu,\"denials\":%llu,"
	    "\"tls_failures\":%llu,\"delivered_to_server\":%llu,"
	    "\"delivered_to_client\":%llu",
	    (unsigned long long)v[PX_RATE_ERRORS],
	    (unsigned long long)v[PX_RATE_DENIALS],
	    (unsigned long long)v[PX_RATE_TLS_FAILURES],
	    (unsigned long long)v[PX_RATE_TO_SERVER],
	    (unsigned long long)v[PX_RATE_TO_CLIENT]);
}

/* Slot i's rates per second between its last two samples (0 before). */
static void
px_rate_json(struct evbuffer *b, unsigned i)
{
	const struct px_svc_rate *r = i < px_nrates ? &px_rates[i] : NULL;
	double dt = r != NULL && r->t[0] > 0 ? r->t[1] - r->t[0] : 0;
	double v[PX_RATES] = { 0 };
	int k;

	for (k = 0; k < PX_RATES && dt > 0; k++)
		v[k] = r->v[1][k] >= r->v[0][k] ?
		    (double)(r->v[1][k] - r->v[0][k]) / dt : 0;
	if (r != NULL) {
		v[PX_RATE_TO_SERVER] = r->rate[0];
		v[PX_RATE_TO_CLIENT] = r->rate[1];
	}
	evbuffer_add_printf(b, "{\"sessions\":%.3f,\"to_server\":%.1f,"
	    "\"to_client\":%.1f,\"errors\":%.3f,\"denials\":%.3f,"
	    "\"tls_failures\":%.3f}", v[PX_RATE_SESSIONS],
	    v[PX_RATE_TO_SERVER], v[PX_RATE_TO_CLIENT], v[PX_RATE_ERRORS],
	    v[PX_RATE_DENIALS], v[PX_RATE_TLS_FAILURES]);
}

/* The daemon's delivered bytes per second over the last second. */
static void
px_tput_rate_json(struct evbuffer *b)
{
	const struct px_tput *p[2];
	double v[2] = { 0, 0 }, dt = 0;
	int k;

	/* (over: the time between the admin's samples, for a reader's
	 * check; the rates are over the workers' own credit times) */

	if (px_tput_n >= 2) {
		p[1] = &px_tput[(px_tput_next + PX_HIST_N - 1) % PX_HIST_N];
		p[0] = &px_tput[(px_tput_next + PX_HIST_N - 2) % PX_HIST_N];
		dt = p[1]->t - p[0]->t;
		for (k = 0; k < 2; k++)
			v[k] = p[1]->rate[k];
	}
	evbuffer_add_printf(b, ",\"rate\":{\"to_server\":%.1f,"
	    "\"to_client\":%.1f,\"over\":%.3f}", v[0], v[1], dt);
}

/* "zone_denials": refusals by service, zones of both ends and reason. */
static void
px_zone_denials_json(struct evbuffer *b, const struct px_scrape *sc)
{
	struct px_zone_denial *all;
	size_t n = px_zone_denials(sc, &all), j;
	const char *svc, *an;
	unsigned ai;

	evbuffer_add_printf(b, ",\"zone_denials\":[");
	for (j = 0; j < n; j++) {
		(void)px_metrics_slot(all[j].slot, &svc, &an, &ai);
		evbuffer_add_printf(b, "%s{\"service\":", j ? "," : "");
		px_json_str(b, svc);
		evbuffer_add_printf(b, ",\"client_zone\":");
		px_json_str(b, all[j].client_zone);
		evbuffer_add_printf(b, ",\"server_zone\":");
		px_json_str(b, all[j].server_zone);
		evbuffer_add_printf(b, ",\"reason\":\"%s\",\"count\":%llu}",
		    px_denial_names[all[j].reason],
		    (unsigned long long)all[j].n);
	}
	evbuffer_add_printf(b, "]");
	free(all);
}

/* The services, their settings and counters (summed over the workers);
 * the status page derives rates from two of these. */
/* Per-partner daily quotas: the day's usage (quota.h). */
static void
px_admin_api_quotas(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();

	(void)arg;
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	px_quota_json(b);
	px_admin_reply(req, "application/json", b);
}

static void
px_admin_api_services(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	struct px_scrape sc = { 0 };
	bool first = true;
	unsigned i, c;

	(void)arg;
	if (b == NULL || px_scrape_open(&sc) == -1) {
		px_scrape_close(&sc);
		if (b != NULL)
			evbuffer_free(b);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add_printf(b, "{\"version\":\"%s\",\"node\":\"%s\",\"time\":%.3f,"
	    "\"uptime\":%lld,\"workers\":%u,\"history\":[", PROXYD_VERSION,
	    px_log_node(), px_wall_now(), (long long)(time(NULL) - px_started), sc.nw);
		for (i = 0; i < px_tput_n; i++) {
		const struct px_tput *p = &px_tput[(px_tput_next + PX_HIST_N -
		    px_tput_n + i) % PX_HIST_N];

		evbuffer_add_printf(b, "%s[%.3f,%llu,%llu,%.1f,%.1f]",
		    i ? "," : "", p->t, (unsigned long long)p->bytes[0],
		    (unsigned long long)p->bytes[1], p->rate[0], p->rate[1]);
	}
	evbuffer_add_printf(b, "]");
	px_admin_reload_json(b);
	px_admin_ha_json(b);
	px_members_json(b);
	evbuffer_add_printf(b, ",\"services\":[");
	for (i = 0; i < sc.nslots; i++) {
		const char *svc, *an, *mode, *listen, *target;
		const char *const *names;
		unsigned ai;
		bool current;

		if (sc.labels[i] == NULL || !px_metrics_slot(i, &svc, &an, &ai))
			continue;
		px_metrics_slot_info(i, &mode, &listen, &target, &current);
#define PX_J(f) (unsigned long long)px_svc_sum(i, \
	offsetof(struct px_svc_counters, f), sc.nw)
		evbuffer_add_printf(b, "%s\n{\"name\":", first ? "" : ",");
		first = false;
		px_json_str(b, svc);
		evbuffer_add_printf(b, ",\"analyser\":\"%s\",\"mode\":\"%s\","
		    "\"listen\":\"%s\",\"target\":\"%s\",\"current\":%s,"
		    "\"active\":%llu,\"accepted\":%llu,\"to_server\":%llu,"
		    "\"to_client\":%llu,\"connect_failures\":%llu,"
		    "\"denied\":{\"acl\":%llu,\"max-sessions\":%llu,"
		    "\"direct\":%llu,\"server\":%llu,\"no-service\":%llu},"
		    "\"limited\":{\"sessions\":%llu,\"connections\":%llu,"
		    "\"requests\":%llu,\"transfers\":%llu,"
		    "\"untracked\":%llu},"
		    "\"events\":{", an, mode ? mode : "",
		    listen, target, current ? "true" : "false",
		    PX_J(active), PX_J(accepted), PX_J(bytes[0]), PX_J(bytes[1]),
		    PX_J(connect_failures), PX_J(denied[PX_DENY_ACL]),
		    PX_J(denied[PX_DENY_MAX_SESSIONS]),
		    PX_J(denied[PX_DENY_DIRECT]), PX_J(denied[PX_DENY_SERVER]),
		    PX_J(denied[PX_DENY_NO_SERVICE]),
		    PX_J(limited[PX_LIMITED_SESSIONS]),
		    PX_J(limited[PX_LIMITED_CONNECTIONS]),
		    PX_J(limited[PX_LIMITED_REQUESTS]),
		    PX_J(limited[PX_LIMITED_TRANSFERS]), PX_J(limit_untracked));
#undef PX_J
		names = px_analysers[ai]->counters;
		for (c = 0; names != NULL && names[c] != NULL &&
		    c < PX_AN_COUNTERS_MAX; c++)
			evbuffer_add_printf(b, "%s\"%s\":%llu", c ? "," : "",
			    names[c], (unsigned long long)px_svc_sum(i,
			    offsetof(struct px_svc_counters, analyser) +
			    c * sizeof(atomic_uint_fast64_t), sc.nw));
		evbuffer_add_printf(b, "},\"totals\":{");
		px_totals_json(b, i, sc.nw);
		evbuffer_add_printf(b, "},\"rate\":");
		px_rate_json(b, i);
		evbuffer_add_printf(b, "}");
	}
	evbuffer_add_printf(b, "\n]");
	/* <source-limits>: the table is fixed in size (srclimit.h). */
	evbuffer_add_printf(b, ",\"source_limits\":{\"entries\":%u,"
	    "\"size\":%u,\"bytes\":%zu}", px_sl_used(), PX_SL_ENTRIES,
	    (size_t)PX_SL_ENTRIES * PX_SL_ENTRY_BYTES);
	px_zone_denials_json(b, &sc);
	evbuffer_add_printf(b, "}\n");
	px_scrape_close(&sc);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Cache-Control", "no-store");
	px_admin_reply(req, "application/json", b);
}

/* cmake/embed.cmake makes proxyd/admin/status.html this string. */
extern const char px_schema_status_html[];

static void
px_admin_root(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	(void)arg;
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add_reference(b, px_schema_status_html,
	    strlen(px_schema_status_html), NULL, NULL);
	evhttp_add_header(h, "Content-Type", "text/html; charset=utf-8");
	/* Everything it needs is inline: nothing may be fetched elsewhere. */
	evhttp_add_header(h, "Content-Security-Policy", "default-src 'none'; "
	    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
	    "connect-src 'self'; img-src 'self'");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void
px_admin_other(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, 404, "try /, /metrics, /status, /sessions, "
	    "/api/services or /api/sessions");
}

int
px_admin_status_start(struct event_base *base, struct evhttp *http)
{
	if ((px_tput_ev = evtimer_new(base, px_tput_cb, NULL)) == NULL)
		return -1;
	px_tput_sample();
	px_tput_arm();
	evhttp_set_cb(http, "/status", px_admin_status, NULL);
	evhttp_set_cb(http, "/sessions", px_admin_sessions, NULL);
	evhttp_set_cb(http, "/api/sessions", px_admin_sessions, NULL);
	evhttp_set_cb(http, "/api/services", px_admin_api_services, NULL);
	evhttp_set_cb(http, "/api/quotas", px_admin_api_quotas, NULL);
	evhttp_set_cb(http, "/", px_admin_root, NULL);
	evhttp_set_gencb(http, px_admin_other, NULL);
	return 0;
}

void
px_admin_status_stop(void)
{
	unsigned i;

	if (px_tput_ev != NULL)
		event_free(px_tput_ev);
	px_tput_ev = NULL;
	for (i = 0; i < px_nrates; i++)
		free(px_rates[i].wbytes);
	free(px_rates);
	px_rates = NULL;
	px_nrates = 0;
	px_conntrack_close(px_admin_ct);
	px_admin_ct = NULL;
}
