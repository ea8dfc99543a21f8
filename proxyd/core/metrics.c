/* Per-service counters and histograms in slots for the daemon's life
 * (metrics.h), the denial reasons, and the monotonic microsecond clock
 * (px_metrics_now_us). */
#include "metrics.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <time.h>

#include <linux/sockios.h>

#include <event2/buffer.h>

#include "config.h"
#include "log.h"
#include "session.h"
#include "worker.h"
#include "zone.h"

/* Blocks come in chunks of PX_SLOT_CHUNK; at most PX_SLOT_MAX slots over
 * the daemon's life (a reload that adds services past that counts them in
 * the overflow block, said once in the log). */
#define PX_SLOT_CHUNK	16
#define PX_SLOT_CHUNKS	256
#define PX_SLOT_MAX	(PX_SLOT_CHUNK * PX_SLOT_CHUNKS)

const uint64_t px_hist_bounds_us[PX_HIST_BOUNDS] = {
	500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000, 60000000, 300000000,
	3600000000ULL,
};

/* Main thread only: written at register, read by the admin. */
struct px_slot {
	char		*service;
	const char	*analyser;
	unsigned	 analyser_index;
	bool		 current;	/* in the last registered config */
	/* What the last config that had it said, for /api/services. */
	const char	*mode;
	char		 listen[PX_ADDRSTRLEN];
	char		 target[PX_ADDRSTRLEN];	/* "" when none */
	/* Some config gave it TLS: its TLS series are exported from then on
	 * (a counter's series does not vanish at a reload). */
	bool		 tls;
};

static struct px_slot px_slots[PX_SLOT_MAX];
/* Released after the entry is written: a worker may look up (at a
 * reload) while the main thread registers the next one. */
static atomic_uint px_nslots;
static bool px_slots_full_said;
/* [worker][chunk]; the worker reads its pointers only after the config
 * handover (an atomic exchange), which orders them after the stores. */
static struct px_svc_counters *(*px_chunks)[PX_SLOT_CHUNKS];
static unsigned px_chunks_workers;
/* Denials by zone pair: per worker, a table (px_zd_find) allocated at
 * its first denial. */
struct px_zd_entry;
static _Atomic(struct px_zd_entry *) *px_zd;
static unsigned px_zd_workers;
/* Where services past PX_SLOT_MAX count (one per worker, never shown). */
static struct px_svc_counters *px_overflow;

uint64_t
px_metrics_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t
px_metrics_since_us(const struct timeval *start)
{
	struct timeval now, d;

	gettimeofday(&now, NULL);
	if (timercmp(&now, start, <))
		return 0;	/* the clock stepped back */
	timersub(&now, start, &d);
	return (uint64_t)d.tv_sec * 1000000 + (uint64_t)d.tv_usec;
}

void
px_hist_observe(struct px_hist *h, uint64_t us)
{
	unsigned i;

	for (i = 0; i < PX_HIST_BOUNDS && us > px_hist_bounds_us[i]; i++)
		;
	PX_SC_ADD(h, bucket[i], 1);
	PX_SC_ADD(h, sum_us, us);
}

static int
px_slot_find(const struct px_service *svc)
{
	unsigned i, n = atomic_load_explicit(&px_nslots, memory_order_acquire);

	for (i = 0; i < n; i++)
		if (px_slots[i].analyser == svc->analyser->name &&
		    strcmp(px_slots[i].service, svc->name) == 0)
			return (int)i;
	return -1;
}

/* Allocation failures at start are fatal elsewhere; at a reload they
 * leave the service in the overflow block, said in the log. */
static int
px_slot_add(const struct px_service *svc, unsigned nworkers)
{
	unsigned i = atomic_load(&px_nslots), c = i / PX_SLOT_CHUNK, w;
	char *name;

	if (i >= PX_SLOT_MAX)
		return -1;
	for (w = 0; w < nworkers; w++) {
		if (px_chunks[w][c] != NULL)
			continue;
		if ((px_chunks[w][c] = calloc(PX_SLOT_CHUNK,
		    sizeof(struct px_svc_counters))) == NULL)
			return -1;
	}
	if ((name = strdup(svc->name)) == NULL)
		return -1;
	px_slots[i].service = name;
	px_slots[i].analyser = svc->analyser->name;
	px_slots[i].analyser_index = px_analyser_index(svc->analyser);
	atomic_store_explicit(&px_nslots, i + 1, memory_order_release);
	return (int)i;
}

void
px_metrics_register(const struct px_config *cfg, unsigned nworkers)
{
	size_t i;
	unsigned k;

	if (px_chunks == NULL) {
		px_chunks = calloc(nworkers, sizeof(*px_chunks));
		px_overflow = calloc(nworkers, sizeof(*px_overflow));
		if (px_chunks == NULL || px_overflow == NULL) {
			free(px_chunks);
			free(px_overflow);
			px_chunks = NULL;
			px_overflow = NULL;
			return;
		}
		px_chunks_workers = nworkers;
		/* Each worker's denials table comes at its first denial. */
		if ((px_zd = calloc(nworkers, sizeof(*px_zd))) != NULL)
			px_zd_workers = nworkers;
	}
	for (k = 0; k < atomic_load(&px_nslots); k++)
		px_slots[k].current = false;
	for (i = 0; i < cfg->nservices; i++) {
		const struct px_service *svc = &cfg->services[i];
		int s = px_slot_find(svc);

		if (s == -1)
			s = px_slot_add(svc, px_chunks_workers);
		if (s != -1) {
			struct px_slot *sl = &px_slots[s];

			sl->current = true;
			sl->mode = px_mode_name(svc->mode);
			sl->tls = sl->tls || svc->tls_client != NULL ||
			    svc->tls_server != NULL ||
			    svc->tls_passthrough != NULL ||
			    svc->starttls_client != NULL ||
			    svc->starttls_server != NULL;
			px_sockaddr_str((const struct sockaddr *)&svc->listen,
			    sl->listen, sizeof(sl->listen));
			sl->target[0] = '\0';
			if (svc->has_target)
				px_sockaddr_str((const struct sockaddr *)
				    &svc->target, sl->target, sizeof(sl->target));
		}
		else if (!px_slots_full_said) {
			px_slots_full_said = true;
			px_log(LOG_WARNING, 0, "metrics: no room for service %s "
			    "(out of memory or over %u services since start): "
			    "its counters are not exported", svc->name,
			    PX_SLOT_MAX);
		}
	}
}

struct px_svc_counters *
px_metrics_block(unsigned w, const struct px_service *svc)
{
	static struct px_svc_counters lost;	/* no table at all */
	int s;

	if (px_chunks == NULL || w >= px_chunks_workers)
		return &lost;
	/* Reads px_slots from a worker: entries below px_nslots never change
	 * once written, and a worker looks up only services of a config the
	 * main thread registered before handing it over. */
	if ((s = px_slot_find(svc)) == -1)
		return &px_overflow[w];
	return &px_chunks[w][s / PX_SLOT_CHUNK][s % PX_SLOT_CHUNK];
}

unsigned
px_metrics_slots(void)
{
	return atomic_load(&px_nslots);
}

const struct px_svc_counters *
px_metrics_get(unsigned w, unsigned i)
{
	if (px_chunks == NULL || w >= px_chunks_workers ||
	    i >= atomic_load(&px_nslots))
		return NULL;
	return &px_chunks[w][i / PX_SLOT_CHUNK][i % PX_SLOT_CHUNK];
}

bool
px_metrics_slot(unsigned i, const char **service, const char **analyser,
    unsigned *analyser_index)
{
	uint64_t active = 0;
	unsigned w;

	if (i >= atomic_load(&px_nslots))
		return false;
	*service = px_slots[i].service;
	*analyser = px_slots[i].analyser;
	*analyser_index = px_slots[i].analyser_index;
	if (px_slots[i].current)
		return true;
	for (w = 0; w < px_chunks_workers; w++)
		active += atomic_load_explicit(&px_metrics_get(w, i)->active,
		    memory_order_relaxed);
	return active != 0;
}

bool
px_metrics_slot_tls(unsigned i)
{
	return i < atomic_load(&px_nslots) && px_slots[i].tls;
}

void
px_metrics_slot_info(unsigned i, const char **mode, const char **listen,
    const char **target, bool *current)
{
	*mode = px_slots[i].mode;
	*listen = px_slots[i].listen;
	*target = px_slots[i].target;
	*current = px_slots[i].current;
}

/* ---- a session's block ---------------------------------------------- */

/* A session counts in its service's sessions_accepted_total once: at
 * accept when its listener has one service, else once the dispatch chose
 * one (px_metrics_session_rebind) or, refused before that, at its end in
 * the block of the listener's first service, which also counts the
 * denial. Its sessions_active follows it. */
void
px_metrics_session_start(struct px_session *s, const struct px_listener *l)
{
	s->m = l->m;
	PX_SC_ADD(s->m, active, 1);
	if (l->svc->group == NULL || l->svc->group->n <= 1) {
		PX_SC_ADD(s->m, accepted, 1);
		s->m_final = true;
	}
}

void
px_metrics_session_rebind(struct px_session *s)
{
	struct px_worker *w = s->w;
	struct px_svc_counters *m;
	size_t i = (size_t)(s->svc - s->cfg->services);

	/* The worker's listeners are per service of its config, blocks
	 * resolved; a session of an older config looks its block up. */
	if (s->cfg == w->cfg && i < w->nlisteners)
		m = w->listeners[i].m;
	else
		m = px_metrics_block(w->id, s->svc);
	if (m != s->m) {
		PX_SC_ADD(s->m, active, -1);
		PX_SC_ADD(m, active, 1);
		s->m = m;
	}
	if (!s->m_final) {
		PX_SC_ADD(s->m, accepted, 1);
		s->m_final = true;
	}
}

void
px_metrics_session_end(struct px_session *s)
{
	PX_SC_ADD(s->m, active, -1);
	if (!s->m_final) {
		PX_SC_ADD(s->m, accepted, 1);
		s->m_final = true;
	}
	px_metrics_credit(s, true);
	px_hist_observe(&s->m->session_duration,
	    px_metrics_since_us(&s->start_tv));
}

/* ---- delivered bytes ------------------------------------------------- */

/* Of s->bytes[dir], what proxyd's queues and the destination socket
 * still hold (the kernel's SIOCOUTQ: not yet acknowledged by the peer). */
static uint64_t
px_metrics_held(const struct px_session *s, enum px_dir dir)
{
	int side = dir == PX_TO_CLIENT ? 0 : 1;
	int fd = side == 0 ? s->cfd : s->sfd, q = 0;
	uint64_t n = 0;

	if (s->relay_on)
		n = px_relay_unsent(s->relay, dir);
	else if (side == 0 && s->dconn_open[0]) {
		n = evbuffer_get_length(s->dconn[0].out);
		fd = s->dconn[0].fd;
	} else if (side == 1 && s->drv != NULL) {
		/* A driver analyser's server conns. */
		const struct px_upconn *u;

		LIST_FOREACH(u, &s->drv->ups, link) {
			n += evbuffer_get_length(u->c.out);
			if (ioctl(u->c.fd, SIOCOUTQ, &q) == 0 && q > 0)
				n += (uint64_t)q;
		}
		return n;
	}
	if (fd != -1 && ioctl(fd, SIOCOUTQ, &q) == 0 && q > 0)
		n += (uint64_t)q;
	return n;
}

void
px_metrics_credit(struct px_session *s, bool final)
{
	int d;

	for (d = 0; d < 2; d++) {
		uint64_t done = s->bytes[d], held;

		/* Nothing moved since the last credit: no syscall. */
		if (done <= s->credited[d])
			continue;
		if (!final) {
			held = px_metrics_held(s, (enum px_dir)d);
			done = held < done ? done - held : 0;
		}
		if (done > s->credited[d]) {
			PX_SC_ADD(s->m, delivered[d], done - s->credited[d]);
			s->credited[d] = done;
		}
	}
}

/* ---- denials by zone pair ------------------------------------------- */

const char *const px_denial_names[PX_DENIALS + 1] = {
	"acl", "max-sessions", "direct", "server", "no-service", "analyser",
};

/* One (service, zones, reason) on one worker. Written by its worker only:
 * the fields first, then `used` (release), which the admin reads
 * (acquire) before them; an entry is never moved or freed. */
struct px_zd_entry {
	const struct px_svc_counters *m;	/* the service's block */
	unsigned		 slot;		/* UINT_MAX: not exported */
	unsigned		 reason;
	char			*cz, *sz;
	atomic_uint_fast64_t	 count;
	atomic_bool		 used;
};

static uint32_t
px_zd_hash(const void *m, unsigned reason, const char *cz, const char *sz)
{
	uint32_t h = 2166136261u ^ (uint32_t)((uintptr_t)m >> 4) ^ reason;

	for (; *cz != '\0'; cz++)
		h = (h ^ (uint8_t)*cz) * 16777619u;
	h = (h ^ 0xff) * 16777619u;
	for (; *sz != '\0'; sz++)
		h = (h ^ (uint8_t)*sz) * 16777619u;
	return h;
}

static unsigned
px_zd_slot_of(unsigned w, const struct px_svc_counters *m)
{
	unsigned i, n = px_metrics_slots();

	for (i = 0; i < n; i++)
		if (px_metrics_get(w, i) == m)
			return i;
	return UINT_MAX;
}

/* The entry of (m, reason, cz, sz) on worker w, made if new; NULL when
 * the table is full or out of memory (the denial still counts in
 * denied[]). Only on a refusal: a hash and a strcmp or two. */
static struct px_zd_entry *
px_zd_find(unsigned w, const struct px_svc_counters *m, unsigned reason,
    const char *cz, const char *sz)
{
	struct px_zd_entry *t, *e;
	uint32_t h;
	unsigned k;

	if (px_zd == NULL || w >= px_zd_workers)
		return NULL;
	if ((t = atomic_load_explicit(&px_zd[w], memory_order_relaxed)) == NULL) {
		if ((t = calloc(PX_ZD_CAP, sizeof(*t))) == NULL)
			return NULL;
		atomic_store_explicit(&px_zd[w], t, memory_order_release);
	}
	h = px_zd_hash(m, reason, cz, sz);
	for (k = 0; k < PX_ZD_CAP; k++) {
		e = &t[(h + k) % PX_ZD_CAP];
		if (!atomic_load_explicit(&e->used, memory_order_relaxed)) {
			if ((e->cz = strdup(cz)) == NULL ||
			    (e->sz = strdup(sz)) == NULL) {
				free(e->cz);
				e->cz = NULL;
				return NULL;
			}
			e->m = m;
			e->reason = reason;
			e->slot = px_zd_slot_of(w, m);
			atomic_store_explicit(&e->used, true,
			    memory_order_release);
			return e;
		}
		if (e->m == m && e->reason == reason &&
		    strcmp(e->cz, cz) == 0 && strcmp(e->sz, sz) == 0)
			return e;
	}
	return NULL;
}

void
px_metrics_denied(struct px_session *s, unsigned reason, uint64_t n)
{
	struct px_zd_entry *e;

	if (reason < PX_DENIALS)
		PX_SC_ADD(s->m, denied[reason], n);
	e = px_zd_find(s->w->id, s->m, reason,
	    px_zone_name(&s->cfg->zones, s->client_zone),
	    px_zone_name(&s->cfg->zones, s->server_zone));
	if (e != NULL)
		PX_SC_ADD(e, count, n);
}

bool
px_metrics_zone_denial(unsigned w, unsigned k, struct px_zone_denial *out)
{
	struct px_zd_entry *t, *e;

	if (px_zd == NULL || w >= px_zd_workers || k >= PX_ZD_CAP ||
	    (t = atomic_load_explicit(&px_zd[w], memory_order_acquire)) == NULL)
		return false;
	e = &t[k];
	if (!atomic_load_explicit(&e->used, memory_order_acquire) ||
	    e->slot == UINT_MAX)
		return false;
	out->slot = e->slot;
	out->reason = e->reason;
	out->client_zone = e->cz;
	out->server_zone = e->sz;
	out->n = atomic_load_explicit(&e->count, memory_order_relaxed);
	return true;
}

/* ---- what analysers report (analyser.h) ------------------------------ */

struct px_hist *
px_series_hist(struct px_svc_counters *m, const struct px_analyser *a,
    size_t i, unsigned v)
{
	return (struct px_hist *)(void *)&m->series[px_series_offset(a, i) +
	    (size_t)v * PX_SERIES_HIST_SLOTS];
}

void
px_session_series_add(struct px_session *s, unsigned series, unsigned value,
    uint64_t n)
{
	const struct px_analyser *a = s->svc->analyser;

	if (series >= a->nseries || value >= a->series[series].nvalues ||
	    a->series[series].kind != PX_SERIES_COUNTER)
		return;
	PX_SC_ADD(s->m, series[px_series_offset(a, series) + value], n);
}

void
px_session_series_observe(struct px_session *s, unsigned series,
    unsigned value, uint64_t us)
{
	const struct px_analyser *a = s->svc->analyser;

	if (series >= a->nseries || value >= a->series[series].nvalues ||
	    a->series[series].kind != PX_SERIES_HISTOGRAM)
		return;
	px_hist_observe(px_series_hist(s->m, a, series, value), us);
}

void
px_session_upstream_connected(struct px_session *s, bool ok)
{
	if (!ok) {
		PX_SC_ADD(s->m, connect_failures, 1);
		return;
	}
	if (s->connect_start_us != 0)
		px_hist_observe(&s->m->connect_duration,
		    px_metrics_now_us() - s->connect_start_us);
	s->connect_start_us = 0;
}
