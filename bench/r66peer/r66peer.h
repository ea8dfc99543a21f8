/* r66peer's shared parts: its configuration, one connection, and what
 * r66peer_io.c (frames, digests, a transfer's two halves) and r66peer_tls.c
 * (TLS on either side) offer the rest (r66peer.c). */
#ifndef R66PEER_H
#define R66PEER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>

#define PEER_MAX_PARTNERS	16
#define PEER_MAX_XFERS		64
#define PEER_BLOCK_MAX		(16u << 20)

struct peer_partner {
	char	 id[128];
	uint8_t	 key[16];
};

struct peer_xfer {
	bool	 send;
	char	*path;		/* SEND: local file; RECV: remote name */
};

struct peer_conf {
	bool		 server;
	const char	*addr;
	const char	*host_id;
	uint8_t		 key[16];
	struct peer_partner partners[PEER_MAX_PARTNERS];
	int		 npartners;
	const char	*dir;
	const char	*rule;
	int		 mode;
	uint32_t	 block;
	const char	*digest;	/* DIGESTALGO we advertise */
	struct peer_xfer xfers[PEER_MAX_XFERS];
	int		 nxfers;
	int		 count;
	bool		 auth_each;	/* advertise 3.5.0: no auth reuse */
	const char	*info;
	int		 timeout;
	bool		 quiet;
	/* client --pause-file: after the first transfer, "paused" on stdout
	 * and a wait (up to --timeout) until this file exists: the
	 * connection idle between two transfers (a proxy's upgrade). */
	const char	*pause_file;
	/* Faults and Waarp's tolerance of them, for the proxy's tests. */
	int64_t		 announce;	/* the size announced; -1: the file's */
	int64_t		 corrupt_block;	/* client: this rank's digest is wrong;
					 * -1: none */
	bool		 keep_going;	/* client: next transfer after a failed
					 * one (exit 2 at the end) */
	bool		 keep_on_error;	/* server: a failed transfer ends its
					 * channel, not the connection */
	bool		 tls;		/* client --tls; server: --tls-cert */
	const char	*tls_ca;	/* client: verify the server against it;
					 * server: require client certificates */
	const char	*tls_name;	/* client: SNI and host check */
	const char	*tls_cert, *tls_key;
	SSL_CTX		*tls_ctx;	/* made once, before any connection */
};

/* One connection. */
struct peer_conn {
	const struct peer_conf *c;
	int		 fd;
	SSL		*ssl;		/* NULL: plain */
	uint8_t		*buf;
	size_t		 bufcap;
	bool		 authed;
	bool		 reuse;		/* both sides >= 3.6.1 */
	char		 peer_id[128];
	char		 peer_digest[32];	/* partner's DIGESTALGO */
	uint32_t	 next_id;
	char		 tmp[PATH_MAX];	/* server: partial file to remove */
	/* keep_on_error (server), keep_going (client): our id of the channel
	 * a failed transfer left, whose frames still in flight are ignored
	 * (as Waarp does), and how many */
	bool		 dead;
	uint32_t	 dead_id;
	uint64_t	 late;
	bool		 peer_error;	/* peer_expect() got an ErrorPacket */
	bool		 corrupted;	/* client: --corrupt-block done */
};

/* "r66peer: " fmt, on stderr. */
void	peer_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- r66peer_io.c ---- */
struct r66_frame;

/* What a transfer's half moved: bytes, blocks, the global hash in hex. */
struct peer_result {
	uint64_t	size, blocks;
	char		hash[2 * EVP_MAX_MD_SIZE + 1];
};

const EVP_MD *peer_md(const char *algo);
int	 peer_write(struct peer_conn *pc, const void *p, size_t n);
int	 peer_read_full(struct peer_conn *pc, uint8_t *p, size_t n);
void	 peer_print_error(const struct r66_frame *f, const char *who);
/* Next frame that is not KeepAlive/NoOp: 1 frame, 0 EOF, -1 error. */
int	 peer_recv(struct peer_conn *pc, struct r66_frame *f);
int	 peer_expect(struct peer_conn *pc, struct r66_frame *f, uint8_t code,
	    uint32_t dst, const char *what);
char	*peer_version(const struct peer_conf *c, char *buf, size_t n);
int	 peer_check_authent(struct peer_conn *pc, const struct r66_frame *f,
	    uint8_t way);
int	 peer_send_error(struct peer_conn *pc, uint32_t dst, uint32_t src,
	    const char *msg, char code);
int	 peer_send_data(struct peer_conn *pc, int fd, uint32_t dst, uint32_t src,
	    uint32_t block, bool md5mode, struct peer_result *res);
int	 peer_recv_data(struct peer_conn *pc, int fd, uint32_t dst, uint32_t src,
	    uint32_t block, bool md5mode, int64_t length, struct peer_result *res,
	    char *errcode);
int	 peer_endrequest_send(struct peer_conn *pc, uint32_t dst, uint32_t src);
int	 peer_endrequest_recv(struct peer_conn *pc, uint32_t dst, uint32_t src);
bool	 peer_name_ok(const char *name);

/* ---- r66peer_tls.c ---- */
SSL_CTX	*peer_tls_ctx(const struct peer_conf *c);
int	 peer_tls_connect(struct peer_conn *pc);
int	 peer_tls_accept(struct peer_conn *pc);
void	 peer_tls_close(struct peer_conn *pc);
/* Error of an SSL_* call that failed: 0 clean EOF, -1 otherwise (errno
 * set, reason printed). */
int	 peer_tls_fail(struct peer_conn *pc, int ret, const char *what);

#endif
