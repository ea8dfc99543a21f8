/* The http analyser: shared between its policy loader and its session
 * code. */
#ifndef HTTP_H
#define HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_parse.h"
#include "rules.h"

struct _xmlNode;
struct px_cfgerr;
struct px_auth_id;

/* A header rule's action: a field is passed, dropped, changed or added,
 * which the core's accept/deny/abort (enum px_action) do not say. */
enum http_header_action {
	HTTP_ACCEPT = 0,
	HTTP_DROP,
	HTTP_CHANGE,
	HTTP_INSERT,
};

enum http_xff {
	HTTP_XFF_NO = 0,
	HTTP_XFF_APPEND,
	HTTP_XFF_REPLACE,
};

/* A space-separated list from an attribute; "*" alone matches anything. */
struct http_words {
	char	**w;
	size_t	  n;
	bool	  any;
};

struct http_request_rule {
	struct http_words	methods;
	uint16_t		*ports;		/* CONNECT/forward targets; NULL: any */
	size_t			 nports;
	/* user=, group=: the rule matches only those (<auth>); n 0: anyone */
	struct http_words	 users, groups;
	enum px_action		 action;
	int			 status;		/* deny: answered with it */
	long			 line;		/* for rule= */
	char			*label;		/* label=; NULL */
};

struct http_url_rule {
	char			*host;		/* glob, case-insensitive */
	char			*path;		/* glob, as canonical paths are
						 * written (http_target_canon) */
	char			*query;		/* glob, decoded as queries are
						 * (http_query_decode); ""
						 * matches no query */
	struct http_words	 users, groups;	/* as a request rule's */
	enum px_action		 action;
	int			 status;		/* deny: answered with it */
	long			 line;
	char			*label;
};

/* The rule that decided, for rule= of the deny lines (px_rule_ref_at);
 * line 0: none did, a list's default. */
struct http_hit {
	long			 line;
	const char		*label;
};

struct http_header_rule {
	char			*name;
	enum http_header_action	 action;
	char			*value;
};

#define HTTP_ERROR_PAGES 600

/* server-h2=: which HTTP a server is spoken to in. */
enum http_server_h2 {
	HTTP_SERVER_H2_NO = 0,	/* HTTP/1.1 */
	HTTP_SERVER_H2_YES,	/* h2: ALPN "h2" under TLS, else prior knowledge */
	HTTP_SERVER_H2_AUTO,	/* ALPN "h2,http/1.1" under TLS, else HTTP/1.1 */
};

struct http_policy {
	bool			 keepalive_client;
	bool			 keepalive_server;
	unsigned		 server_pool;	/* per destination and worker */
	uint64_t		 server_idle_ms;
	unsigned		 max_requests;	/* per client connection; 0: no cap */
	bool			 via;
	enum http_xff		 xff;
	bool			 check_host;	/* transparent: Host vs destination */
	bool			 merge_slashes;	/* url rules read "//" as "/" */
	bool			 underscore_pass; /* field names with '_' go on */
	bool			 trailers_pass;	/* chunked trailers go on */
	struct http_words	 codings;	/* Transfer-Encoding codings allowed
						 * besides chunked */
	struct http_limits	 lim;
	uint64_t		 max_body;	/* 0: no cap */
	uint64_t		 request_timeout_ms;
	uint64_t		 response_timeout_ms;
	/* The rule lists: the first rule that matches decides; what no rule
	 * of a list matches gets the list's default (*_dflt, each stated in
	 * http_policy_load; docs/CONFIG.md lists them). */
	struct http_request_rule *req;
	size_t			 nreq;
	bool			 req_catch_all;	/* a method="*" rule, any port */
	enum px_action		 req_dflt;	/* after the built-in list */
	int			 req_dflt_status;
	struct http_url_rule	*url;
	size_t			 nurl;
	bool			 url_query;	/* a url rule has query= */
	enum px_action		 url_dflt;
	int			 url_dflt_status;
	struct http_header_rule	*reqh;
	size_t			 nreqh;
	enum http_header_action	 reqh_dflt;	/* a field no rule names */
	struct http_header_rule	*resph;
	size_t			 nresph;
	enum http_header_action	 resph_dflt;
	struct http_words	 upgrade;	/* accepted Upgrade protocols */
	enum px_action		 upgrade_dflt;	/* a protocol not in upgrade */
	bool			 silent;	/* error replies without a page */
	/* HTTP/2 towards clients (http_h2.c): h2 in ALPN under TLS, prior
	 * knowledge h2c on a plain listener, and <h2>'s bounds. */
	bool			 h2;
	bool			 h2c;
	/* HTTP/2 towards servers (http_h2_origin.c): enum http_server_h2. */
	int			 server_h2;
	uint32_t		 h2_max_streams;
	uint32_t		 h2_window;	/* initial stream window */
	uint32_t		 h2_max_header_list;
	char			*pages[HTTP_ERROR_PAGES]; /* from errors/@dir */
};

int	http_policy_load(const struct _xmlNode *sec, void **pol,
	    struct px_cfgerr *e);
void	http_policy_free(void *pol);
/* px_analyser.client_alpn: "h2,http/1.1,http/1.0" when h2="yes". */
const char *http_policy_client_alpn(const void *pol);
bool	http_words_has(const struct http_words *w, const char *s, size_t len);
/* What the request rules (method, port) and then the url rules (host,
 * path and query) say of a request: 0 accept, the status to deny with,
 * or -1 abort; *why says which refused, *hit (may be NULL) which rule.
 * path and query as http_target_canon() makes them (query NULL: the
 * target has none, which query= reads as ""). query= reads the query
 * through http_query_decode() (400 when it cannot be, and there is a
 * query= rule); a path with a ';' is judged with each segment's ";params"
 * off, then as it is, and refused if either is; for CONNECT, path is the
 * authority. */
int	http_policy_check(const struct http_policy *p, const char *method,
	    size_t mlen, uint16_t port, const char *host, const char *path,
	    const char *query, const char **why, struct http_hit *hit);
/* The same for a request whose connection proved to be id (NULL:
 * nobody): a rule with user= or group= matches only such requests, of
 * one of its users (id->user) or of a member of one of its groups
 * (px_auth_id_in_group). */
int	http_policy_check_as(const struct http_policy *p,
	    const struct px_auth_id *id, const char *method, size_t mlen,
	    uint16_t port, const char *host, const char *path,
	    const char *query, const char **why, struct http_hit *hit);
/* The methods the request rules accept on port (CONNECT only when
 * connect), ", " between, for the Allow field of a 405 (RFC 9110
 * 15.5.6): every method a rule names or the built-in list has. "" when
 * none (a valid Allow: nothing is). Cut to size at a method's end. */
void	http_policy_allow(const struct http_policy *p, uint16_t port,
	    bool connect, char *buf, size_t size);
/* Whether every Transfer-Encoding coding of m other than chunked is one
 * transfer-codings= lists. */
bool	http_policy_codings(const struct http_policy *p,
	    const struct http_head *m);
/* Whether the protocol an Upgrade field (v, len) asks for first (its name,
 * without "/version") is accepted. */
bool	http_policy_upgrade(const struct http_policy *p, const char *v,
	    size_t len);

#endif
