#include "zone.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "config.h"

/* Deeper nesting is a mistake, not a policy. */
#define PX_ZONE_DEPTH_MAX	16
#define PX_ZONES_MAX		100000

/* ---- keys and the prefix tree ----------------------------------------- */

void
px_key_from_sockaddr(struct px_key *k, const struct sockaddr *sa)
{
	memset(k, 0, sizeof(*k));
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
		    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			/* As px_cidr_match: mapped addresses are IPv4. */
			memcpy(k->addr, a->s6_addr + 12, 4);
			k->len = 32;
			return;
		}
		memcpy(k->addr, a->s6_addr, 16);
		k->v6 = 1;
		k->len = 128;
		return;
	}
	memcpy(k->addr,
	    &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	k->len = 32;
}

void
px_key_from_cidr(struct px_key *k, const struct px_cidr *c)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->addr, c->addr, sizeof(k->addr));
	k->v6 = c->family == AF_INET6;
	k->len = c->prefix;
}

static int
px_key_bit(const uint8_t *addr, unsigned i)
{
	return (addr[i / 8] >> (7 - i % 8)) & 1;
}

int
px_ptree_init(struct px_ptree *t)
{
	t->cap = 64;
	t->n = 2;
	if ((t->node = calloc(t->cap, sizeof(*t->node))) == NULL)
		return -1;
	t->node[0].val = t->node[1].val = -1;
	return 0;
}

void
px_ptree_free(struct px_ptree *t)
{
	free(t->node);
	memset(t, 0, sizeof(*t));
}

int32_t
px_ptree_insert(struct px_ptree *t, const struct px_cidr *c)
{
	int32_t at = c->family == AF_INET6 ? 1 : 0;
	unsigned i;

	for (i = 0; i < c->prefix; i++) {
		int b = px_key_bit(c->addr, i);

		if (t->node[at].child[b] == 0) {
			if (t->n == t->cap) {
				struct px_ptree_node *nn = realloc(t->node,
				    t->cap * 2 * sizeof(*nn));

				if (nn == NULL)
					return -1;
				t->node = nn;
				t->cap *= 2;
			}
			t->node[t->n] = (struct px_ptree_node){ .val = -1 };
			t->node[at].child[b] = (int32_t)t->n++;
		}
		at = t->node[at].child[b];
	}
	return at;
}

size_t
px_ptree_path(const struct px_ptree *t, const struct px_key *k,
    int32_t *vals, uint8_t *lens)
{
	int32_t at = k->v6 ? 1 : 0;
	size_t n = 0;
	unsigned i;

	if (t->node == NULL)
		return 0;
	for (i = 0;; i++) {
		if (t->node[at].val >= 0) {
			vals[n] = t->node[at].val;
			lens[n++] = (uint8_t)i;
		}
		if (i == k->len ||
		    (at = t->node[at].child[px_key_bit(k->addr, i)]) == 0)
			break;
	}
	return n;
}

/* ---- zones ------------------------------------------------------------- */

static bool
px_zone_name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' ||
		    s[i] == '.'))
			return false;
	return true;
}

/* Splits a list attribute on white space and commas: calls tok for each
 * word. 0, or the first -1 tok returned. */
static int
px_words(const char *v, int (*tok)(const char *, size_t, void *), void *arg)
{
	const char *p = v;
	int rc = 0;

	while (*p != '\0') {
		size_t len;

		p += strspn(p, " \t\r\n,");
		if ((len = strcspn(p, " \t\r\n,")) == 0)
			break;
		if (tok(p, len, arg) == -1)
			rc = -1;
		p += len;
	}
	return rc;
}

static int
px_cidr_push(struct px_cidr **v, size_t *n, const struct px_cidr *c)
{
	struct px_cidr *nv;

	if ((*n & (*n - 1)) == 0) {	/* 0, 1, 2, 4...: grow to the next power */
		if ((nv = realloc(*v, (*n ? *n * 2 : 1) * sizeof(*nv))) == NULL)
			return -1;
		*v = nv;
	}
	(*v)[(*n)++] = *c;
	return 0;
}

struct px_zone_tok {
	struct px_zone		*z;
	const xmlNode		*n;
	struct px_cfgerr	*e;
};

static int
px_zone_tok(const char *p, size_t len, void *arg)
{
	struct px_zone_tok *zt = arg;
	struct px_cidr c;
	const char *why;

	if (px_parse_cidr(p, len, &c, &why) == -1) {
		px_cfg_error(zt->e, zt->n, "zone \"%s\": address \"%.*s\": %s",
		    zt->z->name, (int)len, p, why);
		return -1;
	}
	if (px_cidr_push(&zt->z->cidrs, &zt->z->ncidrs, &c) == -1) {
		px_cfg_error(zt->e, zt->n, "out of memory");
		return -1;
	}
	return 0;
}

static bool
px_cidr_within(const struct px_cidr *in, const struct px_cidr *out)
{
	struct px_key k;
	unsigned i;

	if (in->family != out->family || in->prefix < out->prefix)
		return false;
	px_key_from_cidr(&k, in);
	for (i = 0; i < out->prefix; i++)
		if (px_key_bit(k.addr, i) != px_key_bit(out->addr, i))
			return false;
	return true;
}

static void
px_cidr_str(const struct px_cidr *c, char *buf, size_t size)
{
	char a[64];
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (c->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, c->addr, 16);
		px_sockaddr_str((struct sockaddr *)&ss, a, sizeof(a));
		/* "[addr]:0" */
		*strrchr(a, ']') = '\0';
		snprintf(buf, size, "%s/%u", a + 1, c->prefix);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, c->addr, 4);
		px_sockaddr_str((struct sockaddr *)&ss, a, sizeof(a));
		*strrchr(a, ':') = '\0';
		snprintf(buf, size, "%s/%u", a, c->prefix);
	}
}

static int
px_zones_walk(struct px_zones *zs, const xmlNode *parent_el, int32_t parent,
    unsigned depth, struct px_cfgerr *e)
{
	const xmlNode *n;
	int rc = 0;

	for (n = parent_el->children; n != NULL; n = n->next) {
		struct px_zone *z;
		char *name, *addrs;
		int32_t idx;

		if (n->type != XML_ELEMENT_NODE ||
		    xmlStrcmp(n->name, (const xmlChar *)"zone") != 0)
			continue;
		if (depth >= PX_ZONE_DEPTH_MAX) {
			px_cfg_error(e, n, "zones nested deeper than %d",
			    PX_ZONE_DEPTH_MAX);
			return -1;
		}
		if (zs->n >= PX_ZONES_MAX) {
			px_cfg_error(e, n, "more than %d zones", PX_ZONES_MAX);
			return -1;
		}
		name = px_attr(n, "name");
		if (name == NULL || !px_zone_name_ok(name)) {
			px_cfg_error(e, n, "zone name=\"%s\": use 1..64 of "
			    "A-Z a-z 0-9 . _ -", name ? name : "");
			xmlFree(name);
			rc = -1;
			continue;
		}
		if ((idx = px_zones_find(zs, name)) >= 0) {
			px_cfg_error(e, n, "zone \"%s\" is also declared at "
			    "line %ld", name, zs->z[idx].line);
			xmlFree(name);
			rc = -1;
			continue;
		}
		if ((zs->n & (zs->n - 1)) == 0) {
			struct px_zone *nz = realloc(zs->z,
			    (zs->n ? zs->n * 2 : 1) * sizeof(*nz));

			if (nz == NULL) {
				xmlFree(name);
				px_cfg_error(e, n, "out of memory");
				return -1;
			}
			zs->z = nz;
		}
		idx = (int32_t)zs->n++;
		z = &zs->z[idx];
		*z = (struct px_zone){ .parent = parent,
		    .line = px_xml_line(n) };
		z->name = strdup(name);
		xmlFree(name);
		if (z->name == NULL) {
			px_cfg_error(e, n, "out of memory");
			return -1;
		}
		if ((addrs = px_attr(n, "addresses")) != NULL) {
			struct px_zone_tok zt = { z, n, e };

			if (px_words(addrs, px_zone_tok, &zt) == -1)
				rc = -1;
			xmlFree(addrs);
		}
		if (px_zones_walk(zs, n, idx, depth + 1, e) == -1)
			rc = -1;
		z = &zs->z[idx];	/* the walk may have moved it */
		if (z->ncidrs == 0 && (n->children == NULL ||
		    zs->n == (size_t)idx + 1)) {
			px_cfg_error(e, n, "zone \"%s\" holds no addresses "
			    "(addresses=\"...\" or nested zones)", z->name);
			rc = -1;
		}
	}
	return rc;
}

int
px_zones_load(struct px_zones *zs, const xmlNode *n, struct px_cfgerr *e)
{
	size_t i, j, k;
	int rc;

	memset(zs, 0, sizeof(*zs));
	if (px_ptree_init(&zs->tree) == -1) {
		px_cfg_error(e, n, "out of memory");
		return -1;
	}
	if (n == NULL)
		return 0;
	if ((rc = px_zones_walk(zs, n, -1, 0, e)) == -1)
		return -1;
	for (i = 0; i < zs->n; i++) {
		struct px_zone *z = &zs->z[i];
		int32_t up = z->parent;
		char a[80];

		/* A nested zone lies inside the nearest enclosing zone that
		 * has addresses: "most specific" must also mean "inside". */
		while (up >= 0 && zs->z[up].ncidrs == 0)
			up = zs->z[up].parent;
		for (j = 0; j < z->ncidrs; j++) {
			int32_t node = px_ptree_insert(&zs->tree, &z->cidrs[j]);
			bool inside = up < 0;

			px_cidr_str(&z->cidrs[j], a, sizeof(a));
			if (node == -1) {
				px_cfg_error_line(e, e->file, z->line,
				    "out of memory");
				return -1;
			}
			if (zs->tree.node[node].val >= 0) {
				const struct px_zone *o =
				    &zs->z[zs->tree.node[node].val];

				px_cfg_error_line(e, e->file, z->line,
				    "zone \"%s\": %s is also in zone \"%s\" "
				    "(line %ld): an address has one zone",
				    z->name, a, o->name, o->line);
				rc = -1;
				continue;
			}
			zs->tree.node[node].val = (int32_t)i;
			for (k = 0; up >= 0 && k < zs->z[up].ncidrs; k++)
				if (px_cidr_within(&z->cidrs[j],
				    &zs->z[up].cidrs[k]))
					inside = true;
			if (!inside) {
				px_cfg_error_line(e, e->file, z->line,
				    "zone \"%s\": %s is outside the zone it is "
				    "nested in (\"%s\", line %ld)", z->name, a,
				    zs->z[up].name, zs->z[up].line);
				rc = -1;
			}
		}
	}
	return rc;
}

void
px_zones_free(struct px_zones *zs)
{
	size_t i;

	for (i = 0; i < zs->n; i++) {
		free(zs->z[i].name);
		free(zs->z[i].cidrs);
	}
	free(zs->z);
	px_ptree_free(&zs->tree);
	memset(zs, 0, sizeof(*zs));
}

int32_t
px_zones_find(const struct px_zones *zs, const char *name)
{
	size_t i;

	/* Load time only (names are resolved to indexes): a scan is fine. */
	for (i = 0; i < zs->n; i++)
		if (strcmp(zs->z[i].name, name) == 0)
			return (int32_t)i;
	return -1;
}

void
px_zones_path(const struct px_zones *zs, const struct px_key *k,
    struct px_zone_path *out)
{
	out->n = zs->n == 0 ? 0 :
	    px_ptree_path(&zs->tree, k, out->zone, out->len);
}

int32_t
px_zone_path_zone(const struct px_zone_path *p)
{
	return p->n == 0 ? -1 : p->zone[p->n - 1];
}

const char *
px_zone_name(const struct px_zones *zs, int32_t z)
{
	return z >= 0 && (size_t)z < zs->n ? zs->z[z].name : "-";
}

/* The zones holding k's zone, from it outwards, each with the prefix
 * length that counts for it: its own prefix on the path or, for a zone
 * without addresses, that of the zone inside it. Returns how many. */
static size_t
px_zone_chain(const struct px_zones *zs, const struct px_zone_path *zp,
    int32_t *zone, uint8_t *len)
{
	int32_t z = px_zone_path_zone(zp);
	size_t n = 0, at = zp->n;
	uint8_t cur = at ? zp->len[at - 1] : 0;

	for (; z >= 0 && n < PX_PATH_MAX; z = zs->z[z].parent) {
		size_t i;

		for (i = at; i-- > 0;)
			if (zp->zone[i] == z) {
				cur = zp->len[i];
				at = i;
				break;
			}
		zone[n] = z;
		len[n++] = cur;
	}
	return n;
}

/* ---- address lists ---------------------------------------------------- */

struct px_list_tok {
	struct px_addrlist	*l;
	const struct px_zones	*zs;
	const xmlNode		*n;
	struct px_cfgerr	*e;
};

static int
px_list_tok(const char *p, size_t len, void *arg)
{
	struct px_list_tok *lt = arg;
	struct px_addrlist *l = lt->l;
	struct px_cidr c;
	const char *why;

	if (len > 5 && strncmp(p, "zone:", 5) == 0) {
		char name[80];
		int32_t z, *nz;

		snprintf(name, sizeof(name), "%.*s", (int)(len - 5), p + 5);
		if ((z = len - 5 < sizeof(name) ? px_zones_find(lt->zs, name) :
		    -1) < 0) {
			px_cfg_error(lt->e, lt->n, "allow: \"%.*s\": no such "
			    "zone in the daemon file's <zones>", (int)len, p);
			return -1;
		}
		if ((l->nzones & (l->nzones - 1)) == 0) {
			if ((nz = realloc(l->zones, (l->nzones ? l->nzones * 2 :
			    1) * sizeof(*nz))) == NULL) {
				px_cfg_error(lt->e, lt->n, "out of memory");
				return -1;
			}
			l->zones = nz;
		}
		l->zones[l->nzones++] = z;
		return 0;
	}
	if (px_parse_cidr(p, len, &c, &why) == -1) {
		px_cfg_error(lt->e, lt->n, "allow: \"%.*s\": %s", (int)len, p, why);
		return -1;
	}
	if (px_cidr_push(&l->cidrs, &l->ncidrs, &c) == -1) {
		px_cfg_error(lt->e, lt->n, "out of memory");
		return -1;
	}
	return 0;
}

int
px_addrlist_load(struct px_addrlist *l, const xmlNode *n,
    const struct px_zones *zs, struct px_cfgerr *e)
{
	struct px_list_tok lt = { l, zs, n, e };
	char *v = px_attr(n, "allow");
	int rc;

	l->set = true;
	l->line = px_xml_line(n);
	if (v == NULL)
		return 0;	/* the schema requires it */
	rc = px_words(v, px_list_tok, &lt);
	xmlFree(v);
	if (rc == 0 && l->ncidrs == 0 && l->nzones == 0) {
		/* An empty list would silently refuse everyone. */
		px_cfg_error(e, n, "allow=\"\": list at least one address, CIDR "
		    "or zone:NAME, or remove <%s>", (const char *)n->name);
		rc = -1;
	}
	return rc;
}

void
px_addrlist_free(struct px_addrlist *l)
{
	free(l->cidrs);
	free(l->zones);
	memset(l, 0, sizeof(*l));
}

/* Does prefix c hold the region k? */
static bool
px_cidr_holds(const struct px_cidr *c, const struct px_key *k)
{
	unsigned i;

	if ((c->family == AF_INET6) != (k->v6 != 0) || c->prefix > k->len)
		return false;
	for (i = 0; i < c->prefix; i++)
		if (px_key_bit(c->addr, i) != px_key_bit(k->addr, i))
			return false;
	return true;
}

int
px_addrlist_spec(const struct px_addrlist *l, const struct px_zones *zs,
    const struct px_key *k, const struct px_zone_path *zp, char *why,
    size_t whylen)
{
	int32_t chain[PX_PATH_MAX];
	uint8_t clen[PX_PATH_MAX];
	size_t i, j, nchain;
	int best = -1;
	char a[80];

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (!l->set) {
		if (why != NULL)
			snprintf(why, whylen, "no list: everyone, at /0");
		return 0;
	}
	for (i = 0; i < l->ncidrs; i++)
		if (px_cidr_holds(&l->cidrs[i], k) &&
		    l->cidrs[i].prefix > best) {
			best = l->cidrs[i].prefix;
			if (why != NULL) {
				px_cidr_str(&l->cidrs[i], a, sizeof(a));
				snprintf(why, whylen, "%s", a);
			}
		}
	nchain = px_zone_chain(zs, zp, chain, clen);
	for (i = 0; i < l->nzones; i++)
		for (j = 0; j < nchain; j++)
			if (chain[j] == l->zones[i] && clen[j] > best) {
				best = clen[j];
				if (why != NULL)
					snprintf(why, whylen, "zone:%s at /%u",
					    zs->z[chain[j]].name, clen[j]);
			}
	return best;
}

/* ---- one listener's services ------------------------------------------ */

static int
px_set_add(struct px_svcset *s, uint16_t idx)
{
	uint16_t *ni;

	if (s->n > 0 && s->idx[s->n - 1] == idx)
		return 0;	/* the same service twice in one list */
	if ((s->n & (s->n - 1)) == 0) {
		if ((ni = realloc(s->idx, (s->n ? s->n * 2 : 1) *
		    sizeof(*ni))) == NULL)
			return -1;
		s->idx = ni;
	}
	s->idx[s->n++] = idx;
	return 0;
}

static int
px_group_add_cidr(struct px_group *g, enum px_dim d, const struct px_cidr *c,
    uint16_t idx)
{
	int32_t node = px_ptree_insert(&g->tree[d], c);

	if (node == -1)
		return -1;
	if (g->tree[d].node[node].val < 0) {
		struct px_svcset *ns;

		if ((g->nsets[d] & (g->nsets[d] - 1)) == 0) {
			if ((ns = realloc(g->sets[d], (g->nsets[d] ?
			    g->nsets[d] * 2 : 1) * sizeof(*ns))) == NULL)
				return -1;
			g->sets[d] = ns;
		}
		g->sets[d][g->nsets[d]] = (struct px_svcset){ NULL, 0 };
		g->tree[d].node[node].val = (int32_t)g->nsets[d]++;
	}
	return px_set_add(&g->sets[d][g->tree[d].node[node].val], idx);
}

static const struct px_addrlist *
px_service_list(const struct px_service *svc, enum px_dim d)
{
	return d == PX_DIM_CLIENT ? &svc->clients : &svc->servers;
}

int
px_group_build(struct px_group *g, const struct px_zones *zs)
{
	static const struct px_cidr any4 = { .family = AF_INET },
	    any6 = { .family = AF_INET6 };
	unsigned d;
	size_t i, j;

	for (d = 0; d < 2; d++) {
		if (px_ptree_init(&g->tree[d]) == -1)
			return -1;
		if (zs->n > 0 &&
		    (g->zrefs[d] = calloc(zs->n, sizeof(*g->zrefs[d]))) == NULL)
			return -1;
		for (i = 0; i < g->n; i++) {
			const struct px_addrlist *l = px_service_list(g->svc[i], d);

			if (!l->set) {
				if (px_group_add_cidr(g, d, &any4, (uint16_t)i) ||
				    px_group_add_cidr(g, d, &any6, (uint16_t)i))
					return -1;
				continue;
			}
			for (j = 0; j < l->ncidrs; j++)
				if (px_group_add_cidr(g, d, &l->cidrs[j],
				    (uint16_t)i) == -1)
					return -1;
			for (j = 0; j < l->nzones; j++)
				if (px_set_add(&g->zrefs[d][l->zones[j]],
				    (uint16_t)i) == -1)
					return -1;
		}
	}
	return 0;
}

void
px_group_free(struct px_group *g, size_t nzones)
{
	unsigned d;
	size_t i;

	for (d = 0; d < 2; d++) {
		for (i = 0; i < g->nsets[d]; i++)
			free(g->sets[d][i].idx);
		free(g->sets[d]);
		for (i = 0; g->zrefs[d] != NULL && i < nzones; i++)
			free(g->zrefs[d][i].idx);
		free(g->zrefs[d]);
		px_ptree_free(&g->tree[d]);
	}
	free(g->svc);
	memset(g, 0, sizeof(*g));
}

void
px_group_specs(const struct px_group *g, const struct px_zones *zs,
    enum px_dim dim, const struct px_key *k, const struct px_zone_path *zp,
    int16_t *spec)
{
	int32_t vals[PX_PATH_MAX], chain[PX_PATH_MAX];
	uint8_t lens[PX_PATH_MAX], clen[PX_PATH_MAX];
	size_t i, j, n;

	for (i = 0; i < g->n; i++)
		spec[i] = -1;
	/* Shortest first: a later (longer) hit overrides. */
	n = px_ptree_path(&g->tree[dim], k, vals, lens);
	for (i = 0; i < n; i++) {
		const struct px_svcset *s = &g->sets[dim][vals[i]];

		for (j = 0; j < s->n; j++)
			spec[s->idx[j]] = lens[i];
	}
	if (g->zrefs[dim] == NULL)
		return;
	n = px_zone_chain(zs, zp, chain, clen);
	for (i = 0; i < n; i++) {
		const struct px_svcset *s = &g->zrefs[dim][chain[i]];

		for (j = 0; j < s->n; j++)
			if (spec[s->idx[j]] < clen[i])
				spec[s->idx[j]] = clen[i];
	}
}

int
px_group_choose(const struct px_group *g, const int16_t *cspec,
    const int16_t *sspec, int tie[2])
{
	int best = -1;
	size_t i;

	for (i = 0; i < g->n; i++) {
		if (cspec[i] < 0 || sspec[i] < 0)
			continue;
		if (best < 0 || (cspec[i] >= cspec[best] &&
		    sspec[i] >= sspec[best]))
			best = (int)i;
	}
	if (best < 0)
		return -1;
	/* best is maximal; it must also dominate every candidate. */
	for (i = 0; i < g->n; i++)
		if ((int)i != best && cspec[i] >= 0 && sspec[i] >= 0 &&
		    (cspec[i] > cspec[best] || sspec[i] > sspec[best] ||
		    (cspec[i] == cspec[best] && sspec[i] == sspec[best]))) {
			if (tie != NULL) {
				tie[0] = best;
				tie[1] = (int)i;
			}
			return -2;
		}
	return best;
}

/* One end's regions that give distinct specificity vectors, each with an
 * example prefix. */
struct px_regions {
	int16_t		*spec;		/* n x g->n */
	struct px_cidr	*example;
	size_t		 n;
};

static int
px_regions_add(struct px_regions *r, size_t width, const int16_t *spec,
    const struct px_cidr *c)
{
	size_t i;
	bool any = false;

	for (i = 0; i < width; i++)
		if (spec[i] >= 0)
			any = true;
	if (!any)
		return 0;
	for (i = 0; i < r->n; i++)
		if (memcmp(&r->spec[i * width], spec, width * sizeof(*spec)) == 0)
			return 0;
	if ((r->n & (r->n - 1)) == 0) {
		size_t cap = r->n ? r->n * 2 : 1;
		int16_t *ns = realloc(r->spec, cap * width * sizeof(*ns));
		struct px_cidr *ne;

		if (ns == NULL)
			return -1;
		r->spec = ns;
		if ((ne = realloc(r->example, cap * sizeof(*ne))) == NULL)
			return -1;
		r->example = ne;
	}
	memcpy(&r->spec[r->n * width], spec, width * sizeof(*spec));
	r->example[r->n++] = *c;
	return 0;
}

static int
px_regions_of(const struct px_group *g, const struct px_zones *zs,
    enum px_dim d, struct px_regions *r)
{
	static const struct px_cidr any4 = { .family = AF_INET },
	    any6 = { .family = AF_INET6 };
	int16_t *spec = calloc(g->n, sizeof(*spec));
	size_t i, j;
	int rc = -1;

	/* Every prefix that can change a specificity: the services' CIDRs
	 * and every zone's (a zone decides what zone:NAME holds). Each
	 * stands for the addresses it holds outside longer ones. */
#define PX_REGION(c) do { struct px_key k; struct px_zone_path zp;	\
		px_key_from_cidr(&k, (c)); px_zones_path(zs, &k, &zp);	\
		px_group_specs(g, zs, d, &k, &zp, spec);		\
		if (px_regions_add(r, g->n, spec, (c)) == -1) goto out;	\
	} while (0)
	if (spec == NULL)
		return -1;
	PX_REGION(&any4);
	PX_REGION(&any6);
	for (i = 0; i < g->n; i++) {
		const struct px_addrlist *l = px_service_list(g->svc[i], d);

		for (j = 0; j < l->ncidrs; j++)
			PX_REGION(&l->cidrs[j]);
	}
	for (i = 0; g->zrefs[d] != NULL && i < zs->n; i++)
		for (j = 0; j < zs->z[i].ncidrs; j++)
			PX_REGION(&zs->z[i].cidrs[j]);
#undef PX_REGION
	rc = 0;
out:
	free(spec);
	return rc;
}

int
px_group_check(const struct px_group *g, const struct px_zones *zs,
    struct px_cfgerr *e)
{
	struct px_regions r[2] = { { 0 }, { 0 } };
	size_t i, j;
	int rc = 0, tie[2];

	if (g->n < 2)
		return 0;
	if (px_regions_of(g, zs, PX_DIM_CLIENT, &r[0]) == -1 ||
	    px_regions_of(g, zs, PX_DIM_SERVER, &r[1]) == -1) {
		px_cfg_error_line(e, g->svc[0]->file, g->svc[0]->line,
		    "out of memory");
		rc = -1;
		goto out;
	}
	for (i = 0; i < r[0].n && rc == 0; i++)
		for (j = 0; j < r[1].n && rc == 0; j++) {
			const struct px_service *a, *b;
			char cs[80], ss[80];

			if (px_group_choose(g, &r[0].spec[i * g->n],
			    &r[1].spec[j * g->n], tie) != -2)
				continue;
			a = g->svc[tie[0] < tie[1] ? tie[0] : tie[1]];
			b = g->svc[tie[0] < tie[1] ? tie[1] : tie[0]];
			px_cidr_str(&r[0].example[i], cs, sizeof(cs));
			px_cidr_str(&r[1].example[j], ss, sizeof(ss));
			px_cfg_error_line(e, b->file, b->line,
			    "service \"%s\" and service \"%s\" (%s:%ld) share "
			    "their listen address and both select connections "
			    "from %s to %s without one being more specific "
			    "on both ends: narrow <clients> or <servers> of one",
			    b->name, a->name, a->file, a->line, cs, ss);
			rc = -1;
		}
out:
	for (i = 0; i < 2; i++) {
		free(r[i].spec);
		free(r[i].example);
	}
	return rc;
}

