/* Waarp R66 wire format (see docs in ../shared/r66/R66-WIRE.md): frame and
 * local packet decoding over (ptr, len), with every length capped, and the
 * encoders the analyser answers with (the JSON inside packets is read by
 * r66_json.h; the peer's encoders are r66_encode.h). No allocation, no I/O:
 * shared by plugins/r66/r66.c, bench/r66peer and the unit/fuzz tests. */
#ifndef R66_WIRE_H
#define R66_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define R66_NOCHANNEL		0x80000000u
#define R66_NET_HDR		13	/* net_len, dst, src, code */
#define R66_FRAME_MIN		26	/* 13 + hdr_len/mid_len/end_len/type */
#define R66_CTRL_MAX		(16 * 1024)	/* non-Data local packet cap */
#define R66_DATA_OVERHEAD	(R66_FRAME_MIN + 4 + 64) /* + block = cap */

enum r66_code {
	R66_AUTHENT = 1,
	R66_STARTUP = 2,
	R66_DATA = 3,
	R66_VALID = 4,
	R66_ERROR = 5,
	R66_CONNERROR = 6,
	R66_REQUEST = 7,
	R66_SHUTDOWN = 8,
	R66_STOP = 9,
	R66_CANCEL = 10,
	R66_CONFEXPORT = 11,
	R66_CONFIMPORT = 12,
	R66_TEST = 13,
	R66_ENDTRANSFER = 14,
	R66_REQUESTUSER = 15,
	R66_LOG = 16,
	R66_LOGPURGE = 17,
	R66_INFORMATION = 18,
	R66_BANDWIDTH = 19,
	R66_ENDREQUEST = 20,
	R66_KEEPALIVE = 21,
	R66_BUSINESS = 22,
	R66_NOOP = 23,
	R66_BLOCKREQUEST = 24,
	R66_JSONCMD = 25,
};

/* Result of r66_frame_parse(). */
enum r66_status {
	R66_OK = 0,
	R66_INCOMPLETE,		/* need more bytes (see *need) */
	R66_E_LEN,		/* net_len < 22 or sign bit set */
	R66_E_TOOBIG,		/* net_len over the caller's cap */
	R66_E_PARTS,		/* hdr/mid/end lengths do not fill the frame */
	R66_E_TYPE,		/* local type byte != frame code */
	R66_E_STARTUP,		/* code 2: never on the wire */
	R66_E_CODE,		/* 0, 9-12, 15-17, 19 or > 25 */
	R66_E_SHAPE,		/* a part has the wrong size for the code */
};

struct r66_frame {
	uint32_t	 len;		/* whole frame, 4 + net_len */
	uint32_t	 dst, src;
	uint8_t		 code;
	const uint8_t	*h, *m, *e;
	uint32_t	 hlen, mlen, elen;
};

/* Transfer modes (the on-wire integer). */
enum r66_mode {
	R66_MODE_UNKNOWN = 0,
	R66_MODE_SEND = 1,
	R66_MODE_RECV,
	R66_MODE_SENDMD5,
	R66_MODE_RECVMD5,
	R66_MODE_SENDTHROUGH,
	R66_MODE_RECVTHROUGH,
	R66_MODE_SENDMD5THROUGH,
	R66_MODE_RECVMD5THROUGH,
};

struct r66_str {
	const uint8_t	*p;
	size_t		 len;
};

struct r66_authent {
	struct r66_str	host, key, version;	/* version: may be empty */
	uint32_t	local_id;
	uint8_t		way;
};

#define R66_NAME_MAX	1024	/* unescaped file name / rule cap */

struct r66_request {
	bool		json;
	uint8_t		way;
	char		rule[256];
	int		mode;
	char		filename[R66_NAME_MAX];
	int64_t		block, rank, id, length, limit;
	int		code;		/* ErrorCode char, 'i' = InitOk */
	struct r66_str	info;		/* E: transfer information */
};

struct r66_error {
	struct r66_str	msg, code;	/* code: one char or empty */
	int32_t		action;
};

/* Checks one frame at p. R66_OK: *f describes it (f->len bytes). Needs at
 * most max_len + 4 contiguous bytes; on R66_INCOMPLETE *need says how many
 * bytes the caller must gather first (at most max_len + 4). max_len caps
 * net_len. Checks lengths, type == code, the code set and per-code part
 * sizes (R66-WIRE.md 8.3 items 1-3). */
enum r66_status r66_frame_parse(const uint8_t *p, size_t n, uint32_t max_len,
	    struct r66_frame *f, size_t *need);
/* The same checks from the first 26 bytes only (n >= 26, else
 * R66_INCOMPLETE): sets everything in *f but the part pointers. For Data
 * frames, whose block need not be copied to be policed. */
enum r66_status r66_frame_head(const uint8_t *p, size_t n, uint32_t max_len,
	    struct r66_frame *f);
const char	*r66_status_str(enum r66_status st);
/* Name of a packet code ("authent", "data"...), "unknown" otherwise. */
const char	*r66_code_name(unsigned code);
/* True for the codes that may travel as frames (not 2, not sub-types). */
bool		 r66_code_on_wire(unsigned code);

/* Stateless id rules (R66-WIRE.md 8.3 item 4): KeepAlive [NC,NC]; only a
 * client opens channels (dst NC); src NC only on ConnectionError/Error. */
bool		 r66_ids_plausible(const struct r66_frame *f, bool from_client);

/* Packet decoders: 0 ok, -1 malformed. */
int	r66_authent_parse(const struct r66_frame *f, struct r66_authent *a);
int	r66_request_parse(const struct r66_frame *f, struct r66_request *r);
int	r66_data_rank(const struct r66_frame *f, uint32_t *rank);
int	r66_error_parse(const struct r66_frame *f, struct r66_error *e);
/* EndTransfer, EndRequest, KeepAlive: the way byte in M. */
int	r66_way(const struct r66_frame *f, uint8_t *way);

/* Authent version string "3.1.0.{json}": the DIGESTALGO and R66VERSION. */
int	r66_caps_get(const struct r66_str *version, const char *key, char *buf,
	    size_t bufsz);
/* "3.6.1" <= v ? (major.minor.patch, suffix after '-' ignored). */
bool	r66_version_ge(const char *v, int maj, int min, int patch);

bool	r66_mode_valid(int mode);
bool	r66_mode_is_send(int mode);	/* requester sends the file */
bool	r66_mode_has_digest(int mode);	/* per-block digests */
const char *r66_mode_name(int mode);	/* "send", "recvmd5"... */

/* Digest length in bytes for a DIGESTALGO name, 0 if unknown/not binary. */
size_t	r66_digest_len(const char *algo);

/* Encoders: write one frame into buf (cap bytes); return its length, or 0
 * if it does not fit. Only those the analyser answers with; the rest, for
 * the test peer and the tests, are in r66_encode.h. */
size_t	r66_encode(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
	    uint8_t code, const void *h, size_t hl, const void *m, size_t ml,
	    const void *e, size_t el);
size_t	r66_encode_error(uint8_t *buf, size_t cap, uint32_t dst, uint32_t src,
	    const char *msg, char code, int32_t action);
size_t	r66_encode_connerror(uint8_t *buf, size_t cap, uint32_t dst,
	    uint32_t src, const char *msg, const char *mid);

uint32_t r66_be32(const uint8_t *p);
void	r66_put32(uint8_t *p, uint32_t v);

#endif
