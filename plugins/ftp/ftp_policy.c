/* ftp: the <ftp> policy of a service. The loader checks every value with
 * file:line and copies it into struct ftp_policy; the matchers below are
 * the only readers of its rule lists. <user> and <path> are px_rules lists
 * (rules.h); <command> keeps its own table of exact verbs. user= and
 * group= on <command> and <path> (with the service's <auth>) make a rule
 * take only those users; <login> says how proxyd logs into the server
 * for a user it authenticated (FTP inband authentication, ftp.c). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "auth.h"
#include "cfgread.h"
#include "parse.h"
#include "quota.h"
#include "rules.h"
#include "ftp/ftp_path.h"
#include "ftp/ftp_proto.h"
#include "ftp/ftp_policy.h"

/* Indexes are enum ftp_mode. */
static const char *const ftp_mode_names[] = {
	"keep", "active", "passive", NULL,
};
static const char *const ftp_yes_no[] = { "yes", "no", NULL };
static const char *const ftp_cases[] = { "sensitive", "insensitive", NULL };
static const char *const ftp_allow_block[] = { "allow", "block", NULL };

/* ---- who: user= and group= -------------------------------------------- */

static _Thread_local const struct px_auth_id *ftp_who_id;

void
ftp_policy_who(const struct px_auth_id *id)
{
	ftp_who_id = id;
}

static bool
ftp_who_ok(const struct px_who_set *w, const struct px_auth_id *id)
{
	struct px_content_who cw;

	return w == NULL || px_who_set_match(w, px_auth_content_who(id, &cw));
}

/* Whether the service of n (an element of <ftp>) has an <auth>. */
static bool
ftp_service_auth(const xmlNode *n)
{
	const xmlNode *svc = n->parent != NULL ? n->parent->parent : NULL, *c;

	for (c = svc != NULL ? svc->children : NULL; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(c->name, (const xmlChar *)"auth") == 0)
			return true;
	return false;
}

/* user= and group= of n: *out NULL when neither is given. Only where the
 * service has <auth> to say who its users are. */
static int
ftp_load_who(const xmlNode *n, struct ftp_policy *p, struct px_who_set **out,
    struct px_cfgerr *e)
{
	struct px_who_set *w, **grown;

	*out = NULL;
	if (!xmlHasProp(n, (const xmlChar *)"user") &&
	    !xmlHasProp(n, (const xmlChar *)"group"))
		return 0;
	if (!ftp_service_auth(n)) {
		px_cfg_error(e, n, "user=/group=: the service has no <auth> "
		    "to say who its users are");
		return -1;
	}
	if ((grown = px_grow(p->whos, p->nwhos, sizeof(*grown))) == NULL ||
	    (w = calloc(1, sizeof(*w))) == NULL) {
		if (grown != NULL)
			p->whos = grown;
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	p->whos = grown;
	p->whos[p->nwhos++] = w;
	if (px_who_set_load(w, n, n->parent->parent, e) == -1)
		return -1;
	*out = w;
	return 0;
}

/* <login user= group= server-user= server-password-file= pass-password=>. */
static int
ftp_load_login(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	struct ftp_login *grown, *l;
	struct px_who_set *w;
	const char *why;
	char *v, *path;
	int pass = 1;	/* no */

	if (!ftp_service_auth(n)) {
		px_cfg_error(e, n, "<login>: the service has no <auth>: proxyd "
		    "logs into the server only for users it authenticated");
		return -1;
	}
	if ((grown = px_grow(p->logins, p->nlogins, sizeof(*grown))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	p->logins = grown;
	l = &p->logins[p->nlogins++];
	memset(l, 0, sizeof(*l));
	l->line = px_xml_line(n);
	if (ftp_load_who(n, p, &w, e) == -1)
		return -1;
	if (w != NULL)
		l->who = *w;	/* shallow: freed through whos */
	if (px_attr_choice(e, n, "pass-password", ftp_yes_no, &pass) == -1 ||
	    px_attr_quota(e, n, &l->quota) == -1)
		return -1;
	l->pass_password = pass == 0;
	if ((v = px_attr(n, "server-user")) != NULL) {
		if (v[0] == '\0' || strcspn(v, " \r\n") != strlen(v)) {
			px_cfg_error(e, n, "server-user=\"%s\": one name, "
			    "without blanks", v);
			xmlFree(v);
			return -1;
		}
		l->server_user = strdup(v);
		xmlFree(v);
	} else if (!l->pass_password) {
		px_cfg_error(e, n, "<login>: server-user= is required (or "
		    "pass-password=\"yes\": the user's own name and password)");
		return -1;
	}
	if ((v = px_attr(n, "server-password-file")) != NULL) {
		if (l->pass_password) {
			px_cfg_error(e, n, "<login>: server-password-file= and "
			    "pass-password=\"yes\" together");
			xmlFree(v);
			return -1;
		}
		path = px_auth_path(e->file, v);
		if (path == NULL ||
		    (l->server_pw = px_auth_read_secret(path, &why)) == NULL) {
			px_cfg_error(e, n, "server-password-file=\"%s\": %s",
			    v, path == NULL ? "out of memory" : why);
			free(path);
			xmlFree(v);
			return -1;
		}
		free(path);
		xmlFree(v);
	}
	return 0;
}

const struct ftp_login *
ftp_login_for(const struct ftp_policy *p, const struct px_auth_id *id)
{
	size_t i;

	for (i = 0; i < p->nlogins; i++)
		if (ftp_who_ok(&p->logins[i].who, id))
			return &p->logins[i];
	return NULL;
}

/* ---- loader ----------------------------------------------------------- */

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

static bool
ftp_verb_ok(const char *v, size_t len)
{
	size_t i;

	if (len == 0 || len > FTP_VERB_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' &&
		    v[i] <= 'z') || (i > 0 && v[i] >= '0' && v[i] <= '9')))
			return false;
	return true;
}

/* <command name="USER PASS ..." action=.../>: space-separated verbs, or
 * "*" for what no rule names (*star: given already). Not a px_rules list:
 * a verb is an exact name, case-insensitive, with at most one rule, and
 * "*" is the list's default wherever it stands, not a first-match
 * pattern; letting patterns in would change what a policy means. */
static int
ftp_load_command(const xmlNode *n, struct ftp_policy *p, bool *star,
    struct px_cfgerr *e)
{
	struct ftp_cmd_rule *grown;
	char *v, *w, *label, **labels;
	enum px_action action;
	size_t len, i, k;
	int rc = 0, added = 0;

	struct px_who_set *who;

	if (px_attr_action(e, n, PX_ACTIONS_AD, true, &action) == -1 ||
	    px_attr_label(e, n, &label) == -1)
		return -1;
	if (ftp_load_who(n, p, &who, e) == -1) {
		free(label);
		return -1;
	}
	if (label != NULL) {
		if ((labels = px_grow(p->labels, p->nlabels,
		    sizeof(*labels))) == NULL) {
			free(label);
			px_cfg_error(e, n, "out of memory");
			return -1;
		}
		p->labels = labels;
		p->labels[p->nlabels++] = label;
	}
	v = px_attr(n, "name");
	for (w = v; rc == 0 && w != NULL && *w != '\0'; w += len) {
		while (*w == ' ' || *w == '\t' || *w == '\n')
			w++;
		len = strcspn(w, " \t\n");
		if (len == 0)
			break;
		if (len == 1 && *w == '*' && who != NULL) {
			px_cfg_error(e, n, "command \"*\" with user=/group=: "
			    "name the commands");
			rc = -1;
			break;
		}
		if (len == 1 && *w == '*') {
			if (*star) {
				px_cfg_error(e, n, "command \"*\" given twice");
				rc = -1;
			}
			*star = true;
			p->cmd_default = action;
			p->cmd_star_line = px_xml_line(n);
			p->cmd_star_label = label;
			added++;
			continue;
		}
		if (!ftp_verb_ok(w, len)) {
			px_cfg_error(e, n, "command \"%.*s\": expected 1 to %d "
			    "letters and digits, a letter first, or *", (int)len, w, FTP_VERB_MAX);
			rc = -1;
			break;
		}
		/* Letters upper-cased, digits kept: as ftp_cmd_parse spells
		 * the client's verb (XSHA256). */
		for (i = 0; i < len; i++)
			if (w[i] >= 'a' && w[i] <= 'z')
				w[i] = (char)(w[i] & ~0x20);
		/* One rule per verb for everyone; rules for some users
		 * come first in file order. */
		for (k = 0; who == NULL && k < p->ncmds; k++)
			if (p->cmds[k].who == NULL &&
			    strlen(p->cmds[k].verb) == len &&
			    memcmp(p->cmds[k].verb, w, len) == 0) {
				px_cfg_error(e, n, "command %.*s has a rule "
				    "already", (int)len, w);
				rc = -1;
			}
		if (rc == 0) {
			if ((grown = px_grow(p->cmds, p->ncmds,
			    sizeof(*grown))) == NULL) {
				px_cfg_error(e, n, "out of memory");
				rc = -1;
			} else {
				p->cmds = grown;
				memcpy(grown[p->ncmds].verb, w, len);
				grown[p->ncmds].verb[len] = '\0';
				grown[p->ncmds].line = px_xml_line(n);
				grown[p->ncmds].label = label;
				grown[p->ncmds].who = who;
				grown[p->ncmds++].action = action;
			}
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

/* <user name="a b"/> (space-separated shell patterns) and <path
 * pattern="*.exe"/> (one shell pattern, spaces and all). */
static int
ftp_load_rule(const xmlNode *n, const char *attr, bool split,
    struct px_rules *l, struct px_cfgerr *e)
{
	enum px_action action;

	if (px_attr_action(e, n, PX_ACTIONS_AD, true, &action) == -1 ||
	    px_rules_add(e, l, n, attr, split, action) == NULL)
		return -1;
	return 0;
}

/* <path pattern= action= user= group=>: the rule's arg is its who's
 * index in whos + 1 (0: everyone). */
static int
ftp_load_path(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	struct px_who_set *who;

	if (ftp_load_rule(n, "pattern", false, &p->paths, e) == -1 ||
	    ftp_load_who(n, p, &who, e) == -1)
		return -1;
	if (who != NULL)
		p->paths.r[p->paths.n - 1].arg = p->nwhos;
	return 0;
}

/* <user name=... quota-bytes=... quota-transfers=...>: the rule, and its
 * daily quota at the same index of user_quota. */
static int
ftp_load_user(const xmlNode *n, struct ftp_policy *p, struct px_cfgerr *e)
{
	struct px_quota_limit *grown;

	if ((grown = px_grow(p->user_quota, p->users.n,
	    sizeof(*grown))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	p->user_quota = grown;
	if (px_attr_quota(e, n, &grown[p->users.n]) == -1 ||
	    ftp_load_rule(n, "name", true, &p->users, e) == -1)
		return -1;
	return 0;
}

void
ftp_policy_free(void *pol)
{
	struct ftp_policy *p = pol;

	if (p == NULL)
		return;
	free(p->cmds);
	while (p->nlabels > 0)
		free(p->labels[--p->nlabels]);
	free(p->labels);
	px_rules_free(&p->users);
	px_rules_free(&p->paths);
	free(p->user_quota);
	while (p->nwhos > 0) {
		px_who_set_free(p->whos[--p->nwhos]);
		free(p->whos[p->nwhos]);
	}
	free(p->whos);
	while (p->nlogins > 0) {
		free(p->logins[--p->nlogins].server_user);
		if (p->logins[p->nlogins].server_pw != NULL) {
			explicit_bzero(p->logins[p->nlogins].server_pw,
			    strlen(p->logins[p->nlogins].server_pw));
			free(p->logins[p->nlogins].server_pw);
		}
	}
	free(p->logins);
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
	int rc = 0, nlimits = 0, cmode = FTP_KEEP, smode = FTP_KEEP;
	int strict = 0;		/* ftp_yes_no[0]: yes */
	int icase = 0;		/* ftp_cases[0]: sensitive */
	int mismatch = 0;	/* ftp_allow_block[0]: allow */
	bool star = false;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	p->max_line = 512;
	p->max_user = 64;
	p->max_pass = 128;
	p->timeout_ms = 30000;
	/* No <command name="*">: a verb no rule names is accepted if it is
	 * standard (ftp_standard_command), refused otherwise. */
	p->cmd_default = PX_ACT_DENY;
	/* No <user> rule: any user name; once there is one, only those
	 * the rules accept. */
	px_rules_init(&p->users, PX_DEFAULT_ALLOW_LIST, 0);
	/* A path no <path> rule matches is accepted. */
	px_rules_init(&p->paths, PX_DEFAULT_ACCEPT, 0);
	if (sec == NULL)
		goto done;
	if (px_attr_choice(e, sec, "client-data", ftp_mode_names, &cmode) == -1 ||
	    px_attr_choice(e, sec, "server-data", ftp_mode_names, &smode) == -1 ||
	    ftp_attr_ports(sec, p, e) == -1)
		rc = -1;
	if (px_attr_choice(e, sec, "strict-port-check", ftp_yes_no,
	    &strict) == -1 ||
	    px_attr_choice(e, sec, "case", ftp_cases, &icase) == -1 ||
	    px_attr_choice(e, sec, "size-mismatch", ftp_allow_block,
	    &mismatch) == -1)
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
			if (ftp_load_command(n, p, &star, e) == -1)
				rc = -1;
		} else if (strcmp(name, "user") == 0) {
			if (ftp_load_user(n, p, e) == -1)
				rc = -1;
		} else if (strcmp(name, "path") == 0) {
			if (ftp_load_path(n, p, e) == -1)
				rc = -1;
		} else if (strcmp(name, "login") == 0) {
			if (ftp_load_login(n, p, e) == -1)
				rc = -1;
		} else {
			px_cfg_error(e, n, "<%s>: unknown in <ftp>", name);
			rc = -1;
		}
	}
done:
	p->cmd_star = star;
	p->client_data = (enum ftp_mode)cmode;
	p->server_data = (enum ftp_mode)smode;
	p->strict = strict == 0;
	p->icase = icase == 1;
	p->size_mismatch_block = mismatch == 1;
	/* ASCII only: proxyd runs in the C locale. */
	if (p->icase)
		p->paths.fnm_flags |= FNM_CASEFOLD;
	if (rc == -1) {
		ftp_policy_free(p);
		return -1;
	}
	*pol = p;
	return 0;
}

/* ---- decisions -------------------------------------------------------- */

bool
ftp_standard_command(const char *verb)
{
	/* RFC 959 (without the RFC 775 X-aliases), 2389, 2428, 3659. RFC
	 * 2228's security commands are not here: TLS is the proxy's to
	 * negotiate, never passed through. */
	static const char *const standard[] = {
		"USER", "PASS", "ACCT", "CWD", "CDUP", "SMNT", "REIN", "QUIT",
		"PORT", "PASV", "TYPE", "STRU", "MODE", "RETR", "STOR", "STOU",
		"APPE", "ALLO", "REST", "RNFR", "RNTO", "ABOR", "DELE", "RMD",
		"MKD", "PWD", "LIST", "NLST", "SITE", "SYST", "STAT", "HELP",
		"NOOP",				/* RFC 959 */
		"FEAT", "OPTS",			/* RFC 2389 */
		"EPRT", "EPSV",			/* RFC 2428 */
		"MDTM", "SIZE", "MLST", "MLSD",	/* RFC 3659 */
		NULL,
	};
	size_t i;

	for (i = 0; standard[i] != NULL; i++)
		if (strcmp(standard[i], verb) == 0)
			return true;
	return false;
}

/* Whether verb is allowed, and by what: *line, *label of the rule (line
 * 0: no rule, the default; -1: the proxy's own refusal). */
static bool
ftp_cmd_decide(const struct ftp_policy *p, const char *verb, long *line,
    const char **label)
{
	size_t i;

	*label = NULL;
	*line = -1;
	/* TLS on the control channel would hide it from the proxy. */
	if (strcmp(verb, "AUTH") == 0 || strcmp(verb, "PBSZ") == 0 ||
	    strcmp(verb, "PROT") == 0 || strcmp(verb, "CCC") == 0 ||
	    strcmp(verb, "ADAT") == 0)
		return false;
	for (i = 0; i < p->ncmds; i++)
		if (strcmp(p->cmds[i].verb, verb) == 0 &&
		    ftp_who_ok(p->cmds[i].who, ftp_who_id)) {
			*line = p->cmds[i].line;
			*label = p->cmds[i].label;
			return p->cmds[i].action == PX_ACT_ACCEPT;
		}
	*line = 0;
	if (!p->cmd_star)
		return ftp_standard_command(verb);
	/* "*" is the list's default, but a rule of the file all the same. */
	*line = p->cmd_star_line;
	*label = p->cmd_star_label;
	return p->cmd_default == PX_ACT_ACCEPT;
}

bool
ftp_cmd_allowed(const struct ftp_policy *p, const char *verb)
{
	const char *label;
	long line;

	return ftp_cmd_decide(p, verb, &line, &label);
}

const char *
ftp_cmd_ref(const struct ftp_policy *p, const char *verb, const char *file,
    char *buf, size_t size)
{
	const char *label;
	long line;

	(void)ftp_cmd_decide(p, verb, &line, &label);
	if (line <= 0) {
		snprintf(buf, size, "%s", line == 0 ? "default" : "builtin");
		return buf;
	}
	return px_rule_ref_at(line, label, file, buf, size);
}

bool
ftp_user_allowed(const struct ftp_policy *p, const char *user)
{
	return px_rules_decide(&p->users, user, NULL) == PX_ACT_ACCEPT;
}

void
ftp_user_quota(const struct ftp_policy *p, const char *user,
    struct px_quota_limit *l)
{
	const struct px_rule *hit;

	l->bytes = l->transfers = 0;
	if (px_rules_decide(&p->users, user, &hit) == PX_ACT_ACCEPT &&
	    hit != NULL)
		*l = p->user_quota[hit - p->users.r];
}

const char *
ftp_user_ref(const struct ftp_policy *p, const char *user, const char *file,
    char *buf, size_t size)
{
	const struct px_rule *hit;

	(void)px_rules_decide(&p->users, user, &hit);
	return px_rule_ref(hit, file, buf, size);
}

bool
ftp_path_rules(const struct ftp_policy *p)
{
	return p->paths.n > 0;
}

/* px_rules_decide() with one subject a pattern: the absolute path for
 * "/..." patterns, the one relative to home for the others. */
static enum px_action
ftp_path_decide(const struct ftp_policy *p, const char *home,
    const char *path, const struct px_rule **hit)
{
	const char *rel = ftp_path_relative(home, path, p->icase), *subject;
	const struct px_rule *r;
	size_t i, j;

	for (i = 0; i < p->paths.n; i++) {
		r = &p->paths.r[i];
		if (r->arg != 0 && !ftp_who_ok(p->whos[r->arg - 1],
		    ftp_who_id))
			continue;
		for (j = 0; j < r->npats; j++) {
			subject = r->pats[j][0] == '/' ? path : rel;
			if (fnmatch(r->pats[j], subject,
			    p->paths.fnm_flags) == 0) {
				*hit = r;
				return r->action;
			}
		}
	}
	*hit = NULL;
	return px_rules_default_action(&p->paths);
}

bool
ftp_path_allowed(const struct ftp_policy *p, const char *home,
    const char *path)
{
	const struct px_rule *hit;

	return ftp_path_decide(p, home, path, &hit) == PX_ACT_ACCEPT;
}

const char *
ftp_path_ref(const struct ftp_policy *p, const char *home, const char *path,
    const char *file, char *buf, size_t size)
{
	const struct px_rule *hit;

	(void)ftp_path_decide(p, home, path, &hit);
	return px_rule_ref(hit, file, buf, size);
}
