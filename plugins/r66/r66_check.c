/* r66: each frame of a channel checked against the <r66> policy and the
 * state machine of R66-WIRE.md 5.5 (request, data blocks, end of transfer,
 * end of request, the rest), and the peers' capabilities. The session
 * around them: r66.c. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/buffer.h>

#include "analyser.h"
#include "parse.h"
#include "r66_int.h"
#include "r66_json.h"
#include "r66_policy.h"
#include "r66_scan.h"
#include "r66_wire.h"
#include "rules.h"

/* No path tricks, whatever the patterns say. */
static bool
r66_name_safe(const char *name)
{
	const char *p;

	if (name[0] == '\0' || name[0] == '/' || name[0] == '\\')
		return false;
	for (p = name; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
			return false;
	for (p = name; p != NULL; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
			return false;
	}
	return true;
}

/* rule= of a refusal by <mode allow>: the element, or the default set. */
static const char *
r66_mode_ref(struct px_session *s, const struct r66_policy *p, char *buf,
    size_t size)
{
	if (p->mode_line == 0)
		return "default";
	return px_rule_ref_at(p->mode_line, NULL, px_session_policy_file(s),
	    buf, size);
}

/* The file's size is not the one its request announced: longer, a block
 * would take it past that (to size); else its EndTransfer came short.
 * Logged once; refused with size-mismatch="block": an ErrorPacket to both
 * ends (code 'd'), before the file's held end (r66_scan's hold) or its
 * extra block reached the receiver. */
static enum r66_fv
r66_size_mismatch(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, uint64_t size, bool longer)
{
	const struct r66_policy *p = px_session_policy(s);
	char host[200], rule[300], file[400];

	if (!c->size_told) {
		c->size_told = true;
		px_session_log(s, LOG_NOTICE, "r66-size mismatch announced=%lld "
		    "size=%llu%s action=%s file=%s host=%s rule=%s dir=%s",
		    (long long)c->req.length, (unsigned long long)size,
		    longer ? "+" : "", p->size_mismatch_block ? "block" :
		    "allow", px_log_escape(file, sizeof(file), c->req.filename,
		    strlen(c->req.filename), false), px_log_escape(host,
		    sizeof(host), st->host, strlen(st->host), false),
		    px_log_escape(rule, sizeof(rule), c->req.rule,
		    strlen(c->req.rule), false), r66_client_sends(c) ?
		    "upload" : "download");
	}
	if (!p->size_mismatch_block)
		return R66_FV_PASS;
	/* A Data frame not held whole (no inspection: a restart) cannot be
	 * dropped alone: the connection ends then. */
	return r66_refuse(s, st, c, R66_C_DENIED_SIZE, 'd', longer ?
	    "more data than the announced size" :
	    "less data than the announced size", "size-mismatch",
	    "r66/@size-mismatch", PX_ACT_DENY, longer && c->scan == NULL);
}

/* ---- checks ----------------------------------------------------------- */

enum r66_fv
r66_check_request(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_request *rq, bool answer)
{
	const struct r66_policy *p = px_session_policy(s);
	const struct px_rule *hit;
	enum px_action a;
	char ref[PX_RULE_REF_MAX];

	if (!answer) {
		a = px_rules_decide(&p->rules, rq->rule, &hit);
		if (a != PX_ACT_ACCEPT)
			return r66_refuse(s, st, c, R66_C_DENIED_RULE, 'n',
			    "rule not allowed", "rule", r66_ref(s, hit, ref,
			    sizeof(ref)), a, false);
		if (!r66_mode_valid(rq->mode) ||
		    (p->modes & (1u << rq->mode)) == 0)
			return r66_refuse(s, st, c, R66_C_DENIED_MODE, 'n',
			    "transfer mode not allowed", "mode", r66_mode_ref(s,
			    p, ref, sizeof(ref)), PX_ACT_DENY,
			    false);
		if (p->req_block_digest && !r66_mode_has_digest(rq->mode))
			return r66_refuse(s, st, c, R66_C_DENIED_DIGEST, 'M',
			    "per-block digest required", "digest-required",
			    "r66/@require-digest", PX_ACT_DENY, false);
		if (rq->info.len > 0 &&
		    memmem(rq->info.p, rq->info.len, "#COMPRESS#", 10) != NULL)
			return r66_refuse(s, st, c, R66_C_DENIED_MODE, 'n',
			    "block compression not allowed", "compression",
			    "builtin", PX_ACT_DENY, false);
	} else if (rq->mode != c->req.mode || strcmp(rq->rule,
	    c->req.rule) != 0)
		return r66_violation(s, st, PX_TO_CLIENT,
		    "request answer changes rule or mode");
	/* The requester may leave the name out (RECV pattern); the answer
	 * then carries the real one. */
	if (rq->filename[0] != '\0' || answer) {
		if (!r66_name_safe(rq->filename))
			return r66_refuse(s, st, c, R66_C_DENIED_FILE, 'a',
			    "file name not allowed", "file-name", "builtin",
			    PX_ACT_DENY, answer);
		a = px_rules_decide(&p->files, rq->filename, &hit);
		if (a != PX_ACT_ACCEPT)
			return r66_refuse(s, st, c, R66_C_DENIED_FILE, 'a',
			    "file name not allowed", "file-name", r66_ref(s, hit,
			    ref, sizeof(ref)), a, answer);
		c->max_size = hit != NULL ? hit->arg : 0;
		c->file_rule = hit;
	}
	if (rq->block > (int64_t)p->max_block)
		return r66_refuse(s, st, c, R66_C_DENIED_BLOCK, 'd',
		    "block size over the proxy's limit", "block-size",
		    "r66/@max-block", PX_ACT_DENY, answer);
	if (c->max_size != 0 && rq->length > 0 &&
	    (uint64_t)rq->length > c->max_size)
		return r66_refuse(s, st, c, R66_C_DENIED_SIZE, 'd',
		    "file too large", "file-size", r66_ref(s, c->file_rule, ref,
		    sizeof(ref)), PX_ACT_DENY, answer);
	if (!answer)
		return r66_quota_request(s, st, c);
	return R66_FV_PASS;
}

/* A Data frame; f has no part pointers (head only), rank given. */
enum r66_fv
r66_check_data(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_frame *f, uint32_t rank,
    bool from_client)
{
	const struct r66_policy *p = px_session_policy(s);
	size_t dl1, dl2;
	uint64_t size;
	char ref[PX_RULE_REF_MAX];
	enum r66_fv v;

	if (c->st != R66_CH_XFER || from_client != r66_client_sends(c))
		return r66_violation(s, st, from_client ? PX_TO_SERVER :
		    PX_TO_CLIENT, "data outside a transfer or from the receiver");
	if (rank != c->next_rank)
		return r66_violation(s, st, from_client ? PX_TO_SERVER :
		    PX_TO_CLIENT, "data ranks not consecutive");
	if (f->mlen > p->max_block || (c->req.block > 0 &&
	    f->mlen > (uint64_t)c->req.block))
		return r66_refuse(s, st, c, R66_C_DENIED_BLOCK, 'd',
		    "block size over the limit", "block-size", f->mlen >
		    p->max_block ? "r66/@max-block" : "builtin", PX_ACT_DENY,
		    true);
	if (r66_mode_has_digest(c->req.mode)) {
		/* Keys use the receiver's algorithm (the sender's, if they
		 * disagree, per R66-WIRE.md 6.2): accept either length. */
		dl1 = r66_digest_len(st->cdigest);
		dl2 = r66_digest_len(st->sdigest);
		if (f->elen == 0 || f->elen > 64 ||
		    (dl1 != 0 && dl2 != 0 && f->elen != dl1 && f->elen != dl2))
			return r66_refuse(s, st, c, R66_C_DENIED_DIGEST, 'M',
			    "bad block digest", "block-digest", "builtin",
			    PX_ACT_DENY,
			    true);
	} else if (f->elen != 0)
		return r66_violation(s, st, from_client ? PX_TO_SERVER :
		    PX_TO_CLIENT, "block digest in a mode without digests");
	/* The block is judged whole before it counts: one that waits for
	 * the quota store's next lease comes again, unchanged. */
	size = c->bytes + f->mlen;
	if (c->req.length >= 0 && size > (uint64_t)c->req.length &&
	    (v = r66_size_mismatch(s, st, c, size, true)) != R66_FV_PASS)
		return v;
	if (c->max_size != 0 && size > c->max_size)
		return r66_refuse(s, st, c, R66_C_DENIED_SIZE, 'd',
		    "file too large", "file-size", r66_ref(s, c->file_rule, ref,
		    sizeof(ref)), PX_ACT_DENY, true);
	if (c->quota_bytes != 0 &&
	    (v = r66_quota_data(s, st, c, f->mlen)) != R66_FV_PASS)
		return v;
	c->next_rank++;
	c->bytes = size;
	c->blocks++;
	return R66_FV_PASS;
}

enum r66_fv
r66_check_endtransfer(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_frame *f, bool from_client)
{
	const struct r66_policy *p = px_session_policy(s);
	bool sender = from_client == r66_client_sends(c);
	const char *algo;
	uint8_t way;
	size_t k, dl;
	enum r66_fv v;

	if (r66_way(f, &way) == -1)
		return r66_violation(s, st, from_client ? PX_TO_SERVER :
		    PX_TO_CLIENT, "bad way byte");
	if (way == 0 && sender && c->st == R66_CH_XFER) {
		algo = from_client ? st->cdigest : st->sdigest;
		if (c->start_rank == 0 && c->req.length >= 0 &&
		    c->bytes < (uint64_t)c->req.length &&
		    (v = r66_size_mismatch(s, st, c, c->bytes, false)) != R66_FV_PASS)
			return v;
		for (k = 0; k < f->elen; k++)
			if (!((f->e[k] >= '0' && f->e[k] <= '9') ||
			    (f->e[k] >= 'a' && f->e[k] <= 'f') ||
			    (f->e[k] >= 'A' && f->e[k] <= 'F')))
				break;
		dl = r66_digest_len(algo);
		if (k != f->elen || f->elen > 128 || (f->elen > 0 && dl != 0 &&
		    f->elen != 2 * dl) || (p->req_global_digest &&
		    f->elen == 0))
			return r66_refuse(s, st, c, R66_C_DENIED_DIGEST, 'M',
			    "global digest missing or malformed",
			    "global-digest", "r66/@require-digest", PX_ACT_DENY,
			    true);
		if (f->elen > 0)
			snprintf(c->hash_algo, sizeof(c->hash_algo), "%s",
			    algo[0] != '\0' ? algo : "unknown");
		c->st = R66_CH_ET_ASKED;
		return R66_FV_PASS;
	}
	if (way == 1 && !sender && c->st == R66_CH_ET_ASKED) {
		c->st = R66_CH_ET_DONE;
		return R66_FV_PASS;
	}
	return r66_violation(s, st, from_client ? PX_TO_SERVER : PX_TO_CLIENT,
	    "unexpected end of transfer");
}

enum r66_fv
r66_check_endrequest(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_frame *f, bool from_client)
{
	bool sender = from_client == r66_client_sends(c);
	uint8_t way;

	if (c->st == R66_CH_OTHER)
		return R66_FV_PASS;
	if (r66_way(f, &way) == -1)
		return r66_violation(s, st, from_client ? PX_TO_SERVER :
		    PX_TO_CLIENT, "bad way byte");
	if (way == 0 && sender && c->st == R66_CH_ET_DONE) {
		c->st = R66_CH_ER_ASKED;
		return R66_FV_PASS;
	}
	if (way == 1 && !sender && c->st == R66_CH_ER_ASKED) {
		px_session_count(s, R66_C_TRANSFERS, 1);
		r66_xfer_log(s, st, c, "accept", NULL, NULL);
		r66_chan_free(st, c);
		return R66_FV_PASS;
	}
	return r66_violation(s, st, from_client ? PX_TO_SERVER : PX_TO_CLIENT,
	    "unexpected end of request");
}

/* Administrative and optional packets (client side). */
enum r66_fv
r66_check_other(struct px_session *s, struct r66_state *st,
    struct r66_chan *c, const struct r66_frame *f)
{
	const struct r66_policy *p = px_session_policy(s);
	const struct px_rule *hit;
	char buf[R66_NAME_MAX], rule[256], ref[PX_RULE_REF_MAX];
	bool str;
	uint8_t tv;

	switch (f->code) {
	case R66_SHUTDOWN:
	case R66_BLOCKREQUEST:
	case R66_BUSINESS:
		return r66_refuse(s, st, c, R66_C_DENIED_ADMIN, 'U',
		    "administrative request not allowed",
		    r66_code_name(f->code), "builtin", PX_ACT_DENY, false);
	case R66_INFORMATION:
		if (!p->information)
			return r66_refuse(s, st, c, R66_C_DENIED_ADMIN, 'U',
			    "information request not allowed", "information",
			    "r66/@information", PX_ACT_DENY, false);
		if (f->hlen >= sizeof(rule) ||
		    memchr(f->h, '\0', f->hlen) != NULL)
			return r66_violation(s, st, PX_TO_SERVER,
			    "bad information packet");
		memcpy(rule, f->h, f->hlen);
		rule[f->hlen] = '\0';
		/* REQUEST_CHECK (0xff) carries a transfer id, not a rule. */
		if (f->m[0] != 0xff &&
		    px_rules_decide(&p->rules, rule, &hit) != PX_ACT_ACCEPT)
			return r66_refuse(s, st, c, R66_C_DENIED_RULE, 'n',
			    "rule not allowed", "rule", r66_ref(s, hit, ref,
			    sizeof(ref)), PX_ACT_DENY, false);
		c->st = R66_CH_OTHER;
		return R66_FV_PASS;
	case R66_TEST:
		if (!p->test)
			return r66_refuse(s, st, c, R66_C_DENIED_ADMIN, 'U',
			    "test message not allowed", "test", "r66/@test",
			    PX_ACT_DENY,
			    false);
		c->st = R66_CH_OTHER;
		return R66_FV_PASS;
	case R66_VALID:
		tv = f->e[0];
		/* restart, stop, cancel, config, log, bandwidth: admin */
		if (tv == R66_VALID || (tv >= R66_STOP && tv <= R66_CONFIMPORT) ||
		    tv == R66_LOG || tv == R66_LOGPURGE || tv == R66_BANDWIDTH)
			return r66_refuse(s, st, c, R66_C_DENIED_ADMIN, 'U',
			    "administrative request not allowed", "valid-admin",
			    "builtin",
			    PX_ACT_DENY, false);
		if (tv == R66_REQUEST) {
			/* rename notice: M = newname;size[;info] */
			const uint8_t *semi = memchr(f->m, ';', f->mlen);
			size_t nl = semi != NULL ? (size_t)(semi - f->m) : f->mlen;

			if (c->st != R66_CH_XFER || nl >= sizeof(buf) ||
			    memchr(f->m, '\0', nl) != NULL)
				return r66_violation(s, st, PX_TO_SERVER,
				    "unexpected rename notice");
			memcpy(buf, f->m, nl);
			buf[nl] = '\0';
			goto rename;
		}
		if (c->st == R66_CH_AUTHED)
			c->st = R66_CH_OTHER;
		return R66_FV_PASS;
	case R66_JSONCMD:
		if (f->e[0] != R66_REQUEST ||
		    r66_json_get(f->h, f->hlen, "@class", buf, sizeof(buf),
		    &str) != 1 || !str || strcmp(buf, R66_JSON_RENAME_CLASS) != 0)
			return r66_refuse(s, st, c, R66_C_DENIED_ADMIN, 'U',
			    "JSON command not allowed", "json-command",
			    "builtin", PX_ACT_DENY, false);
		if (c->st != R66_CH_XFER)
			return r66_violation(s, st, PX_TO_SERVER,
			    "unexpected rename notice");
		switch (r66_json_get(f->h, f->hlen, "filename", buf,
		    sizeof(buf), &str)) {
		case 0:
			return R66_FV_PASS;
		case 1:
			if (str)
				goto rename;
			/* FALLTHROUGH */
		default:
			return r66_violation(s, st, PX_TO_SERVER,
			    "bad rename notice");
		}
	default:
		return r66_violation(s, st, PX_TO_SERVER, "unexpected packet");
	}
rename:
	if (!r66_name_safe(buf))
		return r66_refuse(s, st, c, R66_C_DENIED_FILE, 'a',
		    "file name not allowed", "file-name", "builtin",
		    PX_ACT_DENY, true);
	if (px_rules_decide(&p->files, buf, &hit) != PX_ACT_ACCEPT)
		return r66_refuse(s, st, c, R66_C_DENIED_FILE, 'a',
		    "file name not allowed", "file-name", r66_ref(s, hit, ref,
		    sizeof(ref)), PX_ACT_DENY, true);
	snprintf(c->req.filename, sizeof(c->req.filename), "%s", buf);
	return R66_FV_PASS;
}

void
r66_caps(const struct r66_authent *a, char *digest, size_t dsz, bool *reuse)
{
	char v[32];

	if (r66_caps_get(&a->version, "DIGESTALGO", digest, dsz) != 1)
		digest[0] = '\0';
	*reuse = r66_caps_get(&a->version, "R66VERSION", v, sizeof(v)) == 1 &&
	    r66_version_ge(v, 3, 6, 1);
}

