/* JA4, FoxIO's TLS client fingerprint (technical_details/JA4.md of
 * FoxIO-LLC/ja4), computed from a ClientHello's bytes: the same pure
 * function for every place proxyd sees one (a terminated or keybridged
 * handshake, through OpenSSL's message callback, and a passthrough hello
 * read off the socket), so one client gets one fingerprint whatever the
 * service does with its TLS. No allocation but one scratch array, no
 * state but the SHA-256 implementation fetched once, safe from any thread;
 * some 2 us a hello.
 *
 *   t13d1516h2_8daaf6152771_e5627efa2ab1
 *   | | |  | |  |            sha256 (12 hex) of the sorted extensions
 *   | | |  | |  |            but SNI and ALPN, "_", the signature
 *   | | |  | |  |            algorithms in the client's order
 *   | | |  | |  sha256 (12 hex) of the sorted cipher suites
 *   | | |  | first and last characters of the first ALPN protocol
 *   | | |  extensions, counted (at most 99)
 *   | | cipher suites, counted (at most 99)
 *   | d: SNI sent, i: none
 *   version: the highest of supported_versions, else legacy_version
 *   t: TLS over TCP
 * GREASE values (RFC 8701) are left out everywhere. */
#ifndef PX_JA4_H
#define PX_JA4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_JA4_LEN	36	/* without the NUL */

/* The JA4 of the ClientHello handshake message msg (its 4-byte handshake
 * header first, as OpenSSL's message callback gives it) into out (at
 * least PX_JA4_LEN + 1 bytes). false when msg is not a whole, well-formed
 * ClientHello (out is then ""). */
bool	px_ja4_hello(const uint8_t *msg, size_t len, char *out);
/* The same from the TLS records that carry a ClientHello (0x16 records,
 * as a client sends them; a hello may span several). */
bool	px_ja4_records(const uint8_t *buf, size_t len, char *out);
#define PX_JA4S_LEN	25	/* without the NUL */

/* JA4S, FoxIO's fingerprint of the server's answer (technical_details/
 * JA4S.md), from a ServerHello handshake message (header on, as OpenSSL's
 * message callback gives it) into out (PX_JA4S_LEN + 1 bytes):
 *
 *   t130200_1301_234ea6891581
 *   | |  | |  |    sha256 (12 hex) of the extensions as sent, in order
 *   | |  | |  the chosen cipher suite
 *   | |  | the ALPN protocol chosen in the ServerHello, first and last
 *   | |  | characters ("00": none; in TLS 1.3 it is never there)
 *   | |  extensions, counted (at most 99)
 *   | version: supported_versions' chosen one, else legacy_version
 *   t: TLS over TCP
 * false (out "") when msg is not a whole, well-formed ServerHello. */
bool	px_ja4s_hello(const uint8_t *msg, size_t len, char *out);
/* msg is a HelloRetryRequest (a ServerHello by its type): its JA4S is not
 * the server's answer, the ServerHello after it is. */
bool	px_ja4s_is_hrr(const uint8_t *msg, size_t len);
/* s has the form of a JA4: 10 characters [A-Za-z0-9] (an ALPN protocol's
 * characters keep their case), "_", 12 hex digits, "_", 12 hex digits
 * (lowercase). */
bool	px_ja4_valid(const char *s);

#endif
