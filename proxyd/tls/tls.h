/* TLS with OpenSSL 3, in the conn layer's transform slot (conn.h), so it
 * sits under every analyser once. A context is built per service and side
 * at config load and shared read-only by the workers; each connection gets
 * its own SSL. Client side: mode="terminate" (proxyd is the TLS server);
 * server side: mode="originate" (proxyd is the TLS client). */
#ifndef PX_TLS_H
#define PX_TLS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct _xmlNode;
struct px_cfgerr;
struct px_conn;
struct px_fp_rule;
struct px_fp_rules;
struct px_hello;
struct px_rule;

/* One <tls> element, compiled. */
struct px_tls_ctx;

enum px_tls_side {
	PX_TLS_CLIENT = 0,		/* between the client and proxyd */
	PX_TLS_SERVER = 1,		/* between proxyd and the server */
};

/* Why a handshake (or a record) failed, in classes an operator can count. */
enum px_tls_failure {
	PX_TLS_OK = 0,			/* no TLS failure on this conn */
	PX_TLS_FAIL_PROTOCOL,		/* no protocol version in common */
	PX_TLS_FAIL_CIPHER,		/* no cipher in common */
	PX_TLS_FAIL_ALPN,		/* no application protocol in common */
	PX_TLS_FAIL_NOT_TLS,		/* the peer did not speak TLS */
	PX_TLS_FAIL_UNKNOWN_CA,		/* its chain leads to no trusted CA */
	PX_TLS_FAIL_HOSTNAME,		/* its certificate names another host */
	PX_TLS_FAIL_EXPIRED,		/* its certificate is out of date */
	PX_TLS_FAIL_NO_CERT,		/* a required certificate not sent */
	PX_TLS_FAIL_OTHER,
	PX_TLS_FAILURES			/* how many */
};

/* A service's TLS counters on one worker (in its struct px_svc_counters):
 * one writer (the worker), read by the admin. */
struct px_tls_counters {
	atomic_uint_fast64_t	failures[2][PX_TLS_FAILURES];	/* by side */
	/* Handshakes done, by side, [0] full, [1] resumed. */
	atomic_uint_fast64_t	handshakes[2][2];
	/* Server certificates that did not verify, let through by
	 * verify="optional". */
	atomic_uint_fast64_t	unverified;
	/* mode="passthrough" ClientHellos, [0] denied, [1] accepted. */
	atomic_uint_fast64_t	passthrough[2];
	/* mode="keybridge" leaves, [0] minted, [1] from the worker's cache. */
	atomic_uint_fast64_t	keybridge[2];
	/* ... and by CA, [0] the trusted one, [1] the untrusted one. */
	atomic_uint_fast64_t	keybridge_ca[2];
	/* ClientHellos refused by a <fingerprint> rule (any mode). */
	atomic_uint_fast64_t	fingerprint_denied;
};

/* A keybridge leaf, kept per worker (see px_tls_keybridge_present). */
struct px_tls_leaf {
	uint64_t		 ctx_id;
	unsigned char		 server_sha256[32];
	bool			 untrusted;
	void			*x509;		/* X509 */
	uint64_t		 used;
};

/* A worker's sessions towards servers, for resumption (mode="originate").
 * Small and per worker: no lock, and a worker talks to few servers. Each
 * server gets a few sessions, oldest first: TLS 1.3 tickets come after the
 * handshake, one or two at a time, and are meant to be used once. */
#define PX_TLS_CACHE_SIZE	64
#define PX_TLS_CACHE_TICKETS	4
struct px_tls_cache_entry {
	uint64_t		 ctx_id;	/* px_tls_ctx's, never reused */
	struct sockaddr_storage	 addr;
	char			 name[256];
	void			*sessions[PX_TLS_CACHE_TICKETS]; /* SSL_SESSION */
	unsigned		 nsessions;
	uint64_t		 used;
};
struct px_tls_worker {
	struct px_tls_leaf		*leaves;	/* keybridge, LRU */
	size_t				 nleaves;
	struct px_tls_cache_entry	 cache[PX_TLS_CACHE_SIZE];
	uint64_t			 clock;
};

void	px_tls_worker_init(struct px_tls_worker *tw);
void	px_tls_worker_free(struct px_tls_worker *tw);
/* Hands freed memory back to the system when a burst of TLS conns has
 * gone (see tls.c): called once the worker has freed its dead sessions. */
void	px_tls_trim_if_due(void);

/* Reads <tls side=... mode=...> (n) of the service file `file`. Client
 * side: the certificate chain and key (PEM, checked to match, not
 * expired). Server side: verify=, ca=, sni=, an optional certificate to
 * present. Both: the protocol versions, the TLS 1.2 ciphers and TLS 1.3
 * suites. alpn: the one protocol the analyser speaks (NULL: no ALPN).
 * Paths are taken from the directory of `file` when relative. NULL after
 * reporting file:line. */
struct px_tls_ctx *px_tls_load(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *file, const char *alpn);
void	px_tls_free(struct px_tls_ctx *t);
enum px_tls_side px_tls_side(const struct px_tls_ctx *t);
/* The side="server" name to send, from the client's (NULL: none). NULL:
 * send none (check the server's address instead). */
const char *px_tls_server_name(const struct px_tls_ctx *t,
	    const char *client_sni);
/* mode="keybridge": the client's handshake waits for the server's. */
bool	px_tls_is_keybridge(const struct px_tls_ctx *t);
/* A keybridge client conn whose handshake stopped at the ClientHello,
 * waiting for px_tls_keybridge_present(); *name: its SNI ("" none). */
bool	px_tls_keybridge_waiting(const struct px_conn *c, const char **name);
/* The server conn (side server, handshaken) showed its certificate: give
 * the client conn a leaf for the same subject and names, signed by the
 * trusted CA when the server's chain verified and by the untrusted one
 * when not, from the worker's cache or minted. Its handshake can then go
 * on. 0, or -1 (*why says). *how: a text for the log line. */
int	px_tls_keybridge_present(struct px_conn *client,
	    const struct px_conn *server, char *how, size_t howsize,
	    const char **why);
/* mode="passthrough": TLS from the client is read, not opened. */
bool	px_tls_is_passthrough(const struct px_tls_ctx *t);
/* Whether its <sni> rules let the ClientHello h through; *hit: the rule
 * that decided (NULL: the default, or no-sni=). */
bool	px_tls_passthrough_allows(const struct px_tls_ctx *t,
	    const struct px_hello *h, const struct px_rule **hit);
/* handshake-timeout=: how long a client may take over its handshake. */
uint64_t px_tls_handshake_timeout(const struct px_tls_ctx *t);
/* implicit=: 1 yes (TLS from the first byte), 0 no (the analyser starts
 * it: FTP's AUTH TLS), -1 not said (the analyser's default). */
int	px_tls_implicit(const struct px_tls_ctx *t);
/* auth="optional": the peer may stay in plain (FTP: the client need not
 * send AUTH TLS; the server may refuse it). */
bool	px_tls_auth_optional(const struct px_tls_ctx *t);
/* Identifies t among all contexts ever loaded (pool and cache keys). */
uint64_t px_tls_ctx_id(const struct px_tls_ctx *t);

/* Who a connection's TLS is with, for the checks, the cache and the
 * counters. */
struct px_tls_peer {
	uint64_t		 session_id;	/* for log lines */
	struct px_tls_worker	*tw;
	struct px_tls_counters	*n;	/* the session's service's; NULL: none */
	/* Server side: the name sent (SNI) and checked, or NULL to check
	 * addr; addr also keys the resumption cache. */
	const char		*name;
	const struct sockaddr	*addr;
	/* Server side under keybridge: a chain that does not verify does
	 * not fail the handshake; px_tls_keybridge_present() reads it. */
	bool			 verify_later;
	/* Server side: resume this conn's TLS session (an FTP data channel
	 * resumes its control connection's), keeping it out of the cache. */
	const struct px_conn	*resume;
	/* Server side: the ALPN list offered (wire format) in place of the
	 * context's; NULL: the context's. */
	const unsigned char	*alpn;
	size_t			 alpn_len;
	/* Client side: the service's <fingerprint> rules, judged on the
	 * ClientHello's JA4 before anything is answered (NULL: none); and
	 * where that JA4 is written when it is still "" there: the session's
	 * buffer, PX_JA4_LEN + 1 bytes, which outlives the conn and is the
	 * JA4's only copy (px_tls_ja4 reads it); an FTPS data conn's is
	 * its channel's. NULL: the hello is not fingerprinted (a server
	 * side); with rules to judge, px_tls_attach then fails. */
	const struct px_fp_rules *fp;
	char			*ja4;
	/* Server side: where to copy the server's JA4S when still "" there
	 * (PX_JA4S_LEN + 1 bytes that outlive the conn: the session's, an
	 * FTPS data conn's channel's; NULL: nowhere). */
	char			*ja4s;
};

/* Puts a TLS session on c's socket into c's transform slot, in t's role
 * (client side: we accept; server side: we connect). The handshake runs
 * on the first reads and writes, or px_conn_handshake(). 0, or -1 (out of
 * memory). */
int	px_tls_attach(struct px_conn *c, const struct px_tls_ctx *t,
	    const struct px_tls_peer *p);

enum px_tls_failure px_tls_failure(const struct px_conn *c);
/* c's handshake took too long: a failure (other), counted like the others.
 * Nothing for a conn without TLS or already handshaken. */
void	px_tls_handshake_timed_out(struct px_conn *c);
/* A TLS conn whose handshake resumed an earlier session. */
bool	px_tls_resumed(const struct px_conn *c);
/* Its peer's chain verified (a TLS conn that checked it). */
bool	px_tls_verified(const struct px_conn *c);
/* <tls side="client" identity=>: what of a verified client certificate
 * names its user. */
enum px_tls_identity {
	PX_TLS_ID_NONE = 0,
	PX_TLS_ID_CN,		/* the subject's commonName (one only) */
	PX_TLS_ID_EMAIL,	/* the first rfc822Name of subjectAltName */
	PX_TLS_ID_DNS,		/* the first dNSName of subjectAltName */
};
/* The user a client certificate names (identity= of its <tls>), into
 * buf: true only when c's peer presented a certificate whose chain
 * verified and that carries the attribute, as printable ASCII without
 * blanks or quotes (anything else names nobody). */
bool	px_tls_identity(const struct px_conn *c, char *buf, size_t len);
/* The subject of the peer's certificate (RFC 2253) into buf: the
 * server's where proxyd is the client, a client's that presented one.
 * false ("" in buf) when c has no TLS or its peer no certificate. */
bool	px_tls_peer_subject(const struct px_conn *c, char *buf, size_t len);
const char *px_tls_failure_name(enum px_tls_failure f);
/* The name the client asked for (SNI), on a client-side conn; NULL. */
const char *px_tls_client_sni(const struct px_conn *c);
/* The JA4 of the ClientHello c's client sent (ja4.h), on a client-side
 * conn that has read it: the buffer px_tls_peer.ja4 gave it; "" otherwise
 * (no such buffer, or no hello). */
const char *px_tls_ja4(const struct px_conn *c);
/* The JA4S of the ServerHello c's server sent (ja4.h), on a server-side
 * conn that has read it; "" otherwise. */
const char *px_tls_ja4s(const struct px_conn *c);
/* The <fingerprint> rule that refused c's ClientHello (its handshake then
 * failed, uncounted as a TLS failure); NULL. */
const struct px_fp_rule *px_tls_fp_denied(const struct px_conn *c);
/* The handshake on c agreed on ALPN protocol proto. */
bool	px_tls_alpn_is(const struct px_conn *c, const char *proto);

#endif
