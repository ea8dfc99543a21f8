/* The R66 encoders only the test peer (bench/r66peer) and the tests need:
 * Authent, Request, Data, EndTransfer, EndRequest, KeepAlive and the
 * Authent key. Their own library, r66_encode, which proxyd does not link:
 * the analyser only ever writes ErrorPacket and ConnectionError
 * (r66_wire.c). See r66_encode.h. */
#include "r66_encode.h"

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "r66_wire.h"

size_t
r66_encode_authent(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    const char *host, const uint8_t key[16], uint32_t local_id, uint8_t way,
    const char *version)
{
	uint8_t e[512];
	size_t vl = version != NULL ? strlen(version) : 0;

	if (vl > sizeof(e) - 5)
		return 0;
	r66_put32(e, local_id);
	e[4] = way;
	if (vl > 0)
		memcpy(e + 5, version, vl);
	return r66_encode(buf, cap, dst, src, R66_AUTHENT, host, strlen(host),
	    key, 16, e, 5 + vl);
}

/* JSON string body: escapes quote, backslash and control characters. */
static int
r66_json_escape(char *out, size_t cap, const char *s)
{
	size_t o = 0;

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		int n;

		if (c == '"' || c == '\\')
			n = snprintf(out + o, cap - o, "\\%c", c);
		else if (c < 0x20)
			n = snprintf(out + o, cap - o, "\\u%04x", c);
		else
			n = snprintf(out + o, cap - o, "%c", c);
		if (n < 0 || (size_t)n >= cap - o)
			return -1;
		o += (size_t)n;
	}
	return 0;
}

size_t
r66_encode_request(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    const struct r66_request *r)
{
	char rule[512], name[2 * R66_NAME_MAX], h[600], m[2 * R66_NAME_MAX + 256];
	int hl, ml;

	if (r66_json_escape(rule, sizeof(rule), r->rule) == -1 ||
	    r66_json_escape(name, sizeof(name), r->filename) == -1)
		return 0;
	hl = snprintf(h, sizeof(h), "{\"rule\":\"%s\",\"mode\":%d}", rule,
	    r->mode);
	m[0] = (char)r->way;
	if (r->filename[0] != '\0')
		ml = snprintf(m + 1, sizeof(m) - 1,
		    "{\"filename\":\"%s\",\"block\":%lld,\"rank\":%lld,"
		    "\"id\":%lld,\"code\":%d,\"length\":%lld,\"limit\":%lld}",
		    name, (long long)r->block, (long long)r->rank,
		    (long long)r->id, r->code, (long long)r->length,
		    (long long)r->limit);
	else
		ml = snprintf(m + 1, sizeof(m) - 1,
		    "{\"block\":%lld,\"rank\":%lld,\"id\":%lld,\"code\":%d,"
		    "\"length\":%lld,\"limit\":%lld}",
		    (long long)r->block, (long long)r->rank,
		    (long long)r->id, r->code, (long long)r->length,
		    (long long)r->limit);
	if (hl < 0 || (size_t)hl >= sizeof(h) || ml < 0 ||
	    (size_t)ml >= sizeof(m) - 1)
		return 0;
	return r66_encode(buf, cap, dst, src, R66_REQUEST, h, (size_t)hl, m,
	    (size_t)ml + 1, r->info.p, r->info.len);
}

size_t
r66_encode_data_hdr(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    uint32_t rank, size_t blen, size_t dlen)
{
	size_t total = R66_FRAME_MIN + 4 + blen + dlen;

	if (cap < R66_FRAME_MIN + 4 || total > 0x7fffffffu)
		return 0;
	r66_put32(buf, (uint32_t)(total - 4));
	r66_put32(buf + 4, dst);
	r66_put32(buf + 8, src);
	buf[12] = R66_DATA;
	r66_put32(buf + 13, 4 + 9);
	r66_put32(buf + 17, (uint32_t)blen);
	r66_put32(buf + 21, (uint32_t)dlen);
	buf[25] = R66_DATA;
	r66_put32(buf + 26, rank);
	return R66_FRAME_MIN + 4;
}

size_t
r66_encode_endtransfer(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    uint8_t way, const char *hash)
{
	uint8_t h = R66_REQUEST;

	return r66_encode(buf, cap, dst, src, R66_ENDTRANSFER, &h, 1, &way, 1,
	    hash, hash != NULL ? strlen(hash) : 0);
}

size_t
r66_encode_endrequest(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
    uint8_t way)
{
	uint8_t h[4];

	r66_put32(h, 4);	/* ErrorCode.CompleteOk ordinal */
	return r66_encode(buf, cap, dst, src, R66_ENDREQUEST, h, 4, &way, 1,
	    NULL, 0);
}

size_t
r66_encode_keepalive(uint8_t *buf, size_t cap, uint8_t way)
{
	return r66_encode(buf, cap, R66_NOCHANNEL, R66_NOCHANNEL,
	    R66_KEEPALIVE, NULL, 0, &way, 1, NULL, 0);
}

int
r66_key_hash(const char *pwd, uint8_t out[16])
{
	static const char salt[] = "GoldenGate";
	EVP_MD_CTX *ctx;
	unsigned int n = 0;
	int k, ok;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	ok = EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
	for (k = 0; ok && k < 16; k++)
		ok = EVP_DigestUpdate(ctx, pwd, strlen(pwd)) &&
		    EVP_DigestUpdate(ctx, salt, sizeof(salt) - 1);
	if (ok)
		ok = EVP_DigestFinal_ex(ctx, out, &n);
	EVP_MD_CTX_free(ctx);
	return ok && n == 16 ? 0 : -1;
}
