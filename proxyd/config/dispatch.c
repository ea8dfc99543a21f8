/* The choice among the services of a shared listen address, and its
 * load-time check (dispatch.h). */
#include "dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"

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

void
px_group_ports(const struct px_group *g, uint16_t port, int16_t *spec)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (!px_addrlist_port_ok(&g->svc[i]->servers, port))
			spec[i] = -1;
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

static int
px_port_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* One port of each set of ports the services' ports= tell apart: the
 * ports where which services admit a port changes (1, each range's start,
 * the port after its end), kept when that set differs from every one kept.
 * *n stays 1 (port 1, every service) when no service has ports=. 0, or -1
 * (memory). */
static int
px_port_classes(const struct px_group *g, uint16_t **out, size_t *n)
{
	uint32_t *cut;
	uint8_t *seen = NULL, *in;
	size_t i, j, k, ncut = 1, max = 1;
	int rc = -1;

	*out = NULL;
	*n = 0;
	for (i = 0; i < g->n; i++)
		max += 2 * g->svc[i]->servers.nports;
	if ((cut = calloc(max, sizeof(*cut))) == NULL ||
	    (seen = calloc(max, g->n)) == NULL ||
	    (*out = calloc(max, sizeof(**out))) == NULL)
		goto out;
	cut[0] = 1;
	for (i = 0; i < g->n; i++)
		for (j = 0; j < g->svc[i]->servers.nports; j++) {
			const struct px_portrange *r = &g->svc[i]->servers.ports[j];

			cut[ncut++] = r->lo;
			if (r->hi < 65535)
				cut[ncut++] = (uint32_t)r->hi + 1;
		}
	qsort(cut, ncut, sizeof(*cut), px_port_cmp);
	for (i = 0; i < ncut; i++) {
		if (i > 0 && cut[i] == cut[i - 1])
			continue;
		in = &seen[*n * g->n];
		for (j = 0; j < g->n; j++)
			in[j] = px_addrlist_port_ok(&g->svc[j]->servers,
			    (uint16_t)cut[i]);
		for (k = 0; k < *n; k++)
			if (memcmp(&seen[k * g->n], in, g->n) == 0)
				break;
		if (k == *n)
			(*out)[(*n)++] = (uint16_t)cut[i];
	}
	rc = 0;
out:
	free(cut);
	free(seen);
	return rc;
}

int
px_group_check(const struct px_group *g, const struct px_zones *zs,
    struct px_cfgerr *e)
{
	struct px_regions r[2] = { { 0 }, { 0 } };
	int16_t sspec[PX_GROUP_MAX];
	uint16_t *port = NULL;
	size_t i, j, p, nport;
	int rc = 0, tie[2];

	if (g->n < 2)
		return 0;
	if (px_regions_of(g, zs, PX_DIM_CLIENT, &r[0]) == -1 ||
	    px_regions_of(g, zs, PX_DIM_SERVER, &r[1]) == -1 ||
	    px_port_classes(g, &port, &nport) == -1) {
		px_cfg_error_line(e, g->svc[0]->file, g->svc[0]->line,
		    "out of memory");
		rc = -1;
		goto out;
	}
	for (i = 0; i < r[0].n && rc == 0; i++)
		for (j = 0; j < r[1].n && rc == 0; j++)
			for (p = 0; p < nport && rc == 0; p++) {
				const struct px_service *a, *b;
				char cs[80], ss[80], ps[16] = "";

				memcpy(sspec, &r[1].spec[j * g->n], g->n *
				    sizeof(*sspec));
				px_group_ports(g, port[p], sspec);
				if (px_group_choose(g, &r[0].spec[i * g->n],
				    sspec, tie) != -2)
					continue;
				a = g->svc[tie[0] < tie[1] ? tie[0] : tie[1]];
				b = g->svc[tie[0] < tie[1] ? tie[1] : tie[0]];
				px_cidr_str(&r[0].example[i], cs, sizeof(cs));
				px_cidr_str(&r[1].example[j], ss, sizeof(ss));
				if (a->servers.nports != 0 ||
				    b->servers.nports != 0)
					snprintf(ps, sizeof(ps), " port %u",
					    (unsigned)port[p]);
				px_cfg_error_line(e, b->file, b->line,
				    "service \"%s\" and service \"%s\" (%s:%ld) "
				    "share their listen address and both select "
				    "connections from %s to %s%s without one "
				    "being more specific on both ends: narrow "
				    "<clients> or <servers> of one%s", b->name,
				    a->name, a->file, a->line, cs, ss, ps,
				    ps[0] != '\0' ? " (allow= or ports=)" : "");
				rc = -1;
			}
out:
	for (i = 0; i < 2; i++) {
		free(r[i].spec);
		free(r[i].example);
	}
	free(port);
	return rc;
}

