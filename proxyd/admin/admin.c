/* The admin endpoint (admin.h): its HTTP server and routes, /metrics (the
 * workers' per-service and per-worker counters summed at scrape time, the
 * analysers' own series, the scanners', quotas', audit and TLS counters,
 * the HA state keepalived's notify script writes, the process), POST
 * /sessions/reset, the accept error handling that keeps a descriptor for
 * the endpoint, and the reload status. The status page is admin_status.c. */
#include "admin.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/resource.h>
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

#include <openssl/crypto.h>

#include "bucket.h"
#include "audit.h"
#include "config.h"
#include "conntrack.h"
#include "log.h"
#include "metrics.h"
#include "prom.h"
#include "quota.h"
#include "quota_store.h"
#include "auth.h"
#include "srclimit.h"
#include "listener.h"
#include "tls.h"
#include "worker.h"
#include "admin_int.h"

static struct evhttp *px_http;
/* The admin listener out of descriptors: its reserve one, the pause, and
 * the failures since the last warning (main thread only). */
static struct evconnlistener *px_admin_lev;
/* A rolling upgrade (core/handover.h): the listener the old process
 * passed to this one (-1: bind it), and in the old one, passed on. */
static int px_admin_given = -1;
static bool px_admin_passed;
static struct event *px_admin_pause;
static int px_admin_reserve = -1;
static uint64_t px_admin_fail_n, px_admin_fail_logged_ms;
static atomic_uint_fast64_t px_admin_accept_failures;
static const struct px_reload_stats *px_reloads;
time_t px_started;
static char *px_ha_file;	/* admin/@ha-state-file: NULL = no HA */


/* A counter of a block, by its offset there. */
struct px_metric {
	const char	*name;
	const char	*labels;
	const char	*type;		/* NULL: one more sample of the above */
	const char	*help;
	size_t		 offset;
};


/* Per service (struct px_svc_counters), labelled service= and analyser=. */
#define PX_S(n, l, t, h, f) { n, l, t, h, offsetof(struct px_svc_counters, f) }
static const struct px_metric px_svc_metrics[] = {
	PX_S("proxyd_sessions_accepted_total", "", "counter",
	    "Connections accepted, before ACL and limits.", accepted),
	PX_S("proxyd_sessions_active", "", "gauge", "Live sessions.", active),
	PX_S("proxyd_sessions_denied_total", "reason=\"acl\"", "counter",
	    "Connections refused, by reason.", denied[PX_DENY_ACL]),
	PX_S("proxyd_sessions_denied_total", "reason=\"max-sessions\"", NULL,
	    NULL, denied[PX_DENY_MAX_SESSIONS]),
	PX_S("proxyd_sessions_denied_total", "reason=\"direct\"", NULL, NULL,
	    denied[PX_DENY_DIRECT]),
	PX_S("proxyd_sessions_denied_total", "reason=\"server\"", NULL, NULL,
	    denied[PX_DENY_SERVER]),
	PX_S("proxyd_sessions_denied_total", "reason=\"no-service\"", NULL,
	    NULL, denied[PX_DENY_NO_SERVICE]),
	PX_S("proxyd_bytes_total", "direction=\"to-server\"", "counter",
	    "Bytes relayed, by direction.", bytes[0]),
	PX_S("proxyd_bytes_total", "direction=\"to-client\"", NULL, NULL,
	    bytes[1]),
	PX_S("proxyd_splice_sessions_total", "", "counter",
	    "Sessions relayed with splice(2).", splice_sessions),
	PX_S("proxyd_idle_timeouts_total", "", "counter",
	    "Sessions closed by the idle timer.", idle_timeouts),
	PX_S("proxyd_upstream_connects_total", "", "counter",
	    "Server connects started (pooled connections not included).",
	    upstream_connects),
	PX_S("proxyd_upstream_connect_failures_total", "", "counter",
	    "Server connects that failed or timed out.", connect_failures),
	PX_S("proxyd_upstream_connections_total", "kind=\"new\"", "counter",
	    "Server connections used by pooling analysers (http), new or "
	    "reused from the worker's pool.", upstream_new),
	PX_S("proxyd_upstream_connections_total", "kind=\"reused\"", NULL, NULL,
	    upstream_reused),
	PX_S("proxyd_upstream_pool_lookups_total", "result=\"hit\"", "counter",
	    "Server connections asked of the worker's pool, found idle "
	    "(hit) or not (miss).", upstream_reused),
	PX_S("proxyd_upstream_pool_lookups_total", "result=\"miss\"", NULL,
	    NULL, pool_misses),
	PX_S("proxyd_upstream_pool_stale_total", "", "counter",
	    "Pooled server connections found closed by the server, by the "
	    "service that parked them.", pool_stale),
	PX_S("proxyd_conntrack_lookups_total", "result=\"conntrack\"",
	    "counter", "Original destinations of redirected connections, by "
	    "source.", origdst[PX_ORIGDST_CONNTRACK]),
	PX_S("proxyd_conntrack_lookups_total", "result=\"original-dst\"", NULL,
	    NULL, origdst[PX_ORIGDST_SOCKOPT]),
	PX_S("proxyd_conntrack_lookups_total", "result=\"failed\"", NULL,
	    NULL, origdst[PX_ORIGDST_FAILED]),
	PX_S("proxyd_accept_failures_total", "", "counter",
	    "accept() failures for want of descriptors or memory (the "
	    "listener pauses 100 ms).", accept_failures),
	PX_S("proxyd_accept_refused_total", "", "counter",
	    "Connections accepted on the reserve descriptor and closed at "
	    "once, for want of descriptors.", refused_no_fd),
	PX_S("proxyd_limited_total", "limit=\"sessions\"", "counter",
	    "Connections (and HTTP requests, FTP transfers) refused by "
	    "<source-limits>, by the limit that decided.",
	    limited[PX_LIMITED_SESSIONS]),
	PX_S("proxyd_limited_total", "limit=\"connections\"", NULL, NULL,
	    limited[PX_LIMITED_CONNECTIONS]),
	PX_S("proxyd_limited_total", "limit=\"requests\"", NULL, NULL,
	    limited[PX_LIMITED_REQUESTS]),
	PX_S("proxyd_limited_total", "limit=\"transfers\"", NULL, NULL,
	    limited[PX_LIMITED_TRANSFERS]),
	PX_S("proxyd_limit_untracked_total", "", "counter",
	    "Connections <source-limits> admitted without counting them: "
	    "every entry their source may take held live sessions.",
	    limit_untracked),
};

/* Per service as above, for the services a config gave TLS. */
static const struct px_metric px_svc_tls_metrics[] = {
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"protocol-version\"", "counter",
	    "TLS handshakes (or records) that failed, by side and reason.",
	    tls.failures[0][PX_TLS_FAIL_PROTOCOL]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"no-shared-cipher\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_CIPHER]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"no-application-protocol\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_ALPN]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"not-tls\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_NOT_TLS]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"unknown-ca\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_UNKNOWN_CA]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"host-name-mismatch\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_HOSTNAME]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"expired\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_EXPIRED]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"no-certificate\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_NO_CERT]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"client\",reason=\"other\"", NULL, NULL,
	    tls.failures[0][PX_TLS_FAIL_OTHER]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"protocol-version\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_PROTOCOL]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"no-shared-cipher\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_CIPHER]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"no-application-protocol\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_ALPN]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"not-tls\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_NOT_TLS]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"unknown-ca\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_UNKNOWN_CA]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"host-name-mismatch\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_HOSTNAME]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"expired\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_EXPIRED]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"no-certificate\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_NO_CERT]),
	PX_S("proxyd_tls_failures_total",
	    "side=\"server\",reason=\"other\"", NULL, NULL,
	    tls.failures[1][PX_TLS_FAIL_OTHER]),
	PX_S("proxyd_tls_handshakes_total", "side=\"client\",resumed=\"no\"",
	    "counter", "TLS handshakes done, by side, full or resumed.",
	    tls.handshakes[0][0]),
	PX_S("proxyd_tls_handshakes_total", "side=\"client\",resumed=\"yes\"",
	    NULL, NULL, tls.handshakes[0][1]),
	PX_S("proxyd_tls_handshakes_total", "side=\"server\",resumed=\"no\"",
	    NULL, NULL, tls.handshakes[1][0]),
	PX_S("proxyd_tls_handshakes_total", "side=\"server\",resumed=\"yes\"",
	    NULL, NULL, tls.handshakes[1][1]),
	PX_S("proxyd_tls_passthrough_total", "verdict=\"accept\"", "counter",
	    "ClientHellos read by mode=\"passthrough\", by verdict.",
	    tls.passthrough[1]),
	PX_S("proxyd_tls_passthrough_total", "verdict=\"deny\"", NULL, NULL,
	    tls.passthrough[0]),
	PX_S("proxyd_tls_keybridge_leaves_total", "result=\"minted\"",
	    "counter", "Keybridge leaves, minted or from the worker's cache.",
	    tls.keybridge[0]),
	PX_S("proxyd_tls_keybridge_leaves_total", "result=\"cached\"", NULL,
	    NULL, tls.keybridge[1]),
	PX_S("proxyd_tls_keybridge_ca_total", "ca=\"trusted\"", "counter",
	    "Keybridge leaves served, by the CA that signed them.",
	    tls.keybridge_ca[0]),
	PX_S("proxyd_tls_keybridge_ca_total", "ca=\"untrusted\"", NULL, NULL,
	    tls.keybridge_ca[1]),
	PX_S("proxyd_tls_server_unverified_total", "", "counter",
	    "Server certificates that did not verify, let through by "
	    "verify=\"optional\".", tls.unverified),
	PX_S("proxyd_fingerprint_denied_total", "", "counter",
	    "ClientHellos refused by a <fingerprint> rule (JA4).",
	    tls.fingerprint_denied),
};

static uint64_t
px_load(const void *base, size_t offset)
{
	const atomic_uint_fast64_t *c = (const atomic_uint_fast64_t *)
	    ((const char *)base + offset);

	return atomic_load_explicit(c, memory_order_relaxed);
}

/* Slot i summed over the workers, at offset in struct px_svc_counters. */
uint64_t
px_svc_sum(unsigned i, size_t offset, unsigned nw)
{
	const struct px_svc_counters *m;
	uint64_t sum = 0;
	unsigned k;

	for (k = 0; k < nw; k++)
		if ((m = px_metrics_get(k, i)) != NULL)
			sum += px_load(m, offset);
	return sum;
}

int
px_scrape_open(struct px_scrape *sc)
{
	struct evbuffer *t;
	unsigned i;

	sc->nw = px_workers_count();
	sc->nslots = px_metrics_slots();
	sc->labels = calloc(sc->nslots + 1, sizeof(*sc->labels));
	sc->an = calloc(sc->nslots + 1, sizeof(*sc->an));
	if (sc->labels == NULL || sc->an == NULL || (t = evbuffer_new()) == NULL)
		return -1;
	for (i = 0; i < sc->nslots; i++) {
		const char *svc, *an;
		size_t n;

		if (!px_metrics_slot(i, &svc, &an, &sc->an[i]))
			continue;
		evbuffer_add_printf(t, "service=\"");
		px_prom_label(t, svc);
		evbuffer_add_printf(t, "\",analyser=\"");
		px_prom_label(t, an);
		evbuffer_add(t, "\"", 1);
		n = evbuffer_get_length(t);
		if ((sc->labels[i] = malloc(n + 1)) != NULL) {
			evbuffer_remove(t, sc->labels[i], n);
			sc->labels[i][n] = '\0';
		}
		evbuffer_drain(t, evbuffer_get_length(t));
	}
	evbuffer_free(t);
	return 0;
}

void
px_scrape_close(struct px_scrape *sc)
{
	unsigned i;

	for (i = 0; sc->labels != NULL && i < sc->nslots; i++)
		free(sc->labels[i]);
	free(sc->labels);
	free(sc->an);
}

static void
px_family(struct evbuffer *b, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* A histogram summed from n blocks (non-cumulative buckets, in us). */
struct px_hist_sum {
	uint64_t	bucket[PX_HIST_BOUNDS + 1];
	uint64_t	sum_us, count;
};

static void
px_hist_add(struct px_hist_sum *t, const struct px_hist *h)
{
	unsigned i;
	uint64_t v;

	for (i = 0; i <= PX_HIST_BOUNDS; i++) {
		v = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
		t->bucket[i] += v;
		t->count += v;
	}
	t->sum_us += atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

/* Samples of one histogram; labels end without a comma ("" for none). The
 * sum is read after the buckets: a scrape racing an observation may show
 * it in _sum one scrape late, never a count above the +Inf bucket. */
static void
px_hist_print(struct evbuffer *b, const char *name, const char *labels,
    const struct px_hist_sum *t)
{
	const char *sep = labels[0] != '\0' ? "," : "";
	uint64_t cum = 0;
	unsigned i;

	for (i = 0; i < PX_HIST_BOUNDS; i++) {
		cum += t->bucket[i];
		evbuffer_add_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name,
		    labels, sep, (double)px_hist_bounds_us[i] / 1e6,
		    (unsigned long long)cum);
	}
	evbuffer_add_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n"
	    "%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", name, labels, sep,
	    (unsigned long long)t->count,
	    name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
	    (double)t->sum_us / 1e6,
	    name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
	    (unsigned long long)t->count);
}

/* A per-service histogram at offset (a struct px_hist) in the blocks. */
static void
px_svc_hist(struct evbuffer *b, const struct px_scrape *sc, const char *name,
    const char *help, size_t offset)
{
	unsigned i, k;

	px_family(b, name, "histogram", help);
	for (i = 0; i < sc->nslots; i++) {
		struct px_hist_sum t = { { 0 }, 0, 0 };
		const struct px_svc_counters *m;

		if (sc->labels[i] == NULL)
			continue;
		for (k = 0; k < sc->nw; k++)
			if ((m = px_metrics_get(k, i)) != NULL)
				px_hist_add(&t, (const struct px_hist *)
				    ((const char *)m + offset));
		px_hist_print(b, name, sc->labels[i], &t);
	}
}

/* A table of per-service counters, every service or (tls_only) those
 * with TLS. */
static void
px_svc_table(struct evbuffer *b, const struct px_scrape *sc,
    const struct px_metric *table, size_t n, bool tls_only)
{
	size_t j;
	unsigned i;

	for (j = 0; j < n; j++) {
		const struct px_metric *m = &table[j];

		if (m->type != NULL)
			px_family(b, m->name, m->type, m->help);
		for (i = 0; i < sc->nslots; i++)
			if (sc->labels[i] != NULL &&
			    (!tls_only || px_metrics_slot_tls(i)))
				evbuffer_add_printf(b, "%s{%s%s%s} %llu\n",
				    m->name, sc->labels[i], m->labels[0] ?
				    "," : "", m->labels, (unsigned long long)
				    px_svc_sum(i, m->offset, sc->nw));
	}
}

static void
px_admin_service_metrics(struct evbuffer *b, const struct px_scrape *sc)
{
	unsigned i, c;

	px_svc_table(b, sc, px_svc_metrics,
	    sizeof(px_svc_metrics) / sizeof(px_svc_metrics[0]), false);
	px_svc_table(b, sc, px_svc_tls_metrics,
	    sizeof(px_svc_tls_metrics) / sizeof(px_svc_tls_metrics[0]), true);
	px_family(b, "proxyd_analyser_events_total", "counter",
	    "Events counted by each service's analyser.");
	for (i = 0; i < sc->nslots; i++) {
		const char *const *names;

		if (sc->labels[i] == NULL)
			continue;
		names = px_analysers[sc->an[i]]->counters;
		for (c = 0; names != NULL && names[c] != NULL &&
		    c < PX_AN_COUNTERS_MAX; c++)
			evbuffer_add_printf(b, "proxyd_analyser_events_total"
			    "{%s,event=\"%s\"} %llu\n", sc->labels[i], names[c],
			    (unsigned long long)px_svc_sum(i,
			    offsetof(struct px_svc_counters, analyser) +
			    c * sizeof(atomic_uint_fast64_t), sc->nw));
	}
	px_svc_hist(b, sc, "proxyd_session_duration_seconds",
	    "Sessions by how long they lasted, from accept to close.",
	    offsetof(struct px_svc_counters, session_duration));
	px_svc_hist(b, sc, "proxyd_upstream_connect_duration_seconds",
	    "Server connects by the time they took to succeed.",
	    offsetof(struct px_svc_counters, connect_duration));
}

/* The series each analyser declares (struct px_series), for every
 * service of that analyser: a counter value shows once it is not 0, a
 * histogram value once it has counts (a plug service shows none). */
static void
px_admin_series_metrics(struct evbuffer *b, const struct px_scrape *sc)
{
	const struct px_svc_counters *m;
	unsigned a, i, k, v;
	size_t j, off;
	char val[32], lab[1100];

	for (a = 0; px_analysers[a] != NULL; a++) {
		const struct px_analyser *an = px_analysers[a];

		for (j = 0; j < an->nseries; j++) {
			const struct px_series *se = &an->series[j];

			px_family(b, se->name, se->kind == PX_SERIES_HISTOGRAM ?
			    "histogram" : "counter", se->help);
			off = px_series_offset(an, j);
			for (i = 0; i < sc->nslots; i++) {
				if (sc->labels[i] == NULL || sc->an[i] != a)
					continue;
				for (v = 0; v < se->nvalues; v++) {
					struct px_hist_sum t = { { 0 }, 0, 0 };
					uint64_t n = 0;

					for (k = 0; k < sc->nw; k++) {
						if ((m = px_metrics_get(k, i)) == NULL)
							continue;
						if (se->kind == PX_SERIES_HISTOGRAM)
							px_hist_add(&t, (const struct px_hist *)(const void *)
							    &m->series[off + (size_t)v * PX_SERIES_HIST_SLOTS]);
						else
							n += atomic_load_explicit(&m->series[off + v],
							    memory_order_relaxed);
					}
					if (se->kind == PX_SERIES_HISTOGRAM ? t.count == 0 :
					    n == 0)
						continue;
					se->value(v, val, sizeof(val));
					snprintf(lab, sizeof(lab), "%s,%s=\"%s\"",
					    sc->labels[i], se->label, val);
					if (se->kind == PX_SERIES_HISTOGRAM)
						px_hist_print(b, se->name, lab, &t);
					else
						evbuffer_add_printf(b, "%s{%s} %llu\n",
						    se->name, lab, (unsigned long long)n);
				}
			}
		}
	}
}

size_t
px_zone_denials(const struct px_scrape *sc, struct px_zone_denial **out)
{
	struct px_zone_denial d, *all = NULL, *p;
	size_t n = 0, cap = 0, j;
	unsigned w, k;

	for (w = 0; w < sc->nw; w++)
		for (k = 0; k < PX_ZD_CAP; k++) {
			if (!px_metrics_zone_denial(w, k, &d) ||
			    d.slot >= sc->nslots || sc->labels[d.slot] == NULL)
				continue;
			for (j = 0; j < n; j++)
				if (all[j].slot == d.slot &&
				    all[j].reason == d.reason &&
				    strcmp(all[j].client_zone, d.client_zone) == 0 &&
				    strcmp(all[j].server_zone, d.server_zone) == 0)
					break;
			if (j < n) {
				all[j].n += d.n;
				continue;
			}
			if (n == cap) {
				if ((p = realloc(all, (cap ? 2 * cap : 16) *
				    sizeof(*all))) == NULL)
					continue;
				all = p;
				cap = cap ? 2 * cap : 16;
			}
			all[n++] = d;
		}
	*out = all;
	return n;
}

/* proxyd_denied_total{client_zone=,server_zone=,reason=}. */
static void
px_admin_zone_denial_metrics(struct evbuffer *b, const struct px_scrape *sc)
{
	struct px_zone_denial *all;
	size_t n = px_zone_denials(sc, &all), j;

	px_family(b, "proxyd_denied_total", "counter",
	    "Refusals by the zones of client and server (\"-\": none, or "
	    "not looked up yet) and reason.");
	for (j = 0; j < n; j++) {
		evbuffer_add_printf(b, "proxyd_denied_total{%s,client_zone=\"",
		    sc->labels[all[j].slot]);
		px_prom_label(b, all[j].client_zone);
		evbuffer_add_printf(b, "\",server_zone=\"");
		px_prom_label(b, all[j].server_zone);
		evbuffer_add_printf(b, "\",reason=\"%s\"} %llu\n",
		    px_denial_names[all[j].reason], (unsigned long long)all[j].n);
	}
	free(all);
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

void
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

void
px_admin_reply(struct evhttp_request *req, const char *ctype,
    struct evbuffer *b)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    ctype);
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* Worker k's blocks summed, at offset in struct px_svc_counters. */
uint64_t
px_worker_sum(unsigned k, size_t offset)
{
	const struct px_svc_counters *m;
	unsigned i, n = px_metrics_slots();
	uint64_t sum = 0;

	for (i = 0; i < n; i++)
		if ((m = px_metrics_get(k, i)) != NULL)
			sum += px_load(m, offset);
	return sum;
}

/* Requests worker k answered: the counts of the request histograms its
 * services' analysers declare (http's request duration). */
static uint64_t
px_worker_requests(unsigned k)
{
	struct px_hist_sum t = { { 0 }, 0, 0 };
	const struct px_svc_counters *m;
	unsigned i, v, n = px_metrics_slots();
	size_t j;

	for (i = 0; i < n; i++) {
		const struct px_analyser *an;
		const char *svc, *name;
		unsigned ai = PX_ANALYSERS_MAX;

		/* Every slot, exported or not: a counter never goes down. */
		(void)px_metrics_slot(i, &svc, &name, &ai);
		if ((m = px_metrics_get(k, i)) == NULL || ai >= PX_ANALYSERS_MAX)
			continue;
		an = px_analysers[ai];
		for (j = 0; j < an->nseries; j++) {
			const struct px_series *se = &an->series[j];
			size_t off = px_series_offset(an, j);

			if (!se->requests || se->kind != PX_SERIES_HISTOGRAM)
				continue;
			for (v = 0; v < se->nvalues; v++)
				px_hist_add(&t, (const struct px_hist *)(const void *)
				    &m->series[off + (size_t)v * PX_SERIES_HIST_SLOTS]);
		}
	}
	return t.count;
}

/* Per-worker series: only what is about the worker itself, under names
 * of their own, so that no sum() counts a session twice. */
static void
px_admin_worker_metrics(struct evbuffer *b, const struct px_scrape *sc)
{
	unsigned k;
	char lab[32];

	px_family(b, "proxyd_worker_sessions_active", "gauge",
	    "Live sessions on each worker thread.");
	for (k = 0; k < sc->nw; k++)
		evbuffer_add_printf(b, "proxyd_worker_sessions_active{worker="
		    "\"%u\"} %llu\n", k, (unsigned long long)
		    px_worker_sum(k, offsetof(struct px_svc_counters, active)));
	px_family(b, "proxyd_worker_sessions_accepted_total", "counter",
	    "Connections accepted by each worker thread.");
	for (k = 0; k < sc->nw; k++)
		evbuffer_add_printf(b, "proxyd_worker_sessions_accepted_total"
		    "{worker=\"%u\"} %llu\n", k, (unsigned long long)
		    px_worker_sum(k, offsetof(struct px_svc_counters, accepted)));
	/* Sessions tell how connections were spread, these what each
	 * worker then carried: a keep-alive connection may bring 1 request
	 * or 10 000. */
	px_family(b, "proxyd_worker_requests_total", "counter",
	    "Requests each worker thread answered, all services (those "
	    "the analysers count as requests: http's).");
	for (k = 0; k < sc->nw; k++)
		evbuffer_add_printf(b, "proxyd_worker_requests_total{worker="
		    "\"%u\"} %llu\n", k, (unsigned long long)
		    px_worker_requests(k));
	px_family(b, "proxyd_worker_bytes_total", "counter",
	    "Bytes each worker thread relayed, all services.");
	for (k = 0; k < sc->nw; k++) {
		evbuffer_add_printf(b, "proxyd_worker_bytes_total{worker=\"%u\","
		    "direction=\"to-server\"} %llu\n", k, (unsigned long long)
		    px_worker_sum(k, offsetof(struct px_svc_counters,
		    bytes[PX_TO_SERVER])));
		evbuffer_add_printf(b, "proxyd_worker_bytes_total{worker=\"%u\","
		    "direction=\"to-client\"} %llu\n", k, (unsigned long long)
		    px_worker_sum(k, offsetof(struct px_svc_counters,
		    bytes[PX_TO_CLIENT])));
	}
	px_family(b, "proxyd_worker_sessions_handed_off_total", "counter",
	    "Connections each worker accepted and handed to a less loaded one.");
	for (k = 0; k < sc->nw; k++)
		evbuffer_add_printf(b, "proxyd_worker_sessions_handed_off_total"
		    "{worker=\"%u\"} %llu\n", k, (unsigned long long)
		    PX_COUNT_GET(px_worker_get(k), handed_off));
	px_family(b, "proxyd_upgrade_sessions_total", "counter",
	    "Sessions of a rolling upgrade (proxyd -s upgrade): passed to the "
	    "new process, drained here instead, taken from the old one.");
	{
		static const char *const side[] = { "passed", "drained", "taken" };
		uint64_t n[3] = { 0, 0, 0 };
		struct px_worker *w;

		for (k = 0; k < sc->nw; k++) {
			w = px_worker_get(k);
			n[0] += atomic_load_explicit(&w->ho_handed,
			    memory_order_relaxed);
			n[1] += atomic_load_explicit(&w->ho_drained,
			    memory_order_relaxed);
			n[2] += atomic_load_explicit(&w->ho_adopted,
			    memory_order_relaxed);
		}
		for (k = 0; k < 3; k++)
			evbuffer_add_printf(b, "proxyd_upgrade_sessions_total"
			    "{side=\"%s\"} %llu\n", side[k],
			    (unsigned long long)n[k]);
	}
	px_family(b, "proxyd_worker_loop_lag_seconds", "histogram",
	    "How late each worker's 250 ms tick ran: the time its event loop "
	    "was busy with other work.");
	for (k = 0; k < sc->nw; k++) {
		struct px_hist_sum t = { { 0 }, 0, 0 };

		px_hist_add(&t, &px_worker_get(k)->counters.loop_lag);
		snprintf(lab, sizeof(lab), "worker=\"%u\"", k);
		px_hist_print(b, "proxyd_worker_loop_lag_seconds", lab, &t);
	}
}

/* process_* as the Prometheus client libraries name them (procfs). */
static void
px_admin_process_metrics(struct evbuffer *b)
{
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	double btime = 0;
	struct rlimit rl;
	struct dirent *de;
	char line[1024], *p;
	unsigned fds = 0;
	bool stat_ok = false;
	FILE *f;
	DIR *d;

	if ((f = fopen("/proc/self/stat", "r")) != NULL) {
		/* After the command name, which may hold spaces and ')'. */
		stat_ok = fgets(line, sizeof(line), f) != NULL &&
		    (p = strrchr(line, ')')) != NULL &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
		    "%*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
		    &utime, &stime, &start, &vsize, &rss) == 5;
		fclose(f);
	}
	if ((f = fopen("/proc/stat", "r")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			if (strncmp(line, "btime ", 6) == 0)
				btime = strtod(line + 6, NULL);
		fclose(f);
	}
	if (tck <= 0)
		tck = 100;
	/* Out of descriptors (or memory) a value cannot be read: no sample
	 * rather than a wrong one. */
	if ((d = opendir("/proc/self/fd")) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.')
				fds++;
		closedir(d);
		px_family(b, "process_open_fds", "gauge",
		    "Number of open file descriptors.");
		/* Less the one opendir held. */
		evbuffer_add_printf(b, "process_open_fds %u\n", fds - 1);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		px_family(b, "process_max_fds", "gauge",
		    "Maximum number of open file descriptors.");
		evbuffer_add_printf(b, "process_max_fds %llu\n",
		    (unsigned long long)rl.rlim_cur);
	}
	if (!stat_ok)
		return;
	px_family(b, "process_cpu_seconds_total", "counter",
	    "Total user and system CPU time spent in seconds.");
	evbuffer_add_printf(b, "process_cpu_seconds_total %.2f\n",
	    (double)(utime + stime) / (double)tck);
	px_family(b, "process_virtual_memory_bytes", "gauge",
	    "Virtual memory size in bytes.");
	evbuffer_add_printf(b, "process_virtual_memory_bytes %llu\n", vsize);
	px_family(b, "process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.");
	evbuffer_add_printf(b, "process_resident_memory_bytes %lld\n",
	    rss * (long long)page);
	if (btime <= 0)
		return;
	px_family(b, "process_start_time_seconds", "gauge",
	    "Start time of the process since unix epoch in seconds.");
	evbuffer_add_printf(b, "process_start_time_seconds %.2f\n",
	    btime + (double)start / (double)tck);
}

static void
px_admin_metrics(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	struct px_scrape sc = { 0 };

	(void)arg;
	if (b == NULL || px_scrape_open(&sc) == -1) {
		px_scrape_close(&sc);
		if (b != NULL)
			evbuffer_free(b);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	px_admin_service_metrics(b, &sc);
	px_admin_series_metrics(b, &sc);
	px_admin_zone_denial_metrics(b, &sc);
	px_admin_worker_metrics(b, &sc);
	px_scrape_close(&sc);
	px_scan_metrics(b);
	px_content_metrics(b);
	px_audit_metrics(b);
	px_quota_metrics(b);
	px_auth_metrics(b);
	px_qstore_metrics(b);
	evbuffer_add_printf(b,
	    "# HELP proxyd_log_dropped_total Log lines lost to a full ring.\n"
	    "# TYPE proxyd_log_dropped_total counter\n"
	    "proxyd_log_dropped_total %llu\n"
	    "# HELP proxyd_config_reloads_total SIGHUP reloads, by result.\n"
	    "# TYPE proxyd_config_reloads_total counter\n"
	    "proxyd_config_reloads_total{result=\"ok\"} %llu\n"
	    "proxyd_config_reloads_total{result=\"failed\"} %llu\n"
	    "# HELP proxyd_config_last_reload_successful Whether the last "
	    "reload (or the start) loaded the configuration.\n"
	    "# TYPE proxyd_config_last_reload_successful gauge\n"
	    "proxyd_config_last_reload_successful %d\n"
	    "# HELP proxyd_config_last_reload_success_timestamp_seconds When "
	    "the running configuration was loaded.\n"
	    "# TYPE proxyd_config_last_reload_success_timestamp_seconds gauge\n"
	    "proxyd_config_last_reload_success_timestamp_seconds %lld\n"
	    "# HELP proxyd_config_last_reload_timestamp_seconds When the last "
	    "reload was tried, whatever its result (the start before any).\n"
	    "# TYPE proxyd_config_last_reload_timestamp_seconds gauge\n"
	    "proxyd_config_last_reload_timestamp_seconds %lld\n"
	    "# HELP proxyd_workers Worker threads.\n"
	    "# TYPE proxyd_workers gauge\nproxyd_workers %u\n"
	    "# HELP proxyd_admin_accept_failures_total accept() failures of "
	    "the admin listener.\n"
	    "# TYPE proxyd_admin_accept_failures_total counter\n"
	    "proxyd_admin_accept_failures_total %llu\n"
	    "# HELP proxyd_build_info The version of proxyd and of the "
	    "libraries it runs with.\n"
	    "# TYPE proxyd_build_info gauge\n"
	    "proxyd_build_info{version=\"%s\",openssl=\"%s\","
	    "libevent=\"%s\"} 1\n",
	    (unsigned long long)px_log_dropped(),
	    (unsigned long long)px_reloads->ok,
	    (unsigned long long)px_reloads->failed,
	    px_reloads->last_failed ? 0 : 1,
	    (long long)(px_reloads->last_ok_time ? px_reloads->last_ok_time :
	    px_started),
	    (long long)(px_reloads->last_time ? px_reloads->last_time :
	    px_started), sc.nw,
	    (unsigned long long)atomic_load(&px_admin_accept_failures),
	    PROXYD_VERSION, OpenSSL_version(OPENSSL_VERSION_STRING),
	    event_get_version());
	/* The node's name as one series of its own rather than a label on
	 * every series (a cluster's Prometheus joins on it when it needs
	 * to); the name has no character a label value escapes. */
	evbuffer_add_printf(b, "# HELP proxyd_node_info The name of this "
	    "proxyd among a cluster's nodes (<node name>, or the host "
	    "name).\n# TYPE proxyd_node_info gauge\n"
	    "proxyd_node_info{node=\"%s\"} 1\n", px_log_node());
	px_family(b, "proxyd_source_limit_entries", "gauge", "Entries of the "
	    "<source-limits> table that hold a source.");
	evbuffer_add_printf(b, "proxyd_source_limit_entries %u\n", px_sl_used());
	px_family(b, "proxyd_source_limit_entries_max", "gauge", "The "
	    "<source-limits> table's size (entries; fixed, 64 bytes each).");
	evbuffer_add_printf(b, "proxyd_source_limit_entries_max %u\n",
	    PX_SL_ENTRIES);
	px_admin_ha_metrics(b);
	px_members_metrics(b);
	px_admin_process_metrics(b);
	px_admin_reply(req, "text/plain; version=0.0.4; charset=utf-8", b);
}

/* POST /sessions/reset[?reason=ha]: every live session ends now with
 * resets (by=shutdown). For keepalived's notify script on leaving MASTER:
 * the sessions' packets go to the peer from then on, so the clients had
 * better learn at once than wait for the idle timeout. POST only, and no
 * Origin header: a web page open on the box must not be able to do it. */
static void
px_admin_sessions_reset(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq q;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	const char *r = NULL;
	enum px_reset_reason why = PX_RESET_ADMIN;
	unsigned long long live;
	struct evbuffer *b;
	unsigned asked;

	(void)arg;
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "POST");
		evhttp_send_error(req, 405, "POST only");
		return;
	}
	if (evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Origin") != NULL) {
		evhttp_send_error(req, 403, "not from a web page");
		return;
	}
	TAILQ_INIT(&q);
	if (query != NULL && evhttp_parse_query_str(query, &q) == 0)
		r = evhttp_find_header(&q, "reason");
	if (r != NULL && strcmp(r, "ha") == 0)
		why = PX_RESET_HA;
	else if (r != NULL || (query != NULL && *query != '\0')) {
		evhttp_clear_headers(&q);
		evhttp_send_error(req, 400, "reason: ha or none");
		return;
	}
	evhttp_clear_headers(&q);
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	live = (unsigned long long)atomic_load(&px_live_sessions);
	asked = px_workers_reset_sessions(why);
	px_log(LOG_NOTICE, 0, "admin: resetting every live session (%llu) "
	    "on %u worker(s): %s", live, asked, px_reset_reason_text(why));
	evbuffer_add_printf(b, "{\"live_sessions\":%llu,\"workers\":%u,"
	    "\"reason\":\"%s\"}\n", live, asked, px_reset_reason_text(why));
	px_admin_reply(req, "application/json", b);
}

static void
px_admin_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	if (px_admin_reserve == -1)
		px_admin_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (px_admin_lev != NULL && !px_admin_passed)
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

void
px_reload_note(struct px_reload_stats *r, bool ok)
{
	r->last_time = time(NULL);
	r->last_failed = !ok;
	if (ok) {
		r->ok++;
		r->last_ok_time = r->last_time;
		r->last_error[0] = '\0';
	} else
		r->failed++;
}

void
px_reload_note_error(struct px_reload_stats *r, const char *why)
{
	snprintf(r->last_error, sizeof(r->last_error), "%s",
	    why != NULL && why[0] != '\0' ? why : "(see the log)");
}

/* The "reload" member of the status JSON: the last attempt, its result
 * and, failed, its first error. */
void
px_admin_reload_json(struct evbuffer *b)
{
	const struct px_reload_stats *r = px_reloads;

	if (r == NULL)
		return;
	evbuffer_add_printf(b, ",\"reload\":{\"time\":%lld,\"ok\":%s,"
	    "\"ok_time\":%lld,\"ok_count\":%llu,\"failed_count\":%llu,"
	    "\"started\":%lld,\"error\":", (long long)r->last_time,
	    r->last_failed ? "false" : "true", (long long)r->last_ok_time,
	    (unsigned long long)r->ok, (unsigned long long)r->failed,
	    (long long)px_started);
	px_json_str(b, r->last_failed ? r->last_error : "");
	evbuffer_add_printf(b, "}");
}

int
px_admin_start(struct event_base *base, const struct px_config *cfg,
    const struct px_reload_stats *reloads)
{
	char a[PX_ADDRSTRLEN];
	int fd;

	px_started = time(NULL);
	px_reloads = reloads;
	if (!cfg->admin_enabled) {
		if (px_admin_given != -1)
			close(px_admin_given);
		px_admin_given = -1;
		return 0;
	}
	/* Like the admin address, a change takes a restart. */
	if (cfg->ha_state_file != NULL &&
	    (px_ha_file = strdup(cfg->ha_state_file)) == NULL)
		return -1;
	if (px_members_configure(cfg->members_file) == -1)
		return -1;
	px_sockaddr_str((const struct sockaddr *)&cfg->admin, a, sizeof(a));
	/* No SO_REUSEPORT: a second daemon must not share the admin port. */
	if ((fd = px_admin_given) != -1)
		px_admin_given = -1;
	else if ((fd = px_listener_socket((const struct sockaddr *)&cfg->admin,
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
	/* POST for /sessions/reset alone (it checks); no body. */
	evhttp_set_allowed_methods(px_http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_POST);
	/* It runs on the main thread with signals and reloads: an endless
	 * header line must not eat memory and CPU there. */
	evhttp_set_max_headers_size(px_http, 8192);
	evhttp_set_max_body_size(px_http, 0);
	evhttp_set_timeout(px_http, 10);
	evhttp_set_cb(px_http, "/metrics", px_admin_metrics, NULL);
	evhttp_set_cb(px_http, "/sessions/reset", px_admin_sessions_reset,
	    NULL);
	if (px_admin_status_start(base, px_http) == -1)
		return -1;
	px_log(LOG_INFO, 0, "admin endpoint on http://%s/metrics", a);
	return 0;
}

void
px_admin_use_fd(int fd)
{
	px_admin_given = fd;
}

int
px_admin_listen_fd(void)
{
	return px_admin_lev != NULL ? evconnlistener_get_fd(px_admin_lev) : -1;
}

void
px_admin_pass(void)
{
	px_admin_passed = true;
	if (px_admin_lev != NULL)
		evconnlistener_disable(px_admin_lev);
}

void
px_admin_unpass(void)
{
	px_admin_passed = false;
	if (px_admin_lev != NULL)
		evconnlistener_enable(px_admin_lev);
}

void
px_admin_stop(void)
{
	if (px_http != NULL)
		evhttp_free(px_http);	/* and its bound listener */
	px_http = NULL;
	px_admin_lev = NULL;
	px_admin_status_stop();
	if (px_admin_pause != NULL)
		event_free(px_admin_pause);
	px_admin_pause = NULL;
	if (px_admin_reserve != -1)
		close(px_admin_reserve);
	px_admin_reserve = -1;
	free(px_ha_file);
	px_ha_file = NULL;
	(void)px_members_configure(NULL);
}
