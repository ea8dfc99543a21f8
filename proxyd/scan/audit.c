/* Audit records (audit.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "audit.h"
#include "json.h"
#include "log.h"
#include "parse.h"

bool
px_audit_enabled(void)
{
	return px_log_record_on();
}

struct px_audit *
px_audit_begin(int64_t announced)
{
	struct px_audit *a;

	if (!px_audit_enabled() || (a = calloc(1, sizeof(*a))) == NULL)
		return NULL;
	if ((a->sha = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(a->sha, EVP_sha256(), NULL) != 1) {
		px_audit_cancel(a);
		return NULL;
	}
	a->announced = announced;
	return a;
}

void
px_audit_feed(struct px_audit *a, const void *buf, size_t n)
{
	if (a == NULL || n == 0)
		return;
	(void)EVP_DigestUpdate(a->sha, buf, n);
	a->size += n;
}

void
px_audit_feed_evbuffer(struct px_audit *a, struct evbuffer *b, size_t n)
{
	struct evbuffer_ptr at;
	struct evbuffer_iovec v[16];
	int k, i;

	if (a == NULL || n == 0 ||
	    evbuffer_ptr_set(b, &at, 0, EVBUFFER_PTR_SET) == -1)
		return;
	while (n > 0) {
		size_t took = 0;

		if ((k = evbuffer_peek(b, (ev_ssize_t)n, &at, v, 16)) <= 0)
			return;
		for (i = 0; i < k && i < 16 && n > 0; i++) {
			size_t m = v[i].iov_len < n ? v[i].iov_len : n;

			px_audit_feed(a, v[i].iov_base, m);
			n -= m;
			took += m;
		}
		if (n > 0 && evbuffer_ptr_set(b, &at, took,
		    EVBUFFER_PTR_ADD) == -1)
			return;
	}
}

void
px_audit_cancel(struct px_audit *a)
{
	if (a == NULL)
		return;
	EVP_MD_CTX_free(a->sha);
	free(a);
}

bool
px_audit_drop_below(struct px_audit **a, uint64_t min_size)
{
	if ((*a)->size >= min_size || ((*a)->announced >= 0 &&
	    (uint64_t)(*a)->announced >= min_size))
		return false;
	px_audit_cancel(*a);
	*a = NULL;
	return true;
}

/* ---- the line ---------------------------------------------------------- */

struct px_json {
	char	*buf;
	size_t	 cap, len;
	bool	 full;
};

static void
px_json_raw(struct px_json *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
px_json_raw(struct px_json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= j->cap - j->len)
		j->full = true;
	else
		j->len += (size_t)n;
}

/* ,"key":"value" or ,"key":null */
static void
px_json_str_field(struct px_json *j, const char *key, const char *v)
{
	size_t vlen;

	if (v == NULL) {
		px_json_raw(j, ",\"%s\":null", key);
		return;
	}
	vlen = strlen(v);
	/* Room for the worst case: every byte escaped as \u00XX. */
	if (j->full || j->len + strlen(key) + 6 * vlen + 16 > j->cap) {
		j->full = true;
		return;
	}
	px_json_raw(j, ",\"%s\":\"", key);
	j->len += px_json_escape(j->buf + j->len, j->cap - j->len, v, vlen);
	px_json_raw(j, "\"");
}

static void
px_json_addr_field(struct px_json *j, const char *key,
    const struct sockaddr *sa)
{
	char a[PX_ADDRSTRLEN];

	px_json_str_field(j, key, sa != NULL && sa->sa_family != 0 ?
	    px_sockaddr_str(sa, a, sizeof(a)) : NULL);
}

size_t
px_audit_format(char *buf, size_t cap, const struct px_audit *a,
    const char *sha256_hex, const struct px_audit_info *in)
{
	struct px_json j = { .buf = buf, .cap = cap };
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	px_json_raw(&j, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	/* Which node of a cluster wrote it; none outside the daemon. */
	if (px_log_node()[0] != '\0')
		px_json_str_field(&j, "node", px_log_node());
	px_json_str_field(&j, "service", in->service);
	px_json_str_field(&j, "analyser", in->analyser);
	px_json_raw(&j, ",\"session\":%llu", (unsigned long long)in->session);
	px_json_addr_field(&j, "client", in->client);
	px_json_addr_field(&j, "server", in->server);
	px_json_str_field(&j, "client_zone", in->client_zone);
	px_json_str_field(&j, "server_zone", in->server_zone);
	px_json_str_field(&j, "user", in->user);
	if (in->auth != NULL)
		px_json_str_field(&j, "auth", in->auth);
	px_json_str_field(&j, "rule", in->rule);
	if (in->transfer_rule != NULL)
		px_json_str_field(&j, "transfer_rule", in->transfer_rule);
	px_json_str_field(&j, "file", in->file);
	px_json_str_field(&j, "direction", in->direction);
	if (a->announced >= 0)
		px_json_raw(&j, ",\"announced_size\":%lld",
		    (long long)a->announced);
	else
		px_json_raw(&j, ",\"announced_size\":null");
	px_json_raw(&j, ",\"size\":%llu,\"complete\":%s",
	    (unsigned long long)a->size, in->complete ? "true" : "false");
	px_json_str_field(&j, "sha256", sha256_hex);
	px_json_str_field(&j, "tls_server_subject", a->tls_server[0] != '\0' ?
	    a->tls_server : NULL);
	if (in->ja4 != NULL)
		px_json_str_field(&j, "ja4", in->ja4);
	if (in->ja4s != NULL)
		px_json_str_field(&j, "ja4s", in->ja4s);
	if (a->data_ja4[0] != '\0')
		px_json_str_field(&j, "data_ja4", a->data_ja4);
	if (a->data_ja4s[0] != '\0')
		px_json_str_field(&j, "data_ja4s", a->data_ja4s);
	px_json_str_field(&j, "tls_client_subject", a->tls_client[0] != '\0' ?
	    a->tls_client : NULL);
	px_json_str_field(&j, "scan_verdict", in->scan_verdict);
	px_json_str_field(&j, "threat", in->threat != NULL ? in->threat :
	    a->threat[0] != '\0' ? a->threat : NULL);
	px_json_str_field(&j, "content_type", in->content_type);
	px_json_str_field(&j, "content_action", in->content_action);
	px_json_str_field(&j, "verdict", in->verdict);
	if (in->reason != NULL)
		px_json_str_field(&j, "reason", in->reason);
	px_json_raw(&j, "}");
	return j.full ? 0 : j.len;
}

/* ---- counters ---------------------------------------------------------- */

struct px_audit_row {
	char		 service[72];
	char		 verdict[16];
	unsigned long long n;
};

#define PX_AUDIT_ROWS	256

static pthread_mutex_t px_audit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct px_audit_row px_audit_rows[PX_AUDIT_ROWS];
static size_t px_audit_nrows;

static void
px_audit_count(const char *service, const char *verdict)
{
	size_t i;

	pthread_mutex_lock(&px_audit_lock);
	for (i = 0; i < px_audit_nrows; i++)
		if (strcmp(px_audit_rows[i].service, service) == 0 &&
		    strcmp(px_audit_rows[i].verdict, verdict) == 0)
			break;
	if (i == px_audit_nrows && i < PX_AUDIT_ROWS) {
		snprintf(px_audit_rows[i].service,
		    sizeof(px_audit_rows[i].service), "%s", service);
		snprintf(px_audit_rows[i].verdict,
		    sizeof(px_audit_rows[i].verdict), "%s", verdict);
		px_audit_nrows++;
	}
	if (i < PX_AUDIT_ROWS)
		px_audit_rows[i].n++;
	pthread_mutex_unlock(&px_audit_lock);
}

void
px_audit_end(struct px_audit *a, const struct px_audit_info *in)
{
	static _Thread_local char line[PX_LOG_RECORD_MAX];
	unsigned char md[EVP_MAX_MD_SIZE];
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	unsigned mdlen = 0, i;
	size_t len;

	if (a == NULL)
		return;
	if (EVP_DigestFinal_ex(a->sha, md, &mdlen) != 1)
		mdlen = 0;
	for (i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[2 * mdlen] = '\0';
	len = px_audit_format(line, sizeof(line) - 1, a, mdlen ? hex : NULL,
	    in);
	if (len == 0)
		px_log(LOG_WARNING, in->session, "audit record over %d bytes: "
		    "not written", PX_LOG_RECORD_MAX);
	else if (px_log_record(line, len))
		px_audit_count(in->service != NULL ? in->service : "-",
		    in->verdict != NULL ? in->verdict : "accept");
	px_audit_cancel(a);
}

void
px_audit_metrics(struct evbuffer *b)
{
	size_t i;

	evbuffer_add_printf(b, "# HELP proxyd_audit_records_total Audit "
	    "records written (one per audited transfer), by the policy's "
	    "verdict.\n# TYPE proxyd_audit_records_total counter\n");
	pthread_mutex_lock(&px_audit_lock);
	for (i = 0; i < px_audit_nrows; i++)
		evbuffer_add_printf(b, "proxyd_audit_records_total{service="
		    "\"%s\",verdict=\"%s\"} %llu\n", px_audit_rows[i].service,
		    px_audit_rows[i].verdict, px_audit_rows[i].n);
	pthread_mutex_unlock(&px_audit_lock);
	evbuffer_add_printf(b, "# HELP proxyd_audit_dropped_total Audit "
	    "records lost: the log thread's ring was full."
	    "\n# TYPE proxyd_audit_dropped_total counter\n"
	    "proxyd_audit_dropped_total %llu\n",
	    (unsigned long long)px_log_records_dropped());
}
