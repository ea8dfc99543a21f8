/* The daemon configuration: parsed and validated once on the main thread,
 * then immutable. Workers and sessions hold references; a reload builds a
 * new one and swaps the pointer. */
#ifndef PX_CONFIG_H
#define PX_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cfgread.h"
#include "directive.h"
#include "log.h"
#include "parse.h"
#include "dispatch.h"
#include "fingerprint.h"
#include "zone.h"
#include "scan.h"
#include "auth.h"
#include "srclimit.h"

struct px_analyser;
struct _xmlNode;

enum px_mode {
	PX_MODE_FIXED = 0,
	PX_MODE_TRANSPARENT,
	PX_MODE_REDIRECT,
	PX_MODE_FORWARD,
};

struct px_service {
	char			*name;
	char			*file;		/* policy file it came from */
	long			 line;		/* of <service>, for cross-file errors */
	long			 listen_line;	/* of <listen> */
	const struct px_analyser *analyser;
	void			*analyser_policy; /* owned by the analyser */

	struct sockaddr_storage	 listen;
	socklen_t		 listen_len;
	enum px_mode		 mode;
	bool			 origdst_conntrack; /* redirect: ask conntrack */
	unsigned		 backlog;

	bool			 has_target;
	struct sockaddr_storage	 target;
	socklen_t		 target_len;

	bool			 spoof_source;
	bool			 has_mark;
	uint32_t		 mark;
	uint64_t		 connect_timeout_ms;	/* resolved: never 0 */
	uint16_t		 ct_zone;	/* of upstream flows, for /sessions */

	struct px_tls_ctx	*tls_client;	/* <tls side="client">; NULL */
	struct px_tls_ctx	*tls_server;	/* <tls side="server">; NULL */
	struct px_tls_ctx	*tls_passthrough; /* mode="passthrough"; NULL */
	/* An analyser that starts TLS itself (analyser->starttls) and a <tls>
	 * without implicit="yes": the core leaves it to the analyser
	 * (px_session_starttls); tls_client/tls_server stay NULL. */
	struct px_tls_ctx	*starttls_client, *starttls_server;
	struct px_addrlist	 clients;	/* unset: everyone */
	struct px_addrlist	 servers;	/* unset: anywhere */
	struct px_scan_policy	 scan;		/* <scan>; scanner NULL: none */
	struct px_fp_rules	 fingerprints;	/* <fingerprint>, in file order */
	struct px_sl_rule	 srclimit;	/* <source-limits>; on: given */
	struct px_auth_use	*auth;		/* <auth>; NULL: none */
	/* The services on this listen address (transparent and redirect
	 * modes may share one); group_idx is this one's place in it. */
	struct px_group		*group;
	uint16_t		 group_idx;
};

struct px_tls_ctx;

struct px_config {
	atomic_uint		 refs;
	char			*path;
	unsigned		 workers;	/* resolved: never 0 */
	uint64_t		 max_sessions;
	uint64_t		 connect_timeout_ms;
	uint64_t		 idle_timeout_ms;	/* 0: off */
	uint64_t		 buffer;
	uint64_t		 session_bandwidth;	/* 0: unlimited */
	uint64_t		 global_bandwidth;
	uint64_t		 shutdown_grace_ms;

	enum px_log_target	 log_target;
	char			*log_file;
	char			*pidfile;	/* <pidfile path>; NULL: none */
	/* <node name>, or the host name (px_log_set_node) */
	char			 node_name[PX_NODE_NAME_MAX + 1];
	int			 log_level;	/* syslog LOG_* */
	bool			 log_json;	/* format="json" */
	/* <audit target>: where audit records go (px_log_record_open) */
	bool			 audit_on;
	enum px_log_target	 audit_target;
	char			*audit_file;

	/* <user>: who proxyd runs as after startup (privs.h); NULL: stay */
	char			*user;
	uid_t			 uid;
	gid_t			 gid;
	long			 user_line;

	bool			 admin_enabled;
	struct sockaddr_storage	 admin;
	socklen_t		 admin_len;
	char			*ha_state_file;	/* admin/@ha-state-file; NULL: none */
	char			*quota_state_file; /* quotas/@state-file; NULL */
	/* <cluster>: the shared quota store (store_len 0: none), how long a
	 * transfer waits for it, what a transfer gets when it cannot answer
	 * (true: refused), and the file an engine writes the members into. */
	struct sockaddr_storage	 store;
	socklen_t		 store_len;
	uint64_t		 store_timeout_ms;
	bool			 store_error_refuse;
	char			*members_file;	/* cluster/@members-file; NULL */

	char			*policy_dir;
	struct px_service	*services;	/* sorted by name */
	size_t			 nservices;
	struct px_zones		 zones;
	struct px_scanners	 scanners;	/* <scanners> */
	struct px_authns	 authns;	/* <authenticators> */
	struct px_group		*groups;	/* one per listen address */
	size_t			 ngroups;
};

/* Loads the daemon file and every policy. Returns NULL after reporting at
 * least one error to *e. The result has one reference. */
struct px_config *px_config_load(const char *path, struct px_cfgerr *e);
struct px_config *px_config_ref(struct px_config *c);
/* Configurations not freed yet: after a reload the old one lives on
 * until its last session ends. */
extern atomic_uint px_configs_live;
void	px_config_unref(struct px_config *c);

const char *px_mode_name(enum px_mode m);

/* The plain attributes of the daemon file and of a service file, as
 * loaded (directive.h); tests hold docs/CONFIG.md to them. */
extern const struct px_directive px_daemon_directives[];
extern const size_t px_ndaemon_directives;
extern const struct px_directive px_service_directives[];
extern const size_t px_nservice_directives;

#endif
