/* Data channels: a connection on the client end and one on the server end
 * (their ends, accepted on a short-lived listener or connected out, are in
 * data_channel_end.c), relayed with splice(2) like a plug session, or
 * through a buffered relay (relay.h) when an end speaks TLS (FTPS, in that
 * conn's slot) or the analyser inspects the bytes (px_channel_inspect:
 * content scanning, which may hold a direction's end until its verdict);
 * a direction's bytes metered against a shared quota (px_channel_meter),
 * its limit perhaps a lease its owner grows (px_channel_meter_lease).
 * Everything runs on the session's worker; the session owns its channels
 * (its host's list) and frees those left when it closes. See analyser.h
 * for the contract. */
#include "data_channel.h"

#include <errno.h>
#include <stdatomic.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "analyser.h"	/* declares the px_channel_* calls */
#include "bucket.h"
#include "data_channel_int.h"
#include "event_want.h"
#include "relay.h"
#include "splice.h"
#include "tcp_progress.h"
#include "tls.h"

static void
px_chan_arm(struct px_channel *ch, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(&ch->timer, &tv);
}

/* Closes fds and events; returns the pipes to the worker's pool. */
static void
px_chan_release(struct px_channel *ch)
{
	struct px_chan_host *hst = ch->host;
	int i;

	if (evtimer_pending(&ch->timer, NULL))
		evtimer_del(&ch->timer);
	if (ch->relay_on) {
		px_relay_free(&ch->relay, NULL);
		ch->relay_on = false;
	}
	for (i = 0; i < 2; i++) {
		px_splice_release(&ch->h[i], hst->pipes);
		px_event_want(&ch->e[i].ev, &ch->e[i].ev_on, false);
	}
	for (i = 0; i < 2; i++) {
		struct px_chan_endp *e = &ch->e[i];

		/* Waited in vain (timeout, or dropped): the kept port
		 * stays and its idle clock runs. The client was told this
		 * port and may still come; closing it would turn that
		 * connection into a dropped SYN under TPROXY (a client
		 * hanging until its timeout) where a reset is due. */
		if (e->lst != NULL) {
			e->lst->waiting = NULL;
			px_lst_idle(e->lst);
			e->lst = NULL;
		}
		if (e->lfd != -1)
			close(e->lfd);
		/* A channel that never relayed moved nothing: its one
		 * connected end is reset, so that its peer cannot take the
		 * close for an empty file. */
		if (e->fd != -1 && !ch->relaying) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			(void)setsockopt(e->fd, SOL_SOCKET, SO_LINGER, &lg,
			    sizeof(lg));
		}
		if (e->fd != -1)
			close(e->fd);
		e->lfd = e->fd = -1;
	}
}

static void
px_chan_unlink(struct px_channel *ch)
{
	struct px_channel **pp;

	for (pp = &ch->host->list; *pp != NULL; pp = &(*pp)->next)
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
}

void
px_channel_free(struct px_channel *ch)
{
	if (ch == NULL || ch->ending)
		return;
	px_chan_unlink(ch);
	px_chan_release(ch);
	px_relay_dispose(&ch->relay);
	free(ch);
}

void
px_channels_close(struct px_chan_host *host)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct px_data_listener *l;
	struct px_channel *ch;
	int i;

	while ((ch = host->list) != NULL) {
		/* Cut short with its session: a reset, so no peer takes a
		 * truncated file for a whole one. */
		if (ch->relaying)
			for (i = 0; i < 2; i++)
				if (ch->e[i].fd != -1)
					(void)setsockopt(ch->e[i].fd, SOL_SOCKET,
					    SO_LINGER, &lg, sizeof(lg));
		px_channel_free(ch);
	}
	while ((l = host->listeners) != NULL) {
		host->listeners = l->next;
		px_lst_close(l);
		free(l);
	}
}

/* How often a relaying channel looks at its sockets: at least twice per
 * idle timeout of its session, which must not end while the kernel still
 * moves bytes proxyd handed over (a slow client reading the end of a file
 * from its socket buffer: the control connection is silent meanwhile). */
static uint64_t
px_chan_period(const struct px_channel *ch)
{
	uint64_t p = ch->timeout_ms, idle = ch->host->idle_ms;

	if (idle != 0 && idle / 2 < p)
		p = idle / 2;
	return p < 10 ? 10 : p;
}

static void
px_chan_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_channel *ch = arg;
	uint64_t now, idle, progress, left;
	char st[2][64], why[192];
	int i;

	(void)fd; (void)what;
	if (ch->abort_why != NULL) {
		px_chan_finish(ch, ch->abort_why);
		return;
	}
	if (!ch->relaying) {
		/* Which end never came, and how far a connect got ("none":
		 * not even begun, e.g. the server's PASV reply awaited). */
		for (i = 0; i < 2; i++)
			if (ch->e[i].fd != -1 && ch->e[i].connecting)
				px_tcp_connect_note(ch->e[i].fd, st[i],
				    sizeof(st[i]));
			else
				snprintf(st[i], sizeof(st[i]), "%s",
				    ch->e[i].fd != -1 ? "connected" :
				    ch->e[i].lfd != -1 || ch->e[i].lst != NULL ?
				    "waiting" : "none");
		snprintf(why, sizeof(why), "timeout: no data connection "
		    "(client: %s, server: %s)", st[0], st[1]);
		px_chan_finish(ch, why);
		return;
	}
	/* A transfer under way keeps its session alive; the channel's own
	 * timeout bounds a stuck one. */
	ch->host->touch(ch->host->owner);
	now = px_clock_ms();
	progress = px_tcp_progress(ch->e[0].fd) + px_tcp_progress(ch->e[1].fd);
	if (progress != ch->tcp_progress) {
		ch->tcp_progress = progress;
		ch->last_ms = now;
	}
	/* An end held for the analyser (a scanner's verdict): its own
	 * timeout bounds the wait. */
	if (ch->relay_on && (ch->relay.end_held[0] || ch->relay.end_held[1]))
		ch->last_ms = now;
	idle = now - ch->last_ms;
	if (idle >= ch->timeout_ms) {
		/* One direction passed its EOF on, the other never closed:
		 * everything was delivered (a client still reading the end of
		 * a file from its socket buffer looks the same). End it with a
		 * plain close, not a reset that could cost it that end. */
		if (ch->half_done[0] || ch->half_done[1]) {
			px_chan_finish(ch, NULL);
			return;
		}
		px_chan_finish(ch, "timeout: no data moved");
		return;
	}
	left = ch->timeout_ms - idle;
	px_chan_arm(ch, left < px_chan_period(ch) ? left : px_chan_period(ch));
}

struct px_channel *
px_chan_new(struct px_chan_host *host, uint64_t timeout_ms, px_channel_cb cb,
    void *arg)
{
	struct px_channel *ch;
	int i;

	if ((ch = calloc(1, sizeof(*ch))) == NULL)
		return NULL;
	ch->host = host;
	ch->cb = cb;
	ch->arg = arg;
	ch->timeout_ms = timeout_ms != 0 ? timeout_ms : 30000;
	ch->oneway = -1;
	for (i = 0; i < 2; i++) {
		ch->e[i].ch = ch;
		ch->e[i].fd = ch->e[i].lfd = -1;
		ch->h[i].pipe[0] = ch->h[i].pipe[1] = -1;
	}
	evtimer_assign(&ch->timer, host->base, px_chan_timer_cb, ch);
	px_chan_arm(ch, ch->timeout_ms);
	ch->next = host->list;
	host->list = ch;
	return ch;
}

void
px_channel_note(struct px_channel *ch, const char *note)
{
	snprintf(ch->note, sizeof(ch->note), "%s", note);
}

void
px_channel_oneway(struct px_channel *ch, enum px_dir dir)
{
	ch->oneway = (int)dir;
}

unsigned
px_channel_refused(const struct px_channel *ch)
{
	return ch->refused;
}

bool
px_channel_relaying(const struct px_channel *ch)
{
	return ch->relaying;
}

/* ---- relay ------------------------------------------------------------ */

static struct px_channel *
px_chan_of(void *arg)
{
	return arg;
}

#define PX_CHAN_METERED_OUT	"denied: over the byte quota"

static int
px_chan_dir(const struct px_channel *ch, const struct px_splice *sp)
{
	return sp == &ch->h[PX_TO_SERVER] ? PX_TO_SERVER : PX_TO_CLIENT;
}

/* n bytes of dir delivered: out of what they were charged with before
 * (meter_held), the rest into the meter now; past its limit (or over:
 * the pump found none left) the receiver's connection is reset. */
static void
px_chan_meter(struct px_channel *ch, int dir, size_t n, bool over)
{
	uint64_t held;

	if (ch->meter == NULL || dir != ch->meter_dir)
		return;
	held = n < ch->meter_held ? n : ch->meter_held;
	ch->meter_held -= held;
	n -= (size_t)held;
	if (n != 0 && atomic_fetch_add(ch->meter, n) + n > ch->meter_limit)
		over = true;
	/* A lease at its end: more is asked for, the transfer waits (the
	 * buffered relay, which is past it already by what it moved at
	 * once, reads no more of the source meanwhile). */
	if (over && ch->meter_more != NULL && !ch->metered_out) {
		if (!ch->meter_asking) {
			ch->meter_asking = true;
			if (ch->relay_on)
				px_relay_hold_read(&ch->relay,
				    (enum px_dir)dir, true);
			ch->meter_more(ch->meter_more_arg, ch);
		}
		return;
	}
	if (over && !ch->metered_out) {
		ch->metered_out = true;
		px_channel_abort(ch, dir == PX_TO_SERVER ? PX_CHAN_SERVER :
		    PX_CHAN_CLIENT, PX_CHAN_METERED_OUT);
	}
}

/* Up to one buffer charged to the meter before the pump reads it, as far
 * as the limit leaves: the byte past it too (the one that shows the
 * transfer goes on), none once the count is past it. The partner's
 * transfers share the count, on any worker: whatever their number, what
 * they move together never goes past the limit by more than that byte. */
uint64_t
px_chan_grant_size(uint64_t used, uint64_t limit, uint64_t buffer)
{
	uint64_t n;

	if (used > limit)
		return 0;
	/* limit - used + 1 would wrap to 0 for a limit of UINT64_MAX. */
	n = limit - used;
	return n >= buffer ? buffer : n + 1;
}

static uint64_t
px_chan_meter_grant(struct px_channel *ch)
{
	uint64_t used = atomic_load(ch->meter), n;

	do {
		if ((n = px_chan_grant_size(used, ch->meter_limit,
		    ch->host->buffer)) == 0)
			return 0;
	} while (!atomic_compare_exchange_weak(ch->meter, &used, used + n));
	ch->meter_held += n;
	return n;
}

/* The channel's end: what was charged and did not move goes back (not
 * below 0: a new day may have cleared the count meanwhile). */
static void
px_chan_meter_release(struct px_channel *ch)
{
	uint64_t used, back;

	if (ch->meter == NULL || ch->meter_held == 0)
		return;
	used = atomic_load(ch->meter);
	do {
		back = ch->meter_held < used ? ch->meter_held : used;
	} while (!atomic_compare_exchange_weak(ch->meter, &used, used - back));
	ch->meter_held = 0;
}

/* A spliced metered direction reads only what was charged to the meter
 * (px_chan_meter_grant), a buffer at a time (px_chan_more); none left: it
 * is over, and reads nothing while its abort is under way. */
static void
px_chan_meter_bound(struct px_channel *ch)
{
	struct px_splice *sp = &ch->h[ch->meter_dir];
	uint64_t n;

	if (ch->meter == NULL || !ch->relaying || ch->relay_on || sp->stopped ||
	    sp->bounded)
		return;
	n = px_chan_meter_grant(ch);
	px_splice_bound(sp, n);
	if (n == 0)
		px_chan_meter(ch, ch->meter_dir, 0, true);
}

/* The metered pump used what was charged: the next buffer. */
static uint64_t
px_chan_more(void *arg, struct px_splice *sp)
{
	struct px_channel *ch = px_chan_of(arg);

	if (ch->meter == NULL || px_chan_dir(ch, sp) != ch->meter_dir ||
	    ch->abort_why != NULL)
		return 0;
	return px_chan_meter_grant(ch);
}

static void
px_chan_moved(void *arg, struct px_splice *sp, size_t n)
{
	struct px_channel *ch = px_chan_of(arg);
	int dir = px_chan_dir(ch, sp);

	ch->bytes[dir] += n;
	ch->host->bytes(ch->host->owner, (enum px_dir)dir, n);
	ch->last_ms = px_clock_ms();
	px_chan_meter(ch, dir, n, false);
}

/* The end of the socket that direction dir writes to. */
static int
px_chan_dest(int dir)
{
	return dir == PX_TO_SERVER ? PX_CHAN_SERVER : PX_CHAN_CLIENT;
}

/* Sends our FIN on that end's socket, once. */
static void
px_chan_shut(struct px_channel *ch, int end)
{
	if (ch->shut[end])
		return;
	ch->shut[end] = true;
	(void)shutdown(ch->e[end].fd, SHUT_WR);
}

/* Whether the kernel still holds bytes given to fd (sent but not yet
 * acknowledged, or not yet sent); true when it cannot tell. */
static bool
px_chan_unsent(int fd)
{
	int n = 0;

	return ioctl(fd, SIOCOUTQ, &n) == -1 || n != 0;
}

static void
px_chan_done(void *arg, struct px_splice *sp)
{
	struct px_channel *ch = px_chan_of(arg);
	int dir = px_chan_dir(ch, sp);

	ch->half_done[dir] = true;
	if (dir == ch->oneway && !ch->half_done[!dir]) {
		/* The data's end: nothing comes the other way. Delivered
		 * already (a small file): the closes send both FINs, and no
		 * wakeup waits for the receiver's own. Else the channel keeps
		 * watching until the receiver closes (a slow reader keeps its
		 * session alive meanwhile), but the sender gets its FIN now:
		 * vsftpd's lingering close, and so its 226, wait for it. */
		if (!px_chan_unsent(sp->to)) {
			px_chan_finish(ch, NULL);
			return;
		}
		px_chan_shut(ch, px_chan_dest(dir));
		px_chan_shut(ch, px_chan_dest(!dir));
		px_splice_start(&ch->h[!dir], false);
		return;
	}
	px_chan_shut(ch, px_chan_dest(dir));
	if (ch->half_done[!dir])
		px_chan_finish(ch, NULL);
}

static void
px_chan_failed(void *arg, struct px_splice *sp, enum px_splice_fail where,
    int err)
{
	(void)sp; (void)where;
	px_chan_finish(px_chan_of(arg), strerror(err));
}

/* The metered direction's bound (px_chan_meter_bound): past the limit,
 * unless the channel is being aborted for another reason. */
static void
px_chan_reached(void *arg, struct px_splice *sp)
{
	struct px_channel *ch = px_chan_of(arg);

	if (ch->abort_why == NULL)
		px_chan_meter(ch, px_chan_dir(ch, sp), 0, true);
}

static const struct px_splice_ops px_chan_splice_ops = {
	.moved = px_chan_moved,
	.done = px_chan_done,
	.more = px_chan_more,
	.reached = px_chan_reached,
	.failed = px_chan_failed,
};

/* ---- the TLS relay ---------------------------------------------------- */

int
px_chan_tls(struct px_channel *ch, enum px_chan_end end,
    const struct px_tls_ctx *t, const struct px_tls_peer *peer)
{
	if (ch->relaying || t == NULL)
		return -1;
	ch->tls[end] = t;
	ch->tls_peer[end] = *peer;
	/* The data connection's own fingerprints, into the channel, which
	 * outlives its conns: the client's hello (JA4) on the client end,
	 * the server's answer (JA4S) on the server end. */
	if (end == PX_CHAN_CLIENT)
		ch->tls_peer[end].ja4 = ch->ja4;
	else
		ch->tls_peer[end].ja4s = ch->ja4s;
	return 0;
}

static int
px_chan_relay_prepare(void *arg, int side, struct px_conn *c)
{
	struct px_channel *ch = arg;

	if (ch->tls[side] == NULL)
		return 0;
	/* Towards the server we are the TLS client, whichever way the data
	 * flows: the relay sends our hello at once. */
	return px_tls_attach(c, ch->tls[side], &ch->tls_peer[side]);
}

static void
px_chan_relay_moved(void *arg, enum px_dir dir, size_t n)
{
	struct px_channel *ch = arg;

	ch->bytes[dir] += n;
	if (n != 0)
		ch->host->bytes(ch->host->owner, dir, n);
	ch->last_ms = px_clock_ms();
	px_chan_meter(ch, dir, n, false);
}

static enum px_verdict
px_chan_relay_analyse(void *arg, enum px_dir dir, struct evbuffer *in)
{
	struct px_channel *ch = arg;

	if (ch->abort_why != NULL) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return PX_MORE;
	}
	return ch->inspect(ch->inspect_arg, dir, in);
}

static void
px_chan_relay_verdict(void *arg, enum px_verdict v)
{
	struct px_channel *ch = arg;

	(void)v;	/* only an inspecting analyser says either */
	px_channel_abort(ch, PX_CHAN_CLIENT, "denied by the analyser");
	px_channel_abort(ch, PX_CHAN_SERVER, "denied by the analyser");
}

static void
px_chan_relay_ended(void *arg, enum px_end_by by, const char *reason)
{
	struct px_channel *ch = arg;
	int i;

	for (i = 0; i < 2; i++) {
		const struct px_conn *c = px_relay_conn(&ch->relay, i);

		if (c != NULL && c->tf != NULL)
			ch->resumed[i] = px_tls_resumed(c);
	}
	/* Both directions passed their end on: a whole transfer (unless
	 * the analyser aborted it meanwhile). */
	if (ch->abort_why != NULL)
		reason = ch->abort_why;
	px_chan_finish(ch, (by == PX_END_CLIENT || by == PX_END_SERVER) &&
	    ch->abort_why == NULL ? NULL : reason);
}

static void
px_chan_relay_flushed(void *arg)
{
	(void)arg;	/* px_relay_finish() is never asked for */
}

static const struct px_relay_ops px_chan_relay_ops = {
	.prepare = px_chan_relay_prepare,
	.moved = px_chan_relay_moved,
	.verdict = px_chan_relay_verdict,
	.ended = px_chan_relay_ended,
	.flushed = px_chan_relay_flushed,
};

static const struct px_relay_ops px_chan_inspect_ops = {
	.prepare = px_chan_relay_prepare,
	.moved = px_chan_relay_moved,
	.analyse = px_chan_relay_analyse,
	.verdict = px_chan_relay_verdict,
	.ended = px_chan_relay_ended,
	.flushed = px_chan_relay_flushed,
};

static void
px_chan_start_relay(struct px_channel *ch)
{
	struct px_chan_host *hst = ch->host;
	struct px_relay_limits lim = { .buffer = hst->buffer,
	    .transforms = true };
	int fd[2] = { ch->e[PX_CHAN_CLIENT].fd, ch->e[PX_CHAN_SERVER].fd };

	ch->relaying = true;
	ch->relay_on = true;
	ch->start_ms = ch->last_ms = px_clock_ms();
	gettimeofday(&ch->start_tv, NULL);
	evtimer_del(&ch->timer);
	px_chan_arm(ch, px_chan_period(ch));
	if (px_relay_start(&ch->relay, hst->base, hst->pipes, fd,
	    PX_RELAY_BUFFERED, true, &lim, ch->inspect != NULL ?
	    &px_chan_inspect_ops : &px_chan_relay_ops, ch) == -1)
		px_chan_finish(ch, "tls: cannot start (out of memory)");
}

/* Both ends connected: relay them. */
static void
px_chan_start(struct px_channel *ch)
{
	struct px_chan_host *hst = ch->host;
	int d, size = (int)hst->buffer;

	if (ch->tls[0] != NULL || ch->tls[1] != NULL || ch->inspect != NULL) {
		px_chan_start_relay(ch);
		return;
	}

	for (d = 0; d < 2; d++) {
		int from = ch->e[d == PX_TO_SERVER ? PX_CHAN_CLIENT :
		    PX_CHAN_SERVER].fd;
		int to = ch->e[d == PX_TO_SERVER ? PX_CHAN_SERVER :
		    PX_CHAN_CLIENT].fd;

		if (px_splice_init(&ch->h[d], hst->base, hst->pipes, from, to,
		    size, &px_chan_splice_ops, ch) == -1) {
			px_chan_finish(ch, "out of pipes");
			return;
		}
	}
	ch->relaying = true;
	ch->start_ms = ch->last_ms = px_clock_ms();
	gettimeofday(&ch->start_tv, NULL);
	evtimer_del(&ch->timer);
	px_chan_arm(ch, px_chan_period(ch));
	/* After the timer is armed: an abort it makes is carried out from
	 * the timer, which evtimer_del() would forget. */
	px_chan_meter_bound(ch);
	/* A one-way channel reads only its data's direction: nothing comes
	 * the other way, and the receiver's close is watched only if the
	 * channel has to wait for it (px_chan_done). */
	for (d = 0; d < 2; d++)
		if (ch->oneway == -1 || d == ch->oneway)
			px_splice_start(&ch->h[d], false);
}

void
px_chan_maybe_start(struct px_channel *ch)
{
	int i;

	for (i = 0; i < 2; i++)
		if (ch->e[i].fd == -1 || ch->e[i].connecting)
			return;
	px_chan_start(ch);
}

void
px_chan_finish(struct px_channel *ch, const char *error)
{
	struct px_chan_host *hst = ch->host;
	struct px_chan_result r;
	struct timeval now, d;
	int i;

	if (ch->ending)
		return;
	ch->ending = true;
	memset(&r, 0, sizeof(r));
	r.ch = ch;
	r.refused = ch->refused;
	r.error = error;
	r.bytes[0] = ch->bytes[0];
	r.bytes[1] = ch->bytes[1];
	r.note = ch->note;
	r.metered_out = ch->metered_out;
	for (i = 0; i < 2; i++) {
		r.tls[i] = ch->tls[i] != NULL;
		r.resumed[i] = ch->resumed[i];
	}
	r.ja4 = ch->ja4;
	r.ja4s = ch->ja4s;
	r.relayed = ch->relaying;
	if (ch->relaying) {
		gettimeofday(&now, NULL);
		timersub(&now, &ch->start_tv, &d);
		r.duration_ms = (uint64_t)d.tv_sec * 1000 +
		    (uint64_t)d.tv_usec / 1000;
	}
	for (i = 0; i < 2; i++)
		r.addr[i] = ch->e[i].addr.ss_family != 0 ?
		    (const struct sockaddr *)&ch->e[i].addr : NULL;
	/* Off the session's list first: the callback may close the session. */
	px_chan_unlink(ch);
	px_chan_release(ch);
	px_chan_meter_release(ch);
	if (ch->cb != NULL)
		ch->cb(hst->owner, ch->arg, &r);
	px_relay_dispose(&ch->relay);
	free(ch);
}

void
px_channel_meter(struct px_channel *ch, enum px_dir dir,
    _Atomic uint64_t *used, uint64_t limit)
{
	ch->meter = used;
	ch->meter_limit = limit;
	ch->meter_dir = (int)dir;
	px_chan_meter_bound(ch);
}

void
px_channel_meter_lease(struct px_channel *ch, px_channel_lease_cb more,
    void *arg)
{
	ch->meter_more = more;
	ch->meter_more_arg = arg;
}

void
px_channel_meter_grow(struct px_channel *ch, uint64_t n)
{
	struct px_splice *sp;
	uint64_t g;

	ch->meter_asking = false;
	if (n == 0) {
		/* No more: past the limit, as without a lease. */
		ch->meter_more = NULL;
		if (ch->abort_why == NULL)
			px_chan_meter(ch, ch->meter_dir, 0, true);
		return;
	}
	ch->meter_limit += n;
	/* Relayed: its source is read again. */
	if (ch->relay_on && ch->abort_why == NULL)
		px_relay_hold_read(&ch->relay, (enum px_dir)ch->meter_dir,
		    false);
	/* Not spliced (yet, or relayed): the next bytes meet the new limit. */
	if (ch->meter == NULL || !ch->relaying || ch->relay_on ||
	    ch->abort_why != NULL)
		return;
	sp = &ch->h[ch->meter_dir];
	if (sp->eof)
		return;
	g = px_chan_meter_grant(ch);
	if (sp->stopped)
		px_splice_extend(sp, g);
	else
		px_splice_bound(sp, sp->left + g);
}

/* ---- inspection ------------------------------------------------------- */

int
px_channel_inspect(struct px_channel *ch, px_channel_data_cb cb, void *arg)
{
	int d;

	if (ch->ending || ch->abort_why != NULL ||
	    ch->bytes[0] + ch->bytes[1] != 0) {
		errno = EBUSY;
		return -1;
	}
	if (ch->relaying && !ch->relay_on) {
		/* Spliced already, before any byte: the pumps stop, the
		 * buffered relay takes over. A pipe holding bytes, or a
		 * source that ended, is too late for that. */
		for (d = 0; d < 2; d++)
			if (ch->h[d].in_pipe != 0 || ch->h[d].eof ||
			    ch->half_done[d]) {
				errno = EBUSY;
				return -1;
			}
		for (d = 0; d < 2; d++)
			px_splice_release(&ch->h[d], ch->host->pipes);
	}
	ch->inspect = cb;
	ch->inspect_arg = arg;
	if (ch->relay_on)
		ch->relay.ops = &px_chan_inspect_ops;
	else if (ch->relaying)
		px_chan_start_relay(ch);
	return 0;
}

struct evbuffer *
px_channel_output(struct px_channel *ch, enum px_dir dir)
{
	return ch->relay_on ? px_relay_output(&ch->relay, dir) : NULL;
}

bool
px_channel_input_closed(const struct px_channel *ch, enum px_dir dir)
{
	return ch->relay_on && px_relay_input_closed(&ch->relay, dir);
}

void
px_channel_hold_end(struct px_channel *ch, enum px_dir dir)
{
	if (ch->relay_on)
		px_relay_hold_end(&ch->relay, dir, true);
}

void
px_channel_resume(struct px_channel *ch, enum px_dir dir, bool release_end)
{
	if (ch->relay_on && ch->abort_why == NULL)
		px_relay_resume(&ch->relay, dir, release_end);
}

void
px_channel_abort(struct px_channel *ch, enum px_chan_end reset,
    const char *why)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (ch->ending)
		return;
	if (ch->e[reset].fd != -1)
		(void)setsockopt(ch->e[reset].fd, SOL_SOCKET, SO_LINGER, &lg,
		    sizeof(lg));
	if (ch->abort_why == NULL) {
		ch->abort_why = why;
		/* Carried out from the timer: the caller may be inside the
		 * relay, which must not be freed under it. */
		event_active(&ch->timer, EV_TIMEOUT, 0);
	}
}
