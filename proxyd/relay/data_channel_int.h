/* What the two files of the data channels share (data_channel.c: a
 * channel, its relay, metering and inspection; data_channel_end.c: its
 * ends, accepted on a listener or connected out, and the kept listeners),
 * and nothing else includes. */
#ifndef PX_DATA_CHANNEL_INT_H
#define PX_DATA_CHANNEL_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "analyser.h"
#include "data_channel.h"
#include "ja4.h"
#include "relay.h"
#include "splice.h"
#include "tls.h"

struct px_chan_endp {
	struct px_channel	*ch;
	int			 fd;		/* connected (or connecting) */
	int			 lfd;		/* listening */
	struct px_data_listener	*lst;		/* waiting on this kept one */
	bool			 connecting;
	bool			 check_peer;
	struct sockaddr_storage	 peer;		/* expected host */
	struct sockaddr_storage	 addr;		/* actual peer, for the log */
	struct event		 ev;		/* EV_READ on lfd / connecting fd */
	bool			 ev_on;
};

struct px_channel {
	struct px_chan_host	*host;
	struct px_channel	*next;		/* in host->list */
	px_channel_cb		 cb;
	void			*arg;
	uint64_t		 timeout_ms;
	struct event		 timer;
	struct px_chan_endp	 e[2];
	struct px_splice	 h[2];		/* by px_dir */
	/* TLS on an end (px_chan_tls): the buffered relay instead. */
	const struct px_tls_ctx	*tls[2];
	struct px_tls_peer	 tls_peer[2];
	/* What the TLS ends wrote of their peers' hellos: the client end's
	 * JA4 (the client's ClientHello), the server end's JA4S (the
	 * server's ServerHello, proxyd the client); "": none. */
	char			 ja4[PX_JA4_LEN + 1];
	char			 ja4s[PX_JA4S_LEN + 1];
	struct px_relay		 relay;
	bool			 relay_on;
	bool			 resumed[2];
	bool			 half_done[2];	/* EOF passed on */
	bool			 shut[2];	/* by end: our FIN sent */
	int			 oneway;	/* px_dir with the data, or -1 */
	bool			 relaying;
	bool			 ending;
	uint64_t		 start_ms, last_ms;
	uint64_t		 tcp_progress;	/* of both sockets, last look */
	struct timeval		 start_tv;
	uint64_t		 bytes[2];
	unsigned		 refused;
	char			 note[256];
	/* px_channel_inspect: the analyser sees the bytes. */
	px_channel_data_cb	 inspect;
	void			*inspect_arg;
	const char		*abort_why;	/* px_channel_abort, to carry out */
	/* px_channel_meter: a shared count of meter_dir's bytes, charged
	 * before they move when spliced (meter_held: charged, not moved
	 * yet), as they move when relayed. */
	_Atomic uint64_t	*meter;
	uint64_t		 meter_limit;
	uint64_t		 meter_held;
	int			 meter_dir;
	bool			 metered_out;	/* the limit ended it */
	/* px_channel_meter_lease: the limit is a lease; at its end the
	 * owner is asked for more (meter_asking: under way) and the
	 * direction waits, spliced, for px_channel_meter_grow. */
	px_channel_lease_cb	 meter_more;
	void			*meter_more_arg;
	bool			 meter_asking;
};

/* A kept listener (px_data_listener_new): one port for several channels. */
struct px_data_listener {
	struct px_chan_host	*host;
	struct px_data_listener	*next;		/* in host->listeners */
	int			 fd;		/* -1: closed (idle) */
	struct sockaddr_storage	 local, bound;
	uint16_t		 lo, hi;
	bool			 check_peer;
	struct sockaddr_storage	 peer;
	uint64_t		 idle_ms;
	struct px_channel	*waiting;	/* whose end takes the next one */
	enum px_chan_end	 end;
	unsigned		 refused;	/* while no channel waited */
	struct event		 ev, timer;
	bool			 ev_on;
};

/* data_channel.c */
/* Ends the channel once: its result to the owner's callback, then freed. */
void	px_chan_finish(struct px_channel *ch, const char *error);
/* Both ends connected: the channel starts relaying. */
void	px_chan_maybe_start(struct px_channel *ch);

/* data_channel_end.c */
/* No channel waits on l any more: its idle clock runs. */
void	px_lst_idle(struct px_data_listener *l);
/* Closes l's socket (if open) and stops its timer; l stays listed. */
void	px_lst_close(struct px_data_listener *l);

#endif
