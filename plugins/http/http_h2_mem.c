/* nghttp2's allocator for proxyd's HTTP/2 sessions. Every session
 * allocates at its start a 16 KiB output frame buffer and a 4 KiB stream
 * map (nghttp2 1.52), whatever its options: from malloc, on memory other
 * connections' TLS handshakes had just written, they were 20 of the 39 KiB
 * an idle client connection cost. Here blocks of a page or more come from
 * slots of anonymous mappings instead: a page takes memory only once
 * written (an idle connection wrote its SETTINGS in the first page of its
 * frame buffer, nothing in its map), and a freed slot's pages are handed
 * back at once (MADV_DONTNEED: the slot reads as zeros again, so calloc
 * costs nothing). Smaller blocks, and any once the slots run out, come
 * from malloc. Big blocks are made when a session starts, ends, or grows
 * past what it had (more streams, a header block over 16 KiB): not per
 * request. Slots are shared by the workers under one mutex (a few
 * operations per connection). */
#include "http_h2_mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* LeakSanitizer looks for pointers in no mapping of ours: what nghttp2
 * keeps in them (its stream map's pointers) is shown to it. */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#define H2M_LSAN_ROOT(p, n)	__lsan_register_root_region((p), (n))
#else
#define H2M_LSAN_ROOT(p, n)	((void)(p), (void)(n))
#endif

/* Blocks of H2M_MIN bytes up to a slot go to slots: a slot holds
 * nghttp2's frame buffer (16384 + 10 bytes). */
#define H2M_MIN			4096
#define H2M_SLOT_MIN		(20 * 1024)
#define H2M_CHUNK_SLOTS		256		/* a mapping: 5 MiB of addresses */
#define H2M_CHUNKS		256		/* then malloc */

struct h2m_chunk {
	uintptr_t	 base;
	uint32_t	 used[H2M_CHUNK_SLOTS];	/* bytes asked; 0: free */
	uint16_t	 free[H2M_CHUNK_SLOTS];	/* free slots, a stack */
	unsigned	 nfree;
};

static pthread_mutex_t h2m_lock = PTHREAD_MUTEX_INITIALIZER;
static struct h2m_chunk *h2m_chunks[H2M_CHUNKS];
static unsigned h2m_nchunks;
static size_t h2m_slot;			/* H2M_SLOT_MIN in whole pages; set
					 * with the first mapping */
static bool h2m_full;			/* no more mappings: malloc */

/* A new mapping of slots; under h2m_lock. NULL: none (malloc then). */
static struct h2m_chunk *
h2m_chunk_new(void)
{
	struct h2m_chunk *k;
	long pg;
	void *p;
	unsigned i;

	if (h2m_full || h2m_nchunks == H2M_CHUNKS)
		return NULL;
	if (h2m_slot == 0) {
		if ((pg = sysconf(_SC_PAGESIZE)) <= 0)
			pg = 4096;
		h2m_slot = ((size_t)H2M_SLOT_MIN + (size_t)pg - 1) /
		    (size_t)pg * (size_t)pg;
	}
	if ((k = malloc(sizeof(*k))) == NULL)
		return NULL;
	p = mmap(NULL, h2m_slot * H2M_CHUNK_SLOTS,
	    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		h2m_full = true;	/* address space or commit refused */
		free(k);
		return NULL;
	}
	H2M_LSAN_ROOT(p, h2m_slot * H2M_CHUNK_SLOTS);
	k->base = (uintptr_t)p;
	memset(k->used, 0, sizeof(k->used));
	for (i = 0; i < H2M_CHUNK_SLOTS; i++)
		k->free[i] = (uint16_t)(H2M_CHUNK_SLOTS - 1 - i);
	k->nfree = H2M_CHUNK_SLOTS;
	h2m_chunks[h2m_nchunks++] = k;
	return k;
}

/* A slot for size bytes (zeros); NULL: none. */
static void *
h2m_slot_get(size_t size)
{
	struct h2m_chunk *k = NULL;
	unsigned i, s;
	void *p = NULL;

	pthread_mutex_lock(&h2m_lock);
	for (i = 0; i < h2m_nchunks; i++)
		if (h2m_chunks[i]->nfree != 0) {
			k = h2m_chunks[i];
			break;
		}
	if (k == NULL)
		k = h2m_chunk_new();
	if (k != NULL) {
		s = k->free[--k->nfree];
		k->used[s] = (uint32_t)size;
		p = (void *)(k->base + (uintptr_t)s * h2m_slot);
	}
	pthread_mutex_unlock(&h2m_lock);
	return p;
}

/* The chunk whose slot holds p, its slot in *slot; NULL: p is malloc's.
 * Under h2m_lock. */
static struct h2m_chunk *
h2m_find(uintptr_t p, unsigned *slot)
{
	size_t len = h2m_slot * H2M_CHUNK_SLOTS;
	unsigned i;

	for (i = 0; i < h2m_nchunks; i++)
		if (p >= h2m_chunks[i]->base && p - h2m_chunks[i]->base < len) {
			*slot = (unsigned)((p - h2m_chunks[i]->base) /
			    h2m_slot);
			return h2m_chunks[i];
		}
	return NULL;
}

/* Bytes asked for the slot block p; 0: p is malloc's. */
static size_t
h2m_used(const void *p)
{
	struct h2m_chunk *k;
	unsigned s = 0;
	size_t n = 0;

	pthread_mutex_lock(&h2m_lock);
	if ((k = h2m_find((uintptr_t)p, &s)) != NULL)
		n = k->used[s];
	pthread_mutex_unlock(&h2m_lock);
	return n;
}

static void
h2m_free(void *p, void *ud)
{
	struct h2m_chunk *k;
	unsigned s = 0;

	(void)ud;
	if (p == NULL)
		return;
	if (h2m_used(p) == 0) {
		free(p);
		return;
	}
	/* Zeros again, and no memory, before another may take it. */
	if (madvise(p, h2m_slot, MADV_DONTNEED) != 0)
		memset(p, 0, h2m_slot);
	pthread_mutex_lock(&h2m_lock);
	k = h2m_find((uintptr_t)p, &s);
	k->used[s] = 0;
	k->free[k->nfree++] = (uint16_t)s;
	pthread_mutex_unlock(&h2m_lock);
}

static void *
h2m_malloc(size_t size, void *ud)
{
	void *p;

	(void)ud;
	if (size >= H2M_MIN && size <= H2M_SLOT_MIN &&
	    (p = h2m_slot_get(size)) != NULL)
		return p;
	return malloc(size);
}

static void *
h2m_calloc(size_t n, size_t size, void *ud)
{
	void *p;

	(void)ud;
	if (size != 0 && n <= H2M_SLOT_MIN / size &&
	    n * size >= H2M_MIN && (p = h2m_slot_get(n * size)) != NULL)
		return p;	/* a free slot reads as zeros */
	return calloc(n, size);
}

static void *
h2m_realloc(void *p, size_t size, void *ud)
{
	struct h2m_chunk *k;
	size_t old;
	unsigned s = 0;
	void *np;

	if (p == NULL)
		return h2m_malloc(size, ud);
	if ((old = h2m_used(p)) == 0)
		return realloc(p, size);
	if (size == 0) {
		h2m_free(p, ud);
		return NULL;
	}
	if (size <= H2M_SLOT_MIN) {
		pthread_mutex_lock(&h2m_lock);
		k = h2m_find((uintptr_t)p, &s);
		k->used[s] = (uint32_t)size;
		pthread_mutex_unlock(&h2m_lock);
		return p;
	}
	if ((np = malloc(size)) == NULL)
		return NULL;
	memcpy(np, p, old);
	h2m_free(p, ud);
	return np;
}

static nghttp2_mem h2m_mem = {
	.mem_user_data = NULL,
	.malloc = h2m_malloc,
	.free = h2m_free,
	.calloc = h2m_calloc,
	.realloc = h2m_realloc,
};

nghttp2_mem *
http_h2_mem(void)
{
	return &h2m_mem;
}

bool
http_h2_mem_paged(const void *p)
{
	return p != NULL && h2m_used(p) != 0;
}
