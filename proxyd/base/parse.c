/* Converters, sockaddr helpers and log escaping (parse.h). */
#include "parse.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* Reads decimal digits from *p; fails on overflow or no digits. */
static int
px_scan_digits(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 0;
}

static int
px_mul_checked(uint64_t v, uint64_t m, uint64_t *out)
{
	if (m != 0 && v > UINT64_MAX / m)
		return -1;
	*out = v * m;
	return 0;
}

int
px_parse_duration_ms(const char *s, bool allow_zero, uint64_t *out,
    const char **why)
{
	const char *p = s;
	uint64_t v, mult;

	if (px_scan_digits(&p, &v) == -1) {
		*why = "not a duration (expected a number and a unit: 500ms, 10s, 5m, 2h, 1d)";
		return -1;
	}
	if (*p == '\0') {
		if (v == 0 && allow_zero) {
			*out = 0;
			return 0;
		}
		*why = "duration needs a unit (ms, s, m, h, d)";
		return -1;
	}
	if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (strcmp(p, "s") == 0)
		mult = 1000;
	else if (strcmp(p, "m") == 0)
		mult = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		mult = 3600 * 1000;
	else if (strcmp(p, "d") == 0)
		mult = 86400 * 1000;
	else {
		*why = "unknown duration unit (use ms, s, m, h or d)";
		return -1;
	}
	if (px_mul_checked(v, mult, out) == -1) {
		*why = "duration too large";
		return -1;
	}
	if (*out == 0 && !allow_zero) {
		*why = "duration must be greater than zero";
		return -1;
	}
	return 0;
}

int
px_parse_size(const char *s, uint64_t *out, const char **why)
{
	const char *p = s;
	uint64_t v, mult = 1;

	if (px_scan_digits(&p, &v) == -1) {
		*why = "not a size (expected a number with an optional k, m or g)";
		return -1;
	}
	if (*p != '\0') {
		if (p[1] != '\0')
			goto bad_unit;
		switch (*p) {
		case 'k': case 'K': mult = 1ULL << 10; break;
		case 'm': case 'M': mult = 1ULL << 20; break;
		case 'g': case 'G': mult = 1ULL << 30; break;
		default: goto bad_unit;
		}
	}
	if (px_mul_checked(v, mult, out) == -1) {
		*why = "size too large";
		return -1;
	}
	return 0;
bad_unit:
	*why = "unknown size unit (use k, m or g)";
	return -1;
}

int
px_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    const char **why)
{
	const char *p = s;
	uint64_t v;

	if (px_scan_digits(&p, &v) == -1 || *p != '\0') {
		*why = "not a decimal number";
		return -1;
	}
	if (v < min || v > max) {
		*why = "number out of range";
		return -1;
	}
	*out = v;
	return 0;
}

int
px_parse_u32_any(const char *s, uint32_t *out, const char **why)
{
	uint64_t v = 0;
	const char *p;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		p = s + 2;
		if (*p == '\0')
			goto bad;
		for (; *p != '\0'; p++) {
			int d;

			if (*p >= '0' && *p <= '9')
				d = *p - '0';
			else if (*p >= 'a' && *p <= 'f')
				d = *p - 'a' + 10;
			else if (*p >= 'A' && *p <= 'F')
				d = *p - 'A' + 10;
			else
				goto bad;
			v = v * 16 + (uint64_t)d;
			if (v > UINT32_MAX)
				goto bad;
		}
	} else if (px_parse_uint(s, 0, UINT32_MAX, &v, why) == -1)
		goto bad;
	*out = (uint32_t)v;
	return 0;
bad:
	*why = "not a 32-bit number (decimal or 0x hex)";
	return -1;
}

int
px_parse_ip(const char *s, uint16_t port, struct sockaddr_storage *ss,
    socklen_t *len, const char **why)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof(*sin6);
		return 0;
	}
	*why = "not a numeric IPv4 or IPv6 address";
	return -1;
}

int
px_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    const char **why)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *hs;
	size_t hl;
	uint64_t port;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (end == NULL || end[1] != ':')
			goto bad;
		hs = s + 1;
		hl = (size_t)(end - hs);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || strchr(s, ':') != colon)
			goto bad;
		hs = s;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= sizeof(host))
		goto bad;
	memcpy(host, hs, hl);
	host[hl] = '\0';
	if (px_parse_uint(colon + 1, 1, 65535, &port, why) == -1) {
		*why = "port must be 1..65535";
		return -1;
	}
	return px_parse_ip(host, (uint16_t)port, ss, len, why);
bad:
	*why = "expected ADDRESS:PORT or [IPV6]:PORT";
	return -1;
}

int
px_parse_cidr(const char *s, size_t len, struct px_cidr *out, const char **why)
{
	char buf[INET6_ADDRSTRLEN + 8];
	char *slash;
	uint64_t prefix;
	unsigned max, i;

	if (len == 0 || len >= sizeof(buf)) {
		*why = "not a CIDR (expected ADDRESS or ADDRESS/PREFIX)";
		return -1;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		*why = "not a CIDR: bad address";
		return -1;
	}
	prefix = max;
	if (slash != NULL && px_parse_uint(slash + 1, 0, max, &prefix, why) == -1) {
		*why = "not a CIDR: prefix length out of range";
		return -1;
	}
	out->prefix = (uint8_t)prefix;
	for (i = 0; i < 16; i++) {
		unsigned bits = i * 8;

		if (bits >= prefix)
			out->addr[i] = 0;
		else if (bits + 8 > prefix)
			out->addr[i] &= (uint8_t)(0xff << (8 - (prefix - bits)));
	}
	return 0;
}

static bool
px_prefix_equal(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, net, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return (a[full] & (uint8_t)(0xff << (8 - rest))) == net[full];
}

bool
px_cidr_match(const struct px_cidr *c, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		return c->family == AF_INET &&
		    px_prefix_equal((const uint8_t *)&sin->sin_addr, c->addr,
		    c->prefix);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *a = sin6->sin6_addr.s6_addr;

		if (c->family == AF_INET6)
			return px_prefix_equal(a, c->addr, c->prefix);
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
			return px_prefix_equal(a + 12, c->addr, c->prefix);
	}
	return false;
}

bool
px_cidr_list_match(const struct px_cidr *list, size_t n,
    const struct sockaddr *sa)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (px_cidr_match(&list[i], sa))
			return true;
	return false;
}

bool
px_sockaddr_is_wildcard(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		    htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
		    &((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

bool
px_sockaddr_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		    ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		    &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

bool
px_sockaddr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
		    24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
		    &((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

uint16_t
px_sockaddr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

socklen_t
px_sockaddr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
	    sizeof(struct sockaddr_in);
}

void
px_sockaddr_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
}

void
px_sockaddr_copy(struct sockaddr_storage *ss, const struct sockaddr *sa)
{
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, sa, px_sockaddr_len(sa));
}

char *
px_sockaddr_str(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) {
		snprintf(buf, size, "-");
		return buf;
	}
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(sin->sin_port));
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(sin6->sin6_port));
	}
	return buf;
}

/* Escapes in[0..len) into out while it fits in room (NUL not counted);
 * returns how many input bytes went in, *used the output length. */
static size_t
px_escape_into(char *out, size_t room, const char *in, size_t len,
    bool quoted, size_t *used)
{
	size_t o = 0, k;

	for (k = 0; k < len; k++) {
		unsigned char c = (unsigned char)in[k];
		bool plain = (c > 0x20 && c < 0x7f && c != '"' && c != '\\') ||
		    (quoted && c == ' ');
		size_t need = plain ? 1 : quoted && (c == '"' || c == '\\') ?
		    2 : 4;

		if (o + need > room)
			break;
		if (plain)
			out[o++] = (char)c;
		else if (need == 2) {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else {
			snprintf(out + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	*used = o;
	return k;
}

const char *
px_log_escape(char *out, size_t cap, const char *in, size_t len, bool quoted)
{
	size_t o;

	if (cap == 0)
		return out;
	if (px_escape_into(out, cap - 1, in, len, quoted, &o) < len) {
		/* Cut: make room for the "..." that says so. */
		o = 0;
		if (cap > 4)
			(void)px_escape_into(out, cap - 4, in, len, quoted, &o);
		memcpy(out + o, "...", cap - 1 - o < 3 ? cap - 1 - o : 3);
		o += cap - 1 - o < 3 ? cap - 1 - o : 3;
	}
	out[o] = '\0';
	return out;
}
