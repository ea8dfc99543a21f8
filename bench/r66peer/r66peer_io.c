/* r66peer's wire half, shared by its client and its server (r66peer.c):
 * the digests, writing and reading frames (KeepAlive answered, an
 * ErrorPacket printed), the Authent exchange, both halves of a transfer
 * (Data frames out with their per-block keys, or in and checked, then
 * EndTransfer) and the closing EndRequest handshake. Every read and write
 * goes through peer_write/peer_read_full, so TLS (r66peer_tls.c) is
 * under all of it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "r66/r66_encode.h"
#include "r66/r66_wire.h"

#include "r66peer.h"

/* ---- digests ---------------------------------------------------------- */

const EVP_MD *
peer_md(const char *algo)
{
	if (strcmp(algo, "MD5") == 0)
		return EVP_md5();
	if (strcmp(algo, "SHA-1") == 0 || strcmp(algo, "SHA1") == 0)
		return EVP_sha1();
	if (strcmp(algo, "SHA-256") == 0 || strcmp(algo, "SHA256") == 0)
		return EVP_sha256();
	if (strcmp(algo, "SHA-384") == 0 || strcmp(algo, "SHA384") == 0)
		return EVP_sha384();
	if (strcmp(algo, "SHA-512") == 0 || strcmp(algo, "SHA512") == 0)
		return EVP_sha512();
	return NULL;
}

static void
peer_hex(const uint8_t *d, size_t n, char *out)
{
	size_t k;

	for (k = 0; k < n; k++)
		sprintf(out + 2 * k, "%02x", d[k]);
	out[2 * n] = '\0';
}

/* ---- I/O -------------------------------------------------------------- */

int
peer_write(struct peer_conn *pc, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t done;
	int ok;

	while (pc->ssl != NULL && n > 0) {
		if ((ok = SSL_write_ex(pc->ssl, b, n, &done)) != 1) {
			if (peer_tls_fail(pc, ok, "write") == 0)
				peer_err("write: %s", strerror(errno));
			return -1;
		}
		b += done;
		n -= done;
	}
	while (n > 0) {
		ssize_t w = send(pc->fd, b, n, MSG_NOSIGNAL);

		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			peer_err("write: %s", strerror(errno));
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int
peer_read_full(struct peer_conn *pc, uint8_t *p, size_t n)
{
	size_t done;
	int ok;

	while (pc->ssl != NULL && n > 0) {
		if ((ok = SSL_read_ex(pc->ssl, p, n, &done)) != 1)
			return peer_tls_fail(pc, ok, "read");
		p += done;
		n -= done;
	}
	while (n > 0) {
		ssize_t r = recv(pc->fd, p, n, 0);

		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0) {
			errno = ECONNRESET;
			return 0;
		}
		if (r == -1)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 1;
}

void
peer_print_error(const struct r66_frame *f, const char *who)
{
	struct r66_error e;

	if (f->code == R66_ERROR && r66_error_parse(f, &e) == 0)
		peer_err("error packet from %s: code=%.*s action=%d msg=%.*s",
		    who, (int)e.code.len, e.code.p, e.action, (int)e.msg.len,
		    e.msg.p);
	else if (f->code == R66_CONNERROR)
		peer_err("connection error packet from %s: msg=%.*s mid=%.*s",
		    who, (int)f->hlen, f->h, (int)f->mlen, f->m);
}

/* Next frame that is not KeepAlive/NoOp (KeepAlive asks are answered).
 * 1 frame, 0 EOF, -1 error. */
int
peer_recv(struct peer_conn *pc, struct r66_frame *f)
{
	uint8_t ka[32];
	size_t need, n;
	enum r66_status st;
	uint32_t cap = pc->c->block + R66_DATA_OVERHEAD + 64;
	int r;

	for (;;) {
		if ((r = peer_read_full(pc, pc->buf, 4)) != 1) {
			if (r == 0)
				return 0;
			peer_err("read: %s", strerror(errno));
			return -1;
		}
		st = r66_frame_parse(pc->buf, 4, cap, f, &need);
		if (st != R66_INCOMPLETE) {
			peer_err("bad frame: %s", r66_status_str(st));
			return -1;
		}
		if (need > pc->bufcap) {
			peer_err("frame too large");
			return -1;
		}
		if (peer_read_full(pc, pc->buf + 4, need - 4) != 1) {
			peer_err("read: truncated frame");
			return -1;
		}
		if ((st = r66_frame_parse(pc->buf, need, cap, f, &need)) !=
		    R66_OK) {
			peer_err("bad frame: %s", r66_status_str(st));
			return -1;
		}
		if (f->code == R66_NOOP)
			continue;
		if (f->code == R66_KEEPALIVE) {
			if (f->m[0] == 0) {
				n = r66_encode_keepalive(ka, sizeof(ka), 1);
				if (peer_write(pc, ka, n) == -1)
					return -1;
			}
			continue;
		}
		if (pc->dead && f->dst == pc->dead_id) {
			pc->late++;
			continue;
		}
		return 1;
	}
}

/* Receives the next frame and requires code/ids; Error frames are
 * printed and fail. */
int
peer_expect(struct peer_conn *pc, struct r66_frame *f, uint8_t code,
    uint32_t dst, const char *what)
{
	if (peer_recv(pc, f) != 1) {
		peer_err("connection closed while waiting for %s", what);
		return -1;
	}
	if (f->code == R66_ERROR || f->code == R66_CONNERROR) {
		peer_print_error(f, pc->c->server ? "client" : "server");
		pc->peer_error = f->code == R66_ERROR;
		return -1;
	}
	if (f->code != code || f->dst != dst) {
		peer_err("unexpected %s frame [%08x,%08x] while waiting for %s",
		    r66_code_name(f->code), f->dst, f->src, what);
		return -1;
	}
	return 0;
}

char *
peer_version(const struct peer_conf *c, char *buf, size_t n)
{
	snprintf(buf, n, "3.1.0.{\"HOSTID\":\"%s\",\"VERSION\":\"3.1.0\","
	    "\"FILESIZE\":true,\"FINALHASH\":true,\"DIGESTALGO\":\"%s\","
	    "\"PROXIFIED\":false,\"SEPARATOR\":\";\",\"R66VERSION\":\"%s\","
	    "\"COMPRESSION\":false}", c->host_id, c->digest,
	    c->auth_each ? "3.5.0" : "3.6.2");
	return buf;
}

/* Checks an Authent from the partner; fills peer_id/digest/reuse. */
int
peer_check_authent(struct peer_conn *pc, const struct r66_frame *f,
    uint8_t way)
{
	const struct peer_conf *c = pc->c;
	struct r66_authent a;
	char v[32];
	int k;

	if (r66_authent_parse(f, &a) == -1 || a.way != way) {
		peer_err("malformed authent");
		return -1;
	}
	for (k = 0; k < c->npartners; k++)
		if (strlen(c->partners[k].id) == a.host.len &&
		    memcmp(c->partners[k].id, a.host.p, a.host.len) == 0)
			break;
	if (k == c->npartners) {
		peer_err("unknown partner host id %.*s", (int)a.host.len,
		    a.host.p);
		return 'N';
	}
	if (a.key.len != 16 || memcmp(a.key.p, c->partners[k].key, 16) != 0) {
		peer_err("bad key for partner %s", c->partners[k].id);
		return 'A';
	}
	snprintf(pc->peer_id, sizeof(pc->peer_id), "%s", c->partners[k].id);
	if (r66_caps_get(&a.version, "DIGESTALGO", pc->peer_digest,
	    sizeof(pc->peer_digest)) != 1 || peer_md(pc->peer_digest) == NULL)
		snprintf(pc->peer_digest, sizeof(pc->peer_digest), "%s",
		    c->digest);
	pc->reuse = !c->auth_each &&
	    r66_caps_get(&a.version, "R66VERSION", v, sizeof(v)) == 1 &&
	    r66_version_ge(v, 3, 6, 1);
	return 0;
}

int
peer_send_error(struct peer_conn *pc, uint32_t dst, uint32_t src,
    const char *msg, char code)
{
	uint8_t b[512];
	size_t n = r66_encode_error(b, sizeof(b), dst, src, msg, code, 3);

	return peer_write(pc, b, n);
}

/* ---- the two halves of a transfer ------------------------------------- */

/* Sends fd's contents as Data frames then EndTransfer(0); waits for
 * EndTransfer(1). Per-block keys in the receiver's algorithm; global hash
 * in ours. */
int
peer_send_data(struct peer_conn *pc, int fd, uint32_t dst, uint32_t src,
    uint32_t block, bool md5mode, struct peer_result *res)
{
	const EVP_MD *gmd = peer_md(pc->c->digest);
	const EVP_MD *bmd = peer_md(pc->peer_digest);
	EVP_MD_CTX *g = EVP_MD_CTX_new();
	uint8_t *fr = pc->buf, dig[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	struct r66_frame f;
	uint32_t rank = 0;
	int rc = -1;

	if (g == NULL || EVP_DigestInit_ex(g, gmd, NULL) != 1)
		goto out;
	res->size = res->blocks = 0;
	for (;;) {
		size_t got = 0, h, dlen = 0;
		ssize_t r;

		while (got < block) {
			r = read(fd, fr + 30 + got, block - got);
			if (r == -1 && errno == EINTR)
				continue;
			if (r == -1) {
				peer_err("read file: %s", strerror(errno));
				goto out;
			}
			if (r == 0)
				break;
			got += (size_t)r;
		}
		if (got == 0)
			break;
		EVP_DigestUpdate(g, fr + 30, got);
		if (md5mode) {
			if (EVP_Digest(fr + 30, got, dig, &dl, bmd, NULL) != 1)
				goto out;
			if ((int64_t)rank == pc->c->corrupt_block &&
			    !pc->corrupted) {
				dig[0] ^= 0xff;
				pc->corrupted = true;
			}
			memcpy(fr + 30 + got, dig, dl);
			dlen = dl;
		}
		h = r66_encode_data_hdr(fr, 30, dst, src, rank++, got, dlen);
		if (h != 30 || peer_write(pc, fr, 30 + got + dlen) == -1)
			goto out;
		res->size += got;
		res->blocks++;
	}
	EVP_DigestFinal_ex(g, dig, &dl);
	peer_hex(dig, dl, res->hash);
	{
		uint8_t b[256];
		size_t n = r66_encode_endtransfer(b, sizeof(b), dst, src, 0,
		    res->hash);

		if (peer_write(pc, b, n) == -1)
			goto out;
	}
	if (peer_expect(pc, &f, R66_ENDTRANSFER, src, "end of transfer") == -1)
		goto out;
	if (f.m[0] != 1) {
		peer_err("end of transfer answer with way 0");
		goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(g);
	return rc;
}

/* Receives Data frames into fd until EndTransfer(0), checks them, answers
 * EndTransfer(1). length: declared size or -1. */
int
peer_recv_data(struct peer_conn *pc, int fd, uint32_t dst, uint32_t src,
    uint32_t block, bool md5mode, int64_t length, struct peer_result *res,
    char *errcode)
{
	const EVP_MD *gmd = peer_md(pc->peer_digest);
	const EVP_MD *bmd = peer_md(pc->c->digest);
	EVP_MD_CTX *g = EVP_MD_CTX_new();
	uint8_t dig[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	struct r66_frame f;
	uint32_t rank = 0, r;
	int rc = -1;

	*errcode = 'T';
	if (g == NULL || EVP_DigestInit_ex(g, gmd, NULL) != 1)
		goto out;
	res->size = res->blocks = 0;
	for (;;) {
		if (peer_recv(pc, &f) != 1) {
			peer_err("connection closed during the transfer");
			goto out;
		}
		if (f.code == R66_ERROR || f.code == R66_CONNERROR) {
			peer_print_error(&f, pc->c->server ? "client" : "server");
			*errcode = '\0';
			goto out;
		}
		if (f.dst != src || f.src != dst) {
			peer_err("frame for another channel [%08x,%08x]", f.dst,
			    f.src);
			goto out;
		}
		if (f.code == R66_ENDTRANSFER)
			break;
		if (f.code != R66_DATA || r66_data_rank(&f, &r) == -1) {
			peer_err("unexpected %s frame during the transfer",
			    r66_code_name(f.code));
			goto out;
		}
		if (r != rank || f.mlen > block) {
			peer_err("data rank %u (want %u) or size %u over block %u",
			    r, rank, f.mlen, block);
			goto out;
		}
		rank++;
		if (md5mode) {
			if (EVP_Digest(f.m, f.mlen, dig, &dl, bmd, NULL) != 1 ||
			    f.elen != dl || memcmp(f.e, dig, dl) != 0) {
				peer_err("block %u: digest mismatch", r);
				*errcode = 'M';
				goto out;
			}
		} else if (f.elen != 0) {
			peer_err("block %u: digest in a non-digest mode", r);
			goto out;
		}
		EVP_DigestUpdate(g, f.m, f.mlen);
		if (write(fd, f.m, f.mlen) != (ssize_t)f.mlen) {
			peer_err("write file: %s", strerror(errno));
			goto out;
		}
		res->size += f.mlen;
		res->blocks++;
	}
	if (f.m[0] != 0) {
		peer_err("end of transfer with way 1 from the sender");
		goto out;
	}
	EVP_DigestFinal_ex(g, dig, &dl);
	peer_hex(dig, dl, res->hash);
	if (length >= 0 && (uint64_t)length != res->size) {
		peer_err("size %" PRIu64 " != declared %" PRId64, res->size,
		    length);
		goto out;
	}
	if (f.elen != strlen(res->hash) ||
	    strncasecmp((const char *)f.e, res->hash, f.elen) != 0) {
		peer_err("global digest mismatch: got %.*s, computed %s (%s)",
		    (int)f.elen, f.e, res->hash, pc->peer_digest);
		*errcode = 'M';
		goto out;
	}
	{
		uint8_t b[256];
		size_t n = r66_encode_endtransfer(b, sizeof(b), dst, src, 1,
		    res->hash);

		if (peer_write(pc, b, n) == -1)
			goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(g);
	return rc;
}

/* Sender side of the closing handshake: EndRequest(0), wait (1). */
int
peer_endrequest_send(struct peer_conn *pc, uint32_t dst, uint32_t src)
{
	struct r66_frame f;
	uint8_t b[64];
	size_t n = r66_encode_endrequest(b, sizeof(b), dst, src, 0);

	if (peer_write(pc, b, n) == -1 ||
	    peer_expect(pc, &f, R66_ENDREQUEST, src, "end of request") == -1)
		return -1;
	return f.m[0] == 1 ? 0 : -1;
}

int
peer_endrequest_recv(struct peer_conn *pc, uint32_t dst, uint32_t src)
{
	struct r66_frame f;
	uint8_t b[64];
	size_t n;

	if (peer_expect(pc, &f, R66_ENDREQUEST, src, "end of request") == -1 ||
	    f.m[0] != 0)
		return -1;
	n = r66_encode_endrequest(b, sizeof(b), dst, src, 1);
	return peer_write(pc, b, n);
}

/* A plain file name: no directory part, no dot-dot, no control bytes. */
bool
peer_name_ok(const char *name)
{
	const char *p;

	if (name[0] == '\0' || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || name[0] == '.')
		return false;
	for (p = name; *p != '\0'; p++)
		if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20)
			return false;
	return true;
}

