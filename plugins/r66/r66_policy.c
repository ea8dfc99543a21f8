/* r66: the <r66> element of a service, read once at load into a
 * struct r66_policy (r66_policy.h) that workers then only read. */
#include "r66_policy.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "auth.h"
#include "cfgread.h"
#include "parse.h"
#include "r66_wire.h"

/* require-digest=, in the order its error message lists them. */
enum {
	R66_REQ_YES = 0,
	R66_REQ_NO,
	R66_REQ_BLOCK,
	R66_REQ_GLOBAL,
};

static const char *const r66_digest_names[] = {
	"yes", "no", "block", "global", NULL,
};
/* information=, test=. */
enum {
	R66_YES = 0,
	R66_NO,
};

static const char *const r66_yes_no[] = { "yes", "no", NULL };
/* size-mismatch=. */
static const char *const r66_allow_block[] = { "allow", "block", NULL };

void
r66_policy_free(void *pol)
{
	struct r66_policy *p = pol;

	if (p == NULL)
		return;
	px_rules_free(&p->hosts);
	px_rules_free(&p->rules);
	px_rules_free(&p->files);
	free(p->host_quota);
	if (p->partners != NULL)
		OPENSSL_cleanse(p->partners, p->npartners *
		    sizeof(*p->partners));
	free(p->partners);
	free(p);
}

void
r66_password_key(const char *pw, size_t len, unsigned char key[16])
{
	static const char salt[] = "GoldenGate";
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned n = 16;
	int i;

	memset(key, 0, 16);
	if (ctx == NULL)
		return;
	if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1) {
		for (i = 0; i < 16; i++) {
			EVP_DigestUpdate(ctx, pw, len);
			EVP_DigestUpdate(ctx, salt, sizeof(salt) - 1);
		}
		EVP_DigestFinal_ex(ctx, key, &n);
	}
	EVP_MD_CTX_free(ctx);
}

const struct r66_partner *
r66_partner_find(const struct r66_policy *p, const char *id)
{
	size_t i;

	for (i = 0; i < p->npartners; i++)
		if (strcmp(p->partners[i].id, id) == 0)
			return &p->partners[i];
	return NULL;
}

/* <partner id="hosta" password-file="hosta.pw"/>: the file (relative to
 * the service file) read now, only its key kept. */
static int
r66_partner_load(const xmlNode *n, struct r66_policy *p, struct px_cfgerr *e)
{
	struct r66_partner *grown, *r;
	char *id = px_attr(n, "id"), *f = px_attr(n, "password-file");
	char *path = NULL, *pw = NULL;
	const char *why = "out of memory";
	int rc = -1;

	if (id == NULL || id[0] == '\0' || strlen(id) >= sizeof(r->id)) {
		px_cfg_error(e, n, "<partner>: id= is required, 1..127 bytes");
		goto out;
	}
	if (r66_partner_find(p, id) != NULL) {
		px_cfg_error(e, n, "<partner id=\"%s\"> given twice", id);
		goto out;
	}
	if (f == NULL) {
		px_cfg_error(e, n, "<partner id=\"%s\">: password-file= is "
		    "required", id);
		goto out;
	}
	if ((path = px_auth_path(e->file, f)) == NULL ||
	    (pw = px_auth_read_secret(path, &why)) == NULL) {
		px_cfg_error(e, n, "password-file=\"%s\": %s", f, why);
		goto out;
	}
	if ((grown = px_grow(p->partners, p->npartners,
	    sizeof(*grown))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		goto out;
	}
	p->partners = grown;
	r = &p->partners[p->npartners++];
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	r66_password_key(pw, strlen(pw), r->key);
	r->line = px_xml_line(n);
	rc = 0;
out:
	if (pw != NULL) {
		OPENSSL_cleanse(pw, strlen(pw));
		free(pw);
	}
	free(path);
	xmlFree(id);
	xmlFree(f);
	return rc;
}

static int
r66_split(const xmlNode *n, const char *attr, const char *v, char ***out,
    size_t *nout, struct px_cfgerr *e)
{
	const char *p = v;
	char **list = NULL, **nl;
	size_t k = 0;

	for (;;) {
		size_t len;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		len = strcspn(p, " \t\n");
		if (len > 255 || (nl = px_grow(list, k, sizeof(*list))) == NULL) {
			px_cfg_error(e, n, "%s: item too long or out of memory",
			    attr);
			goto fail;
		}
		list = nl;
		if ((list[k] = strndup(p, len)) == NULL) {
			px_cfg_error(e, n, "%s: out of memory", attr);
			goto fail;
		}
		k++;
		p += len;
	}
	if (k == 0) {
		px_cfg_error(e, n, "%s=\"\": expected at least one item", attr);
		goto fail;
	}
	*out = list;
	*nout = k;
	return 0;
fail:
	while (k > 0)
		free(list[--k]);
	free(list);
	return -1;
}

/* True when v holds no pattern. px_rules_add() refuses that too, in its
 * own words ("<rule> needs a non-empty name="); r66 keeps the message it
 * has always given, which tests/unit/config_test.c checks. */
static bool
r66_blank(const char *v)
{
	return v[strspn(v, " \t\r\n")] == '\0';
}

/* <host id=...>, <rule name=...>, <file pattern=...>: one rule of list l,
 * its patterns split on white space, action= accept (the default), deny
 * or abort; <file> may carry max-size=, kept in the rule's arg (0: none). */
static int
r66_pat_rule_load(const xmlNode *n, const char *attr, struct px_rules *l,
    struct px_cfgerr *e)
{
	struct px_rule *r;
	char *v;
	const char *why;
	uint64_t max_size;
	int rc = -1;

	if ((v = px_attr(n, attr)) == NULL) {
		px_cfg_error(e, n, "<%s> needs %s=", (const char *)n->name, attr);
		return -1;
	}
	if (r66_blank(v)) {
		px_cfg_error(e, n, "%s=\"\": expected at least one item", attr);
		goto out;
	}
	xmlFree(v);
	v = NULL;
	if ((r = px_rules_add(e, l, n, attr, true, PX_ACT_ACCEPT)) == NULL ||
	    px_attr_action(e, n, PX_ACTIONS_ADA, false, &r->action) == -1)
		goto out;
	if ((v = px_attr(n, "max-size")) != NULL) {
		if (px_parse_size(v, &max_size, &why) == -1) {
			px_cfg_error(e, n, "max-size=\"%s\": %s", v, why);
			goto out;
		}
		if (max_size == 0) {
			px_cfg_error(e, n, "max-size=\"%s\": must be above 0 "
			    "(leave it out for no limit)", v);
			goto out;
		}
		r->arg = max_size;
	}
	rc = 0;
out:
	if (v != NULL)
		xmlFree(v);
	return rc;
}

/* <host>: the rule, and its daily quota at the same index. */
static int
r66_host_load(const xmlNode *n, struct r66_policy *p, struct px_cfgerr *e)
{
	struct px_quota_limit *grown;

	if ((grown = px_grow(p->host_quota, p->hosts.n,
	    sizeof(*grown))) == NULL) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	p->host_quota = grown;
	if (px_attr_quota(e, n, &grown[p->hosts.n]) == -1)
		return -1;
	return r66_pat_rule_load(n, "id", &p->hosts, e);
}

void
r66_host_quota(const struct r66_policy *p, const char *host,
    struct px_quota_limit *l)
{
	const struct px_rule *hit;

	l->bytes = l->transfers = 0;
	if (px_rules_decide(&p->hosts, host, &hit) == PX_ACT_ACCEPT &&
	    hit != NULL)
		*l = p->host_quota[hit - p->hosts.r];
}

static int
r66_modes_load(const xmlNode *n, unsigned *modes, struct px_cfgerr *e)
{
	char *v = px_attr(n, "allow"), **list = NULL;
	size_t k, nl = 0;
	int m, rc = -1;

	if (v == NULL) {
		px_cfg_error(e, n, "<mode> needs allow=");
		return -1;
	}
	if (r66_split(n, "allow", v, &list, &nl, e) == -1)
		goto out;
	*modes = 0;
	for (k = 0; k < nl; k++) {
		for (m = R66_MODE_SEND; m <= R66_MODE_RECVMD5THROUGH; m++)
			if (strcmp(list[k], r66_mode_name(m)) == 0)
				break;
		if (m > R66_MODE_RECVMD5THROUGH) {
			px_cfg_error(e, n, "allow: unknown mode \"%s\" (send recv "
			    "sendmd5 recvmd5 sendthrough recvthrough "
			    "sendmd5through recvmd5through)", list[k]);
			goto out;
		}
		*modes |= 1u << m;
	}
	rc = 0;
out:
	for (k = 0; k < nl; k++)
		free(list[k]);
	free(list);
	xmlFree(v);
	return rc;
}

int
r66_policy_load(const xmlNode *sec, void **pol, struct px_cfgerr *e)
{
	struct r66_policy *p;
	const xmlNode *n;
	const char *why;
	char *v;
	bool seen_mode = false;
	int digest = R66_REQ_NO, info = R66_YES, test = R66_YES, mismatch = -1;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		px_cfg_error(e, sec, "out of memory");
		return -1;
	}
	/* What no rule matches: each list is an allow-list, as r66 lists
	 * have always been (docs/CONFIG.md): with no rule everything passes,
	 * with rules a name none of them matches is denied. */
	px_rules_init(&p->hosts, PX_DEFAULT_ALLOW_LIST, 0);
	px_rules_init(&p->rules, PX_DEFAULT_ALLOW_LIST, 0);
	px_rules_init(&p->files, PX_DEFAULT_ALLOW_LIST, 0);
	p->max_block = R66_MAX_BLOCK_DEF;
	p->modes = 0x1fe;	/* 1..8 */
	p->information = p->test = true;
	if (sec == NULL)
		goto done;
	if (px_attr_choice(e, sec, "require-digest", r66_digest_names,
	    &digest) == -1)
		goto fail;
	p->req_block_digest = digest == R66_REQ_YES || digest == R66_REQ_BLOCK;
	p->req_global_digest = digest == R66_REQ_YES ||
	    digest == R66_REQ_GLOBAL;
	if ((v = px_attr(sec, "max-block")) != NULL) {
		if (px_parse_size(v, &p->max_block, &why) == -1) {
			px_cfg_error(e, sec, "max-block=\"%s\": %s", v, why);
			xmlFree(v);
			goto fail;
		}
		if (p->max_block < 100 || p->max_block > R66_MAX_BLOCK_MAX) {
			px_cfg_error(e, sec, "max-block=\"%s\": must be between "
			    "100 and 16m", v);
			xmlFree(v);
			goto fail;
		}
		xmlFree(v);
	}
	if (px_attr_choice(e, sec, "information", r66_yes_no, &info) == -1 ||
	    px_attr_choice(e, sec, "test", r66_yes_no, &test) == -1 ||
	    px_attr_choice(e, sec, "size-mismatch", r66_allow_block,
	    &mismatch) == -1)
		goto fail;
	/* Unset: a wrong size is refused where it is found (it always was a
	 * violation), without holding every transfer's last block: that takes
	 * transfers off the spliced path, so only an explicit block pays it. */
	p->size_mismatch_block = mismatch != 0;
	p->size_mismatch_hold = mismatch == 1;
	p->information = info == R66_YES;
	p->test = test == R66_YES;
	for (n = sec->children; n != NULL; n = n->next) {
		int rc = 0;

		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(n->name, (const xmlChar *)"host") == 0)
			rc = r66_host_load(n, p, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"partner") == 0)
			rc = r66_partner_load(n, p, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"rule") == 0)
			rc = r66_pat_rule_load(n, "name", &p->rules, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"file") == 0)
			rc = r66_pat_rule_load(n, "pattern", &p->files, e);
		else if (xmlStrcmp(n->name, (const xmlChar *)"mode") == 0) {
			if (seen_mode) {
				px_cfg_error(e, n, "<mode> given twice");
				goto fail;
			}
			seen_mode = true;
			p->mode_line = px_xml_line(n);
			rc = r66_modes_load(n, &p->modes, e);
		} else {
			px_cfg_error(e, n, "unknown element <%s> in <r66>",
			    (const char *)n->name);
			rc = -1;
		}
		if (rc == -1)
			goto fail;
	}
done:
	*pol = p;
	return 0;
fail:
	r66_policy_free(p);
	return -1;
}
