/* ftp: the <ftp> policy of a service. The loader checks every value with
 * file:line and copies it into struct ftp_policy; the matchers below are
 * the only readers of its rule lists. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "config.h"
#include "parse.h"
#include "ftp/ftp_proto.h"
#include "ftp/ftp_policy.h"

static const char *const ftp_mode_names[] = { "keep", "active", "passive" };

/* ---- loader ----------------------------------------------------------- */

static int
ftp_attr_mode(const xmlNode *n, const char *name, enum ftp_mode *out,
    struct px_cfgerr *e)
{
	char *v = px_attr(n, name);
	int i, rc = -1;

	if (v == NULL)
		return 0;
	for (i = 0; i < 3; i++)
		if (strcmp(v, ftp_mode_names[i]) == 0) {
			*out = (enum ftp_mode)i;
			rc = 0;
		}
	if (rc == -1)
		px_cfg_error(e, n, "%s=\"%s\": expected keep, active or passive",
		    name, v);
	xmlFree(v);
	return rc;
}

static int
ftp_attr_ports(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	char *v = px_attr(n, "data-ports"), *dash;
	uint64_t lo, hi;
	const char *why = "expected LOW-HIGH, 1024..65535";
	int rc = -1;

	if (v == NULL)
		return 0;
	if ((dash = strchr(v, '-')) != NULL) {
		*dash = '\0';
		if (px_parse_uint(v, 1024, 65535, &lo, &why) == 0 &&
		    px_parse_uint(dash + 1, 1024, 65535, &hi, &why) == 0) {
			if (lo <= hi) {
				p->port_lo = (uint16_t)lo;
				p->port_hi = (uint16_t)hi;
				rc = 0;
			} else
				why = "the low port is above the high one";
		}
		*dash = '-';
	}
	if (rc == -1)
		px_cfg_error(e, n, "data-ports=\"%s\": %s (expected LOW-HIGH "
		    "within 1024..65535)", v, why);
	xmlFree(v);
	return rc;
}

static int
ftp_attr_action(const xmlNode *n, bool *accept, struct px_cfgerr *e)
{
	char *v = px_attr(n, "action");
	int rc = 0;

	if (v == NULL) {
		px_cfg_error(e, n, "<%s> needs action=\"accept\" or \"deny\"",
		    (const char *)n->name);
		return -1;
	}
	if (strcmp(v, "accept") == 0)
		*accept = true;
	else if (strcmp(v, "deny") == 0)
		*accept = false;
	else {
		px_cfg_error(e, n, "action=\"%s\": expected accept or deny", v);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

static int
ftp_rule_add(struct ftp_rule **list, size_t *n, const char *name,
    size_t len, bool accept)
{
	struct ftp_rule *r;

	if ((r = realloc(*list, (*n + 1) * sizeof(**list))) == NULL)
		return -1;
	*list = r;
	if ((r[*n].name = strndup(name, len)) == NULL)
		return -1;
	r[*n].accept = accept;
	(*n)++;
	return 0;
}

static bool
ftp_verb_ok(const char *v, size_t len)
{
	size_t i;

	if (len == 0 || len > FTP_VERB_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z')))
			return false;
	return true;
}

/* <command name="USER PASS ..." action=.../>: space-separated verbs. */
static int
ftp_load_command(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	char *v = px_attr(n, "name"), *w;
	bool accept;
	size_t len, i, k;
	int rc = 0, added = 0;

	if (ftp_attr_action(n, &accept, e) == -1) {
		xmlFree(v);
		return -1;
	}
	for (w = v; rc == 0 && w != NULL && *w != '\0'; w += len) {
		while (*w == ' ' || *w == '\t' || *w == '\n')
			w++;
		len = strcspn(w, " \t\n");
		if (len == 0)
			break;
		if (len == 1 && *w == '*') {
			if (p->cmd_default != -1) {
				px_cfg_error(e, n, "command \"*\" given twice");
				rc = -1;
			}
			p->cmd_default = accept;
			added++;
			continue;
		}
		if (!ftp_verb_ok(w, len)) {
			px_cfg_error(e, n, "command \"%.*s\": expected 1 to %d "
			    "letters or *", (int)len, w, FTP_VERB_MAX);
			rc = -1;
			break;
		}
		for (i = 0; i < len; i++)
			w[i] = (char)(w[i] & ~0x20);
		for (k = 0; k < p->ncmds; k++)
			if (strlen(p->cmds[k].name) == len &&
			    memcmp(p->cmds[k].name, w, len) == 0) {
				px_cfg_error(e, n, "command %.*s has a rule "
				    "already", (int)len, w);
				rc = -1;
			}
		if (rc == 0 && ftp_rule_add(&p->cmds, &p->ncmds, w, len,
		    accept) == -1) {
			px_cfg_error(e, n, "out of memory");
			rc = -1;
		}
		added++;
	}
	if (rc == 0 && added == 0) {
		px_cfg_error(e, n, "<command> needs name=\"VERB ...\"");
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

/* <user name="a b"/> (space-separated, shell patterns) and <path
 * pattern="*.exe"/> (one shell pattern). */
static int
ftp_load_names(const xmlNode *n, const char *attr, bool split,
    struct ftp_rule **list, size_t *cnt, struct px_cfgerr *e)
{
	char *v = px_attr(n, attr), *w;
	bool accept;
	size_t len;
	int rc = 0, added = 0;

	if (v == NULL || v[0] == '\0') {
		px_cfg_error(e, n, "<%s> needs a non-empty %s", (const char *)n->name,
		    attr);
		xmlFree(v);
		return -1;
	}
	if (ftp_attr_action(n, &accept, e) == -1) {
		xmlFree(v);
		return -1;
	}
	for (w = v; *w != '\0'; w += len) {
		if (split)
			while (*w == ' ' || *w == '\t' || *w == '\n')
				w++;
		len = split ? strcspn(w, " \t\n") : strlen(w);
		if (len == 0)
			break;
		if (len > 255) {
			px_cfg_error(e, n, "%s: longer than 255 bytes", attr);
			rc = -1;
			break;
		}
		if (ftp_rule_add(list, cnt, w, len, accept) == -1) {
			px_cfg_error(e, n, "out of memory");
			rc = -1;
			break;
		}
		added++;
	}
	if (rc == 0 && added == 0) {
		px_cfg_error(e, n, "<%s> needs a non-empty %s", (const char *)n->name,
		    attr);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

static void
ftp_rules_free(struct ftp_rule *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(r[i].name);
	free(r);
}

void
ftp_policy_free(void *pol)
{
	struct ftp_policy *p = pol;

	if (p == NULL)
		return;
	ftp_rules_free(p->cmds, p->ncmds);
	ftp_rules_free(p->users, p->nusers);
	ftp_rules_free(p->paths, p->npaths);
	free(p);
}

static int
ftp_load_limits(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	int rc = 0;

	if (px_attr_uint(e, n, "max-line", 64, FTP_LINE_MAX, &p->max_line) == -1 ||
	    px_attr_uint(e, n, "max-username", 1, 255, &p->max_user) == -1 ||
	    px_attr_uint(e, n, "max-password", 1, 1024, &p->max_pass) == -1 ||
	    px_attr_duration(e, n, "timeout", false, 100, 3600 * 1000,
	    &p->timeout_ms) == -1)
		rc = -1;
	return rc;
}

int
ftp_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct ftp_policy *p;
	const xmlNode *n;
	int rc = 0, nlimits = 0;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	p->client_data = FTP_KEEP;
	p->server_data = FTP_KEEP;
	p->strict = true;
	p->max_line = 512;
	p->max_user = 64;
	p->max_pass = 128;
	p->timeout_ms = 30000;
	p->cmd_default = -1;
	if (sec == NULL)
		goto done;
	if (ftp_attr_mode(sec, "client-data", &p->client_data, e) == -1 ||
	    ftp_attr_mode(sec, "server-data", &p->server_data, e) == -1 ||
	    ftp_attr_ports(sec, p, e) == -1)
		rc = -1;
	if (px_attr_bool(e, sec, "strict-port-check", &p->strict) == -1)
		rc = -1;
	for (n = sec->children; n != NULL; n = n->next) {
		const char *name = (const char *)n->name;

		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (strcmp(name, "limits") == 0) {
			if (nlimits++ > 0) {
				px_cfg_error(e, n, "<limits> given twice");
				rc = -1;
			} else if (ftp_load_limits(n, p, e) == -1)
				rc = -1;
		} else if (strcmp(name, "command") == 0) {
			if (ftp_load_command(n, p, e) == -1)
				rc = -1;
		} else if (strcmp(name, "user") == 0) {
			if (ftp_load_names(n, "name", true, &p->users,
			    &p->nusers, e) == -1)
				rc = -1;
		} else if (strcmp(name, "path") == 0) {
			if (ftp_load_names(n, "pattern", false, &p->paths,
			    &p->npaths, e) == -1)
				rc = -1;
		} else {
			px_cfg_error(e, n, "<%s>: unknown in <ftp>", name);
			rc = -1;
		}
	}
done:
	if (rc == -1) {
		ftp_policy_free(p);
		return -1;
	}
	*pol = p;
	return 0;
}

/* ---- decisions -------------------------------------------------------- */

bool
ftp_cmd_allowed(const struct ftp_policy *p, const char *verb)
{
	size_t i;

	/* TLS on the control channel would hide it from the proxy. */
	if (strcmp(verb, "AUTH") == 0 || strcmp(verb, "PBSZ") == 0 ||
	    strcmp(verb, "PROT") == 0 || strcmp(verb, "CCC") == 0 ||
	    strcmp(verb, "ADAT") == 0)
		return false;
	for (i = 0; i < p->ncmds; i++)
		if (strcmp(p->cmds[i].name, verb) == 0)
			return p->cmds[i].accept;
	return p->cmd_default == 1;
}

/* First matching rule wins; no rule: dflt. */
static bool
ftp_match(const struct ftp_rule *r, size_t n, const char *s, bool dflt)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fnmatch(r[i].name, s, 0) == 0)
			return r[i].accept;
	return dflt;
}

/* With user rules, a name none of them matches is refused. */
bool
ftp_user_allowed(const struct ftp_policy *p, const char *user)
{
	return ftp_match(p->users, p->nusers, user, p->nusers == 0);
}

/* A path no rule matches is accepted. */
bool
ftp_path_allowed(const struct ftp_policy *p, const char *path)
{
	return ftp_match(p->paths, p->npaths, path, true);
}
