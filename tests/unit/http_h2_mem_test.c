/* Unit tests for plugins/http/http_h2_mem.c: blocks of a page or more are
 * in page slots whose pages are resident only once written and handed
 * back when freed (the Rss of their mapping), read as zeros when made by calloc,
 * and keep their bytes through realloc; smaller blocks are malloc's; an
 * nghttp2 server session made with it takes a page of its frame buffer
 * and map in all once it has answered a client's preface. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "http/http_h2_mem.h"

#define FRAMEBUF	(16384 + 10)	/* nghttp2's output frame buffer */

/* Resident pages (Rss, /proc/self/smaps) of the mapping that holds p: a
 * page only read (the zero page) is not one. */
static size_t
resident(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long lo, hi, kb;
	bool in = false;
	size_t r = (size_t)-1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)	/* a mapping */
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (in && sscanf(line, "Rss: %lu kB", &kb) == 1) {
			r = kb * 1024 / (size_t)sysconf(_SC_PAGESIZE);
			break;
		}
	}
	fclose(f);
	assert_int_not_equal(r, (size_t)-1);
	return r;
}

static bool
all_zero(const unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void
t_pages_on_write(void **state)
{
	nghttp2_mem *m = http_h2_mem();
	unsigned char *p, *q;

	(void)state;
	/* nghttp2 makes its frame buffer by realloc(NULL) */
	p = m->realloc(NULL, FRAMEBUF, m->mem_user_data);
	assert_non_null(p);
	assert_true(http_h2_mem_paged(p));
	assert_int_equal(resident(p), 0);
	memset(p, 0xa5, 100);		/* a SETTINGS frame or two */
	assert_int_equal(resident(p), 1);
	memset(p, 0xa5, FRAMEBUF);
	assert_true(resident(p) >= 4);
	m->free(p, m->mem_user_data);
	/* handed back: the next block (the same slot, LIFO) has no page
	 * and reads as zeros */
	q = m->calloc(256, 16, m->mem_user_data);	/* nghttp2's map */
	assert_ptr_equal(q, p);
	assert_true(http_h2_mem_paged(q));
	assert_int_equal(resident(q), 0);
	assert_true(all_zero(q, FRAMEBUF));
	m->free(q, m->mem_user_data);
}

static void
t_small_and_realloc(void **state)
{
	nghttp2_mem *m = http_h2_mem();
	unsigned char *p, *q;
	size_t i;

	(void)state;
	p = m->malloc(1024, m->mem_user_data);
	assert_non_null(p);
	assert_false(http_h2_mem_paged(p));
	m->free(p, m->mem_user_data);
	p = m->calloc(3, 1000, m->mem_user_data);
	assert_false(http_h2_mem_paged(p));
	assert_true(all_zero(p, 3000));
	m->free(p, m->mem_user_data);
	m->free(NULL, m->mem_user_data);

	p = m->malloc(8192, m->mem_user_data);
	assert_true(http_h2_mem_paged(p));
	for (i = 0; i < 8192; i++)
		p[i] = (unsigned char)i;
	q = m->realloc(p, 16000, m->mem_user_data);	/* stays */
	assert_ptr_equal(q, p);
	q = m->realloc(p, 100000, m->mem_user_data);	/* past a slot */
	assert_non_null(q);
	assert_false(http_h2_mem_paged(q));
	for (i = 0; i < 8192; i++)
		assert_int_equal(q[i], (unsigned char)i);
	m->free(q, m->mem_user_data);
}

/* Many at once: more than a mapping holds, each its own slot. */
static void
t_many(void **state)
{
	nghttp2_mem *m = http_h2_mem();
	enum { N = 600 };
	static unsigned char *p[N];
	size_t i, j;

	(void)state;
	for (i = 0; i < N; i++) {
		p[i] = m->malloc(FRAMEBUF, m->mem_user_data);
		assert_true(http_h2_mem_paged(p[i]));
		memset(p[i], (int)(i & 0xff), 64);
		for (j = 0; j < i; j++)
			assert_ptr_not_equal(p[i], p[j]);
	}
	for (i = 0; i < N; i++) {
		assert_int_equal(p[i][63], (unsigned char)(i & 0xff));
		m->free(p[i], m->mem_user_data);
	}
}

static ssize_t
ng_send(nghttp2_session *s, const uint8_t *d, size_t len, int fl, void *u)
{
	(void)s; (void)d; (void)fl; (void)u;
	return (ssize_t)len;
}

/* A server session after the client's preface and SETTINGS, its SETTINGS
 * and the acknowledgement written: its map (its first big block, calloc,
 * only read) has no page, its frame buffer one; none once it is gone. */
static void
t_session(void **state)
{
	static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	    "\x00\x00\x00\x04\x00\x00\x00\x00\x00";	/* empty SETTINGS */
	nghttp2_session_callbacks *cb;
	nghttp2_session *s;
	nghttp2_mem *m = http_h2_mem();
	unsigned char *map, *fb;

	(void)state;
	/* the slots the next two big blocks take (a stack) */
	map = m->malloc(FRAMEBUF, m->mem_user_data);
	fb = m->malloc(FRAMEBUF, m->mem_user_data);
	m->free(fb, m->mem_user_data);
	m->free(map, m->mem_user_data);
	assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
	nghttp2_session_callbacks_set_send_callback(cb, ng_send);
	assert_int_equal(nghttp2_session_server_new3(&s, cb, NULL, NULL, m),
	    0);
	assert_true(http_h2_mem_paged(map));
	assert_true(http_h2_mem_paged(fb));
	assert_int_equal(nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL,
	    0), 0);
	assert_int_equal(nghttp2_session_mem_recv(s, preface,
	    sizeof(preface) - 1), (ssize_t)sizeof(preface) - 1);
	assert_int_equal(nghttp2_session_send(s), 0);
	/* their mapping holds no other block: one page in all */
	assert_int_equal(resident(fb), 1);
	nghttp2_session_del(s);
	nghttp2_session_callbacks_del(cb);
	assert_false(http_h2_mem_paged(map));
	assert_false(http_h2_mem_paged(fb));
	assert_int_equal(resident(fb), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_pages_on_write),
		cmocka_unit_test(t_small_and_realloc),
		cmocka_unit_test(t_many),
		cmocka_unit_test(t_session),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
