/* r66: polices Waarp R66 managed file transfers inline (R66-WIRE.md).
 *
 * Buffered relay. Each direction is cut into frames by r66_wire; a frame is
 * forwarded once checked, a partial one waits in a per-direction hold
 * buffer bounded by max-block plus headroom, except a Data frame's block:
 * once its head is checked, the rest of it passes unseen (px_session_pass:
 * spliced, or copied under TLS or a bandwidth limit), unless the transfer
 * is inspected (scan, content, audit). The identity (host id) belongs
 * to the TCP connection: since R66 3.6.1 later channels skip Authent. Per
 * local channel we follow R66-WIRE.md 5.5 and apply the <r66> policy.
 *
 * Refusals: a request-time refusal answers the client with an ErrorPacket
 * on that channel (and tells the server, if it had seen the channel), and
 * the connection goes on. A refused host id, or a refusal in the middle of
 * a transfer, answers with an ErrorPacket and ends the connection. A
 * malformed frame or a state-machine violation answers a ConnectionError
 * [NOCHANNEL, NOCHANNEL] and ends the connection.
 *
 * This file is the session state machine only: frames and packets are
 * r66_wire.c's, JSON bodies r66_json.c's, the <r66> element r66_policy.c's,
 * each frame's check against it r66_check.c's, scanning r66_scan.c's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "analyser.h"
#include "parse.h"
#include "r66_json.h"
#include "r66_policy.h"
#include "r66_scan.h"
#include "r66_wire.h"
#include "rules.h"

#include "r66_int.h"

static const char *const r66_counters[] = {
	"transfers", "transfers_denied", "transfers_failed", "denied_host",
	"denied_rule", "denied_mode", "denied_file", "denied_size",
	"denied_block", "denied_digest", "denied_admin", "violations", "late_frames",
	"denied_scan", "denied_quota", "denied_content", NULL,
};

/* ---- helpers ---------------------------------------------------------- */

/* Bare log values (host=, rule=, file=). */
static const char *
r66_esc(char *out, size_t cap, const char *in, size_t len)
{
	return px_log_escape(out, cap, in, len, false);
}

static struct r66_chan *
r66_chan_by_cid(struct r66_state *st, uint32_t cid)
{
	int k;

	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st != R66_CH_FREE && st->ch[k].cid == cid)
			return &st->ch[k];
	return NULL;
}

static struct r66_chan *
r66_chan_new(struct r66_state *st, uint32_t cid)
{
	int k;

	/* A free slot, else one of an answered information/test exchange
	 * (R66 has no close message for those). */
	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st == R66_CH_FREE)
			break;
	if (k == R66_CHAN_MAX)
		for (k = 0; k < R66_CHAN_MAX; k++)
			if (st->ch[k].st == R66_CH_OTHER)
				break;
	for (; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st == R66_CH_FREE || st->ch[k].st == R66_CH_OTHER) {
			memset(&st->ch[k], 0, sizeof(st->ch[k]));
			st->ch[k].cid = cid;
			st->ch[k].sid = R66_NOCHANNEL;
			return &st->ch[k];
		}
	return NULL;
}

static uint64_t
r66_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Ends channel c; it is remembered for its late frames (the oldest one
 * remembered is forgotten). */
void
r66_chan_free(struct r66_state *st, struct r66_chan *c)
{
	struct r66_ended *e;

	if (c->st == R66_CH_FREE)
		return;
	e = &st->ended[st->ended_next++ % R66_ENDED_MAX];
	e->cid = c->cid;
	e->sid = c->sid;
	e->at_ms = r66_now_ms();
	e->dropped = 0;
	c->st = R66_CH_FREE;
	r66_quota_chan_end(st, c);
	r66_scan_free(c->scan);
	c->scan = NULL;
}

/* The lately ended channel frame f (which no open channel takes) belongs
 * to, or NULL. */
static struct r66_ended *
r66_ended_of(struct r66_state *st, const struct r66_frame *f,
    bool from_client)
{
	uint64_t now = r66_now_ms();
	struct r66_ended *e;
	int k;

	for (k = 0; k < R66_ENDED_MAX; k++) {
		e = &st->ended[k];
		if (e->at_ms == 0 || now - e->at_ms > R66_LATE_MS)
			continue;
		if (from_client && f->src == e->cid && (f->dst == e->sid ||
		    e->sid == R66_NOCHANNEL))
			return e;
		if (!from_client && f->dst == e->cid && (f->src == e->sid ||
		    f->src == R66_NOCHANNEL || e->sid == R66_NOCHANNEL))
			return e;
	}
	return NULL;
}

/* A late frame dropped: counted, and said once per channel. */
static void
r66_late_dropped(struct px_session *s, struct r66_state *st,
    const struct r66_frame *f, bool from_client)
{
	struct r66_ended *e = r66_ended_of(st, f, from_client);

	px_session_count(s, R66_C_LATE_FRAMES, 1);
	if (e != NULL && e->dropped++ == 0)
		px_session_log(s, LOG_INFO, "r66 late frames from the %s for "
		    "the ended channel %08x dropped (first: %s)", from_client ?
		    "client" : "server", e->cid, r66_code_name(f->code));
}

/* Does the requester (client) send the file on this channel? */
bool
r66_client_sends(const struct r66_chan *c)
{
	return r66_mode_is_send(c->req.mode);
}

/* How the blocks' bytes went: spliced (never in user space), copied
 * (TLS, a bandwidth limit, blocks that came whole), both, or none yet. */
static const char *
r66_payload_path(const struct r66_chan *c)
{
	if (c->payload_spliced == 0)
		return c->payload_copied == 0 ? "none" : "copy";
	return c->payload_copied == 0 ? "splice" : "mixed";
}

void
r66_xfer_log(struct px_session *s, struct r66_state *st,
    const struct r66_chan *c, const char *verdict, const char *why,
    const char *ref)
{
	char host[200], rule[300], file[400];

	if (!c->has_req)
		return;
	r66_scan_outcome(c->scan, verdict, why, ref);
	px_session_log(s, LOG_INFO, "r66-transfer host=%s rule=%s mode=%s "
	    "file=%s size=%llu blocks=%llu digest=%s verdict=%s%s%s%s%s "
	    "payload=%s",
	    r66_esc(host, sizeof(host), st->host, strlen(st->host)),
	    r66_esc(rule, sizeof(rule), c->req.rule, strlen(c->req.rule)),
	    r66_mode_name(c->req.mode),
	    r66_esc(file, sizeof(file), c->req.filename,
	    strlen(c->req.filename)),
	    (unsigned long long)c->bytes, (unsigned long long)c->blocks,
	    c->hash_algo[0] != '\0' ? c->hash_algo : "none", verdict,
	    why != NULL ? " reason=" : "", why != NULL ? why : "",
	    ref != NULL ? " policy-rule=" : "", ref != NULL ? ref : "",
	    r66_payload_path(c));
}

static void
r66_send_error(struct px_session *s, enum px_dir to, uint32_t dst,
    uint32_t src, const char *msg, char code)
{
	uint8_t b[512];
	size_t n = r66_encode_error(b, sizeof(b), dst, src, msg, code, 3);

	if (n > 0)
		evbuffer_add(px_session_output(s, to), b, n);
}

/* Malformed or out-of-sequence: ConnectionError to the client, end. */
enum r66_fv
r66_violation(struct px_session *s, struct r66_state *st, enum px_dir dir,
    const char *what)
{
	uint8_t b[256];
	char reason[200];
	size_t n;
	int k;

	px_session_count(s, R66_C_VIOLATIONS, 1);
	px_session_log(s, LOG_NOTICE, "r66 protocol violation from %s: %s",
	    dir == PX_TO_SERVER ? "client" : "server", what);
	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st != R66_CH_FREE) {
			if (st->ch[k].has_req) {
				px_session_count(s, R66_C_TRANSFERS_DENIED, 1);
				r66_xfer_log(s, st, &st->ch[k], "deny",
				    "protocol-violation", "builtin");
			}
			r66_chan_free(st, &st->ch[k]);
		}
	n = r66_encode_connerror(b, sizeof(b), R66_NOCHANNEL, R66_NOCHANNEL,
	    "Protocol violation (proxy)", NULL);
	evbuffer_add(px_session_output(s, PX_TO_CLIENT), b, n);
	snprintf(reason, sizeof(reason), "r66 protocol violation: %s", what);
	px_session_deny(s, reason);
	st->done = true;
	return R66_FV_END;
}

/* rule= of a refusal by entry hit of a rule list (NULL: its default). */
const char *
r66_ref(struct px_session *s, const struct px_rule *hit, char *buf,
    size_t size)
{
	return px_rule_ref(hit, px_session_policy_file(s), buf, size);
}

/* A policy refusal on channel c (ref: rule= of the lines). whole: end
 * the connection too (host id, mid-transfer). The client gets an
 * ErrorPacket on its channel; a server that already knows the channel
 * gets one too so it drops it. */
enum r66_fv
r66_refuse(struct px_session *s, struct r66_state *st, struct r66_chan *c,
    unsigned counter, char code, const char *msg, const char *why,
    const char *ref, enum px_action act, bool whole)
{
	char text[160], reason[200];

	px_session_count(s, counter, 1);
	if (c->has_req) {
		px_session_count(s, R66_C_TRANSFERS_DENIED, 1);
		r66_xfer_log(s, st, c, "deny", why, ref);
	} else {
		char host[200];

		px_session_log(s, LOG_NOTICE, "r66 denied host=%s: %s rule=%s",
		    r66_esc(host, sizeof(host), c->host[0] != '\0' ? c->host :
		    st->host, strlen(c->host[0] != '\0' ? c->host : st->host)),
		    why, ref);
	}
	if (act == PX_ACT_ABORT || whole)
		px_session_set_rule(s, ref);
	if (act == PX_ACT_ABORT) {
		st->done = st->abort = true;
		snprintf(st->abort_why, sizeof(st->abort_why), "r66 %s", why);
		r66_chan_free(st, c);
		return R66_FV_END;	/* the caller returns PX_ERROR */
	}
	snprintf(text, sizeof(text), "Denied by proxy: %s", msg);
	r66_send_error(s, PX_TO_CLIENT, c->cid, c->sid, text, code);
	if (c->sid != R66_NOCHANNEL && !whole)
		r66_send_error(s, PX_TO_SERVER, c->sid, c->cid, text, code);
	r66_chan_free(st, c);
	if (!whole)
		return R66_FV_DROP;
	snprintf(reason, sizeof(reason), "r66 %s", why);
	px_session_deny(s, reason);
	st->done = true;
	return R66_FV_END;
}

/* A transfer ended by a peer's ErrorPacket or ConnectionError: its line
 * says whose, and the ErrorCode the packet gives (R66-WIRE.md 3.6: 'M' a
 * bad digest, 'T' a transfer error...) when it gives one. */
static void
r66_xfer_error(struct px_session *s, struct r66_state *st,
    const struct r66_chan *c, const struct r66_frame *f, bool from_client)
{
	const char *who = from_client ? "client-error" : "server-error";
	char why[48];

	px_session_count(s, R66_C_TRANSFERS_FAILED, 1);
	if (f->mlen == 1 && ((f->m[0] >= 'A' && f->m[0] <= 'Z') ||
	    (f->m[0] >= 'a' && f->m[0] <= 'z')))
		snprintf(why, sizeof(why), "%s error-code=%c", who, f->m[0]);
	else
		snprintf(why, sizeof(why), "%s", who);
	r66_xfer_log(s, st, c, "error", why, NULL);
}

/* ---- scanning (r66_scan.c) ------------------------------------------- */

static void
r66_scan_refuse(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_scan_refusal *why)
{
	(void)r66_refuse(s, st, c, why->counter, why->code, why->msg,
	    why->why, why->ref[0] != '\0' ? why->ref : "scan", PX_ACT_DENY,
	    false);
}

/* The transfer of c starts: its file goes through the scanner when the
 * service's <scan> covers its direction, is judged by its type when it
 * has a <content>, recorded when it has an <audit>, and its end is held
 * for the size check with size-mismatch="block". */
static enum r66_fv
r66_scan_start(struct px_session *s, struct r66_state *st, struct r66_chan *c)
{
	const struct r66_policy *p = px_session_policy(s);
	struct r66_scan_what w = {
		.file = c->req.filename,
		.host = st->host,
		.auth = !st->proven ? NULL : st->proven_cert ? "certificate" :
		    "r66",
		.server = st->server_host,
		.rule = c->req.rule,
		.upload = r66_client_sends(c),
		.length = c->req.length,
		.rank = c->start_rank,
		.hold_end = p->size_mismatch_hold && c->req.length >= 0 &&
		    c->start_rank == 0,
	};
	struct r66_scan_refusal why;

	if (r66_scan_begin(s, &w, &c->scan, &why) != R66_SCAN_REFUSE)
		return R66_FV_PASS;
	r66_scan_refuse(s, st, c, &why);
	return R66_FV_DROP;
}

/* The channel of frame f when f goes the way of its scanned blocks. */
static struct r66_chan *
r66_scan_chan(struct r66_state *st, const struct r66_frame *f,
    bool from_client)
{
	struct r66_chan *c = r66_chan_by_cid(st, from_client ? f->src : f->dst);

	if (c == NULL || c->scan == NULL || r66_scan_dir(c->scan) !=
	    (from_client ? PX_TO_SERVER : PX_TO_CLIENT))
		return NULL;
	return c;
}

/* Whether c is a transfer under way whose blocks go in dir, scanned. */
static bool
r66_chan_scanned(const struct r66_chan *c, enum px_dir dir)
{
	return c->st != R66_CH_FREE && c->scan != NULL &&
	    r66_scan_dir(c->scan) == dir;
}

/* The verdicts that came for the transfers whose blocks go in dir. */
static void
r66_scan_settle_all(struct px_session *s, struct r66_state *st,
    enum px_dir dir)
{
	struct r66_scan_refusal why;
	int k;

	for (k = 0; k < R66_CHAN_MAX; k++) {
		struct r66_chan *c = &st->ch[k];

		if (!r66_chan_scanned(c, dir))
			continue;
		switch (r66_scan_settle(c->scan, px_session_output(s, dir),
		    &why)) {
		case R66_SCAN_ON:
			break;
		case R66_SCAN_OFF:
			r66_scan_free(c->scan);
			c->scan = NULL;
			break;
		case R66_SCAN_REFUSE:
			r66_scan_refuse(s, st, c, &why);
			break;
		}
	}
}

/* dir's sender left: a transfer waiting for its verdict never gets its
 * end (its peer's side is shut once what went is written; the held
 * frames could not follow). */
static void
r66_scan_sender_gone(struct r66_state *st, enum px_dir dir)
{
	int k;

	for (k = 0; k < R66_CHAN_MAX; k++) {
		struct r66_chan *c = &st->ch[k];

		if (!r66_chan_scanned(c, dir))
			continue;
		r66_scan_abandon(c->scan, dir == PX_TO_SERVER ?
		    "the client closed before the verdict" :
		    "the server closed before the verdict");
		c->scan = NULL;
	}
}

/* A scanner of a transfer in dir has all it may queue: dir waits. */
static bool
r66_scan_stalled(const struct r66_state *st, enum px_dir dir)
{
	int k;

	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st != R66_CH_FREE && st->ch[k].scan != NULL &&
		    r66_scan_dir(st->ch[k].scan) == dir &&
		    r66_scan_full(st->ch[k].scan))
			return true;
	return false;
}

/* A whole, checked frame of a scanned transfer from its sender. false:
 * the scanner's queue is full, read no more of dir for now. */
static bool
r66_scan_frame(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_frame *f, struct evbuffer *src,
    struct evbuffer *out)
{
	struct r66_scan_refusal why;

	switch (r66_scan_take(c->scan, src, f, out, &why)) {
	case R66_SCAN_ON:
		return !r66_scan_full(c->scan);
	case R66_SCAN_OFF:
		r66_scan_free(c->scan);
		c->scan = NULL;
		return true;
	case R66_SCAN_REFUSE:
	default:
		/* (the frame was taken: dropped) */
		r66_scan_refuse(s, st, c, &why);
		return true;
	}
}

/* <partner>: the requester's key against the host table, before its
 * Authent goes on. -1: not proven (unknown host id or wrong key). */
static int
r66_partner_check(struct px_session *s, struct r66_state *st,
    const struct r66_chan *c, const struct r66_policy *p,
    const struct r66_authent *a)
{
	const struct r66_partner *pt = r66_partner_find(p, c->host);
	const char *result;
	char h[200];

	if (pt == NULL)
		result = "unknown-host";
	else if (a->key.len != sizeof(pt->key) ||
	    CRYPTO_memcmp(a->key.p, pt->key, sizeof(pt->key)) != 0)
		result = "bad-password";
	else
		result = "ok";
	px_session_log(s, strcmp(result, "ok") == 0 ? LOG_INFO : LOG_NOTICE,
	    "r66 auth host=%s result=%s%s", r66_esc(h, sizeof(h), c->host,
	    strlen(c->host)), result, pt != NULL ? "" : " (not in the "
	    "service's <partner> table)");
	if (strcmp(result, "ok") != 0)
		return -1;
	st->proven = true;
	return 0;
}

/* A frame from the client (requester). */
static enum r66_fv
r66_from_client(struct px_session *s, struct r66_state *st,
    const struct r66_frame *f, uint32_t rank)
{
	const struct r66_policy *p = px_session_policy(s);
	struct r66_chan *c;
	struct r66_authent a;
	struct r66_request rq;
	enum px_action act;
	const struct px_rule *hit;
	char ref[PX_RULE_REF_MAX], cert[128];
	bool certified;

	if (f->code == R66_KEEPALIVE || f->code == R66_NOOP)
		return R66_FV_PASS;
	/* The request that waited for the quota store: its answer alone is
	 * still to judge (every other check passed it). */
	if (r66_quota_waiting(st, f)) {
		if ((c = r66_chan_by_cid(st, f->src)) == NULL)
			return r66_violation(s, st, PX_TO_SERVER,
			    "frame for an unknown channel");
		return r66_quota_request(s, st, c);
	}
	if (f->code == R66_CONNERROR) {
		if ((c = r66_chan_by_cid(st, f->src)) != NULL) {
			if (c->has_req) {
				r66_xfer_error(s, st, c, f, true);
			}
			r66_chan_free(st, c);
		}
		return R66_FV_PASS;
	}
	if (f->dst == R66_NOCHANNEL) {
		if (r66_chan_by_cid(st, f->src) != NULL)
			return r66_violation(s, st, PX_TO_SERVER,
			    "channel opened twice");
		if (f->code == R66_DATA || f->code == R66_ENDTRANSFER ||
		    f->code == R66_ENDREQUEST || f->code == R66_ERROR)
			return r66_violation(s, st, PX_TO_SERVER,
			    "channel opened by a non-opening packet");
		if ((c = r66_chan_new(st, f->src)) == NULL)
			return r66_violation(s, st, PX_TO_SERVER,
			    "too many channels");
		if (f->code == R66_AUTHENT) {
			if (r66_authent_parse(f, &a) == -1 || a.way != 0 ||
			    a.host.len >= sizeof(c->host))
				return r66_violation(s, st, PX_TO_SERVER,
				    "bad authentication packet");
			memcpy(c->host, a.host.p, a.host.len);
			c->host[a.host.len] = '\0';
			act = px_rules_decide(&p->hosts, c->host, &hit);
			if (act != PX_ACT_ACCEPT)
				return r66_refuse(s, st, c, R66_C_DENIED_HOST, 'A',
				    "host id not allowed", "host",
				    r66_ref(s, hit, ref, sizeof(ref)), act,
				    true);
			if (st->authed && strcmp(st->host, c->host) != 0)
				return r66_refuse(s, st, c, R66_C_DENIED_HOST, 'A',
				    "one host id per connection", "host-change",
				    "builtin", PX_ACT_DENY, true);
			/* A client certificate that names a user (<tls
			 * identity=>) proves that host id and no other;
			 * else the host table, if any. */
			if ((certified = px_session_client_identity(s, cert,
			    sizeof(cert))) && strcmp(cert, c->host) != 0) {
				char h[200], ce[200];

				px_session_log(s, LOG_NOTICE, "r66 auth host=%s "
				    "result=bad-certificate (the certificate "
				    "names %s)", r66_esc(h, sizeof(h), c->host,
				    strlen(c->host)), r66_esc(ce, sizeof(ce),
				    cert, strlen(cert)));
				return r66_refuse(s, st, c, R66_C_DENIED_HOST, 'A',
				    "host id not the certificate's",
				    "bad-authent", "tls/@identity", PX_ACT_DENY,
				    true);
			}
			if (certified && !st->proven) {
				char h[200];

				px_session_log(s, LOG_INFO, "r66 auth host=%s "
				    "result=ok method=certificate", r66_esc(h,
				    sizeof(h), c->host, strlen(c->host)));
				st->proven = st->proven_cert = true;
			} else if (!certified && p->npartners > 0 &&
			    r66_partner_check(s, st, c, p, &a) == -1)
				return r66_refuse(s, st, c, R66_C_DENIED_HOST, 'A',
				    "host id not proven", "bad-authent",
				    "partner", PX_ACT_DENY, true);
			r66_caps(&a, st->cdigest, sizeof(st->cdigest),
			    &st->creuse);
			c->st = R66_CH_AUTH_ASKED;
			return R66_FV_PASS;
		}
		/* Authentication reuse (R66 >= 3.6.1 on both sides). */
		if (!st->authed || !st->creuse || !st->sreuse)
			return r66_refuse(s, st, c, R66_C_DENIED_HOST, 'A',
			    "not authenticated", "not-authenticated",
			    "builtin", PX_ACT_DENY, true);
		c->st = R66_CH_AUTHED;
	} else {
		c = r66_chan_by_cid(st, f->src);
		if (c == NULL || c->sid != f->dst) {
			/* Late error for a channel we refused: swallow it. */
			if (f->code == R66_ERROR)
				return R66_FV_DROP;
			if (c == NULL && r66_ended_of(st, f, true) != NULL)
				return R66_FV_LATE;
			return r66_violation(s, st, PX_TO_SERVER,
			    "frame for an unknown channel");
		}
	}
	switch (f->code) {
	case R66_REQUEST:
		if (c->st != R66_CH_AUTHED || r66_request_parse(f, &rq) == -1 ||
		    rq.way != 0 || rq.code != 'i')
			return r66_violation(s, st, PX_TO_SERVER,
			    "unexpected or malformed request");
		c->req = rq;
		c->req.info.p = NULL;
		c->req.info.len = 0;
		c->has_req = true;
		c->st = R66_CH_REQ_ASKED;
		return r66_check_request(s, st, c, &rq, false);
	case R66_DATA:
		return r66_check_data(s, st, c, f, rank, true);
	case R66_ENDTRANSFER:
		return r66_check_endtransfer(s, st, c, f, true);
	case R66_ENDREQUEST:
		return r66_check_endrequest(s, st, c, f, true);
	case R66_ERROR:
		if (c->has_req) {
			r66_xfer_error(s, st, c, f, true);
		}
		r66_chan_free(st, c);
		return R66_FV_PASS;
	case R66_AUTHENT:
		return r66_violation(s, st, PX_TO_SERVER,
		    "authentication on an open channel");
	default:
		if (c->st != R66_CH_AUTHED && c->st != R66_CH_OTHER &&
		    c->st != R66_CH_XFER)
			return r66_violation(s, st, PX_TO_SERVER,
			    "unexpected packet");
		return r66_check_other(s, st, c, f);
	}
}

/* A frame from the server (requested). */
static enum r66_fv
r66_from_server(struct px_session *s, struct r66_state *st,
    const struct r66_frame *f, uint32_t rank)
{
	struct r66_chan *c;
	struct r66_authent a;
	struct r66_request rq;
	enum r66_fv v;

	if (f->code == R66_KEEPALIVE || f->code == R66_NOOP)
		return R66_FV_PASS;
	if (f->dst == R66_NOCHANNEL) {
		if (f->code == R66_CONNERROR)
			return R66_FV_PASS;
		return r66_violation(s, st, PX_TO_CLIENT,
		    "server opened a channel");
	}
	c = r66_chan_by_cid(st, f->dst);
	if (c == NULL || (c->sid != R66_NOCHANNEL && c->sid != f->src &&
	    f->src != R66_NOCHANNEL)) {
		if (f->code == R66_ERROR || f->code == R66_CONNERROR)
			return R66_FV_DROP;
		if (c == NULL && r66_ended_of(st, f, false) != NULL)
			return R66_FV_LATE;
		return r66_violation(s, st, PX_TO_CLIENT,
		    "frame for an unknown channel");
	}
	if (f->code == R66_ERROR || f->code == R66_CONNERROR) {
		if (c->has_req) {
			r66_xfer_error(s, st, c, f, false);
		}
		r66_chan_free(st, c);
		return R66_FV_PASS;
	}
	if (c->sid == R66_NOCHANNEL)
		c->sid = f->src;
	switch (f->code) {
	case R66_AUTHENT:
		if (c->st != R66_CH_AUTH_ASKED || r66_authent_parse(f, &a) == -1 ||
		    a.way != 1 || a.host.len >= sizeof(st->server_host))
			return r66_violation(s, st, PX_TO_CLIENT,
			    "unexpected or malformed authentication answer");
		memcpy(st->server_host, a.host.p, a.host.len);
		st->server_host[a.host.len] = '\0';
		r66_caps(&a, st->sdigest, sizeof(st->sdigest), &st->sreuse);
		if (!st->authed) {
			char h[200], sh[200];

			snprintf(st->host, sizeof(st->host), "%s", c->host);
			st->authed = true;
			px_session_log(s, LOG_INFO, "r66 authenticated host=%s "
			    "server=%s", r66_esc(h, sizeof(h), st->host,
			    strlen(st->host)), r66_esc(sh, sizeof(sh),
			    st->server_host, strlen(st->server_host)));
		}
		c->st = R66_CH_AUTHED;
		return R66_FV_PASS;
	case R66_REQUEST:
		if (c->st != R66_CH_REQ_ASKED || r66_request_parse(f, &rq) == -1 ||
		    rq.way != 1)
			return r66_violation(s, st, PX_TO_CLIENT,
			    "unexpected or malformed request answer");
		if (rq.code != 'i') {
			/* the server refused: pass its answer on */
			px_session_count(s, R66_C_TRANSFERS_FAILED, 1);
			r66_xfer_log(s, st, c, "error", "server-refused", NULL);
			r66_chan_free(st, c);
			return R66_FV_PASS;
		}
		if ((v = r66_check_request(s, st, c, &rq, true)) != R66_FV_PASS)
			return v;
		snprintf(c->req.filename, sizeof(c->req.filename), "%s",
		    rq.filename);
		c->req.block = rq.block;
		c->req.length = rq.length;
		if (rq.rank < 0 || rq.rank > UINT32_MAX)
			return r66_violation(s, st, PX_TO_CLIENT, "bad rank");
		c->next_rank = c->start_rank = (uint32_t)rq.rank;
		c->st = R66_CH_XFER;
		if ((v = r66_scan_start(s, st, c)) != R66_FV_PASS)
			return v;
		/* The client's blocks follow this answer: read the first
		 * one's head alone (see r66_on_data). */
		if (r66_client_sends(c) && c->scan == NULL &&
		    evbuffer_get_length(st->hold[PX_TO_SERVER]) == 0)
			px_session_read_head(s, PX_TO_SERVER,
			    R66_FRAME_MIN + 4);
		return R66_FV_PASS;
	case R66_DATA:
		return r66_check_data(s, st, c, f, rank, false);
	case R66_ENDTRANSFER:
		return r66_check_endtransfer(s, st, c, f, false);
	case R66_ENDREQUEST:
		return r66_check_endrequest(s, st, c, f, false);
	case R66_SHUTDOWN:
	case R66_BLOCKREQUEST:
	case R66_BUSINESS:
		return r66_violation(s, st, PX_TO_CLIENT,
		    "administrative packet from the server");
	default:
		/* Valid/JsonCommand/Test answers, rename notices in RECV */
		if (c->st == R66_CH_AUTHED)
			return r66_violation(s, st, PX_TO_CLIENT,
			    "unexpected packet");
		/* a Valid is the last word of an information/test exchange */
		if (c->st == R66_CH_OTHER && f->code == R66_VALID)
			r66_chan_free(st, c);
		return R66_FV_PASS;
	}
}

/* ---- the analyser ----------------------------------------------------- */

static int
r66_on_open(struct px_session *s, void *vst)
{
	struct r66_state *st = vst;

	if ((st->hold[0] = evbuffer_new()) == NULL ||
	    (st->hold[1] = evbuffer_new()) == NULL)
		return -1;
	return px_session_relay(s, PX_RELAY_BUFFERED, true);
}

/* Appends a copy of in's bytes to hold and empties in. A copy, not a move
 * of in's chains: the core reads into a fresh chain sized for a whole read
 * each time in is empty, so a peer sending one byte per segment would
 * leave a mostly empty chain in the hold per byte. Copied, the hold's
 * memory stays about the partial frame it holds, and each byte of a frame
 * is copied once, when it arrives. */
static int
r66_hold_add(struct evbuffer *hold, struct evbuffer *in)
{
	struct evbuffer_iovec v[16];
	size_t got;
	int n, k;

	while (evbuffer_get_length(in) > 0) {
		n = evbuffer_peek(in, -1, NULL, v, 16);
		if (n > 16)
			n = 16;
		for (k = 0, got = 0; k < n; k++) {
			if (evbuffer_add(hold, v[k].iov_base,
			    v[k].iov_len) == -1)
				return -1;
			got += v[k].iov_len;
		}
		evbuffer_drain(in, got);
	}
	return 0;
}

/* A transfer on this connection has its data coming from that side. */
static bool
r66_sending(const struct r66_state *st, bool from_client)
{
	int k;

	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st == R66_CH_XFER && st->ch[k].scan == NULL &&
		    r66_client_sends(&st->ch[k]) == from_client)
			return true;
	return false;
}

/* The channel a checked Data frame belongs to (the sender's id). */
static struct r66_chan *
r66_data_chan(struct r66_state *st, const struct r66_frame *f,
    bool from_client)
{
	return r66_chan_by_cid(st, from_client ? f->src : f->dst);
}

static void
r66_block_copied(struct r66_state *st, const struct r66_frame *f,
    bool from_client)
{
	struct r66_chan *c = r66_data_chan(st, f, from_client);

	if (c != NULL)
		c->payload_copied += f->mlen;
}

/* A checked Data frame of which `have` bytes are here: those go on now,
 * the rest of its block (and digest) follows unseen. */
static void
r66_pass_block(struct px_session *s, struct r66_state *st, enum px_dir dir,
    const struct r66_frame *f, struct evbuffer *src, struct evbuffer *out,
    size_t have)
{
	struct r66_chan *c = r66_data_chan(st, f, dir == PX_TO_SERVER);
	uint64_t rest = f->len - have;

	evbuffer_remove_buffer(src, out, have);
	/* The next frame's head and a Data frame's rank, alone. */
	if (px_session_pass(s, dir, rest, R66_FRAME_MIN + 4)) {
		if (c != NULL)
			c->payload_spliced += rest > f->elen ? rest - f->elen : 0;
	} else if (c != NULL)
		c->payload_copied += f->mlen;
}

static enum px_verdict
r66_on_data(struct px_session *s, void *vst, enum px_dir dir,
    struct evbuffer *in)
{
	const struct r66_policy *p = px_session_policy(s);
	struct r66_state *st = vst;
	struct evbuffer *out = px_session_output(s, dir), *src = in;
	uint32_t cap = (uint32_t)p->max_block + R66_DATA_OVERHEAD;
	bool from_client = dir == PX_TO_SERVER, stalled = false;
	struct r66_chan *sc;

	if (st->hold[dir] == NULL)
		return PX_ERROR;
	/* Verdicts first: what they release goes before what comes now. */
	r66_scan_settle_all(s, st, dir);
	/* A scanner short of room: what comes waits in `in`, whose bound
	 * (limits/@buffer) stops the reads. */
	if (!st->done && r66_scan_stalled(st, dir) &&
	    !px_session_input_closed(s, dir))
		return PX_MORE;
	/* A request or a block waits for the quota store: so does what
	 * follows it. */
	if (!st->done && ((from_client && st->qask.req != NULL) ||
	    r66_quota_leasing(st, from_client)) &&
	    !px_session_input_closed(s, dir))
		return PX_MORE;
	/* Frames are cut from the hold while it has the start of one, else
	 * straight from in (whole frames move without a copy). */
	if (evbuffer_get_length(st->hold[dir]) > 0) {
		if (r66_hold_add(st->hold[dir], in) == -1)
			return PX_ERROR;
		src = st->hold[dir];
	}
	while (!st->done) {
		size_t len = evbuffer_get_length(src), need;
		uint8_t head[30];
		struct r66_frame f;
		enum r66_status rs;
		enum r66_fv v;
		uint32_t rank = 0;
		char what[96];
		bool partial;

		if (len < 4)
			break;
		evbuffer_copyout(src, head, len < sizeof(head) ? len :
		    sizeof(head));
		if (len < R66_FRAME_MIN)
			rs = r66_frame_parse(head, len, cap, &f, &need);
		else
			rs = r66_frame_head(head, sizeof(head) < len ?
			    sizeof(head) : len, cap, &f);
		if (rs == R66_INCOMPLETE)
			break;
		if (rs != R66_OK) {
			snprintf(what, sizeof(what), "%s", r66_status_str(rs));
			if (rs == R66_E_TOOBIG)
				snprintf(what, sizeof(what), "frame of %u bytes "
				    "over max-block", r66_be32(head) + 4);
			r66_violation(s, st, dir, what);
			break;
		}
		/* A Data frame is judged on its head and rank; its block then
		 * goes on as it comes (a pass), not held until it is whole. */
		partial = len < f.len;
		if (partial && (f.code != R66_DATA ||
		    len < (size_t)R66_FRAME_MIN + f.hlen))
			break;
		/* A scanned block is judged whole: its bytes go through user
		 * space, to the scanner too. */
		if (partial && r66_scan_chan(st, &f, from_client) != NULL)
			break;
		if (f.code == R66_DATA) {
			rank = r66_be32(head + R66_FRAME_MIN);
		} else {
			const uint8_t *fp = evbuffer_pullup(src, f.len);

			if (fp == NULL || r66_frame_parse(fp, f.len, cap, &f,
			    &need) != R66_OK) {
				r66_violation(s, st, dir, "frame changed");
				break;
			}
		}
		if (!r66_ids_plausible(&f, from_client)) {
			snprintf(what, sizeof(what), "bad channel ids on %s",
			    r66_code_name(f.code));
			r66_violation(s, st, dir, what);
			break;
		}
		v = from_client ? r66_from_client(s, st, &f, rank) :
		    r66_from_server(s, st, &f, rank);
		if (v == R66_FV_WAIT) {
			/* The request or block stays, with what follows it. */
			stalled = true;
			break;
		}
		if (v == R66_FV_LATE) {
			/* Dropped whole: its rest must not reach the peer
			 * (the hold's bound covers a whole frame). */
			if (partial)
				break;
			r66_late_dropped(s, st, &f, from_client);
			evbuffer_drain(src, f.len);
			continue;
		}
		if (partial && v == R66_FV_PASS) {
			r66_pass_block(s, st, dir, &f, src, out, len);
			break;
		}
		if (partial && v == R66_FV_DROP) {
			/* Data frames are never dropped alone (a refusal
			 * mid-transfer ends the connection). */
			r66_violation(s, st, dir, "data frame dropped");
			break;
		}
		if (v == R66_FV_PASS) {
			if (f.code == R66_DATA)
				r66_block_copied(st, &f, from_client);
			if ((sc = r66_scan_chan(st, &f, from_client)) == NULL)
				evbuffer_remove_buffer(src, out, f.len);
			else if (!r66_scan_frame(s, st, sc, &f, src, out)) {
				stalled = true;
				break;
			}
		} else if (v == R66_FV_DROP)
			evbuffer_drain(src, f.len);
		else if (!st->done)
			break;
	}
	if (st->done) {
		evbuffer_drain(src, evbuffer_get_length(src));
		evbuffer_drain(in, evbuffer_get_length(in));
		if (st->abort) {
			px_session_abort(s, st->abort_why);
			return PX_ERROR;
		}
		return PX_DENY;
	}
	/* The scanner is short of room: the rest waits in `in`, where the
	 * relay's bound stops the reads. Left in the hold, it would grow by
	 * what each resume moved there and the scanner did not take (the
	 * hold is for one partial frame only). */
	if (stalled && !px_session_input_closed(s, dir)) {
		if (src != in && evbuffer_prepend_buffer(in, src) == -1)
			return PX_ERROR;
		return PX_MORE;
	}
	if (px_session_input_closed(s, dir))
		r66_scan_sender_gone(st, dir);
	/* At a frame boundary while this side sends a file: its next frame
	 * is most likely a Data block; read its head alone so that the block
	 * is spliced rather than read along. */
	if (evbuffer_get_length(src) == 0 && px_session_pass_left(s, dir) == 0 &&
	    r66_sending(st, from_client))
		px_session_read_head(s, dir, R66_FRAME_MIN + 4);
	/* Keep a partial frame ourselves, so PX_PASS (and its backpressure)
	 * applies to what we forwarded. Bounded: its head passed the cap, so
	 * it is under max-block + 98 bytes (16 414 for other frames). */
	if (evbuffer_get_length(src) > 0 || px_session_pass_left(s, dir) > 0) {
		if (px_session_input_closed(s, dir)) {
			px_session_log(s, LOG_NOTICE, "r66: %s closed in the "
			    "middle of a frame", from_client ? "client" :
			    "server");
			evbuffer_drain(src, evbuffer_get_length(src));
		} else if (src == in && r66_hold_add(st->hold[dir], in) == -1)
			return PX_ERROR;
	}
	return PX_PASS;
}

static void
r66_on_close(struct px_session *s, void *vst)
{
	struct r66_state *st = vst;
	int k, d;

	for (k = 0; k < R66_CHAN_MAX; k++) {
		if (st->ch[k].st != R66_CH_FREE && st->ch[k].has_req &&
		    st->ch[k].st != R66_CH_OTHER) {
			px_session_count(s, R66_C_TRANSFERS_FAILED, 1);
			r66_xfer_log(s, st, &st->ch[k], "error",
			    "connection-closed", NULL);
			r66_chan_free(st, &st->ch[k]);
		}
		r66_scan_free(st->ch[k].scan);
		st->ch[k].scan = NULL;
	}
	for (d = 0; d < 2; d++)
		if (st->hold[d] != NULL) {
			evbuffer_free(st->hold[d]);
			st->hold[d] = NULL;
		}
	r66_quota_close(st);
}

/* px_analyser.who: " user=HOST auth=r66" once proven to proxyd by the
 * host table, auth=certificate by a client certificate naming it. */
static void
r66_who(const struct px_session *s, const void *state, char *buf,
    size_t len)
{
	const struct r66_state *st = state;
	char h[200];

	(void)s;
	if (st->proven && st->authed)
		snprintf(buf, len, " user=%s auth=%s", r66_esc(h, sizeof(h),
		    st->host, strlen(st->host)), st->proven_cert ?
		    "certificate" : "r66");
}

/* A client <source-limits> refuses at accept: a ConnectionError on no
 * channel ([NOCHANNEL,NOCHANNEL], "cannot continue with you", R66-WIRE
 * 1.3), as for a violation, its middle the ErrorCode 'l'
 * (ServerOverloaded), then the close. */
static size_t
r66_limit_refusal(const void *pol, const char *limit, const char *whose,
    const char *rule, uint32_t retry_s, uint64_t id, char *buf, size_t size)
{
	char msg[128];

	(void)pol;
	(void)rule;
	(void)id;
	snprintf(msg, sizeof(msg), "Too many %s %s (proxy source limit: %s), "
	    "try again in %u s", limit, whose, limit, (unsigned)retry_s);
	return r66_encode_connerror((uint8_t *)buf, size, R66_NOCHANNEL,
	    R66_NOCHANNEL, msg, "l");
}

/* ---- a rolling upgrade's hand-over (core/handover.h) ------------------- */

/* A connection between transfers (every channel free, no frame in part,
 * no scan) changes processes with its identity (the authentication the
 * later channels reuse, the peers' capabilities) and the channels that
 * ended lately, whose late frames are still dropped whole. (Monotonic
 * times: the same clock in both processes.) */
#define R66_HO_VERSION	2

struct r66_ho {
	uint32_t	 version;
	bool		 authed, creuse, sreuse, proven, proven_cert;
	unsigned char	 partner_key[16];	/* proven by <partner>: its key */
	char		 host[128], server_host[128];
	char		 cdigest[24], sdigest[24];
	struct r66_ended ended[R66_ENDED_MAX];
	unsigned	 ended_next;
};

static ssize_t
r66_handover_save(struct px_session *s, void *vst, void *buf, size_t len)
{
	const struct r66_state *st = vst;
	const struct r66_partner *pt;
	struct r66_ho *h = buf;
	int k, d;

	if (len < sizeof(*h) || st->done || st->abort)
		return -1;
	for (d = 0; d < 2; d++)
		if (st->hold[d] == NULL || evbuffer_get_length(st->hold[d]) != 0)
			return -1;
	for (k = 0; k < R66_CHAN_MAX; k++)
		if (st->ch[k].st != R66_CH_FREE || st->ch[k].scan != NULL)
			return -1;
	memset(h, 0, sizeof(*h));
	h->version = R66_HO_VERSION;
	h->authed = st->authed;
	h->creuse = st->creuse;
	h->sreuse = st->sreuse;
	h->proven = st->proven;
	h->proven_cert = st->proven_cert;
	if (st->proven && !st->proven_cert) {
		if ((pt = r66_partner_find(px_session_policy(s),
		    st->host)) == NULL)
			return -1;	/* a reload dropped it: not here */
		memcpy(h->partner_key, pt->key, sizeof(h->partner_key));
	}
	memcpy(h->host, st->host, sizeof(h->host));
	memcpy(h->server_host, st->server_host, sizeof(h->server_host));
	memcpy(h->cdigest, st->cdigest, sizeof(h->cdigest));
	memcpy(h->sdigest, st->sdigest, sizeof(h->sdigest));
	memcpy(h->ended, st->ended, sizeof(h->ended));
	h->ended_next = st->ended_next % R66_ENDED_MAX;
	return (ssize_t)sizeof(*h);
}

static int
r66_handover_load(struct px_session *s, void *vst, const void *buf,
    size_t len)
{
	struct r66_state *st = vst;
	const struct r66_ho *h = buf;
	const struct r66_partner *pt;
	char e[200];

	if (len != sizeof(*h) || h->version != R66_HO_VERSION)
		return -1;
	st->authed = h->authed;
	st->creuse = h->creuse;
	st->sreuse = h->sreuse;
	st->proven = h->proven;
	st->proven_cert = h->proven_cert;
	memcpy(st->host, h->host, sizeof(st->host));
	memcpy(st->server_host, h->server_host, sizeof(st->server_host));
	memcpy(st->cdigest, h->cdigest, sizeof(st->cdigest));
	memcpy(st->sdigest, h->sdigest, sizeof(st->sdigest));
	st->host[sizeof(st->host) - 1] = '\0';
	st->server_host[sizeof(st->server_host) - 1] = '\0';
	st->cdigest[sizeof(st->cdigest) - 1] = '\0';
	st->sdigest[sizeof(st->sdigest) - 1] = '\0';
	memcpy(st->ended, h->ended, sizeof(st->ended));
	st->ended_next = h->ended_next;
	/* Proven by the old process's <partner> table: the new one's must
	 * still have that partner, with that key, or the later channels
	 * (which reuse the authentication) would pass on a proof this
	 * configuration no longer accepts. */
	if (st->proven && !st->proven_cert &&
	    ((pt = r66_partner_find(px_session_policy(s), st->host)) == NULL ||
	    CRYPTO_memcmp(pt->key, h->partner_key, sizeof(pt->key)) != 0)) {
		px_session_log(s, LOG_NOTICE, "r66 auth host=%s result=%s "
		    "(handed over: the partner proven before the upgrade is "
		    "%s): closed", r66_esc(e, sizeof(e), st->host,
		    strlen(st->host)), pt == NULL ? "unknown-host" :
		    "bad-password", pt == NULL ? "no longer in the <partner> "
		    "table" : "another key now");
		return -1;
	}
	return r66_on_open(s, vst);
}

const struct px_analyser r66_analyser = {
	.name = "r66",
	.state_size = sizeof(struct r66_state),
	.policy_load = r66_policy_load,
	.policy_free = r66_policy_free,
	.on_open = r66_on_open,
	.on_data = r66_on_data,
	.on_close = r66_on_close,
	.on_worker_exit = px_qstore_thread_exit,
	.counters = r66_counters,
	.scan = true,
	.content = true,
	.audit = true,
	.limit_refusal = r66_limit_refusal,
	.who = r66_who,
	.handover = true,
	.handover_save = r66_handover_save,
	.handover_load = r66_handover_load,
};
