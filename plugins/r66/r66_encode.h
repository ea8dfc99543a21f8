/* Encoders for the R66 frames only a peer sends (the test peer
 * bench/r66peer and the unit tests): library r66_encode, never linked into
 * proxyd, which only answers with r66_encode_error() and
 * r66_encode_connerror() (r66_wire.h). Each writes one frame into buf (cap
 * bytes) and returns its length, or 0 if it does not fit. */
#ifndef R66_ENCODE_H
#define R66_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "r66_wire.h"

size_t	r66_encode_authent(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
	    const char *host, const uint8_t key[16], uint32_t local_id,
	    uint8_t way, const char *version);
size_t	r66_encode_request(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
	    const struct r66_request *r);
/* Data frame header (26 + 4 bytes) for a block of blen bytes followed by
 * dlen digest bytes: the caller appends block then digest. */
size_t	r66_encode_data_hdr(uint8_t *buf, size_t cap, uint32_t dst,
	    uint32_t src, uint32_t rank, size_t blen, size_t dlen);
size_t	r66_encode_endtransfer(uint8_t *buf, size_t cap, uint32_t dst,
	    uint32_t src, uint8_t way, const char *hash);
size_t	r66_encode_endrequest(uint8_t *buf, size_t cap, uint32_t dst,
	    uint32_t src, uint8_t way);
size_t	r66_encode_keepalive(uint8_t *buf, size_t cap, uint8_t way);

/* MD5((pwd || "GoldenGate") x 16): the Authent key. 0 ok, -1 on failure. */
int	r66_key_hash(const char *pwd, uint8_t out[16]);

#endif
