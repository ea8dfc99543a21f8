/* Zones and address lists, and their prefix trees (zone.h). */
#include "zone.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "cfgread.h"

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

void
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

static int	px_zones_index(struct px_zones *zs, int32_t idx);

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
		if (z->name == NULL || px_zones_index(zs, idx) == -1) {
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
	free(zs->byname);
	px_ptree_free(&zs->tree);
	memset(zs, 0, sizeof(*zs));
}

/* FNV-1a: zone names are short and chosen by the administrator. */
static size_t
px_zone_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name != '\0'; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h;
}

int32_t
px_zones_find(const struct px_zones *zs, const char *name)
{
	size_t mask = zs->byname_cap - 1, i;

	/* Load time only, but once per zone and per zone:NAME: with 100 000
	 * zones a scan made loading quadratic (24 s), so a hash. */
	if (zs->byname_cap == 0)
		return -1;
	for (i = px_zone_hash(name) & mask; zs->byname[i] >= 0;
	    i = (i + 1) & mask)
		if (strcmp(zs->z[zs->byname[i]].name, name) == 0)
			return zs->byname[i];
	return -1;
}

static void
px_zones_index_put(int32_t *tab, size_t cap, const char *name, int32_t idx)
{
	size_t i;

	for (i = px_zone_hash(name) & (cap - 1); tab[i] >= 0;
	    i = (i + 1) & (cap - 1))
		;
	tab[i] = idx;
}

/* Indexes zone idx by name (not already there): 0, or -1 out of memory.
 * The table stays at most half full so that probes stay short. */
static int
px_zones_index(struct px_zones *zs, int32_t idx)
{
	if (2 * (size_t)(idx + 1) > zs->byname_cap) {
		size_t cap = zs->byname_cap ? zs->byname_cap * 2 : 64, i;
		int32_t *tab = malloc(cap * sizeof(*tab));

		if (tab == NULL)
			return -1;
		memset(tab, 0xff, cap * sizeof(*tab));	/* all -1 */
		for (i = 0; i < (size_t)idx; i++)
			px_zones_index_put(tab, cap, zs->z[i].name, (int32_t)i);
		free(zs->byname);
		zs->byname = tab;
		zs->byname_cap = cap;
	}
	px_zones_index_put(zs->byname, zs->byname_cap, zs->z[idx].name, idx);
	return 0;
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

size_t
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

/* One word of ports=: "21" or "2100-2199". */
static int
px_ports_tok(const char *p, size_t len, void *arg)
{
	struct px_list_tok *lt = arg;
	struct px_addrlist *l = lt->l;
	struct px_portrange r, *nr;
	char lo[8], hi[8];
	const char *dash = memchr(p, '-', len), *why;
	uint64_t a, b;
	size_t llen = dash != NULL ? (size_t)(dash - p) : len;

	if (llen >= sizeof(lo) || (dash != NULL &&
	    len - llen - 1 >= sizeof(hi))) {
		px_cfg_error(lt->e, lt->n, "ports: \"%.*s\": not a port or "
		    "LOW-HIGH range", (int)(len < 40 ? len : 40), p);
		return -1;
	}
	snprintf(lo, sizeof(lo), "%.*s", (int)llen, p);
	snprintf(hi, sizeof(hi), "%.*s", dash != NULL ? (int)(len - llen - 1) :
	    (int)llen, dash != NULL ? dash + 1 : p);
	if (px_parse_uint(lo, 1, 65535, &a, &why) == -1 ||
	    px_parse_uint(hi, 1, 65535, &b, &why) == -1) {
		px_cfg_error(lt->e, lt->n, "ports: \"%.*s\": %s (ports are "
		    "1..65535, a range LOW-HIGH)", (int)len, p, why);
		return -1;
	}
	if (a > b) {
		px_cfg_error(lt->e, lt->n, "ports: \"%.*s\": the range ends "
		    "below its start", (int)len, p);
		return -1;
	}
	r.lo = (uint16_t)a;
	r.hi = (uint16_t)b;
	if ((l->nports & (l->nports - 1)) == 0) {
		if ((nr = realloc(l->ports, (l->nports ? l->nports * 2 : 1) *
		    sizeof(*nr))) == NULL) {
			px_cfg_error(lt->e, lt->n, "out of memory");
			return -1;
		}
		l->ports = nr;
	}
	l->ports[l->nports++] = r;
	return 0;
}

static int
px_portrange_cmp(const void *a, const void *b)
{
	const struct px_portrange *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* ports= of <servers>: sorted, with overlapping and adjacent ranges
 * joined, so that a lookup is a binary search. */
static int
px_addrlist_ports_load(struct px_addrlist *l, const xmlNode *n,
    struct px_list_tok *lt)
{
	char *v = px_attr(n, "ports");
	size_t i, j;
	int rc;

	if (v == NULL)
		return 0;
	rc = px_words(v, px_ports_tok, lt);
	xmlFree(v);
	if (rc == 0 && l->nports == 0) {
		/* An empty list would silently refuse every port. */
		px_cfg_error(lt->e, n, "ports=\"\": list at least one port or "
		    "LOW-HIGH range, or leave ports= out (any port)");
		return -1;
	}
	if (rc == -1 || l->nports == 0)
		return rc;
	qsort(l->ports, l->nports, sizeof(*l->ports), px_portrange_cmp);
	for (i = 1, j = 0; i < l->nports; i++) {
		if ((uint32_t)l->ports[i].lo <= (uint32_t)l->ports[j].hi + 1) {
			if (l->ports[i].hi > l->ports[j].hi)
				l->ports[j].hi = l->ports[i].hi;
		} else
			l->ports[++j] = l->ports[i];
	}
	l->nports = j + 1;
	return 0;
}

int
px_addrlist_load(struct px_addrlist *l, const xmlNode *n,
    const struct px_zones *zs, struct px_cfgerr *e)
{
	static const struct px_cidr any4 = { .family = AF_INET },
	    any6 = { .family = AF_INET6 };
	struct px_list_tok lt = { l, zs, n, e };
	char *v = px_attr(n, "allow");
	int rc;

	l->set = true;
	l->line = px_xml_line(n);
	rc = px_addrlist_ports_load(l, n, &lt);
	if (v == NULL) {
		if (l->nports == 0) {
			if (rc == 0)
				px_cfg_error(e, n, "<%s> needs allow= (or, on "
				    "<servers>, ports=)", (const char *)n->name);
			return -1;
		}
		/* ports= alone: every address, as without the element. */
		if (px_cidr_push(&l->cidrs, &l->ncidrs, &any4) == -1 ||
		    px_cidr_push(&l->cidrs, &l->ncidrs, &any6) == -1) {
			px_cfg_error(e, n, "out of memory");
			return -1;
		}
		return rc;
	}
	if (px_words(v, px_list_tok, &lt) == -1)
		rc = -1;
	else if (l->ncidrs == 0 && l->nzones == 0) {
		/* An empty list would silently refuse everyone. */
		px_cfg_error(e, n, "allow=\"\": list at least one address, CIDR "
		    "or zone:NAME, or remove <%s>", (const char *)n->name);
		rc = -1;
	}
	xmlFree(v);
	return rc;
}

bool
px_addrlist_port_ok(const struct px_addrlist *l, uint16_t port)
{
	size_t lo = 0, hi = l->nports;

	if (l->nports == 0)
		return true;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (port < l->ports[mid].lo)
			hi = mid;
		else if (port > l->ports[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

void
px_addrlist_free(struct px_addrlist *l)
{
	free(l->cidrs);
	free(l->zones);
	free(l->ports);
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
