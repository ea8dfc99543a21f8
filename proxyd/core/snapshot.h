/* The admin's view of live sessions: each worker copies what the listing
 * needs of its own sessions (px_session_snapshot) when the admin asks, so
 * the admin thread never touches a worker's sessions. */
#ifndef PX_SNAPSHOT_H
#define PX_SNAPSHOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* What the admin listing needs of one live session, copied by its worker
 * so the admin never touches a worker's sessions. */
struct px_session_snap {
	uint64_t		 id;
	unsigned		 worker;
	char			 service[72];
	const char		*analyser;	/* static: the registry's */
	char			 detail[200];	/* its describe(); "" */
	uint16_t		 ct_zone;	/* of the upstream flow */
	const char		*state;
	struct sockaddr_storage	 client, local, dst, server, upstream_local;
	uint64_t		 to_server, to_client;
	double			 age;
};

/* One admin request for the session list, answered by every worker.
 * Each asked worker and the admin hold a reference; the last one out
 * frees it (px_snap_req_unref), so neither side can free it under the
 * other, even when the admin gives up waiting. */
struct px_snap_req {
	atomic_uint		 refs;
	atomic_uint		 pending;	/* workers yet to answer */
	int			 done_fd;	/* eventfd: last worker -> admin */
	struct px_session_snap	*snaps[256];	/* per worker, malloc'd */
	size_t			 nsnaps[256];
};

/* Asks every live worker for its sessions, taking a reference for each;
 * returns how many were asked. */
unsigned px_workers_snapshot(struct px_snap_req *req);
void	px_snap_req_unref(struct px_snap_req *req);

#endif
