/* TLS with OpenSSL 3, in the conn layer's transform slot (conn.h), so it
 * sits under every analyser once. A context is built per service and side
 * at config load and shared read-only by the workers; each connection gets
 * its own SSL. This step: the client side, mode="terminate". */
#ifndef PX_TLS_H
#define PX_TLS_H

#include <stdbool.h>

struct _xmlNode;
struct px_cfgerr;
struct px_conn;

/* One <tls> element, compiled. */
struct px_tls_ctx;

/* Reads <tls side=... mode=...> (n) of the service file `file`: the
 * certificate chain and key (PEM, checked to match, not expired), the
 * protocol versions, the TLS 1.2 ciphers and TLS 1.3 suites. alpn: the one
 * protocol the analyser speaks (NULL: no ALPN). Paths are taken from the
 * directory of `file` when relative. NULL after reporting file:line. */
struct px_tls_ctx *px_tls_load(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *file, const char *alpn);
void	px_tls_free(struct px_tls_ctx *t);

/* Puts a server-side (we terminate) TLS session on c's socket into c's
 * transform slot; the handshake runs on its first reads and writes.
 * 0, or -1 (out of memory). */
int	px_tls_attach(struct px_conn *c, const struct px_tls_ctx *t);

/* Why a handshake (or a record) failed, in classes an operator can count. */
enum px_tls_failure {
	PX_TLS_OK = 0,			/* no TLS failure on this conn */
	PX_TLS_FAIL_PROTOCOL,		/* no protocol version in common */
	PX_TLS_FAIL_CIPHER,		/* no cipher in common */
	PX_TLS_FAIL_ALPN,		/* no application protocol in common */
	PX_TLS_FAIL_NOT_TLS,		/* the peer did not speak TLS */
	PX_TLS_FAIL_OTHER,
	PX_TLS_FAILURES			/* how many */
};
enum px_tls_failure px_tls_failure(const struct px_conn *c);
const char *px_tls_failure_name(enum px_tls_failure f);

#endif
