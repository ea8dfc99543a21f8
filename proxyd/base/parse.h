/* Range-checked converters for config values and addresses (each returns
 * 0 on success or -1 with *why set to a static explanation), sockaddr
 * helpers and the escaping of peer strings for log lines. Pure functions:
 * no allocation, no global state, safe from any thread. */
#ifndef PX_PARSE_H
#define PX_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct px_cidr {
	sa_family_t	family;		/* AF_INET or AF_INET6 */
	uint8_t		prefix;		/* 0..32 or 0..128 */
	uint8_t		addr[16];	/* network order, host bits cleared */
};

/* "500ms" "10s" "5m" "2h" "1d"; a bare "0" only when allow_zero. */
int	px_parse_duration_ms(const char *s, bool allow_zero, uint64_t *out,
	    const char **why);
/* "4096" "64k" "16m" "1g" (powers of 1024). */
int	px_parse_size(const char *s, uint64_t *out, const char **why);
/* Decimal integer in [min, max], no sign, no spaces, no trailing bytes. */
int	px_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out,
	    const char **why);
/* Decimal or 0x-hex 32-bit value (firewall marks). */
int	px_parse_u32_any(const char *s, uint32_t *out, const char **why);
/* Numeric IPv4/IPv6 literal (no names: no DNS at load) plus port. */
int	px_parse_ip(const char *s, uint16_t port, struct sockaddr_storage *ss,
	    socklen_t *len, const char **why);
/* "1.2.3.4:80" or "[::1]:80". */
int	px_parse_hostport(const char *s, struct sockaddr_storage *ss,
	    socklen_t *len, const char **why);
/* "10.0.0.0/8", "::1", "2001:db8::/32" (no prefix = host route). */
int	px_parse_cidr(const char *s, size_t len, struct px_cidr *out,
	    const char **why);
/* IPv4-mapped IPv6 addresses match IPv4 entries. */
bool	px_cidr_match(const struct px_cidr *c, const struct sockaddr *sa);
bool	px_cidr_list_match(const struct px_cidr *list, size_t n,
	    const struct sockaddr *sa);
bool	px_sockaddr_is_wildcard(const struct sockaddr *sa);
/* Same family and address; ports are not compared. */
bool	px_sockaddr_same_host(const struct sockaddr *a, const struct sockaddr *b);
bool	px_sockaddr_is_loopback(const struct sockaddr *sa);
uint16_t px_sockaddr_port(const struct sockaddr *sa);
/* The length of an AF_INET or AF_INET6 address (sizeof sockaddr_in6 for
 * v6, sockaddr_in for anything else). */
socklen_t px_sockaddr_len(const struct sockaddr *sa);
/* Sets the port of an AF_INET or AF_INET6 address (host order in). */
void	px_sockaddr_set_port(struct sockaddr_storage *ss, uint16_t port);
/* Copies sa (of its own length) into ss, zeroing the rest. */
void	px_sockaddr_copy(struct sockaddr_storage *ss, const struct sockaddr *sa);
/* "1.2.3.4:80" / "[::1]:80"; always NUL-terminates; returns buf. */
#define PX_ADDRSTRLEN 64
char	*px_sockaddr_str(const struct sockaddr *sa, char *buf, size_t size);

/* A peer's string made safe for a log line: printable ASCII is kept and
 * every other byte becomes \xNN, so no value can end its field or fake
 * another. quoted (for key="value"): space is kept, '"' and '\' get a
 * backslash. Bare (key=value): space, '"' and '\' become \xNN too. Cut
 * to fit cap with "..." at the end. Always NUL-terminated; returns out. */
const char *px_log_escape(char *out, size_t cap, const char *in, size_t len,
	    bool quoted);

#endif
