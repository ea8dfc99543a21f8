/* A TLS ClientHello reader for SNI passthrough policing: a service reads
 * the client's first bytes without terminating TLS, allows or denies by
 * the server name and the ALPN protocols, then relays the bytes untouched.
 * Pure functions over (buf, len): no OpenSSL, no allocation, no I/O, no
 * global state, safe from any thread.
 *
 * Records are not copied: a ClientHello fragmented over several handshake
 * records is read in place, record header by record header, so no scratch
 * buffer is needed and struct px_hello stays small. Strict means: any
 * length that does not fit its container, any byte left over inside a
 * structure, and anything two readers could take two ways is MALFORMED,
 * never a guess. */
#ifndef PX_TLS_HELLO_H
#define PX_TLS_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_HELLO_MAX		16384	/* a sensible cap for px_hello_parse() */
#define PX_HELLO_SNI_MAX	253	/* a DNS name, without a trailing dot */
#define PX_HELLO_ALPN_MAX	8	/* protocols kept in alpn[] */
#define PX_HELLO_ALPN_LEN	32	/* longest kept protocol is 31 bytes */

enum px_hello_result {
	PX_HELLO_OK = 0,
	PX_HELLO_NEED_MORE,	/* a valid start: read more and call again */
	PX_HELLO_NOT_TLS,	/* not a TLS handshake that opens with a hello */
	PX_HELLO_MALFORMED,	/* TLS framing, but a broken or ambiguous hello */
	PX_HELLO_TOO_BIG,	/* the hello's records would pass max bytes */
};

struct px_hello {
	uint16_t	record_version;	/* of the first record: 0x0301... */
	uint16_t	client_version;	/* legacy_version of the hello */
	bool		has_sni;
	char		sni[PX_HELLO_SNI_MAX + 1];	/* "" without SNI */
	unsigned	alpn_count;	/* every protocol offered */
	char		alpn[PX_HELLO_ALPN_MAX][PX_HELLO_ALPN_LEN];
	bool		has_supported_versions;
	bool		offers_tls13;	/* supported_versions lists 0x0304 */
	size_t		consumed;	/* bytes of the records the hello used */
};

/* Reads the ClientHello at the start of the len bytes a client has sent
 * so far. *out is zeroed first and only meaningful on PX_HELLO_OK.
 *
 * NOT_TLS is decided on the first byte that shows it: byte 0 is not 0x16
 * (handshake record: "GET ..." and SSLv2's 0x80 are NOT_TLS at once),
 * bytes 1-2 are not 0x03 0x00..0x0f, or the first handshake message
 * (byte 5) is not a ClientHello (1); a first record too long for max is
 * TOO_BIG before byte 5 is read.
 *
 * The hello may span several handshake records (each 1..16384 bytes, each
 * with a header that would pass as the first); it must end exactly at the
 * end of a record, so consumed is where the hello's records end and what
 * follows (a ChangeCipherSpec, early data) is the caller's. Any other
 * record type in between is MALFORMED.
 *
 * NEED_MORE while the hello is incomplete and can still end within max
 * bytes; TOO_BIG as soon as the length fields say it cannot (or len has
 * reached max without a whole hello; always when max < 5). Every prefix
 * of a valid hello gives NEED_MORE, so the caller can call again on each
 * read. Checks are made in byte order, each as soon as its bytes are in,
 * and nothing at or past max is looked at: once a verdict other than
 * NEED_MORE is given, more bytes cannot change it, and a smaller max can
 * only turn it into TOO_BIG.
 *
 * What is read, and what makes it MALFORMED:
 *   - the body: session_id <= 32 bytes, cipher_suites non-empty and even,
 *     at least one compression method, then either nothing or an
 *     extension block that ends exactly where the hello ends;
 *   - extensions: each length inside the block; the same type twice is
 *     MALFORMED for types below 64, which covers every extension read here
 *     (higher ones, GREASE and renegotiation_info among them, are skipped
 *     unchecked);
 *   - server_name (0): exactly one entry, of type host_name; its name is
 *     1..253 bytes of letters, digits, '-' and '.', labels of 1..63 bytes
 *     (no leading, trailing or double dot). Stored lowercased in sni[].
 *     An IP literal passes as a name (RFC 6066 forbids it; policy decides);
 *   - ALPN (16): a non-empty list of non-empty names. alpn_count counts all
 *     of them; alpn[] keeps the first PX_HELLO_ALPN_MAX, NUL-terminated.
 *     A name longer than 31 bytes or holding a NUL is kept as "", which
 *     matches no protocol. A caller that denies by protocol must treat
 *     alpn_count > PX_HELLO_ALPN_MAX as "offers something unknown";
 *   - supported_versions (43): a non-empty, even list; offers_tls13 when
 *     0x0304 is in it.
 * Every one of these must use its extension's bytes exactly. */
enum px_hello_result px_hello_parse(const uint8_t *buf, size_t len,
	    size_t max, struct px_hello *out);

/* Whether a server name matches a policy pattern, ASCII case-insensitive:
 *   "www.example.test"  that name only;
 *   "*.example.test"    exactly one label before ".example.test":
 *                       "a.example.test", not "example.test" nor
 *                       "a.b.example.test" (RFC 6125, leftmost label only);
 *   "*"                 any name.
 * A '*' anywhere else is an ordinary byte (so it matches no valid name).
 * An empty name matches nothing, "*" included: the caller decides what a
 * hello without SNI gets (has_sni false) before asking about names. */
bool	px_hello_name_match(const char *pattern, const char *name);

#endif
