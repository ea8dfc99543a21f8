/* What tls.c, tls_config.c and tls_keybridge.c share: the context and
 * per-connection state behind tls.h's opaque types, and the helpers they
 * use. Not for the rest of proxyd (tls.h is its interface). */
#ifndef PX_TLS_INT_H
#define PX_TLS_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "conn.h"
#include "fingerprint.h"
#include "ja4.h"
#include "rules.h"
#include "tls.h"

struct px_cfgerr;
struct _xmlNode;

/* Session ticket keys, rotated by proxyd: a ticket is issued with the
 * current key and accepted with it or the one before, so a ticket lives
 * one to two periods. Four slots: the workers read two of them while the
 * one that rotates writes a third. */
#define PX_TLS_TICKET_SLOTS	4
struct px_tls_ticket_keys {
	unsigned char	 name[PX_TLS_TICKET_SLOTS][16];
	unsigned char	 aes[PX_TLS_TICKET_SLOTS][32];
	unsigned char	 hmac[PX_TLS_TICKET_SLOTS][32];
	atomic_uint	 cur;		/* a counter; slot cur % SLOTS */
	atomic_uint_fast64_t next_ms;	/* when cur moves on */
	atomic_bool	 rotating;	/* one worker at a time */
	uint64_t	 period_ms;
};

struct px_tls_ctx {
	SSL_CTX		*ctx;
	struct px_tls_ticket_keys *tickets;	/* terminate; NULL */
	uint64_t	 id;
	enum px_tls_side side;
	uint64_t	 handshake_timeout_ms;
	unsigned char	 alpn[32];	/* wire format: length, name */
	unsigned	 alpn_len;
	/* Client side: certificates chosen by the name the client asks
	 * for (<certificate name=...>), each in a context of its own. */
	struct px_tls_named *named;
	size_t		 nnamed;
	int		 client_verify;	/* 0 none, 1 optional, 2 required */
	/* identity=: which part of a verified client certificate names
	 * its user (enum px_tls_identity), identity-domain= for email. */
	int		 client_identity;
	char		*identity_domain;
	/* Client side, mode="passthrough": <sni> rules on the ClientHello,
	 * each rule's arg indexing (from 1) its alpn= set. */
	bool		 passthrough;
	struct px_rules	 sni_rules;
	struct px_tls_alpn_set *alpn_sets;
	size_t		 nalpn_sets;
	bool		 no_sni_accept;
	/* Client side, mode="keybridge": the CAs that sign leaves for
	 * servers whose chain verified [0] or did not [1], the one key pair
	 * of every leaf, and how many leaves a worker keeps. */
	bool		 keybridge;
	X509		*kb_ca[2];
	EVP_PKEY	*kb_ca_key[2];
	EVP_PKEY	*kb_key;
	uint64_t	 kb_cache;
	/* Server side. */
	bool		 sni_forward;	/* the client's name */
	char		*sni;		/* a fixed name; NULL */
	bool		 verify_optional;
	/* Analysers that start TLS themselves (FTP's AUTH TLS): implicit=
	 * (-1 unset: the analyser's default, 0 no, 1 yes) and auth= (a peer
	 * may stay in plain: optional). */
	int		 implicit;
	bool		 auth_optional;
};

struct px_tls_alpn_set {
	char		**names;
	size_t		 n;
};

struct px_tls_named {
	SSL_CTX		*ctx;
	char		**names;	/* exact, or "*.example.test" */
	size_t		 nnames;
};

struct px_tls_dest {
	struct sockaddr_storage addr;
	char		 name[256];
};

struct px_tls_conn {
	SSL		*ssl;
	enum px_tls_side side;
	bool		 done;		/* the handshake finished */
	/* Read ahead (px_tls_attach): OpenSSL may hold records it read from
	 * the socket and not yet decoded. Whether the last SSL call that
	 * read gave something (then a held rest may be whole records: the
	 * loop must come back for them) rather than wanting more (then it
	 * is a record's start, and the socket says when the rest comes). */
	bool		 ahead;
	bool		 verify_optional;
	bool		 verify_client;	/* log the client's certificate */
	uint8_t		 identity;	/* enum px_tls_identity */
	const char	*identity_domain;	/* the ctx's */
	/* Keybridge, client side: the ClientHello was seen (kb_waiting)
	 * and the handshake waits for a leaf (kb_ready once it has one). */
	const struct px_tls_ctx *kb;
	bool		 kb_waiting, kb_ready;
	uint64_t	 ctx_id;
	uint64_t	 session_id;
	struct px_tls_worker *tw;
	struct px_tls_counters *n;	/* NULL: not counted */
	/* Server side: the session cache's key (the name also sent and
	 * checked); keybridge: the ClientHello's name. NULL elsewhere: a
	 * terminated connection does not carry their 384 bytes. */
	struct px_tls_dest *dest;
	char		 error[160];	/* "tls: <reason>" of the last failure */
	enum px_tls_failure failure;
	bool		 no_cache;	/* resumes a given session: keep none */
	/* Allowed a chain its context would refuse (px_tls_peer.verify_later):
	 * a session from such a chain is not kept for others to resume. */
	bool		 relaxed;
	/* FTP data channels towards a server (px_tls_peer.resume): the
	 * control conn's next_resume is the newest session one of them was
	 * given (TLS 1.3 tickets may be good for one use only), each data
	 * conn's resume_of the control conn it feeds. */
	SSL_SESSION	*next_resume;
	struct px_tls_conn *resume_of;
	/* Client side: where the JA4 of the first ClientHello is written
	 * (px_tls_msg_cb), the session's buffer (px_tls_peer.ja4: its one
	 * copy, outliving the conn; NULL: not fingerprinted), the rules it
	 * is judged by, the rule that refused it. Server side: the server's
	 * JA4S (its ServerHello's), kept here too since a pooled conn
	 * outlives its session and serves the next (px_tls_ja4s), and the
	 * session's buffer it is copied to (ja4s_out; NULL: none). */
	char		*ja4;
	char		 ja4s[PX_JA4S_LEN + 1];
	char		*ja4s_out;
	const struct px_fp_rules *fp;
	const struct px_fp_rule *fp_hit;
	bool		 hello_refused;	/* by px_tls_fp_hello, no rule: tc->error says why */
};

/* tc's dest, made the first time (zeros); NULL: out of memory. */
struct px_tls_dest *px_tls_dest(struct px_tls_conn *tc);

/* The conn layer's TLS transform: c->tf == &px_tls_transform is a TLS
 * conn, c->tf_state its struct px_tls_conn. */
extern const struct px_conn_transform px_tls_transform;
/* SSL ex_data index of a connection's struct px_tls_conn. */
extern int px_tls_conn_index;

/* OpenSSL's first queued reason ("prefix: reason"), the queue emptied. */
void	 px_tls_reason(char *buf, size_t size, const char *prefix);
/* ALPN selection against the context's list (SSL_CTX_set_alpn_select_cb). */
int	 px_tls_alpn_cb(SSL *ssl, const unsigned char **out,
	    unsigned char *outlen, const unsigned char *in, unsigned int inlen,
	    void *arg);
/* A file attribute of n resolved against the policy file; NULL after
 * reporting when mode names who needs it (see tls.c). */
char	*px_tls_file(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *file, const char *attr, const char *mode);
/* A host name SNI may carry (RFC 6066 3). */
bool	 px_tls_is_dns_name(const char *s);
/* What every context of a <tls> shares: versions, ciphers, options. */
int	 px_tls_ctx_common(struct px_cfgerr *e, const struct _xmlNode *n,
	    SSL_CTX *ctx);
/* A counter bumped by its one writer (the worker). */
void	 px_tls_inc(atomic_uint_fast64_t *c);

/* tls.c: judges the ClientHello's JA4 by the conn's <fingerprint> rules:
 * SSL_CLIENT_HELLO_SUCCESS, or SSL_CLIENT_HELLO_ERROR with *alert set
 * (access_denied). The client-hello callback of every client-side
 * context calls it first (keybridge's too). */
int	 px_tls_fp_hello(SSL *ssl, int *alert);
/* tls.c: keeps a new session of a server-side conn in the worker's cache
 * (SSL_CTX_sess_set_new_cb). */
int	 px_tls_new_session(SSL *ssl, SSL_SESSION *sess);
/* tls_config.c: verify="optional": log the failure, go on
 * (SSL_set_verify callback). */
int	 px_tls_verify_optional(int ok, X509_STORE_CTX *x);

/* tls_keybridge.c: <tls mode="keybridge">'s CA pairs, key and hello
 * callback into t. 0, or -1 after reporting. */
int	 px_tls_load_keybridge(struct px_cfgerr *e, const struct _xmlNode *n,
	    const char *file, struct px_tls_ctx *t);

#endif
