/* The analyser interface: one const table per protocol, registered by name in
 * plugins/registry.c. The core owns sessions and sockets; an analyser owns
 * only its policy object (read-only once loaded) and its per-session state. */
#ifndef PX_ANALYSER_H
#define PX_ANALYSER_H

#include <stdbool.h>
#include <stddef.h>

struct px_session;
struct px_cfgerr;
struct _xmlNode;
struct evbuffer;

/* Not yet: a PX_DENY that flushes a reply the analyser queued before
 * closing (the core closes at once today), and a last on_data call for
 * bytes held under PX_MORE when their side closes (they are dropped).
 * The first inspecting analyser (http) needs and adds both, with tests. */
enum px_verdict {
	PX_PASS = 0,	/* forward what is in the buffer */
	PX_MORE,	/* keep it, wait for more bytes */
	PX_DENY,	/* refuse: the session ends, logged as denied */
	PX_ERROR,	/* abort the session at once */
};

enum px_dir {
	PX_TO_SERVER = 0,
	PX_TO_CLIENT,
};

enum px_relay_mode {
	PX_RELAY_BUFFERED = 0,	/* evbuffers; on_data sees every byte */
	PX_RELAY_SPLICE,	/* splice(2); no byte reaches user space */
};

struct px_analyser {
	const char	*name;		/* matches service/@analyser */
	size_t		 state_size;	/* per session; the core callocs and frees it */
	/* Reads the analyser's own element (NULL if absent: use defaults).
	 * 0 ok, -1 after reporting through px_cfg_error(). */
	int		(*policy_load)(const struct _xmlNode *section, void **pol,
			    struct px_cfgerr *err);
	void		(*policy_free)(void *pol);
	/* The server side is connected. Returns 0 and calls one of the
	 * px_session_relay_*() functions, or -1 to abort the session. */
	int		(*on_open)(struct px_session *s, void *st);
	/* Bytes from one side in buffered mode; NULL: forward as they are. */
	enum px_verdict	(*on_data)(struct px_session *s, void *st,
			    enum px_dir dir, struct evbuffer *in);
	void		(*on_close)(struct px_session *s, void *st);
};

/* NULL if no analyser has that name. */
const struct px_analyser *px_analyser_find(const char *name);
/* Fails (with a message on stderr) on duplicate or empty names. */
int	px_analyser_registry_check(void);

/* What an analyser may ask of the core for its session. */
const void	*px_session_policy(const struct px_session *s);
int		 px_session_relay(struct px_session *s, enum px_relay_mode mode,
		    bool half_close);

#endif
