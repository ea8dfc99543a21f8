/* R66 frame/packet decoding and encoding; see r66_wire.h. Every length read
 * from the wire is checked against what is actually there before use. */
#include "r66_wire.h"

#include <string.h>

#include "r66_json.h"

uint32_t
r66_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void
r66_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static const char *const r66_code_names[26] = {
	"unknown", "authent", "startup", "data", "valid", "error",
	"connerror", "request", "shutdown", "stop", "cancel", "confexport",
	"confimport", "test", "endtransfer", "requestuser", "log", "logpurge",
	"information", "bandwidth", "endrequest", "keepalive", "business",
	"noop", "blockrequest", "jsoncommand",
};

const char *
r66_code_name(unsigned code)
{
	return code < 26 ? r66_code_names[code] : "unknown";
}

bool
r66_code_on_wire(unsigned code)
{
	switch (code) {
	case R66_AUTHENT: case R66_DATA: case R66_VALID: case R66_ERROR:
	case R66_CONNERROR: case R66_REQUEST: case R66_SHUTDOWN: case R66_TEST:
	case R66_ENDTRANSFER: case R66_INFORMATION: case R66_ENDREQUEST:
	case R66_KEEPALIVE: case R66_BUSINESS: case R66_NOOP:
	case R66_BLOCKREQUEST: case R66_JSONCMD:
		return true;
	default:
		return false;
	}
}

const char *
r66_status_str(enum r66_status st)
{
	switch (st) {
	case R66_OK:		return "ok";
	case R66_INCOMPLETE:	return "incomplete";
	case R66_E_LEN:		return "bad frame length";
	case R66_E_TOOBIG:	return "frame too large";
	case R66_E_PARTS:	return "inconsistent part lengths";
	case R66_E_TYPE:	return "type byte differs from frame code";
	case R66_E_STARTUP:	return "startup packet on the wire";
	case R66_E_CODE:	return "unknown packet code";
	case R66_E_SHAPE:	return "malformed packet parts";
	}
	return "?";
}

/* Part sizes the Java decoders insist on (R66-WIRE.md 8.3 item 3), made
 * exact where Java always writes an exact size. */
static bool
r66_shape_ok(const struct r66_frame *f)
{
	uint32_t h = f->hlen, m = f->mlen, e = f->elen;

	switch (f->code) {
	case R66_AUTHENT:	return h >= 1 && m >= 1 && e >= 5;
	case R66_DATA:		return h == 4 && m >= 1;
	case R66_VALID:		return e == 1;
	case R66_ERROR:		return e == 4;
	case R66_CONNERROR:	return e == 0;
	case R66_REQUEST:	return h >= 1 && m >= 2;
	case R66_SHUTDOWN:	return h >= 1;
	case R66_TEST:		return e == 4;
	case R66_ENDTRANSFER:	return h == 1 && m == 1;
	case R66_INFORMATION:	return h >= 1 && m == 1;
	case R66_ENDREQUEST:	return h == 4 && m == 1;
	case R66_KEEPALIVE:	return h == 0 && m == 1 && e == 0;
	case R66_BUSINESS:	return m == 4 && e == 1;
	case R66_NOOP:		return h == 0 && m == 0 && e == 0;
	case R66_BLOCKREQUEST:	return h >= 2;
	case R66_JSONCMD:	return e == 1;
	default:		return false;
	}
}

/* Length checks that need only the first bytes. */
static enum r66_status
r66_frame_len(const uint8_t *p, size_t n, uint32_t max_len, uint32_t *nl)
{
	*nl = r66_be32(p);
	if ((*nl & 0x80000000u) != 0 || *nl < R66_FRAME_MIN - 4)
		return R66_E_LEN;
	if (*nl > max_len)
		return R66_E_TOOBIG;
	/* As soon as the code is there, control frames get the small cap. */
	if (n >= R66_NET_HDR && p[12] != R66_DATA &&
	    *nl > R66_CTRL_MAX + R66_FRAME_MIN)
		return R66_E_TOOBIG;
	return R66_OK;
}

enum r66_status
r66_frame_head(const uint8_t *p, size_t n, uint32_t max_len,
    struct r66_frame *f)
{
	enum r66_status st;
	uint32_t nl, hl, ml, el;

	if (n < R66_FRAME_MIN)
		return R66_INCOMPLETE;
	if ((st = r66_frame_len(p, n, max_len, &nl)) != R66_OK)
		return st;
	memset(f, 0, sizeof(*f));
	f->len = nl + 4;
	f->dst = r66_be32(p + 4);
	f->src = r66_be32(p + 8);
	f->code = p[12];
	hl = r66_be32(p + 13);
	ml = r66_be32(p + 17);
	el = r66_be32(p + 21);
	if (hl < 9 || (uint64_t)hl + ml + el + R66_NET_HDR != (uint64_t)nl)
		return R66_E_PARTS;
	if (p[25] != f->code)
		return R66_E_TYPE;
	if (f->code == R66_STARTUP)
		return R66_E_STARTUP;
	if (!r66_code_on_wire(f->code))
		return R66_E_CODE;
	f->hlen = hl - 9;
	f->mlen = ml;
	f->elen = el;
	if (!r66_shape_ok(f))
		return R66_E_SHAPE;
	return R66_OK;
}

enum r66_status
r66_frame_parse(const uint8_t *p, size_t n, uint32_t max_len,
    struct r66_frame *f, size_t *need)
{
	enum r66_status st;
	uint32_t nl;

	*need = 0;
	if (n < 4) {
		*need = 4;
		return R66_INCOMPLETE;
	}
	if ((st = r66_frame_len(p, n, max_len, &nl)) != R66_OK)
		return st;
	if (n - 4 < nl) {
		*need = (size_t)nl + 4;
		return R66_INCOMPLETE;
	}
	if ((st = r66_frame_head(p, n, max_len, f)) != R66_OK)
		return st;
	f->h = p + R66_FRAME_MIN;
	f->m = f->h + f->hlen;
	f->e = f->m + f->mlen;
	return R66_OK;
}

bool
r66_ids_plausible(const struct r66_frame *f, bool from_client)
{
	switch (f->code) {
	case R66_KEEPALIVE:
		return f->dst == R66_NOCHANNEL && f->src == R66_NOCHANNEL;
	case R66_NOOP:
	case R66_CONNERROR:
		return true;
	case R66_ERROR:
		return f->dst != R66_NOCHANNEL || f->src != R66_NOCHANNEL;
	default:
		if (f->src == R66_NOCHANNEL)
			return false;
		return f->dst != R66_NOCHANNEL || from_client;
	}
}

/* ---- numbers -------------------------------------------------------- */

/* Strict decimal: optional '-', 1-19 digits, no overflow. */
static int
r66_parse_i64(const char *s, size_t len, int64_t *out)
{
	bool neg = false;
	uint64_t v = 0;
	size_t k = 0;

	if (len > 0 && s[0] == '-') {
		neg = true;
		k = 1;
	}
	if (k == len || len - k > 19)
		return -1;
	for (; k < len; k++) {
		if (s[k] < '0' || s[k] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[k] - '0');
	}
	if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0))
		return -1;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* 1 found (number), 0 absent, -1 malformed. */
static int
r66_json_i64(const uint8_t *p, size_t len, const char *key, int64_t *v)
{
	char buf[32];
	bool str;
	int rc;

	rc = r66_json_get(p, len, key, buf, sizeof(buf), &str);
	if (rc != 1)
		return rc;
	if (str || r66_parse_i64(buf, strlen(buf), v) == -1)
		return -1;
	return 1;
}

/* ---- packets ---------------------------------------------------------- */

int
r66_authent_parse(const struct r66_frame *f, struct r66_authent *a)
{
	if (f->code != R66_AUTHENT || f->hlen < 1 || f->mlen < 1 ||
	    f->elen < 5)
		return -1;
	a->host.p = f->h;
	a->host.len = f->hlen;
	a->key.p = f->m;
	a->key.len = f->mlen;
	a->local_id = r66_be32(f->e);
	a->way = f->e[4];
	a->version.p = f->e + 5;
	a->version.len = f->elen - 5;
	if (a->way > 1 || memchr(a->host.p, '\0', a->host.len) != NULL)
		return -1;
	return 0;
}

static int
r66_copy_name(char *dst, size_t cap, const uint8_t *p, size_t len)
{
	if (len >= cap || memchr(p, '\0', len) != NULL)
		return -1;
	memcpy(dst, p, len);
	dst[len] = '\0';
	return 0;
}

static int
r66_request_legacy(const struct r66_frame *f, struct r66_request *r)
{
	const uint8_t *sp, *q, *end;
	const uint8_t *field[6];
	size_t flen[6];
	int64_t mode, v;
	int nf = 0, pass;
	uint8_t sep = ';';

	/* H: "rule mode" */
	sp = memchr(f->h, ' ', f->hlen);
	if (sp == NULL || sp == f->h ||
	    r66_copy_name(r->rule, sizeof(r->rule), f->h,
	    (size_t)(sp - f->h)) == -1 ||
	    r66_parse_i64((const char *)sp + 1,
	    f->hlen - (size_t)(sp - f->h) - 1, &mode) == -1 ||
	    mode < 0 || mode > 255)
		return -1;
	r->mode = (int)mode;
	/* M: way, then name;block;rank;id;code[;length] (or spaces) */
	for (pass = 0; pass < 2; pass++) {
		q = f->m + 1;
		end = f->m + f->mlen;
		nf = 0;
		while (nf < 6) {
			const uint8_t *s = memchr(q, sep, (size_t)(end - q));

			field[nf] = q;
			if (s == NULL || nf == 5) {
				flen[nf++] = (size_t)(end - q);
				break;
			}
			flen[nf++] = (size_t)(s - q);
			q = s + 1;
		}
		if (nf >= 5)
			break;
		sep = ' ';
	}
	if (nf < 5 || flen[4] != 1)
		return -1;
	if (r66_copy_name(r->filename, sizeof(r->filename), field[0],
	    flen[0]) == -1 ||
	    r66_parse_i64((const char *)field[1], flen[1], &r->block) == -1 ||
	    r66_parse_i64((const char *)field[2], flen[2], &r->rank) == -1 ||
	    r66_parse_i64((const char *)field[3], flen[3], &r->id) == -1)
		return -1;
	r->code = field[4][0];
	r->length = -1;
	if (nf == 6) {
		if (r66_parse_i64((const char *)field[5], flen[5], &v) == -1)
			return -1;
		r->length = v;
	}
	r->limit = 0;
	return 0;
}

static int
r66_request_json(const struct r66_frame *f, struct r66_request *r)
{
	const uint8_t *mj = f->m + 1;
	size_t ml = f->mlen - 1;
	char buf[32];
	bool str;
	int64_t v;

	if (r66_json_get(f->h, f->hlen, "rule", r->rule, sizeof(r->rule),
	    &str) != 1 || !str || r->rule[0] == '\0')
		return -1;
	if (r66_json_get(f->h, f->hlen, "mode", buf, sizeof(buf), &str) != 1 ||
	    str || r66_parse_i64(buf, strlen(buf), &v) == -1 || v < 0 ||
	    v > 255)
		return -1;
	r->mode = (int)v;
	/* An empty file name is omitted by Jackson. */
	switch (r66_json_get(mj, ml, "filename", r->filename,
	    sizeof(r->filename), &str)) {
	case 1:
		if (!str)
			return -1;
		break;
	case 0:
		r->filename[0] = '\0';
		break;
	default:
		return -1;
	}
	if (r66_json_i64(mj, ml, "block", &r->block) != 1 ||
	    r66_json_i64(mj, ml, "rank", &r->rank) != 1 ||
	    r66_json_i64(mj, ml, "id", &r->id) != 1 ||
	    r66_json_i64(mj, ml, "code", &v) != 1 || v < 0 || v > 255)
		return -1;
	r->code = (int)v;
	switch (r66_json_i64(mj, ml, "length", &r->length)) {
	case 0:
		r->length = -1;
		break;
	case 1:
		break;
	default:
		return -1;
	}
	switch (r66_json_i64(mj, ml, "limit", &r->limit)) {
	case 0:
		r->limit = 0;
		break;
	case 1:
		break;
	default:
		return -1;
	}
	return 0;
}

int
r66_request_parse(const struct r66_frame *f, struct r66_request *r)
{
	memset(r, 0, sizeof(*r));
	if (f->code != R66_REQUEST || f->hlen < 1 || f->mlen < 2)
		return -1;
	r->way = f->m[0];
	if (r->way > 1)
		return -1;
	r->info.p = f->e;
	r->info.len = f->elen;
	r->json = f->h[0] == '{';
	if (r->json)
		return r66_request_json(f, r);
	return r66_request_legacy(f, r);
}

int
r66_data_rank(const struct r66_frame *f, uint32_t *rank)
{
	if (f->code != R66_DATA || f->hlen != 4 || f->mlen < 1)
		return -1;
	*rank = r66_be32(f->h);
	return 0;
}

int
r66_error_parse(const struct r66_frame *f, struct r66_error *e)
{
	if (f->code != R66_ERROR || f->elen != 4 || f->mlen > 1)
		return -1;
	e->msg.p = f->h;
	e->msg.len = f->hlen;
	e->code.p = f->m;
	e->code.len = f->mlen;
	e->action = (int32_t)r66_be32(f->e);
	return 0;
}

int
r66_way(const struct r66_frame *f, uint8_t *way)
{
	if (f->mlen != 1)
		return -1;
	*way = f->m[0];
	return *way <= 1 ? 0 : -1;
}

int
r66_caps_get(const struct r66_str *version, const char *key, char *buf,
    size_t bufsz)
{
	const uint8_t *b;
	bool str;

	if (version->len == 0 ||
	    (b = memchr(version->p, '{', version->len)) == NULL)
		return 0;
	return r66_json_get(b, version->len - (size_t)(b - version->p), key,
	    buf, bufsz, &str);
}

bool
r66_version_ge(const char *v, int maj, int min, int patch)
{
	long part[3] = { 0, 0, 0 };
	const char *c = v;
	int k;

	for (k = 0; k < 3; k++) {
		if (*c < '0' || *c > '9')
			return false;
		while (*c >= '0' && *c <= '9') {
			part[k] = part[k] * 10 + (*c - '0');
			if (part[k] > 100000)
				return false;
			c++;
		}
		if (k < 2 && *c++ != '.')
			return false;
	}
	if (*c != '\0' && *c != '-')
		return false;
	if (part[0] != maj)
		return part[0] > maj;
	if (part[1] != min)
		return part[1] > min;
	return part[2] >= patch;
}

bool
r66_mode_valid(int mode)
{
	return mode >= R66_MODE_SEND && mode <= R66_MODE_RECVMD5THROUGH;
}

bool
r66_mode_is_send(int mode)
{
	return mode == 1 || mode == 3 || mode == 5 || mode == 7;
}

bool
r66_mode_has_digest(int mode)
{
	return mode == 3 || mode == 4 || mode == 7 || mode == 8;
}

const char *
r66_mode_name(int mode)
{
	static const char *const names[] = {
		"unknown", "send", "recv", "sendmd5", "recvmd5",
		"sendthrough", "recvthrough", "sendmd5through",
		"recvmd5through",
	};

	return r66_mode_valid(mode) ? names[mode] : names[0];
}

size_t
r66_digest_len(const char *algo)
{
	static const struct {
		const char *name;
		size_t len;
	} t[] = {
		{ "MD5", 16 }, { "MD2", 16 }, { "SHA-1", 20 }, { "SHA1", 20 },
		{ "SHA-256", 32 }, { "SHA256", 32 }, { "SHA-384", 48 },
		{ "SHA384", 48 }, { "SHA-512", 64 }, { "SHA512", 64 },
	};
	size_t k;

	for (k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		if (strcmp(t[k].name, algo) == 0)
			return t[k].len;
	return 0;
}

/* ---- encoders --------------------------------------------------------- */

size_t
r66_encode(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src, uint8_t code,
    const void *h, size_t hl, const void *m, size_t ml, const void *e,
    size_t el)
{
	size_t total = R66_FRAME_MIN + hl + ml + el;

	if (total > cap || total > 0x7fffffffu)
		return 0;
	r66_put32(buf, (uint32_t)(total - 4));
	r66_put32(buf + 4, dst);
	r66_put32(buf + 8, src);
	buf[12] = code;
	r66_put32(buf + 13, (uint32_t)(hl + 9));
	r66_put32(buf + 17, (uint32_t)ml);
	r66_put32(buf + 21, (uint32_t)el);
	buf[25] = code;
	if (hl > 0)
		memcpy(buf + 26, h, hl);
	if (ml > 0)
		memcpy(buf + 26 + hl, m, ml);
	if (el > 0)
		memcpy(buf + 26 + hl + ml, e, el);
	return total;
}

size_t
r66_encode_error(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    const char *msg, char code, int32_t action)
{
	uint8_t e[4];

	r66_put32(e, (uint32_t)action);
	return r66_encode(buf, cap, dst, src, R66_ERROR, msg, strlen(msg),
	    &code, code != '\0' ? 1 : 0, e, 4);
}

size_t
r66_encode_connerror(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    const char *msg, const char *mid)
{
	return r66_encode(buf, cap, dst, src, R66_CONNERROR, msg, strlen(msg),
	    mid, mid != NULL ? strlen(mid) : 0, NULL, 0);
}
