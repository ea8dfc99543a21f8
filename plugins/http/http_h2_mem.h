/* nghttp2's allocator for proxyd's HTTP/2 sessions (http_h2_mem.c): its
 * page-sized blocks take memory only for the pages written. */
#ifndef HTTP_H2_MEM_H
#define HTTP_H2_MEM_H

#include <stdbool.h>

#include <nghttp2/nghttp2.h>

/* For nghttp2_session_*_new3 (nghttp2 copies it; any thread). */
nghttp2_mem	*http_h2_mem(void);
/* p was given by http_h2_mem() from its page slots (the unit test). */
bool		 http_h2_mem_paged(const void *p);

#endif
