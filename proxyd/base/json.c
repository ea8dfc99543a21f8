/* The JSON string escaper (json.h). */
#include "json.h"

#include <string.h>

#include <event2/buffer.h>

/* The strict form (no overlong forms, surrogates or code points above
 * U+10FFFF), as JSON readers such as Python's decode it. */
size_t
px_utf8_len(const unsigned char *s, size_t len)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		lo = s[0] == 0xe0 ? 0xa0 : 0x80;
		hi = s[0] == 0xed ? 0x9f : 0xbf;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		lo = s[0] == 0xf0 ? 0x90 : 0x80;
		hi = s[0] == 0xf4 ? 0x8f : 0xbf;
	} else
		return 0;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

size_t
px_json_escape(char *out, size_t cap, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0, i, n;

	for (i = 0; i < len && o + 6 < cap; i++) {
		unsigned char c = u[i];

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c >= 0x80 && (n = px_utf8_len(u + i, len - i)) != 0) {
			memcpy(out + o, s + i, n);
			o += n;
			i += n - 1;
		} else if (c < 0x20 || c >= 0x7f) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[c >> 4];
			out[o + 5] = hex[c & 15];
			o += 6;
		} else
			out[o++] = (char)c;
	}
	return o;
}

void
px_json_str(struct evbuffer *b, const char *v)
{
	size_t len = strlen(v);
	/* Room for the worst case, every byte as \u00XX, and the quotes. */
	size_t cap = 6 * len + 8, o;
	struct evbuffer_iovec vec;
	char *out;

	if (evbuffer_reserve_space(b, (ev_ssize_t)cap, &vec, 1) != 1)
		return;
	out = vec.iov_base;
	out[0] = '"';
	o = 1 + px_json_escape(out + 1, cap - 2, v, len);
	out[o++] = '"';
	vec.iov_len = o;
	evbuffer_commit_space(b, &vec, 1);
}
