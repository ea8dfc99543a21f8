/* What the files of a session (session.c: timers, the relay and the
 * connect; admission.c: admission; session_tls.c; session_end.c;
 * handover.c: a session taken over from another process) call of each
 * other, and nothing outside core/ includes. */
#ifndef PX_SESSION_INT_H
#define PX_SESSION_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

struct px_fp_rule;
struct px_session;
struct px_relay_limits;

void	px_session_arm_timer(struct px_session *s, uint64_t ms);
int	px_session_ask_conntrack(struct px_session *s);
int	px_session_check_dst(struct px_session *s);
int	px_session_client_allowed(struct px_session *s);
void	px_session_client_handshake(struct px_session *s);
/* The client's conn gets its TLS, and its handshake the callbacks (at its
 * first bytes, or at the handshake timeout). 0, or -1 after ending the
 * session. */
int	px_session_client_tls(struct px_session *s);
void	px_session_connect_server(struct px_session *s);
/* The reason a <fingerprint> deny (hit) ends the session with, into buf;
 * the session's rule= set to hit. */
const char *px_session_fp_reason(struct px_session *s,
	    const struct px_fp_rule *hit, char *buf, size_t size);
void	px_session_connected(struct px_session *s);
/* <source-limits per="ja4">: judged once the client's JA4 is known (or,
 * done, the hello is past without one: by address). 0, or -1 after
 * ending the session (a reset). Once per session; 0 on other services. */
int	px_session_limits_hello(struct px_session *s, bool done);
void	px_session_proceed(struct px_session *s);
void	px_session_release_io(struct px_session *s);
int	px_session_send_hello(struct px_session *s, struct px_relay_limits *lim);
void	px_session_server_up(struct px_session *s);
void	px_session_stop_timer(struct px_session *s);
void	px_session_timer_cb(evutil_socket_t fd, short what, void *arg);

#endif
