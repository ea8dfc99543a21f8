/* The user-space half of splice="sockmap" (see sockmap.h). */
#include "sockmap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

/* <linux/tcp.h> for tcpi_bytes_acked; it clashes with <netinet/tcp.h>. */
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "log.h"

static atomic_bool px_sm_wanted;
static char px_sm_status[512];
static bool px_sm_ok;

void
px_sockmap_want(void)
{
	atomic_store(&px_sm_wanted, true);
}

bool
px_sockmap_wanted(void)
{
	return atomic_load(&px_sm_wanted);
}

bool
px_sockmap_loaded(void)
{
	return px_sm_ok;
}

void
px_sockmap_log(void)
{
	if (px_sm_status[0] != '\0')
		px_log(px_sm_ok ? LOG_INFO : LOG_WARNING, 0, "%s", px_sm_status);
}

uint64_t
px_sockmap_written(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int outq = 0;

	/* Acked first, then queued: an ACK in between can only make the
	 * sum too small (wait a little longer), never too large (a FIN
	 * ahead of bytes still in the redirect queue). */
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1 ||
	    len < sizeof(ti) || ioctl(fd, SIOCOUTQ, &outq) == -1)
		return 0;
	return ti.tcpi_bytes_acked + (uint64_t)(outq > 0 ? outq : 0);
}

#ifdef PX_HAVE_SOCKMAP

#include <sys/mman.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sockmap_keys.h"

#define PX_SM_SLOTS	(PX_SOCKMAP_KEYS / 2)

/* The compiled program, embedded at build time (cmake/embed_bpf.cmake). */
extern const unsigned char px_sockmap_obj[];
extern const unsigned long px_sockmap_obj_len;

static struct bpf_object *px_sm_obj;
static int px_sm_peers = -1, px_sm_srcs = -1, px_sm_keys = -1;
static int px_sm_prog = -1;
static volatile uint64_t *px_sm_bytes;	/* mmap of px_bytes */
static size_t px_sm_bytes_len;

/* Free slots, shared by the workers: taken once per session. */
static pthread_mutex_t px_sm_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t px_sm_free[PX_SM_SLOTS];
static uint32_t px_sm_nfree;

/* libbpf's last complaint, for the one line said about a failure. */
static char px_sm_libbpf_msg[160];

static int
px_sm_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char *nl;

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(px_sm_libbpf_msg, sizeof(px_sm_libbpf_msg), fmt, ap);
	if ((nl = strchr(px_sm_libbpf_msg, '\n')) != NULL)
		*nl = '\0';
	return 0;
}

static int
px_sm_fail(const char *what, int err)
{
	snprintf(px_sm_status, sizeof(px_sm_status), "sockmap: cannot %s: %s%s%s%s; "
	    "services with splice=\"sockmap\" splice instead", what,
	    strerror(err), err == EPERM ? " (needs root or CAP_BPF and "
	    "CAP_NET_ADMIN)" : "", px_sm_libbpf_msg[0] != '\0' ? "; libbpf: " : "",
	    px_sm_libbpf_msg);
	px_sockmap_unload();
	return -1;
}

static int
px_sm_map_fd(const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(px_sm_obj, name);

	return m != NULL ? bpf_map__fd(m) : -1;
}

int
px_sockmap_load(void)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "px_sockmap");
	struct bpf_program *prog;
	uint32_t i;
	int err;

	libbpf_set_print(px_sm_print);
	px_sm_obj = bpf_object__open_mem(px_sockmap_obj, px_sockmap_obj_len,
	    &opts);
	if (px_sm_obj == NULL)
		return px_sm_fail("open the BPF object", errno);
	if ((err = bpf_object__load(px_sm_obj)) != 0)
		return px_sm_fail("load the BPF program", -err);
	prog = bpf_object__find_program_by_name(px_sm_obj, "px_verdict");
	px_sm_prog = prog != NULL ? bpf_program__fd(prog) : -1;
	px_sm_peers = px_sm_map_fd("px_peers");
	px_sm_srcs = px_sm_map_fd("px_srcs");
	px_sm_keys = px_sm_map_fd("px_keys");
	if (px_sm_prog < 0 || px_sm_peers < 0 || px_sm_srcs < 0 ||
	    px_sm_keys < 0 || px_sm_map_fd("px_bytes") < 0)
		return px_sm_fail("find the BPF maps", ENOENT);
	if (bpf_prog_attach(px_sm_prog, px_sm_srcs, BPF_SK_SKB_STREAM_VERDICT,
	    0) != 0)
		return px_sm_fail("attach the verdict program", errno);
	px_sm_bytes_len = (size_t)PX_SOCKMAP_KEYS * sizeof(uint64_t);
	px_sm_bytes = mmap(NULL, px_sm_bytes_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED, px_sm_map_fd("px_bytes"), 0);
	if (px_sm_bytes == MAP_FAILED) {
		px_sm_bytes = NULL;
		return px_sm_fail("map the byte counters", errno);
	}
	for (i = 0; i < PX_SM_SLOTS; i++)
		px_sm_free[i] = PX_SM_SLOTS - 1 - i;
	px_sm_nfree = PX_SM_SLOTS;
	px_sm_ok = true;
	snprintf(px_sm_status, sizeof(px_sm_status), "sockmap: BPF relay "
	    "loaded (%u sessions at once)", PX_SM_SLOTS);
	return 0;
}

void
px_sockmap_unload(void)
{
	px_sm_ok = false;
	if (px_sm_bytes != NULL)
		munmap((void *)px_sm_bytes, px_sm_bytes_len);
	px_sm_bytes = NULL;
	if (px_sm_obj != NULL)
		bpf_object__close(px_sm_obj);
	px_sm_obj = NULL;
	px_sm_peers = px_sm_srcs = px_sm_keys = px_sm_prog = -1;
}

static void
px_sm_put_slot(uint32_t slot)
{
	pthread_mutex_lock(&px_sm_lock);
	px_sm_free[px_sm_nfree++] = slot;
	pthread_mutex_unlock(&px_sm_lock);
}

int
px_sockmap_attach(struct px_sockmap_link *l, const int fd[2])
{
	socklen_t len;
	uint32_t key, v;
	int side, one = 1, err;

	if (!px_sm_ok) {
		errno = ENOTSUP;
		return -1;
	}
	for (side = 0; side < 2; side++) {
		len = sizeof(l->cookie[side]);
		if (getsockopt(fd[side], SOL_SOCKET, SO_COOKIE,
		    &l->cookie[side], &len) == -1)
			return -1;
		l->written0[side] = px_sockmap_written(fd[side]);
	}
	pthread_mutex_lock(&px_sm_lock);
	if (px_sm_nfree == 0) {
		pthread_mutex_unlock(&px_sm_lock);
		errno = ENOSPC;
		return -1;
	}
	l->slot = px_sm_free[--px_sm_nfree];
	pthread_mutex_unlock(&px_sm_lock);
	/* Targets and keys first, sources last: once a socket runs the
	 * verdict, its peer is already there to redirect to. */
	for (side = 0; side < 2; side++) {
		key = 2 * l->slot + (uint32_t)side;
		v = (uint32_t)fd[side];
		px_sm_bytes[key] = 0;
		if (bpf_map_update_elem(px_sm_peers, &key, &v, BPF_ANY) != 0 ||
		    bpf_map_update_elem(px_sm_keys, &l->cookie[side], &key,
		    BPF_ANY) != 0)
			goto fail;
	}
	for (side = 0; side < 2; side++) {
		key = 2 * l->slot + (uint32_t)side;
		v = (uint32_t)fd[side];
		if (bpf_map_update_elem(px_sm_srcs, &key, &v, BPF_ANY) != 0)
			goto fail;
	}
	/* Bytes queued before the verdict was attached (the client's
	 * first request, a server's greeting) wait for the next segment;
	 * setting SO_RCVLOWAT runs the socket's data-ready hook, so the
	 * verdict takes them now. */
	for (side = 0; side < 2; side++)
		(void)setsockopt(fd[side], SOL_SOCKET, SO_RCVLOWAT, &one,
		    sizeof(one));
	return 0;
fail:
	err = errno;
	for (side = 0; side < 2; side++) {
		key = 2 * l->slot + (uint32_t)side;
		(void)bpf_map_delete_elem(px_sm_srcs, &key);
		(void)bpf_map_delete_elem(px_sm_peers, &key);
		(void)bpf_map_delete_elem(px_sm_keys, &l->cookie[side]);
	}
	px_sm_put_slot(l->slot);
	errno = err;
	return -1;
}

void
px_sockmap_detach(struct px_sockmap_link *l)
{
	int side;

	/* A late segment then stays with its socket (the verdict passes
	 * it), and the slot's next pair replaces these sockets in the
	 * socket maps. */
	for (side = 0; side < 2; side++)
		(void)bpf_map_delete_elem(px_sm_keys, &l->cookie[side]);
	px_sm_put_slot(l->slot);
}

uint64_t
px_sockmap_bytes(const struct px_sockmap_link *l, int side)
{
	return px_sm_bytes[2 * l->slot + (uint32_t)side];
}

#else	/* !PX_HAVE_SOCKMAP */

int
px_sockmap_load(void)
{
	snprintf(px_sm_status, sizeof(px_sm_status), "sockmap: this proxyd "
	    "was built without libbpf; services with splice=\"sockmap\" "
	    "splice instead");
	return -1;
}

void
px_sockmap_unload(void)
{
}

int
px_sockmap_attach(struct px_sockmap_link *l, const int fd[2])
{
	(void)l; (void)fd;
	errno = ENOTSUP;
	return -1;
}

void
px_sockmap_detach(struct px_sockmap_link *l)
{
	(void)l;
}

uint64_t
px_sockmap_bytes(const struct px_sockmap_link *l, int side)
{
	(void)l; (void)side;
	return 0;
}

#endif
