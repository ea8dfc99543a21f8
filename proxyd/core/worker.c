/* A worker thread (worker.h): its event base and listeners, accepting and
 * balancing connections between workers, the reaping of its sessions, its
 * pools, reloads, drain and stop, and the requests of the main and admin
 * threads (resets, snapshots, accept holds). */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "bucket.h"
#include "conn.h"
#include "conntrack.h"
#include "handover.h"
#include "listener.h"
#include "log.h"
#include "session.h"
#include "snapshot.h"
#include "upflush.h"
#include "upstream.h"

atomic_uint_fast64_t px_live_sessions;

static struct px_worker *px_workers;
static unsigned px_nworkers;

unsigned
px_workers_count(void)
{
	return px_nworkers;
}

struct px_worker *
px_worker_get(unsigned i)
{
	return i < px_nworkers ? &px_workers[i] : NULL;
}

static void px_worker_wake(struct px_worker *w);

/* An auth thread's answer is in w's box (auth.h). */
static void
px_worker_wake_auth(void *arg)
{
	px_worker_wake(arg);
}
static bool px_same_listen(const struct px_service *a,
    const struct px_service *b);

/* ---- balance ---------------------------------------------------------- */

/* SO_REUSEPORT picks a worker by a hash of the 4-tuple, blind to load: 50
 * keep-alive connections landed 18/32 on two workers. A worker that holds
 * clearly more sessions than a peer hands the new connection over; only
 * at accept, so the per-request paths stay lock-free. */

/* The stack of a worker that takes no more hand-offs (exiting). */
#define PX_HANDOFF_CLOSED	((struct px_handoff *)(uintptr_t)1)

static unsigned
px_worker_load(struct px_worker *w)
{
	return atomic_load_explicit(&w->nsessions, memory_order_relaxed) +
	    atomic_load_explicit(&w->incoming, memory_order_relaxed);
}

/* Which worker should take a connection w accepted: w itself, or a peer
 * with fewer sessions by more than a margin (so that churn at the same
 * load does not bounce connections). One peer per connection, in turn:
 * the "two choices" balance, O(1) whatever the number of workers. */
static struct px_worker *
px_balance_pick(struct px_worker *w)
{
	struct px_worker *o;
	unsigned mine, theirs, k;

	if (px_nworkers < 2)
		return w;
	k = 1 + w->balance_rr++ % (px_nworkers - 1);
	o = &px_workers[(w->id + k) % px_nworkers];
	if (atomic_load_explicit(&o->cmd, memory_order_relaxed) != PX_CMD_NONE)
		return w;
	mine = px_worker_load(w);
	theirs = px_worker_load(o);
	return mine > theirs + PX_BALANCE_MARGIN(mine) ? o : w;
}

/* Pushes h onto o's stack; false when o takes no more (h is untouched). */
static bool
px_handoff_push(struct px_worker *o, struct px_handoff *h)
{
	struct px_handoff *head = atomic_load(&o->handoffs);

	do {
		if (head == PX_HANDOFF_CLOSED)
			return false;
		h->next = head;
	} while (!atomic_compare_exchange_weak(&o->handoffs, &head, h));
	atomic_fetch_add(&o->incoming, 1);
	/* The first on an empty stack wakes the worker; the others find
	 * the wakeup pending. */
	if (head == NULL)
		px_worker_wake(o);
	return true;
}

/* The listener of w for the service a hand-off was accepted for: the
 * same index under the same config, else (one of the two switched to a
 * reload) the one on the same address; NULL if w has none. */
static struct px_listener *
px_handoff_listener(struct px_worker *w, const struct px_handoff *h)
{
	const struct px_service *svc = &h->cfg->services[h->svc_idx];
	size_t j;

	if (w->cfg == h->cfg && h->svc_idx < w->nlisteners)
		return &w->listeners[h->svc_idx];
	for (j = 0; j < w->nlisteners; j++)
		if (w->listeners[j].svc->group_idx == 0 &&
		    px_same_listen(w->listeners[j].svc, svc))
			return &w->listeners[j];
	return NULL;
}

/* Takes in what peers handed over: oldest first, as they came. */
static void
px_handoffs_take(struct px_worker *w, bool closing)
{
	struct px_handoff *h, *rev = NULL, *next;
	struct px_listener *l;

	h = atomic_exchange(&w->handoffs, closing ? PX_HANDOFF_CLOSED : NULL);
	if (h == PX_HANDOFF_CLOSED)
		return;
	for (; h != NULL; h = next) {
		next = h->next;
		h->next = rev;
		rev = h;
	}
	for (h = rev; h != NULL; h = next) {
		next = h->next;
		atomic_fetch_sub(&w->incoming, 1);
		if (h->ho != NULL)	/* a rolling upgrade's session */
			px_handover_adopt(w, h->cfg, h->svc_idx, h->fd,
			    h->sfd, h->ho, closing);
		else if (!closing && !w->draining &&
		    (l = px_handoff_listener(w, h)) != NULL)
			px_session_accept(l, h->fd, (struct sockaddr *)&h->sa,
			    h->salen);
		else
			close(h->fd);	/* shutting down: the client sees it */
		px_config_unref(h->cfg);
		free(h);
	}
}

/* ---- listeners -------------------------------------------------------- */

static void
px_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct px_listener *l = arg;
	struct px_worker *w = l->w, *o;
	struct px_handoff *h;

	(void)lev;
	o = px_balance_pick(w);
	if (o != w && (size_t)salen <= sizeof(h->sa) &&
	    (h = malloc(sizeof(*h))) != NULL) {
		h->cfg = px_config_ref(w->cfg);
		h->svc_idx = (size_t)(l - w->listeners);
		h->fd = (int)fd;
		h->sfd = -1;
		h->ho = NULL;
		h->salen = salen;
		memcpy(&h->sa, sa, (size_t)salen);
		if (px_handoff_push(o, h)) {
			PX_COUNT_ADD(w, handed_off, 1);
			return;
		}
		px_config_unref(h->cfg);
		free(h);
	}
	px_session_accept(l, (int)fd, sa, salen);
}

/* Until when workers leave their listeners paused (px_clock_ms()): the
 * admin endpoint, out of descriptors, asks for the ones it frees. */
static atomic_uint_fast64_t px_accept_hold_until;

void
px_workers_hold_accepts(uint64_t ms)
{
	atomic_store(&px_accept_hold_until, px_clock_ms() + ms);
}

/* Out of descriptors, the connection waiting in the backlog would only
 * time out: the reserve descriptor makes room to accept and close it (the
 * client sees the refusal at once). 1 if one was refused. */
static int
px_refuse_with_reserve(struct px_worker *w, struct px_listener *l,
    struct evconnlistener *lev)
{
	int fd;

	if (w->reserve_fd == -1)
		return 0;
	close(w->reserve_fd);
	w->reserve_fd = -1;
	fd = accept4(evconnlistener_get_fd(lev), NULL, NULL, SOCK_CLOEXEC);
	if (fd != -1) {
		close(fd);
		PX_SC_ADD(l->m, refused_no_fd, 1);
	}
	w->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return fd != -1;
}

/* Re-enables whatever listeners the worker has now: a reload or a drain
 * may have replaced or freed the one that failed. While the admin endpoint
 * holds them, a paused listener takes no descriptor but still refuses a
 * waiting client every 100 ms with the reserve one (which comes straight
 * back): held for as long as the admin is read, a client would otherwise
 * wait in the backlog until it gave up. */
static void
px_accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_worker *w = arg;
	uint64_t now = px_clock_ms(), hold = atomic_load(&px_accept_hold_until);
	uint64_t wait;
	struct px_listener *l;
	struct timeval tv;
	size_t i;

	(void)fd; (void)what;
	if (now < hold) {
		/* A reserve lost to another thread (px_refuse_with_reserve's
		 * open) is taken again as soon as a descriptor is free. */
		if (w->reserve_fd == -1)
			w->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		for (i = 0; i < w->nlisteners; i++) {
			l = &w->listeners[i];
			if (l->lev != NULL && l->paused)
				(void)px_refuse_with_reserve(w, l, l->lev);
		}
		wait = hold - now < 100 ? hold - now : 100;
		tv.tv_sec = 0;
		tv.tv_usec = (suseconds_t)wait * 1000;
		evtimer_add(w->accept_pause, &tv);
		return;
	}
	if (w->reserve_fd == -1)
		w->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (i = 0; i < w->nlisteners; i++)
		if (w->listeners[i].lev != NULL) {
			w->listeners[i].paused = false;
			evconnlistener_enable(w->listeners[i].lev);
		}
}

static void
px_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct px_listener *l = arg;
	struct px_worker *w = l->w;
	struct timeval pause = { 0, 100 * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	uint64_t now = px_clock_ms();

	/* EMFILE/ENFILE/ENOBUFS: back off instead of spinning on accept;
	 * idle pipes give their descriptors back; one line a second says
	 * how often it happened. */
	PX_SC_ADD(l->m, accept_failures, 1);
	w->accept_fail_n++;
	if (err == EMFILE || err == ENFILE) {
		px_pipe_pool_flush(&w->pipes);
		(void)px_refuse_with_reserve(w, l, lev);
	}
	if (now - w->accept_fail_logged_ms >= 1000) {
		px_log(LOG_WARNING, 0, "service %s: accept failed: %s (%llu "
		    "times since the last warning); pausing accepts for 100ms",
		    l->svc->name, strerror(err),
		    (unsigned long long)w->accept_fail_n);
		w->accept_fail_n = 0;
		w->accept_fail_logged_ms = now;
	}
	l->paused = true;
	evconnlistener_disable(lev);
	evtimer_add(w->accept_pause, &pause);
}

static bool
px_same_listen(const struct px_service *a, const struct px_service *b)
{
	return a->listen_len == b->listen_len &&
	    memcmp(&a->listen, &b->listen, a->listen_len) == 0 &&
	    a->mode == b->mode;
}

/* Builds the listener set for cfg, keeping the sockets of services whose
 * address did not change (so their accept queues survive a reload).
 * Returns the number of services that could not listen, or -1 (nothing
 * changed) when out of memory. */
static int
px_worker_listen(struct px_worker *w, struct px_config *cfg, FILE *errout)
{
	struct px_listener *nl;
	size_t i, j;
	int failed = 0;

	nl = calloc(cfg->nservices ? cfg->nservices : 1, sizeof(*nl));
	if (nl == NULL)
		return -1;
	for (i = 0; i < cfg->nservices; i++) {
		const struct px_service *svc = &cfg->services[i];
		struct px_listener *l = &nl[i];
		char a[PX_ADDRSTRLEN];
		int fd;

		l->w = w;
		l->svc = svc;
		l->m = px_metrics_block(w->id, svc);
		/* Services sharing an address share its socket: the first
		 * of the group listens, the dispatch picks per connection. */
		if (svc->group_idx != 0)
			continue;
		for (j = 0; j < w->nlisteners; j++) {
			struct px_listener *o = &w->listeners[j];

			if (o->lev != NULL && px_same_listen(o->svc, svc)) {
				l->lev = o->lev;
				o->lev = NULL;
				/* Still disabled if paused: still refusing. */
				l->paused = o->paused;
				/* listen() again only changes the backlog. */
				(void)listen(evconnlistener_get_fd(l->lev),
				    (int)svc->backlog);
				evconnlistener_set_cb(l->lev, px_accept_cb, l);
				evconnlistener_set_error_cb(l->lev, px_accept_error_cb);
				break;
			}
		}
		if (l->lev != NULL)
			continue;
		px_sockaddr_str((const struct sockaddr *)&svc->listen, a, sizeof(a));
		if ((fd = px_listener_socket((const struct sockaddr *)&svc->listen,
		    svc->listen_len, (int)svc->backlog, true,
		    svc->mode == PX_MODE_TRANSPARENT)) == -1) {
			if (errout != NULL)
				fprintf(errout, "proxyd: %s: cannot listen on %s: %s\n",
				    svc->file, a, strerror(errno));
			else
				px_log(LOG_ERR, 0, "%s: cannot listen on %s: %s",
				    svc->file, a, strerror(errno));
			failed++;
			continue;
		}
		l->lev = evconnlistener_new(w->base, px_accept_cb, l,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
		if (l->lev == NULL) {
			close(fd);
			failed++;
			continue;
		}
		evconnlistener_set_error_cb(l->lev, px_accept_error_cb);
	}
	for (j = 0; j < w->nlisteners; j++)
		if (w->listeners[j].lev != NULL)
			evconnlistener_free(w->listeners[j].lev);
	free(w->listeners);
	w->listeners = nl;
	w->nlisteners = cfg->nservices;
	return failed;
}

static void
px_worker_unlisten(struct px_worker *w)
{
	size_t i;

	for (i = 0; i < w->nlisteners; i++)
		if (w->listeners[i].lev != NULL)
			evconnlistener_free(w->listeners[i].lev);
	free(w->listeners);
	w->listeners = NULL;
	w->nlisteners = 0;
}

/* ---- rate limits ------------------------------------------------------ */

static void
px_worker_rate_limits(struct px_worker *w, const struct px_config *cfg)
{
	/* Each running worker gets an even share: no lock between workers.
	 * (A reload cannot change the number of workers.) */
	uint64_t rate = cfg->global_bandwidth / px_nworkers;
	int d;

	if (cfg->global_bandwidth != 0 && rate == 0)
		rate = 1;
	if (rate == w->rl_global_rate)
		return;
	w->rl_global_rate = rate;
	for (d = 0; d < 2; d++)
		px_bucket_init(&w->rl_global[d], rate, px_now_ms(w));
}

/* ---- admin session listing -------------------------------------------- */

static void
px_worker_snapshot(struct px_worker *w, struct px_snap_req *req)
{
	struct px_session_snap *snaps = NULL;
	struct px_session *s;
	size_t n = 0, cap = 0;
	uint64_t now = px_now_ms(w);
	uint64_t one = 1;

	TAILQ_FOREACH(s, &w->sessions, link)
		cap++;
	if (cap != 0 && (snaps = calloc(cap, sizeof(*snaps))) != NULL) {
		TAILQ_FOREACH(s, &w->sessions, link)
			px_session_snapshot(s, now, &snaps[n++]);
	}
	req->snaps[w->id] = snaps;
	req->nsnaps[w->id] = n;
	if (atomic_fetch_sub(&req->pending, 1) == 1 &&
	    write(req->done_fd, &one, sizeof(one)) < 0)
		(void)0;	/* the admin's poll times out instead */
	px_snap_req_unref(req);
}

void
px_snap_req_unref(struct px_snap_req *req)
{
	size_t k;

	if (atomic_fetch_sub(&req->refs, 1) != 1)
		return;
	for (k = 0; k < sizeof(req->snaps) / sizeof(req->snaps[0]); k++)
		free(req->snaps[k]);
	if (req->done_fd != -1)
		close(req->done_fd);
	free(req);
}

/* ---- conntrack lookups ----------------------------------------------- */

static void
px_worker_ct_answer(void *arg, uint32_t seq, const struct sockaddr_storage *dst)
{
	struct px_worker *w = arg;
	struct px_session *s;

	/* Few wait at once: SO_ORIGINAL_DST answers nearly every lookup. */
	TAILQ_FOREACH(s, &w->ct_wait, ct_link)
		if (s->ct_seq == seq) {
			px_session_origdst_answer(s, dst);
			return;
		}
}

static void
px_worker_ct_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_worker *w = arg;

	(void)fd; (void)what;
	if (px_conntrack_answers(w->ct, px_worker_ct_answer, w) == -1)
		px_log(LOG_WARNING, 0, "worker %u: conntrack socket: %s", w->id,
		    strerror(errno));
}

struct px_conntrack *
px_worker_conntrack(struct px_worker *w)
{
	if (w->ct_tried)
		return w->ct;
	w->ct_tried = true;
	if ((w->ct = px_conntrack_open()) == NULL) {
		px_log(LOG_WARNING, 0, "worker %u: conntrack unavailable (%s): "
		    "only SO_ORIGINAL_DST finds original destinations", w->id,
		    strerror(errno));
		return NULL;
	}
	w->ct_ev = event_new(w->base, px_conntrack_fd(w->ct),
	    EV_READ | EV_PERSIST, px_worker_ct_cb, w);
	if (w->ct_ev == NULL || event_add(w->ct_ev, NULL) == -1) {
		px_log(LOG_WARNING, 0, "worker %u: conntrack: no event", w->id);
		px_conntrack_close(w->ct);
		w->ct = NULL;
	}
	return w->ct;
}

/* ---- commands from the main thread ------------------------------------ */

static void
px_worker_close_all(struct px_worker *w, const char *reason)
{
	struct px_session *s;

	while ((s = TAILQ_FIRST(&w->sessions)) != NULL)
		px_session_end(s, PX_END_SHUTDOWN, reason);
}

/* Tells the driver analysers' sessions that the policy they run under is
 * no longer the one in force (an http keep-alive connection closes rather
 * than judge new requests by the old policy). */
static bool
px_worker_wants_config(const struct px_session *s)
{
	const struct px_driver *d = s->svc->analyser->driver;

	return s->state == PX_SS_RELAY && s->an_state != NULL && d != NULL &&
	    d->on_config != NULL;
}

/* The sessions are taken first: one's on_config may end others, and an ended session moves to w->dead, so a walk that kept its next
 * pointer went on along the dead list and told nobody after it. Ended
 * sessions stay allocated until the reaper runs, after this callback. */
static void
px_worker_config_changed(struct px_worker *w)
{
	struct px_session *s, **all;
	size_t n = 0, i;

	TAILQ_FOREACH(s, &w->sessions, link)
		n++;
	if (n == 0 || (all = calloc(n, sizeof(*all))) == NULL) {
		if (n != 0)
			px_log(LOG_WARNING, 0, "reload: no memory to tell %zu "
			    "sessions of the new policy", n);
		return;
	}
	n = 0;
	TAILQ_FOREACH(s, &w->sessions, link)
		all[n++] = s;
	for (i = 0; i < n; i++)
		if (px_worker_wants_config(all[i]))
			all[i]->svc->analyser->driver->on_config(all[i],
			    all[i]->an_state);
	free(all);
}

static void
px_worker_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_worker *w = arg;
	struct px_config *ncfg;
	uint64_t v;

	struct px_snap_req *req;
	int why;

	(void)what;
	if (read((int)fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	if ((req = atomic_exchange(&w->snap_req, NULL)) != NULL)
		px_worker_snapshot(w, req);
	if ((why = atomic_exchange(&w->reset_req, PX_RESET_NONE)) !=
	    PX_RESET_NONE)
		px_worker_close_all(w, px_reset_reason_text(
		    (enum px_reset_reason)why));
	ncfg = atomic_exchange(&w->pending, NULL);
	if (ncfg != NULL && !w->draining &&
	    px_worker_listen(w, ncfg, NULL) != -1) {
		/* Only now: the listeners point into ncfg, no longer the old
		 * one, which sessions keep alive with their own references. */
		px_config_unref(w->cfg);
		w->cfg = ncfg;
		px_worker_rate_limits(w, ncfg);
		px_worker_config_changed(w);
	} else if (ncfg != NULL) {
		if (!w->draining)
			px_log(LOG_ERR, 0, "worker %u: out of memory applying the "
			    "new configuration; keeping the old one", w->id);
		px_config_unref(ncfg);
	}

	px_handoffs_take(w, false);
	px_auth_box_drain(&w->auth_box);

	switch (atomic_load(&w->cmd)) {
	case PX_CMD_DRAIN:
		if (!w->draining) {
			w->draining = true;
			w->pool.closed = true;
			px_worker_unlisten(w);
		}
		if (TAILQ_EMPTY(&w->sessions))
			event_base_loopbreak(w->base);
		break;
	case PX_CMD_HANDOVER:
		if (!w->draining) {
			w->draining = true;
			w->pool.closed = true;
			px_worker_unlisten(w);
			px_handover_begin(w);
		}
		/* (Not out with the last session: the main thread stops
		 * it once the new process has them all; if that one dies
		 * first, this worker listens again.) */
		break;
	case PX_CMD_RESUME:
		atomic_store(&w->cmd, PX_CMD_NONE);
		if (w->draining && w->handing) {
			w->draining = false;
			w->handing = false;
			w->pool.closed = false;
			if (px_worker_listen(w, w->cfg, NULL) != 0)
				px_log(LOG_ERR, 0, "worker %u: not every "
				    "service listens again", w->id);
		}
		break;
	case PX_CMD_STOP:
		w->draining = true;
		w->pool.closed = true;
		px_worker_unlisten(w);
		px_worker_close_all(w, "shutdown");
		event_base_loopbreak(w->base);
		break;
	default:
		break;
	}
}

/* How late the tick fires is how long the loop was busy elsewhere (or the
 * thread was not scheduled): proxyd_worker_loop_lag_seconds. */
#define PX_TICK_US	250000

static void
px_worker_tick_arm(struct px_worker *w)
{
	struct timeval tv = { 0, PX_TICK_US };

	w->tick_due_us = px_metrics_now_us() + PX_TICK_US;
	evtimer_add(w->tick_ev, &tv);
}

static void
px_worker_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_worker *w = arg;
	uint64_t now = px_metrics_now_us();

	(void)fd; (void)what;
	px_hist_observe(&w->counters.loop_lag, now > w->tick_due_us ?
	    now - w->tick_due_us : 0);
	px_worker_tick_arm(w);
}

/* The sessions' delivered bytes are credited just after each whole second
 * of the wall clock, and the admin samples them half a second later
 * (admin_status.c): each of its one-second samples then holds exactly one
 * second's worth, whatever the timers' jitter. */
static void
px_worker_credit_arm(struct px_worker *w)
{
	struct timespec now;
	struct timeval tv = { 0, 0 };

	clock_gettime(CLOCK_REALTIME, &now);
	tv.tv_usec = (suseconds_t)((1000000000L - now.tv_nsec) / 1000 + 1000);
	if (tv.tv_usec >= 1000000) {
		tv.tv_sec = 1;
		tv.tv_usec -= 1000000;
	}
	evtimer_add(w->credit_ev, &tv);
}

static void
px_worker_credit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_worker *w = arg;
	struct px_session *s;
	struct timespec now;

	(void)fd; (void)what;
	TAILQ_FOREACH(s, &w->sessions, link)
		px_metrics_credit(s, false);
	/* (After the walk: its SIOCOUTQs take microseconds each.) */
	clock_gettime(CLOCK_REALTIME, &now);
	atomic_store_explicit(&w->credit_us, (uint64_t)now.tv_sec * 1000000 +
	    (uint64_t)now.tv_nsec / 1000, memory_order_relaxed);
	px_worker_credit_arm(w);
}

static void
px_worker_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what;
	px_session_reap(arg);
}

static void *
px_worker_main(void *arg)
{
	struct px_worker *w = arg;
	unsigned i;
	char name[16];

	/* "px-worker-N" in /proc/PID/task/TID/comm: top -H, perf and the
	 * bench tell the workers' CPU apart from the admin and log threads. */
	snprintf(name, sizeof(name), "px-worker-%u", w->id);
	(void)pthread_setname_np(pthread_self(), name);
	w->log = px_log_ring_attach();
	px_worker_tick_arm(w);
	px_worker_credit_arm(w);
	event_base_dispatch(w->base);
	px_worker_unlisten(w);
	px_handoffs_take(w, true);
	px_worker_close_all(w, "shutdown");
	px_session_reap(w);
	px_handover_end(w);
	px_upflush_worker_exit(w);
	px_pool_flush(&w->pool);
	px_tls_worker_free(&w->tls);
	px_sniff_worker_exit();
	for (i = 0; px_analysers[i] != NULL; i++)
		if (px_analysers[i]->on_worker_exit != NULL)
			px_analysers[i]->on_worker_exit();
	px_conn_thread_exit();
	px_log_ring_detach(w->log);
	atomic_store(&w->exited, true);
	return NULL;
}

static int
px_worker_init(struct px_worker *w, unsigned id, struct px_config *cfg)
{
	struct event_config *ec;

	w->id = id;
	w->pipes.owner = id;
	w->wake_fd = -1;
	w->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	TAILQ_INIT(&w->sessions);
	TAILQ_INIT(&w->ct_wait);
	TAILQ_INIT(&w->dead);
	LIST_INIT(&w->flushing);
	/* Each base is used by exactly one thread: no libevent locks. */
	if ((ec = event_config_new()) == NULL)
		return -1;
	event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
	/* Coalesce the del/add pairs of one loop pass on the same fd (connect
	 * event off, relay events on) into one epoll_ctl. Safe here: proxyd
	 * never dup()s a socket it watches. A socket closed in the pass it
	 * left the loop gets its DEL after the close (EBADF): the one call a
	 * DEL before the close would have cost, not an extra one. */
	event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	/* Not EVENT_BASE_FLAG_PRECISE_TIMER: it ends the second wake-up a
	 * timer costs on the coarse clock (idle: 5 wake-ups/s, not 9), but
	 * libevent then sets a timerfd on every loop pass (+24 calls per
	 * FTP transfer, 83 -> 110). */
	w->base = event_base_new_with_config(ec);
	event_config_free(ec);
	if (w->base == NULL)
		return -1;
	px_pool_init(&w->pool, w->base, NULL);
	px_tls_worker_init(&w->tls);
	w->cfg = px_config_ref(cfg);
	w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->wake_fd == -1)
		return -1;
	w->wake_ev = event_new(w->base, w->wake_fd, EV_READ | EV_PERSIST,
	    px_worker_wake_cb, w);
	w->auth_box.wake = px_worker_wake_auth;
	w->auth_box.wake_arg = w;
	if (w->wake_ev == NULL || event_add(w->wake_ev, NULL) == -1)
		return -1;
	if ((w->accept_pause = evtimer_new(w->base, px_accept_resume_cb, w)) == NULL)
		return -1;
	if ((w->reap_ev = event_new(w->base, -1, 0, px_worker_reap_cb, w)) == NULL)
		return -1;
	if ((w->tick_ev = evtimer_new(w->base, px_worker_tick_cb, w)) == NULL)
		return -1;
	if ((w->credit_ev = evtimer_new(w->base, px_worker_credit_cb,
	    w)) == NULL)
		return -1;
	px_worker_rate_limits(w, cfg);
	return 0;
}

unsigned
px_workers_probe(const struct px_config *old, const struct px_config *cfg,
    FILE *errout)
{
	unsigned failed = 0;
	size_t i, j;

	for (i = 0; i < cfg->nservices; i++) {
		const struct px_service *svc = &cfg->services[i];
		char a[PX_ADDRSTRLEN];
		bool ours = false;

		if (svc->group_idx != 0)
			continue;	/* the group's first one probes */
		/* Our own sockets hold it (whatever their mode: the worker
		 * opens the new one before closing the old). */
		for (j = 0; old != NULL && j < old->nservices; j++)
			if (old->services[j].listen_len == svc->listen_len &&
			    memcmp(&old->services[j].listen, &svc->listen,
			    svc->listen_len) == 0)
				ours = true;
		if (ours || px_listener_probe((const struct sockaddr *)
		    &svc->listen, svc->listen_len,
		    svc->mode == PX_MODE_TRANSPARENT) == 0)
			continue;
		px_sockaddr_str((const struct sockaddr *)&svc->listen, a, sizeof(a));
		if (errout != NULL)
			fprintf(errout, "%s:%ld: cannot listen on %s: %s\n",
			    svc->file, svc->listen_line, a, strerror(errno));
		else
			px_log(LOG_ERR, 0, "reload: %s:%ld: cannot listen on %s: %s",
			    svc->file, svc->listen_line, a, strerror(errno));
		failed++;
	}
	return failed;
}

int
px_workers_start(struct px_config *cfg, bool probe)
{
	unsigned i;

	if (probe && px_workers_probe(NULL, cfg, stderr) != 0)
		return -1;
	px_workers = calloc(cfg->workers, sizeof(*px_workers));
	if (px_workers == NULL)
		return -1;
	px_metrics_register(cfg, cfg->workers);
	px_nworkers = cfg->workers;
	for (i = 0; i < px_nworkers; i++) {
		if (px_worker_init(&px_workers[i], i, cfg) == -1) {
			fprintf(stderr, "proxyd: worker %u: setup failed: %s\n", i,
			    strerror(errno));
			return -1;
		}
		if (px_worker_listen(&px_workers[i], cfg, stderr) != 0)
			return -1;	/* errors printed, or out of memory */
	}
	for (i = 0; i < px_nworkers; i++)
		if (pthread_create(&px_workers[i].thread, NULL, px_worker_main,
		    &px_workers[i]) != 0) {
			fprintf(stderr, "proxyd: cannot start worker %u\n", i);
			return -1;
		}
	return 0;
}

bool
px_workers_adopt(struct px_config *cfg, size_t svc_idx, int cfd, int sfd,
    struct px_ho_session *ho)
{
	struct px_worker *o = NULL;
	struct px_handoff *h;
	unsigned i;

	for (i = 0; i < px_nworkers; i++)
		if (atomic_load(&px_workers[i].cmd) == PX_CMD_NONE &&
		    (o == NULL || px_worker_load(&px_workers[i]) <
		    px_worker_load(o)))
			o = &px_workers[i];
	if (o == NULL || (h = calloc(1, sizeof(*h))) == NULL)
		return false;
	h->cfg = cfg;
	h->svc_idx = svc_idx;
	h->fd = cfd;
	h->sfd = sfd;
	h->ho = ho;
	if (px_handoff_push(o, h))
		return true;
	free(h);
	return false;
}

static void
px_worker_wake(struct px_worker *w)
{
	uint64_t one = 1;

	if (write(w->wake_fd, &one, sizeof(one)) < 0)
		(void)0;	/* counter saturated: a wakeup is pending anyway */
}

void
px_workers_reload(struct px_config *cfg)
{
	unsigned i;

	px_metrics_register(cfg, px_nworkers);	/* before any worker sees it */
	for (i = 0; i < px_nworkers; i++) {
		struct px_config *old;

		old = atomic_exchange(&px_workers[i].pending, px_config_ref(cfg));
		if (old != NULL)
			px_config_unref(old);
		px_worker_wake(&px_workers[i]);
	}
}

void
px_workers_command(enum px_worker_cmd cmd)
{
	unsigned i;

	for (i = 0; i < px_nworkers; i++) {
		atomic_store(&px_workers[i].cmd, cmd);
		px_worker_wake(&px_workers[i]);
	}
}

unsigned
px_workers_snapshot(struct px_snap_req *req)
{
	unsigned i, asked = 0;

	for (i = 0; i < px_nworkers; i++)
		if (!atomic_load(&px_workers[i].exited))
			asked++;
	atomic_store(&req->pending, asked);
	atomic_fetch_add(&req->refs, asked);
	for (i = 0; i < px_nworkers; i++) {
		struct px_snap_req *stale;

		if (atomic_load(&px_workers[i].exited))
			continue;
		/* A request this worker never took (it was stuck or exiting)
		 * is dropped here with the reference it held. */
		stale = atomic_exchange(&px_workers[i].snap_req, req);
		if (stale != NULL)
			px_snap_req_unref(stale);
		px_worker_wake(&px_workers[i]);
	}
	return asked;
}

const char *
px_reset_reason_text(enum px_reset_reason why)
{
	return why == PX_RESET_HA ? "ha: left master" : "admin: sessions reset";
}

unsigned
px_workers_reset_sessions(enum px_reset_reason why)
{
	unsigned i, asked = 0;

	for (i = 0; i < px_nworkers; i++) {
		if (atomic_load(&px_workers[i].exited))
			continue;
		atomic_store(&px_workers[i].reset_req, (int)why);
		px_worker_wake(&px_workers[i]);
		asked++;
	}
	return asked;
}

bool
px_workers_all_exited(void)
{
	unsigned i;

	for (i = 0; i < px_nworkers; i++)
		if (!atomic_load(&px_workers[i].exited))
			return false;
	return true;
}

void
px_workers_join(void)
{
	unsigned i;

	for (i = 0; i < px_nworkers; i++) {
		struct px_worker *w = &px_workers[i];
		struct px_config *p;
		struct px_snap_req *sr;

		pthread_join(w->thread, NULL);
		/* Before its box and wakeup go: an auth thread may still be
		 * on one of its checks (a stalled directory). */
		px_auth_box_close(&w->auth_box);

		if ((p = atomic_exchange(&w->pending, NULL)) != NULL)
			px_config_unref(p);
		if ((sr = atomic_exchange(&w->snap_req, NULL)) != NULL)
			px_snap_req_unref(sr);
		px_pipe_pool_flush(&w->pipes);
		if (w->ct_ev != NULL)
			event_free(w->ct_ev);
		px_conntrack_close(w->ct);
		event_free(w->wake_ev);
		event_free(w->accept_pause);
		event_free(w->reap_ev);
		event_free(w->tick_ev);
		event_free(w->credit_ev);
		close(w->wake_fd);
		if (w->reserve_fd != -1)
			close(w->reserve_fd);
		event_base_free(w->base);
		px_config_unref(w->cfg);
	}
	free(px_workers);
	px_workers = NULL;
	px_nworkers = 0;
}
