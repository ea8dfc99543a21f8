/* The quota table (quota.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <libxml/tree.h>

#include "cfgread.h"
#include "json.h"
#include "parse.h"
#include "prom.h"
#include "quota.h"

#define PX_QUOTA_BUCKETS	4096	/* a power of two */

struct px_quota {
	struct px_quota		*next;		/* in its bucket; set once */
	uint64_t		 hash;
	_Atomic uint64_t	 day;		/* of the counts below */
	_Atomic uint64_t	 bytes, transfers;
	/* Since start, whatever the day. */
	_Atomic uint64_t	 refused_bytes, refused_transfers, cuts;
	char			*service, *partner;
};

static _Atomic(struct px_quota *) px_quota_table[PX_QUOTA_BUCKETS];
static _Atomic unsigned px_quota_count;
static _Atomic uint64_t px_quota_full;

/* ---- configuration ---------------------------------------------------- */

int
px_attr_quota(struct px_cfgerr *e, const xmlNode *n, struct px_quota_limit *l)
{
	l->bytes = l->transfers = 0;
	if (px_attr_size(e, n, "quota-bytes", 1, UINT64_MAX, &l->bytes) == -1 ||
	    px_attr_uint(e, n, "quota-transfers", 1, UINT32_MAX,
	    &l->transfers) == -1)
		return -1;
	return 0;
}

bool
px_quota_limited(const struct px_quota_limit *l)
{
	return l->bytes != 0 || l->transfers != 0;
}

/* ---- the clock -------------------------------------------------------- */

static pthread_once_t px_quota_once = PTHREAD_ONCE_INIT;
static const char *px_quota_clock;

static void
px_quota_clock_init(void)
{
	px_quota_clock = getenv("PROXYD_QUOTA_CLOCK");
	if (px_quota_clock != NULL && px_quota_clock[0] == '\0')
		px_quota_clock = NULL;
}

uint64_t
px_quota_day(void)
{
	long long t = (long long)time(NULL);
	FILE *f;

	pthread_once(&px_quota_once, px_quota_clock_init);
	if (px_quota_clock != NULL && (f = fopen(px_quota_clock, "re")) != NULL) {
		if (fscanf(f, "%lld", &t) != 1)
			t = (long long)time(NULL);
		fclose(f);
	}
	return t < 0 ? 0 : (uint64_t)t / 86400;
}

/* ---- the table -------------------------------------------------------- */

/* FNV-1a over service, a NUL, partner. */
static uint64_t
px_quota_hash(const char *service, const char *partner)
{
	uint64_t h = 1469598103934665603ULL;
	const char *p;

	for (p = service; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h *= 1099511628211ULL;
	for (p = partner; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h;
}

static struct px_quota *
px_quota_find(struct px_quota *q, uint64_t h, const char *service,
    const char *partner)
{
	for (; q != NULL; q = q->next)
		if (q->hash == h && strcmp(q->service, service) == 0 &&
		    strcmp(q->partner, partner) == 0)
			return q;
	return NULL;
}

static struct px_quota *
px_quota_new(uint64_t h, const char *service, const char *partner)
{
	struct px_quota *q;

	if (atomic_fetch_add(&px_quota_count, 1) >= PX_QUOTA_MAX) {
		atomic_fetch_sub(&px_quota_count, 1);
		return NULL;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->service = strdup(service)) == NULL ||
	    (q->partner = strdup(partner)) == NULL) {
		if (q != NULL)
			free(q->service);
		free(q);
		atomic_fetch_sub(&px_quota_count, 1);
		return NULL;
	}
	q->hash = h;
	atomic_init(&q->day, px_quota_day());
	return q;
}

struct px_quota *
px_quota_get(const char *service, const char *partner)
{
	uint64_t h = px_quota_hash(service, partner);
	_Atomic(struct px_quota *) *bucket =
	    &px_quota_table[h & (PX_QUOTA_BUCKETS - 1)];
	struct px_quota *head, *q, *mine = NULL;

	head = atomic_load_explicit(bucket, memory_order_acquire);
	for (;;) {
		if ((q = px_quota_find(head, h, service, partner)) != NULL) {
			/* Another thread made it meanwhile: ours goes. */
			if (mine != NULL) {
				free(mine->service);
				free(mine->partner);
				free(mine);
				atomic_fetch_sub(&px_quota_count, 1);
			}
			return q;
		}
		if (mine == NULL &&
		    (mine = px_quota_new(h, service, partner)) == NULL)
			return NULL;
		mine->next = head;
		/* On failure head is the new head: look again from it. */
		if (atomic_compare_exchange_weak_explicit(bucket, &head, mine,
		    memory_order_acq_rel, memory_order_acquire))
			return mine;
	}
}

/* A new day starts the counts afresh. Whoever swaps the day clears
 * them; a byte added by another thread in between is lost to the new day,
 * which at midnight is harmless. */
static void
px_quota_roll(struct px_quota *q)
{
	uint64_t today = px_quota_day(), d = atomic_load(&q->day);

	if (d != today && atomic_compare_exchange_strong(&q->day, &d, today)) {
		atomic_store(&q->bytes, 0);
		atomic_store(&q->transfers, 0);
	}
}

enum px_quota_kind
px_quota_begin(struct px_quota *q, const struct px_quota_limit *l,
    uint64_t *used, uint64_t *limit)
{
	uint64_t n;

	px_quota_roll(q);
	if (l->bytes != 0 && (n = atomic_load(&q->bytes)) >= l->bytes) {
		atomic_fetch_add(&q->refused_bytes, 1);
		*used = n;
		*limit = l->bytes;
		return PX_QUOTA_BYTES;
	}
	n = atomic_fetch_add(&q->transfers, 1);
	if (l->transfers != 0 && n >= l->transfers) {
		atomic_fetch_sub(&q->transfers, 1);
		atomic_fetch_add(&q->refused_transfers, 1);
		*used = n;
		*limit = l->transfers;
		return PX_QUOTA_TRANSFERS;
	}
	return PX_QUOTA_OK;
}

void
px_quota_admit(struct px_quota *q, uint64_t bytes)
{
	uint64_t n;

	px_quota_roll(q);
	atomic_fetch_add(&q->transfers, 1);
	n = atomic_load(&q->bytes);
	while (n < bytes && !atomic_compare_exchange_weak(&q->bytes, &n,
	    bytes))
		;
}

void
px_quota_refused(struct px_quota *q, enum px_quota_kind k)
{
	if (k == PX_QUOTA_BYTES)
		atomic_fetch_add(&q->refused_bytes, 1);
	else if (k == PX_QUOTA_TRANSFERS)
		atomic_fetch_add(&q->refused_transfers, 1);
}

_Atomic uint64_t *
px_quota_bytes(struct px_quota *q)
{
	return &q->bytes;
}

bool
px_quota_take(struct px_quota *q, uint64_t limit, uint64_t n, uint64_t *used)
{
	uint64_t before = atomic_fetch_add(&q->bytes, n);

	if (limit != 0 && before + n > limit) {
		atomic_fetch_sub(&q->bytes, n);
		*used = before;
		return false;
	}
	*used = before + n;
	return true;
}

void
px_quota_settle(struct px_quota *q, uint64_t charged, uint64_t moved)
{
	uint64_t n, back;

	if (moved >= charged) {
		atomic_fetch_add(&q->bytes, moved - charged);
		return;
	}
	back = charged - moved;
	n = atomic_load(&q->bytes);
	while (!atomic_compare_exchange_weak(&q->bytes, &n,
	    n > back ? n - back : 0))
		;
}

void
px_quota_cut(struct px_quota *q)
{
	atomic_fetch_add(&q->cuts, 1);
}

void
px_quota_usage(struct px_quota *q, uint64_t *bytes, uint64_t *transfers)
{
	px_quota_roll(q);
	*bytes = atomic_load(&q->bytes);
	*transfers = atomic_load(&q->transfers);
}

void
px_quota_refuse_full(void)
{
	atomic_fetch_add(&px_quota_full, 1);
}

/* ---- metrics ---------------------------------------------------------- */

static void
px_quota_usage_row(struct evbuffer *b, const char *name,
    const struct px_quota *q, uint64_t v)
{
	evbuffer_add_printf(b, "%s{service=\"", name);
	px_prom_label(b, q->service);
	evbuffer_add(b, "\",partner=\"", 11);
	px_prom_label(b, q->partner);
	evbuffer_add_printf(b, "\"} %llu\n", (unsigned long long)v);
}

/* The refusals summed per service: services are few (a linear look). */
#define PX_QUOTA_SERVICES	256

struct px_quota_sum {
	const char	*service;
	uint64_t	 n[3];		/* transfers, bytes, cut */
};

static void
px_quota_refusals(struct evbuffer *b)
{
	static const char *const kinds[] = { "transfers", "bytes", "cut" };
	struct px_quota_sum *sum;
	struct px_quota *q;
	size_t i, k, ns = 0;

	evbuffer_add_printf(b, "# HELP proxyd_quota_refusals_total Transfers "
	    "refused at their start by a partner's daily quota (kind transfers "
	    "or bytes), or cut mid-way at its byte limit (kind cut).\n"
	    "# TYPE proxyd_quota_refusals_total counter\n");
	if ((sum = calloc(PX_QUOTA_SERVICES, sizeof(*sum))) == NULL)
		return;
	for (i = 0; i < PX_QUOTA_BUCKETS; i++)
		for (q = atomic_load(&px_quota_table[i]); q != NULL;
		    q = q->next) {
			for (k = 0; k < ns; k++)
				if (strcmp(sum[k].service, q->service) == 0)
					break;
			if (k == ns) {
				if (ns == PX_QUOTA_SERVICES)
					continue;
				sum[ns++].service = q->service;
			}
			sum[k].n[0] += atomic_load(&q->refused_transfers);
			sum[k].n[1] += atomic_load(&q->refused_bytes);
			sum[k].n[2] += atomic_load(&q->cuts);
		}
	for (k = 0; k < ns; k++)
		for (i = 0; i < 3; i++) {
			evbuffer_add_printf(b, "proxyd_quota_refusals_total{"
			    "service=\"");
			px_prom_label(b, sum[k].service);
			evbuffer_add_printf(b, "\",kind=\"%s\"} %llu\n",
			    kinds[i], (unsigned long long)sum[k].n[i]);
		}
	free(sum);
}

void
px_quota_metrics(struct evbuffer *b)
{
	struct px_quota *q;
	uint64_t bytes, transfers;
	unsigned i;

	evbuffer_add_printf(b, "# HELP proxyd_quota_used_bytes Bytes a partner "
	    "moved today (UTC day), under a daily quota.\n"
	    "# TYPE proxyd_quota_used_bytes gauge\n");
	for (i = 0; i < PX_QUOTA_BUCKETS; i++)
		for (q = atomic_load(&px_quota_table[i]); q != NULL;
		    q = q->next) {
			px_quota_usage(q, &bytes, &transfers);
			px_quota_usage_row(b, "proxyd_quota_used_bytes", q,
			    bytes);
		}
	evbuffer_add_printf(b, "# HELP proxyd_quota_used_transfers Transfers "
	    "a partner started today (UTC day), under a daily quota.\n"
	    "# TYPE proxyd_quota_used_transfers gauge\n");
	for (i = 0; i < PX_QUOTA_BUCKETS; i++)
		for (q = atomic_load(&px_quota_table[i]); q != NULL;
		    q = q->next) {
			px_quota_usage(q, &bytes, &transfers);
			px_quota_usage_row(b, "proxyd_quota_used_transfers", q,
			    transfers);
		}
	px_quota_refusals(b);
	evbuffer_add_printf(b, "# HELP proxyd_quota_table_full_total Transfers "
	    "refused because the quota table was full (%u partners).\n"
	    "# TYPE proxyd_quota_table_full_total counter\n"
	    "proxyd_quota_table_full_total %llu\n", PX_QUOTA_MAX,
	    (unsigned long long)atomic_load(&px_quota_full));
}

void
px_quota_json(struct evbuffer *b)
{
	struct px_quota *q;
	uint64_t bytes, transfers;
	unsigned i;
	bool first = true;

	evbuffer_add_printf(b, "{\"day\":%llu,\"quotas\":[",
	    (unsigned long long)px_quota_day());
	for (i = 0; i < PX_QUOTA_BUCKETS; i++)
		for (q = atomic_load(&px_quota_table[i]); q != NULL;
		    q = q->next) {
			px_quota_usage(q, &bytes, &transfers);
			evbuffer_add_printf(b, "%s{\"service\":", first ? "" :
			    ",");
			px_json_str(b, q->service);
			evbuffer_add_printf(b, ",\"partner\":");
			px_json_str(b, q->partner);
			evbuffer_add_printf(b, ",\"bytes\":%llu,\"transfers\":%llu,"
			    "\"refused_transfers\":%llu,\"refused_bytes\":%llu,"
			    "\"cuts\":%llu}", (unsigned long long)bytes,
			    (unsigned long long)transfers, (unsigned long long)
			    atomic_load(&q->refused_transfers),
			    (unsigned long long)atomic_load(&q->refused_bytes),
			    (unsigned long long)atomic_load(&q->cuts));
			first = false;
		}
	evbuffer_add_printf(b, "]}\n");
}

/* ---- the state file --------------------------------------------------- */

/* A key part as one word: %XX for '%' and bytes outside 0x21..0x7e. */
static void
px_quota_word(FILE *f, const char *v)
{
	for (; *v != '\0'; v++) {
		unsigned char c = (unsigned char)*v;

		if (c <= 0x20 || c >= 0x7f || c == '%')
			fprintf(f, "%%%02X", c);
		else
			fputc(c, f);
	}
}

/* The reverse, in place; -1 on a bad escape. */
static int
px_quota_unword(char *v)
{
	char *w = v;
	unsigned c;

	for (; *v != '\0'; v++) {
		if (*v != '%') {
			*w++ = *v;
			continue;
		}
		if (sscanf(v + 1, "%2X", &c) != 1 || c == 0)
			return -1;
		*w++ = (char)c;
		v += 2;
	}
	*w = '\0';
	return 0;
}

#define PX_QUOTA_MAGIC	"proxyd-quotas 1"

int
px_quota_save(const char *path)
{
	char tmp[4096];
	struct px_quota *q;
	uint64_t today = px_quota_day(), bytes, transfers;
	unsigned i;
	FILE *f;
	int rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new", path) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((f = fopen(tmp, "we")) == NULL)
		return -1;
	fprintf(f, "%s\n", PX_QUOTA_MAGIC);
	for (i = 0; i < PX_QUOTA_BUCKETS; i++)
		for (q = atomic_load(&px_quota_table[i]); q != NULL;
		    q = q->next) {
			px_quota_usage(q, &bytes, &transfers);
			if (atomic_load(&q->day) != today ||
			    (bytes == 0 && transfers == 0))
				continue;
			fprintf(f, "%llu ", (unsigned long long)today);
			px_quota_word(f, q->service);
			fputc(' ', f);
			px_quota_word(f, q->partner);
			fprintf(f, " %llu %llu\n", (unsigned long long)bytes,
			    (unsigned long long)transfers);
		}
	rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -1;
	if (fclose(f) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) == 0)
		return 0;
	i = (unsigned)errno;
	(void)unlink(tmp);
	errno = (int)i;
	return -1;
}

int
px_quota_load(const char *path, size_t *n)
{
	char line[1100], service[520], partner[520];
	unsigned long long day, bytes, transfers;
	uint64_t today = px_quota_day();
	struct px_quota *q;
	FILE *f;
	int rc = 0;

	*n = 0;
	if ((f = fopen(path, "re")) == NULL)
		return errno == ENOENT ? 0 : -1;
	if (fgets(line, sizeof(line), f) == NULL ||
	    strncmp(line, PX_QUOTA_MAGIC "\n", sizeof(PX_QUOTA_MAGIC)) != 0) {
		fclose(f);
		errno = EINVAL;
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%llu %519s %519s %llu %llu", &day, service,
		    partner, &bytes, &transfers) != 5 ||
		    px_quota_unword(service) == -1 ||
		    px_quota_unword(partner) == -1) {
			errno = EINVAL;
			rc = -1;
			break;
		}
		/* Another day's counts are over. */
		if (day != today)
			continue;
		if ((q = px_quota_get(service, partner)) == NULL) {
			rc = -1;
			break;
		}
		atomic_store(&q->day, today);
		atomic_store(&q->bytes, bytes);
		atomic_store(&q->transfers, transfers);
		(*n)++;
	}
	fclose(f);
	return rc;
}
