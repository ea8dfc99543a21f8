/* One service file (a policy file of the policies directory), its root
 * element parsed and validated against the joined service schema by
 * config.c: its plain attributes (the directive table), listen and
 * target, the client and server lists, <scan>, <auth>, <content>,
 * <audit>, <fingerprint>, <source-limits>, the analyser's own section
 * and <tls>, with the checks that join them (what a mode, an analyser
 * or TLS allows), copied into struct px_service. */
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "analyser.h"
#include "config_int.h"
#include "directive.h"
#include "rules.h"
#include "tls.h"

static const char *const px_modes[] = { "fixed", "transparent",
    "redirect", "forward", NULL };
static const int px_mode_values[] = { PX_MODE_FIXED, PX_MODE_TRANSPARENT,
    PX_MODE_REDIRECT, PX_MODE_FORWARD };
static const char *const px_origdsts[] = { "auto", "conntrack", NULL };

/* A service file's plain attributes (docs/CONFIG.md, "Service files").
 * upstream/@connect-timeout has no default of its own: the daemon's. */
const struct px_directive px_service_directives[] = {
	{ "listen", "mode", PX_D_CHOICE, "fixed", 0, 0, px_modes,
	    px_mode_values, PX_FIELD(struct px_service, mode) },
	{ "listen", "origdst", PX_D_CHOICE, "auto", 0, 0, px_origdsts, NULL,
	    PX_FIELD(struct px_service, origdst_conntrack) },
	{ "listen", "backlog", PX_D_UINT, "1024", 1, 65535, NULL, NULL,
	    PX_FIELD(struct px_service, backlog) },
	{ "upstream", "connect-timeout", PX_D_DURATION, NULL, 1, 3600 * 1000,
	    NULL, NULL, PX_FIELD(struct px_service, connect_timeout_ms) },
	{ "upstream", "spoof-source", PX_D_BOOL, "no", 0, 0, NULL, NULL,
	    PX_FIELD(struct px_service, spoof_source) },
	{ "upstream", "ct-zone", PX_D_UINT, "0", 0, 65535, NULL, NULL,
	    PX_FIELD(struct px_service, ct_zone) },
};
const size_t px_nservice_directives =
    sizeof(px_service_directives) / sizeof(px_service_directives[0]);

/* What one attribute allows depends on another: the mode. */
static void
px_service_mode_checks(const struct px_service *svc, xmlNodePtr root,
    struct px_cfgerr *e)
{
	xmlNodePtr listen = px_child(root, "listen");
	xmlNodePtr up = px_child(root, "upstream");

	if (svc->mode == PX_MODE_FORWARD && svc->analyser != NULL &&
	    !svc->analyser->forward_mode)
		px_cfg_error(e, listen, "mode=\"forward\": analyser \"%s\" "
		    "cannot take its destination from the request",
		    svc->analyser->name);
	/* A stream analyser in forward mode hears the server's name in the
	 * client's login (ftp: USER name@server): only a proven user may
	 * name one. Its <tls> works as in the other modes: the client's
	 * from the start, the server's once it is connected (the stand-in
	 * takes none, px_session_prepare). */
	if (svc->mode == PX_MODE_FORWARD && svc->analyser != NULL &&
	    svc->analyser->forward_mode && svc->analyser->driver == NULL &&
	    px_child(root, "auth") == NULL)
		px_cfg_error(e, listen, "mode=\"forward\": analyser \"%s\" "
		    "takes the server from a proven user's login: the service "
		    "needs <auth>", svc->analyser->name);
	if (svc->origdst_conntrack && svc->mode != PX_MODE_REDIRECT)
		px_cfg_error(e, listen, "origdst=\"conntrack\" is for "
		    "mode=\"redirect\"");
	if (svc->spoof_source && svc->mode != PX_MODE_TRANSPARENT)
		px_cfg_error(e, up, "spoof-source=\"yes\" needs mode=\"transparent\"");
}

/* <target>, only in fixed mode, and <upstream mark>. */
static void
px_load_target(struct px_service *svc, xmlNodePtr root, struct px_cfgerr *e)
{
	xmlNodePtr n;
	char *v;

	if ((n = px_child(root, "target")) != NULL) {
		if (px_attr_endpoint(e, n, &svc->target, &svc->target_len) == 0)
			svc->has_target = true;
		if (svc->mode != PX_MODE_FIXED)
			/* The destination is the client's own choice there. */
			px_cfg_error(e, n, "<target> is only used in fixed mode (mode=\"%s\" connects to the original destination)",
			    px_mode_name(svc->mode));
	} else if (svc->mode == PX_MODE_FIXED)
		px_cfg_error(e, root, "service \"%s\": fixed mode needs a <target address=... port=...>",
		    svc->name ? svc->name : "");
	if ((n = px_child(root, "upstream")) != NULL &&
	    (v = px_attr(n, "mark")) != NULL) {
		const char *why;

		if (px_parse_u32_any(v, &svc->mark, &why) == -1)
			px_cfg_error(e, n, "mark=\"%s\": %s", v, why);
		else
			svc->has_mark = true;
		xmlFree(v);
	}
}

/* The ALPN list a <tls> offers or asks for: towards clients the policy
 * may add protocols (http's h2="yes"); servers are asked for the
 * analyser's own. */
static const char *
px_service_alpn(const struct px_service *svc, xmlNodePtr n)
{
	char *side = px_attr(n, "side");
	bool client = side != NULL && strcmp(side, "client") == 0;

	xmlFree(side);
	if (client && svc->analyser->client_alpn != NULL)
		return svc->analyser->client_alpn(svc->analyser_policy);
	return svc->analyser->alpn;
}

/* Each <tls>: one per side, each where the analyser takes it. */
static void
px_load_service_tls(struct px_service *svc, xmlNodePtr root,
    struct px_cfgerr *e)
{
	xmlNodePtr n;

	for (n = root->children; n != NULL && svc->analyser != NULL;
	    n = n->next) {
		struct px_tls_ctx *t;
		unsigned errs = e->count;

		if (n->type != XML_ELEMENT_NODE ||
		    xmlStrcmp(n->name, (const xmlChar *)"tls") != 0)
			continue;
		if ((t = px_tls_load(e, n, svc->file,
		    px_service_alpn(svc, n))) == NULL) {
			if (e->count == errs)
				px_cfg_error(e, n, "invalid <tls>");
			continue;
		}
		/* One per side: px_check_repeats refused a second. */
		if (px_tls_implicit(t) == 0 && !svc->analyser->starttls)
			px_cfg_error(e, n, "implicit=\"no\" needs an analyser "
			    "that starts TLS itself (ftp), not analyser=\"%s\"",
			    svc->analyser->name);
		/* Its data channels would each need the minted leaf. */
		if (svc->analyser->starttls && px_tls_is_keybridge(t))
			px_cfg_error(e, n, "<tls mode=\"keybridge\"> is not "
			    "supported on analyser=\"%s\"", svc->analyser->name);
		if (svc->analyser->starttls && px_tls_implicit(t) != 1) {
			/* FTP's AUTH TLS: started by the analyser. */
			if (px_tls_side(t) == PX_TLS_CLIENT &&
			    svc->starttls_client == NULL)
				svc->starttls_client = t;
			else if (px_tls_side(t) == PX_TLS_SERVER &&
			    svc->starttls_server == NULL)
				svc->starttls_server = t;
			else
				px_tls_free(t);
		} else if (px_tls_is_passthrough(t)) {
			/* The stream is relayed untouched: an analyser that
			 * reads it would only see ciphertext. */
			if (svc->analyser->driver != NULL ||
			    svc->analyser->on_data != NULL)
				px_cfg_error(e, n, "<tls mode=\"passthrough\"> "
				    "needs an analyser that relays bytes "
				    "unread (plug), not analyser=\"%s\"",
				    svc->analyser->name);
			if (svc->tls_passthrough == NULL)
				svc->tls_passthrough = t;
			else
				px_tls_free(t);
		} else if (px_tls_side(t) == PX_TLS_CLIENT &&
		    svc->tls_client == NULL)
			svc->tls_client = t;
		else if (px_tls_side(t) == PX_TLS_SERVER &&
		    svc->tls_server == NULL)
			svc->tls_server = t;
		else
			px_tls_free(t);
	}

	if (svc->tls_client != NULL && px_tls_is_keybridge(svc->tls_client)) {
		/* It verifies the server and copies its certificate: it needs
		 * to know how to talk TLS to it, and where it is up front. */
		if (svc->tls_server == NULL)
			px_cfg_error(e, root, "service \"%s\": <tls mode="
			    "\"keybridge\"> needs a <tls side=\"server\" "
			    "mode=\"originate\"> (how to verify the server)",
			    svc->name ? svc->name : "");
		if (svc->mode == PX_MODE_FORWARD)
			px_cfg_error(e, root, "service \"%s\": <tls mode="
			    "\"keybridge\"> needs the server before the first "
			    "request: not with mode=\"forward\"",
			    svc->name ? svc->name : "");
	}

}

/* The analyser's own section, or NULL; a section of another analyser is
 * reported. */
static xmlNodePtr
px_service_section(const struct px_service *svc, xmlNodePtr root,
    struct px_cfgerr *e)
{
	xmlNodePtr n, section = NULL;

	for (n = root->children; n != NULL; n = n->next) {
		static const char *const core[] = { "listen", "target",
		    "upstream", "clients", "servers", "tls", "scan", "content",
		    "audit", "fingerprint", "auth",
		    "source-limits", NULL };
		size_t i;
		bool is_core = false;

		if (n->type != XML_ELEMENT_NODE)
			continue;
		for (i = 0; core[i] != NULL; i++)
			if (xmlStrcmp(n->name, (const xmlChar *)core[i]) == 0)
				is_core = true;
		if (is_core)
			continue;
		if (svc->analyser == NULL ||
		    xmlStrcmp(n->name, (const xmlChar *)svc->analyser->name) != 0)
			px_cfg_error(e, n, "<%s> does not belong to a service with analyser=\"%s\"",
			    (const char *)n->name,
			    svc->analyser ? svc->analyser->name : "?");
		else
			section = n;
	}
	return section;
}

/* A rate: N/s or N/m, as the interval between two events in ns. 0, or
 * -1 after reporting. */
static int
px_attr_rate(struct px_cfgerr *e, const xmlNode *n, const char *name,
    uint64_t *count, uint64_t *interval_ns)
{
	char *v = px_attr(n, name), *slash;
	const char *why = "expected N/s or N/m";
	uint64_t per_ns;
	int rc = -1;

	if (v == NULL)
		return 0;
	if ((slash = strchr(v, '/')) == NULL)
		goto out;
	if (strcmp(slash + 1, "s") == 0)
		per_ns = 1000000000ULL;
	else if (strcmp(slash + 1, "m") == 0)
		per_ns = 60000000000ULL;
	else
		goto out;
	*slash = '\0';
	if (px_parse_uint(v, 1, 1000000, count, &why) == -1)
		goto out;
	*interval_ns = per_ns / *count;
	rc = 0;
out:
	if (rc == -1) {
		if (slash != NULL)
			*slash = '/';
		px_cfg_error(e, n, "%s=\"%s\": %s (1..1000000 a second or a "
		    "minute)", name, v, why);
	}
	xmlFree(v);
	return rc;
}

/* In enum px_sl_per's order. */
static const char *const px_sl_pers[] = { "address", "prefix", "zone",
    "user", "ja4", NULL };

/* <source-limits> (srclimit.h): who counts as one source, and its
 * limits. */
static void
px_load_source_limits(struct px_service *svc, const xmlNode *n,
    const struct px_zones *zones, struct px_cfgerr *e)
{
	struct px_sl_rule *r = &svc->srclimit;
	uint64_t rate = 0, p4 = 24, p6 = 64, sessions = 0, burst = 0;
	unsigned before = e->count;
	char *v;
	size_t i;

	memset(r, 0, sizeof(*r));
	r->line = px_xml_line(n);
	r->per = PX_SL_ADDRESS;
	if ((v = px_attr(n, "per")) != NULL) {
		for (i = 0; px_sl_pers[i] != NULL &&
		    strcmp(px_sl_pers[i], v) != 0; i++)
			;
		if (px_sl_pers[i] == NULL)
			px_cfg_error(e, n, "per=\"%s\": expected address, "
			    "prefix, zone, user or ja4", v);
		else if (strcmp(v, "user") == 0 && (svc->auth == NULL ||
		    (svc->analyser != NULL && !svc->analyser->user_limits)))
			px_cfg_error(e, n, "per=\"user\" needs the service's "
			    "<auth> on an analyser that counts its users (http, "
			    "ftp)");
		else
			r->per = (enum px_sl_per)i;
		xmlFree(v);
	}
	if (r->per == PX_SL_ZONE && zones->n == 0)
		px_cfg_error(e, n, "per=\"zone\" needs <zones> in the daemon "
		    "file");
	(void)px_attr_uint(e, n, "prefix-v4", 1, 32, &p4);
	(void)px_attr_uint(e, n, "prefix-v6", 1, 128, &p6);
	(void)px_attr_uint(e, n, "sessions", 1, 1000000, &sessions);
	if (px_attr_rate(e, n, "connections", &rate, &r->interval_ns) == 0 &&
	    px_attr_uint(e, n, "burst", 1, 1000000, &burst) == 0) {
		if (burst != 0 && r->interval_ns == 0)
			px_cfg_error(e, n, "burst= needs connections=");
		r->burst = (uint32_t)(burst != 0 ? burst : rate);
	}
	/* requests=: each request of an analyser that counts them (http:
	 * every HTTP/1.x request and HTTP/2 stream); the bucket holds one
	 * second's (or minute's) worth. */
	if (px_attr_rate(e, n, "requests", &rate, &r->req_interval_ns) == 0 &&
	    r->req_interval_ns != 0) {
		r->req_burst = (uint32_t)rate;
		if (svc->analyser != NULL && !svc->analyser->requests)
			px_cfg_error(e, n, "requests=: analyser \"%s\" has no "
			    "requests to limit (http has); use connections= "
			    "and sessions=", svc->analyser->name);
	}
	/* transfers=: each file transfer of an analyser that counts them
	 * (ftp: RETR, STOR, APPE, STOU); the bucket holds one second's (or
	 * minute's) worth. */
	if (px_attr_rate(e, n, "transfers", &rate, &r->xfer_interval_ns) ==
	    0 && r->xfer_interval_ns != 0) {
		r->xfer_burst = (uint32_t)rate;
		if (svc->analyser != NULL && !svc->analyser->transfers)
			px_cfg_error(e, n, "transfers=: analyser \"%s\" has "
			    "no file transfers to limit (ftp has)",
			    svc->analyser->name);
	}
	if (sessions == 0 && r->interval_ns == 0 && r->req_interval_ns == 0 &&
	    r->xfer_interval_ns == 0 && e->count == before)
		px_cfg_error(e, n, "<source-limits> needs sessions=, "
		    "connections=, requests= or transfers=");
	r->prefix4 = (uint8_t)p4;
	r->prefix6 = (uint8_t)p6;
	r->sessions = (uint32_t)sessions;
	r->svc_hash = px_sl_hash_str(svc->name != NULL ? svc->name : "");
	r->on = true;
}

int
px_load_service(struct px_config *c, struct px_service *svc, xmlNodePtr root,
    struct px_cfgerr *e)
{
	xmlNodePtr n, section;
	char *v;
	unsigned before = e->count;

	px_check_repeats(root, e);
	svc->line = px_xml_line(root);
	svc->name = px_attr(root, "name");
	if (svc->name == NULL || !px_valid_name(svc->name))
		px_cfg_error(e, root, "name=\"%s\": use 1..64 of A-Z a-z 0-9 . _ -",
		    svc->name ? svc->name : "");
	v = px_attr(root, "analyser");
	if (v != NULL && (svc->analyser = px_analyser_find(v)) == NULL)
		px_cfg_error(e, root, "analyser=\"%s\": not built into this proxyd", v);
	xmlFree(v);

	if ((n = px_child(root, "listen")) == NULL) {
		px_cfg_error(e, root, "service needs a <listen address=... port=...>");
		return -1;
	}
	svc->listen_line = px_xml_line(n);
	px_attr_endpoint(e, n, &svc->listen, &svc->listen_len);
	svc->connect_timeout_ms = c->connect_timeout_ms;
	px_directives_load(px_service_directives, px_nservice_directives, svc,
	    root, svc->file, e);
	px_service_mode_checks(svc, root, e);
	px_load_target(svc, root, e);

	if ((n = px_child(root, "clients")) != NULL)
		px_addrlist_load(&svc->clients, n, &c->zones, e);
	if ((n = px_child(root, "servers")) != NULL) {
		px_addrlist_load(&svc->servers, n, &c->zones, e);
		if (svc->mode == PX_MODE_FIXED)
			/* The target is the only server there. */
			px_cfg_error(e, n, "<servers> is for modes where the "
			    "client picks the server (transparent, redirect, "
			    "forward), not mode=\"fixed\"");
	}
	if ((n = px_child(root, "scan")) != NULL) {
		px_scan_policy_load(&svc->scan, n, &c->scanners, e);
		if (svc->analyser != NULL && !svc->analyser->scan)
			px_cfg_error(e, n, "<scan>: analyser \"%s\" does not "
			    "scan its transfers (http, ftp and r66 do)",
			    svc->analyser->name);
		else if (svc->analyser != NULL && !svc->analyser->auth &&
		    (svc->scan.who.nusers != 0 || svc->scan.who.ngroups != 0 ||
		    svc->scan.who.any))
			px_cfg_error(e, n, "<scan> user=/group=: analyser \"%s\" "
			    "does not tell the scanner who a transfer is for "
			    "(http and ftp do)", svc->analyser->name);
	}
	if ((n = px_child(root, "auth")) != NULL) {
		px_auth_use_load(&svc->auth, n, &c->authns, e);
		if (svc->analyser != NULL && !svc->analyser->auth)
			px_cfg_error(e, n, "<auth>: analyser \"%s\" does not "
			    "authenticate its users (http and ftp do)",
			    svc->analyser->name);
		else if (svc->analyser != NULL && svc->analyser->auth_password &&
		    svc->auth != NULL && svc->auth->ldap == NULL)
			px_cfg_error(e, n, "<auth>: analyser \"%s\" checks "
			    "passwords: authenticator= must name an ldap one",
			    svc->analyser->name);
	}
	/* After <scan>, whose loader clears the whole struct. */
	px_content_policy_load(&svc->scan.content, root, svc->file, e);
	if (svc->scan.content.n != 0 && svc->analyser != NULL &&
	    !svc->analyser->content)
		px_cfg_error(e, px_child(root, "content"), "<content>: analyser "
		    "\"%s\" does not sniff its transfers (http, ftp and r66 do)",
		    svc->analyser->name);
	if ((n = px_child(root, "audit")) != NULL) {
		px_scan_audit_load(&svc->scan, n, e);
		if (svc->analyser != NULL && !svc->analyser->audit)
			px_cfg_error(e, n, "<audit>: analyser \"%s\" does not "
			    "write audit records (http, ftp and r66 do)",
			    svc->analyser->name);
	}
	for (n = root->children; n != NULL; n = n->next)
		if (n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name,
		    (const xmlChar *)"fingerprint") == 0)
			(void)px_fp_load(e, n, svc->file, &svc->fingerprints);
	if ((n = px_child(root, "source-limits")) != NULL)
		px_load_source_limits(svc, n, &c->zones, e);
	section = px_service_section(svc, root, e);
	if (svc->analyser != NULL && e->count == before &&
	    svc->analyser->policy_load != NULL &&
	    svc->analyser->policy_load(section, &svc->analyser_policy, e) == -1 &&
	    e->count == before)
		px_cfg_error(e, section ? section : root, "invalid <%s> section",
		    svc->analyser->name);
	/* After the policy: what TLS offers clients may depend on it. */
	px_load_service_tls(svc, root, e);
	/* A password the protocol carries (ftp's PASS) is taken only over
	 * the client's TLS unless basic-without-tls="yes": with no <tls
	 * side="client"> nobody could ever log in, and the way to take
	 * passwords in clear must be said, not fallen into. */
	if (svc->analyser != NULL && svc->analyser->auth_password &&
	    svc->auth != NULL && !svc->auth->basic_plain &&
	    svc->tls_client == NULL && svc->starttls_client == NULL &&
	    e->count == before)
		px_cfg_error(e, px_child(root, "auth"), "<auth>: analyser "
		    "\"%s\" takes passwords only over the client's TLS "
		    "(basic-without-tls=\"no\", the default) and the service "
		    "has no <tls side=\"client\">: add one, or say "
		    "basic-without-tls=\"yes\" to take them in clear",
		    svc->analyser->name);
	/* A fingerprint is a ClientHello's: without one, a rule would never
	 * match and a deny list would let everyone through. */
	if (svc->fingerprints.n > 0 && svc->tls_client == NULL &&
	    svc->tls_passthrough == NULL && svc->starttls_client == NULL &&
	    e->count == before)
		px_cfg_error_line(e, svc->file, svc->fingerprints.r[0].line,
		    "<fingerprint> needs TLS from the client (a <tls "
		    "side=\"client\">: terminate, keybridge, passthrough, or "
		    "ftp's AUTH TLS)");
	/* per="ja4" is judged once the ClientHello is read, before anything
	 * else happens: only where the client speaks TLS from its first
	 * byte (an AUTH TLS comes after the session began). */
	if (svc->srclimit.on && svc->srclimit.per == PX_SL_JA4 &&
	    svc->tls_client == NULL && svc->tls_passthrough == NULL &&
	    e->count == before)
		px_cfg_error_line(e, svc->file, svc->srclimit.line,
		    "<source-limits per=\"ja4\"> needs TLS from the client's "
		    "first byte (a <tls side=\"client\">: terminate, keybridge, "
		    "passthrough; for ftp implicit=\"yes\")");
	return e->count == before ? 0 : -1;
}
