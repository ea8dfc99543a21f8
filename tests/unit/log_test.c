/* Unit tests for proxyd/base/log.c: a line read back into fields (the
 * JSON and journal forms) gives back every value as it was before
 * px_log_escape wrote it. The parser and the JSON writer are static: the
 * file is compiled in here (log.o from the library is then not linked,
 * this object defines all it does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../proxyd/base/log.c"
#include "parse.h"

/* xorshift64*: the same values on every run; the seed is printed. */
static uint64_t rng_state;

static uint32_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

/* A value made of what breaks naive parsers: spaces, quotes, backslashes
 * (also before x and hex digits, as in a file named "a\x41"), '=' and
 * key-like text, control bytes, UTF-8 of 2 to 4 bytes, stray bytes. */
static size_t
random_value(char *v, size_t cap)
{
	static const char *const atoms[] = {
		" ", "\"", "\\", "\\x41", "\\\"", "=", "k=v", " end=x ", "x",
		"a b", "\n", "\r", "\t", "\x01", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
		"\xf0\x9f\x98\x80", "\xff", "\xc3", "\xed\xa0\x80", "...", "0",
		"12", "-3.5", "\x00",
	};
	size_t n = 0, k, count = rng() % 12;

	for (k = 0; k < count; k++) {
		const char *a;
		size_t alen;

		if (rng() % 5 == 0) {
			char b = (char)(rng() & 0xff);

			if (n + 1 > cap)
				break;
			v[n++] = b;
			continue;
		}
		a = atoms[rng() % (sizeof(atoms) / sizeof(atoms[0]))];
		alen = a[0] == '\0' ? 1 : strlen(a);
		if (n + alen > cap)
			break;
		memcpy(v + n, a, alen);
		n += alen;
	}
	return n;
}

/* The JSON string starting after the quote at *p, decoded: \uXXXX below
 * U+0100 as that byte (how px_json_escape writes stray bytes and controls),
 * other text byte for byte. -1 when it is not what px_json_escape writes. */
static ssize_t
json_unstr(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t n = 0;
	unsigned v;

	while (*s != '"') {
		if (*s == '\0' || (unsigned char)*s < 0x20 || n >= cap)
			return -1;
		if (*s == '\\' && (s[1] == '"' || s[1] == '\\')) {
			out[n++] = s[1];
			s += 2;
		} else if (*s == '\\' && s[1] == 'u') {
			if (sscanf(s + 2, "%4x", &v) != 1 || v > 0xff)
				return -1;
			out[n++] = (char)v;
			s += 6;
		} else if (*s == '\\')
			return -1;
		else
			out[n++] = *s++;
	}
	*p = s + 1;
	return (ssize_t)n;
}

/* Is every byte of the line valid UTF-8 with no raw control byte? */
static bool
json_line_clean(const char *s, size_t len)
{
	size_t i = 0, n;

	while (i < len) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x80) {
			if (c < 0x20 && !(c == '\n' && i == len - 1))
				return false;
			i++;
		} else if ((n = px_utf8_len((const unsigned char *)s + i,
		    len - i)) == 0)
			return false;
		else
			i += n;
	}
	return true;
}

/* Random values, escaped as the logger does, parsed back: the same
 * bytes, in the fields and in the JSON line. */
static void
test_round_trip(void **state)
{
	uint64_t seed = 0x5eed0fa11ULL;
	int iter;

	(void)state;
	rng_state = seed;
	print_message("log_test seed %#llx\n", (unsigned long long)seed);
	for (iter = 0; iter < 20000; iter++) {
		char v1[64], v2[64], e1[260], e2[260], line[PX_LOG_LINE];
		char json[PX_LOG_LINE * 16], got[PX_LOG_LINE];
		struct px_log_parsed pl;
		size_t l1 = random_value(v1, 40), l2 = random_value(v2, 40);
		const char *j, *tail;
		ssize_t g;
		int len;

		px_log_escape(e1, sizeof(e1), v1, l1, true);
		px_log_escape(e2, sizeof(e2), v2, l2, true);
		len = snprintf(line, sizeof(line), "#7 ftp-command user=u "
		    "arg=\"%s\" n=42 why=\"%s\" q=\"17\" end=a \"b\" c", e1, e2);
		assert_true(len > 0 && (size_t)len < sizeof(line));
		px_log_parse(7, line, (size_t)len, &pl);
		if (pl.nkv != 6)
			fail_msg("iter %d: %zu fields in %s", iter, pl.nkv, line);
		assert_memory_equal(pl.event, "ftp-command", 11);
		assert_int_equal(pl.kv[1].vlen, l1);
		if (l1 != 0 && memcmp(pl.kv[1].v, v1, l1) != 0)
			fail_msg("iter %d: arg does not round-trip: %s", iter,
			    line);
		assert_int_equal(pl.kv[3].vlen, l2);
		if (l2 != 0 && memcmp(pl.kv[3].v, v2, l2) != 0)
			fail_msg("iter %d: why does not round-trip: %s", iter,
			    line);
		assert_memory_equal(pl.kv[2].k, "n", 1);
		assert_memory_equal(pl.kv[2].v, "42", 2);
		assert_false(pl.kv[2].quoted);
		assert_true(pl.kv[4].quoted);
		assert_int_equal(pl.kv[5].vlen, 7);
		assert_memory_equal(pl.kv[5].v, "a \"b\" c", 7);

		/* The JSON form carries the same bytes, typed as written. */
		len = (int)px_log_json(json, sizeof(json), "T", LOG_INFO, 7,
		    line, strlen(line));
		if (!json_line_clean(json, (size_t)len))
			fail_msg("iter %d: raw control or bad UTF-8 in %.*s",
			    iter, len, json);
		j = strstr(json, ",\"arg\":\"");
		assert_non_null(j);
		j += 8;
		g = json_unstr(&j, got, sizeof(got));
		if (g != (ssize_t)l1 || (l1 != 0 && memcmp(got, v1, l1) != 0))
			fail_msg("iter %d: JSON arg differs: %.*s", iter, len,
			    json);
		assert_memory_equal(j, ",\"n\":42,\"why\":\"", 15);
		j += 15;
		g = json_unstr(&j, got, sizeof(got));
		if (g != (ssize_t)l2 || (l2 != 0 && memcmp(got, v2, l2) != 0))
			fail_msg("iter %d: JSON why differs: %.*s", iter, len,
			    json);
		tail = ",\"q\":\"17\",\"end\":\"a \\\"b\\\" c\"";
		assert_memory_equal(j, tail, strlen(tail));
	}
}

/* Hand-picked: the issue's own lines, a line cut inside a quoted value,
 * a bare value that is not decoded. */
static void
test_cases(void **state)
{
	static const char l1[] = "#3 ftp-command user=bob cmd=RETR "
	    "arg=\"my file \\\"x\\\" \\\\ y\" verdict=deny reason=path";
	static const char l2[] = "http-error status=502 reason=\"URL too "
	    "long\" (after part of the response) detail=x";
	static const char l3[] = "http-request path=/a\\x41\"b status=200 "
	    "arg=\"cut \\x4";
	struct px_log_parsed pl;

	(void)state;
	px_log_parse(3, l1, sizeof(l1) - 1, &pl);
	assert_int_equal(pl.nkv, 5);
	assert_int_equal(pl.kv[2].vlen, strlen("my file \"x\" \\ y"));
	assert_memory_equal(pl.kv[2].v, "my file \"x\" \\ y", pl.kv[2].vlen);
	assert_memory_equal(pl.kv[4].v, "path", 4);

	px_log_parse(0, l2, sizeof(l2) - 1, &pl);
	assert_int_equal(pl.nkv, 3);
	assert_int_equal(pl.kv[1].vlen, strlen("URL too long"));
	assert_memory_equal(pl.kv[1].v, "URL too long", pl.kv[1].vlen);
	assert_memory_equal(pl.kv[2].k, "detail", 6);

	px_log_parse(0, l3, sizeof(l3) - 1, &pl);
	assert_int_equal(pl.nkv, 3);
	assert_int_equal(pl.kv[0].vlen, strlen("/a\\x41\"b"));
	assert_memory_equal(pl.kv[0].v, "/a\\x41\"b", pl.kv[0].vlen);
	assert_int_equal(pl.kv[2].vlen, strlen("cut \\x4"));
	assert_memory_equal(pl.kv[2].v, "cut \\x4", pl.kv[2].vlen);
}

/* "EVENT WORD key=value ...": the word is the first field, "kind"
 * (data-transfer's direction); free text with a bare word stays text. */
static void
test_event_word(void **state)
{
	static const char l1[] = "#9 data-transfer download cmd=RETR "
	    "file=\"a \\\"b\\\" c.bin\" bytes=3000 to-client=3000 "
	    "duration=0.004 end=ok";
	static const char l2[] = "data-transfer - cmd=- file=\"\" bytes=0 "
	    "end=timeout: no data connection";
	static const char *text[] = {
		"service web: plug on 127.0.0.1:1 mode=fixed -> 127.0.0.1:2",
		"running as user nobody (uid 65534, gid 65534), no_new_privs",
		"admin endpoint on http://127.0.0.1:9180/metrics",
		"open-file limit 20000 is below the 20512 that max-sessions=1",
		"reload done: 1 service",
		"word word word key=value",
		"event word",
		"event word ",
	};
	char json[PX_LOG_LINE * 16];
	struct px_log_parsed pl;
	const char *want;
	size_t i, n;

	(void)state;
	px_log_parse(9, l1, sizeof(l1) - 1, &pl);
	assert_int_equal(pl.eventlen, 13);
	assert_memory_equal(pl.event, "data-transfer", 13);
	assert_int_equal(pl.nkv, 7);
	assert_int_equal(pl.kv[0].klen, 4);
	assert_memory_equal(pl.kv[0].k, "kind", 4);
	assert_int_equal(pl.kv[0].vlen, 8);
	assert_memory_equal(pl.kv[0].v, "download", 8);
	assert_memory_equal(pl.kv[1].k, "cmd", 3);
	assert_int_equal(pl.kv[2].vlen, strlen("a \"b\" c.bin"));
	assert_memory_equal(pl.kv[2].v, "a \"b\" c.bin", pl.kv[2].vlen);
	n = px_log_json(json, sizeof(json), "T", LOG_INFO, 9, l1,
	    sizeof(l1) - 1);
	json[n] = '\0';
	want = "{\"ts\":\"T\",\"level\":\"info\",\"session\":9,"
	    "\"event\":\"data-transfer\",\"kind\":\"download\","
	    "\"cmd\":\"RETR\",\"file\":\"a \\\"b\\\" c.bin\","
	    "\"bytes\":3000,\"to-client\":3000,\"duration\":0.004,"
	    "\"end\":\"ok\",\"msg\":";
	if (strncmp(json, want, strlen(want)) != 0)
		fail_msg("got %s", json);

	px_log_parse(0, l2, sizeof(l2) - 1, &pl);
	assert_int_equal(pl.nkv, 5);
	assert_int_equal(pl.kv[0].vlen, 1);
	assert_memory_equal(pl.kv[0].v, "-", 1);
	assert_int_equal(pl.kv[4].vlen, strlen("timeout: no data connection"));

	for (i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
		px_log_parse(0, text[i], strlen(text[i]), &pl);
		if (pl.eventlen != 0 || pl.nkv != 0)
			fail_msg("free text read as an event: %s", text[i]);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_event_word),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
