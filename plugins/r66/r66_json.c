/* R66's JSON reader (see r66_json.h): a strict scanner over (ptr, len) for
 * the flat objects R66 sends, no allocation. Apart from the frame codec
 * because it is a grammar of its own (strings, escapes, surrogates, nesting)
 * that the codec, the analyser (JsonCommand) and the tests each use. */
#include "r66_json.h"

#include <string.h>

#define R66_JSON_DEPTH	16	/* nesting skipped in values we do not read */

static size_t
r66_json_ws(const uint8_t *p, size_t len, size_t i)
{
	while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' ||
	    p[i] == '\r'))
		i++;
	return i;
}

static int
r66_hex4(const uint8_t *p, uint32_t *v)
{
	int k;

	*v = 0;
	for (k = 0; k < 4; k++) {
		uint8_t c = p[k];

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

/* Appends one byte; -1 when out is full (out NULL: count only). */
static int
r66_out(char *out, size_t cap, size_t *o, uint8_t c)
{
	if (out != NULL) {
		if (*o + 1 >= cap)
			return -1;
		out[*o] = (char)c;
	}
	(*o)++;
	return 0;
}

/* p[*i] == '"'. Unescapes into out (NUL-terminated) unless out is NULL. */
static int
r66_json_string(const uint8_t *p, size_t len, size_t *i, char *out,
    size_t cap)
{
	size_t k = *i + 1, o = 0;

	if (out != NULL && cap == 0)
		return -1;
	while (k < len) {
		uint8_t c = p[k];
		uint32_t u, lo;

		if (c == '"') {
			if (out != NULL)
				out[o] = '\0';
			*i = k + 1;
			return 0;
		}
		if (c < 0x20)
			return -1;
		if (c != '\\') {
			if (r66_out(out, cap, &o, c) == -1)
				return -1;
			k++;
			continue;
		}
		if (++k >= len)
			return -1;
		c = p[k++];
		switch (c) {
		case '"': case '\\': case '/':
			break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u':
			if (len - k < 4 || r66_hex4(p + k, &u) == -1)
				return -1;
			k += 4;
			if (u == 0 || (u >= 0xdc00 && u <= 0xdfff))
				return -1;
			if (u >= 0xd800 && u <= 0xdbff) {
				if (len - k < 6 || p[k] != '\\' || p[k + 1] != 'u' ||
				    r66_hex4(p + k + 2, &lo) == -1 ||
				    lo < 0xdc00 || lo > 0xdfff)
					return -1;
				k += 6;
				u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (u < 0x80) {
				if (r66_out(out, cap, &o, (uint8_t)u) == -1)
					return -1;
			} else if (u < 0x800) {
				if (r66_out(out, cap, &o, (uint8_t)(0xc0 | u >> 6)) == -1 ||
				    r66_out(out, cap, &o, (uint8_t)(0x80 | (u & 0x3f))) == -1)
					return -1;
			} else if (u < 0x10000) {
				if (r66_out(out, cap, &o, (uint8_t)(0xe0 | u >> 12)) == -1 ||
				    r66_out(out, cap, &o, (uint8_t)(0x80 | ((u >> 6) & 0x3f))) == -1 ||
				    r66_out(out, cap, &o, (uint8_t)(0x80 | (u & 0x3f))) == -1)
					return -1;
			} else {
				if (r66_out(out, cap, &o, (uint8_t)(0xf0 | u >> 18)) == -1 ||
				    r66_out(out, cap, &o, (uint8_t)(0x80 | ((u >> 12) & 0x3f))) == -1 ||
				    r66_out(out, cap, &o, (uint8_t)(0x80 | ((u >> 6) & 0x3f))) == -1 ||
				    r66_out(out, cap, &o, (uint8_t)(0x80 | (u & 0x3f))) == -1)
					return -1;
			}
			continue;
		default:
			return -1;
		}
		if (r66_out(out, cap, &o, c) == -1)
			return -1;
	}
	return -1;
}

/* A scalar token (number, true, false, null): its end. */
static int
r66_json_scalar(const uint8_t *p, size_t len, size_t *i)
{
	size_t k = *i;

	while (k < len && ((p[k] >= '0' && p[k] <= '9') || p[k] == '-' ||
	    p[k] == '+' || p[k] == '.' || p[k] == 'e' || p[k] == 'E' ||
	    (p[k] >= 'a' && p[k] <= 'z')))
		k++;
	if (k == *i)
		return -1;
	*i = k;
	return 0;
}

static int
r66_json_skip(const uint8_t *p, size_t len, size_t *i, int depth)
{
	size_t k = r66_json_ws(p, len, *i);
	uint8_t close;

	if (k >= len || depth > R66_JSON_DEPTH)
		return -1;
	if (p[k] == '"') {
		if (r66_json_string(p, len, &k, NULL, 0) == -1)
			return -1;
		*i = k;
		return 0;
	}
	if (p[k] != '{' && p[k] != '[') {
		if (r66_json_scalar(p, len, &k) == -1)
			return -1;
		*i = k;
		return 0;
	}
	close = p[k] == '{' ? '}' : ']';
	k = r66_json_ws(p, len, k + 1);
	if (k < len && p[k] == close) {
		*i = k + 1;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			k = r66_json_ws(p, len, k);
			if (k >= len || p[k] != '"' ||
			    r66_json_string(p, len, &k, NULL, 0) == -1)
				return -1;
			k = r66_json_ws(p, len, k);
			if (k >= len || p[k] != ':')
				return -1;
			k++;
		}
		if (r66_json_skip(p, len, &k, depth + 1) == -1)
			return -1;
		k = r66_json_ws(p, len, k);
		if (k >= len)
			return -1;
		if (p[k] == close) {
			*i = k + 1;
			return 0;
		}
		if (p[k] != ',')
			return -1;
		k++;
	}
}

int
r66_json_get(const uint8_t *p, size_t len, const char *key, char *buf,
    size_t bufsz, bool *is_string)
{
	char kbuf[64];
	size_t i, start;
	int found = 0;

	i = r66_json_ws(p, len, 0);
	if (i >= len || p[i] != '{')
		return -1;
	i = r66_json_ws(p, len, i + 1);
	if (i < len && p[i] == '}')
		return r66_json_ws(p, len, i + 1) == len ? 0 : -1;
	for (;;) {
		bool match;

		i = r66_json_ws(p, len, i);
		if (i >= len || p[i] != '"')
			return -1;
		start = i;
		if (r66_json_string(p, len, &i, kbuf, sizeof(kbuf)) == 0)
			match = strcmp(kbuf, key) == 0;
		else {
			/* longer than any key we look for */
			i = start;
			if (r66_json_string(p, len, &i, NULL, 0) == -1)
				return -1;
			match = false;
		}
		i = r66_json_ws(p, len, i);
		if (i >= len || p[i] != ':')
			return -1;
		i = r66_json_ws(p, len, i + 1);
		if (i >= len)
			return -1;
		if (match) {
			/* A repeated key would let two parsers disagree. */
			if (found)
				return -1;
			found = 1;
			if (p[i] == '"') {
				if (r66_json_string(p, len, &i, buf, bufsz) == -1)
					return -1;
				*is_string = true;
			} else if (p[i] == '{' || p[i] == '[') {
				return -1;
			} else {
				start = i;
				if (r66_json_scalar(p, len, &i) == -1 ||
				    i - start >= bufsz)
					return -1;
				memcpy(buf, p + start, i - start);
				buf[i - start] = '\0';
				*is_string = false;
			}
		} else if (r66_json_skip(p, len, &i, 1) == -1)
			return -1;
		i = r66_json_ws(p, len, i);
		if (i >= len)
			return -1;
		if (p[i] == '}')
			break;
		if (p[i] != ',')
			return -1;
		i++;
	}
	if (r66_json_ws(p, len, i + 1) != len)
		return -1;
	return found;
}
