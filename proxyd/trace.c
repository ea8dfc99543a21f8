/* proxyd --check --trace CLIENT DEST:PORT: which service of each shared
 * listener would take such a connection (its lists and ports=), and why. It decides with the
 * same trees the workers use and explains with a plain scan of each list;
 * the two must agree (a disagreement is a bug, and says so). */
#include "trace.h"

#include <string.h>

#include "analyser.h"
#include "config.h"
#include "zone.h"

static void
px_trace_zone(FILE *out, const struct px_zones *zs, const char *what,
    const struct px_zone_path *zp)
{
	int32_t z = px_zone_path_zone(zp);

	fprintf(out, "%s zone: %s", what, px_zone_name(zs, z));
	if (z >= 0) {
		fprintf(out, " (line %ld", zs->z[z].line);
		for (z = zs->z[z].parent; z >= 0; z = zs->z[z].parent)
			fprintf(out, ", inside %s", zs->z[z].name);
		fprintf(out, ")");
	}
	fprintf(out, "\n");
}

static void
px_trace_list(FILE *out, const char *what, const struct px_service *svc,
    const struct px_addrlist *l, int spec, const char *why)
{
	if (!l->set)
		fprintf(out, "      %s: no <%s> element: any, at /0\n", what, what);
	else if (spec < 0)
		fprintf(out, "      %s: no entry holds it (%s:%ld)\n", what,
		    svc->file, l->line);
	else
		fprintf(out, "      %s: %s (%s:%ld)\n", what, why, svc->file,
		    l->line);
}

int
px_trace(const struct px_config *c, const char *client, const char *dest,
    FILE *out)
{
	struct sockaddr_storage cs, ds;
	socklen_t len;
	const char *why;
	struct px_key ck, dk;
	struct px_zone_path czp, dzp;
	char a[PX_ADDRSTRLEN];
	size_t i, j, shown = 0;
	uint16_t port;
	int bad = 0;

	if (px_parse_ip(client, 0, &cs, &len, &why) == -1) {
		fprintf(stderr, "proxyd: --trace %s: %s\n", client, why);
		return 1;
	}
	if (px_parse_hostport(dest, &ds, &len, &why) == -1) {
		fprintf(stderr, "proxyd: --trace ... %s: %s (want ADDR:PORT or "
		    "[ADDR6]:PORT)\n", dest, why);
		return 1;
	}
	port = px_sockaddr_port((struct sockaddr *)&ds);
	px_key_from_sockaddr(&ck, (struct sockaddr *)&cs);
	px_key_from_sockaddr(&dk, (struct sockaddr *)&ds);
	px_zones_path(&c->zones, &ck, &czp);
	px_zones_path(&c->zones, &dk, &dzp);
	fprintf(out, "trace: client %s to %s\n", client,
	    px_sockaddr_str((struct sockaddr *)&ds, a, sizeof(a)));
	px_trace_zone(out, &c->zones, "  client", &czp);
	px_trace_zone(out, &c->zones, "  server", &dzp);

	for (i = 0; i < c->ngroups; i++) {
		const struct px_group *g = &c->groups[i];
		const struct px_service *lead = g->svc[0];
		int16_t cspec[PX_GROUP_MAX], sspec[PX_GROUP_MAX];
		int16_t addr0;
		int pick, tie[2];

		/* Only listeners that take diverted connections pick by
		 * destination; a fixed service has one server. */
		if (lead->mode == PX_MODE_FIXED)
			continue;
		shown++;
		fprintf(out, "listener %s (%s), %zu service%s:\n",
		    px_sockaddr_str((const struct sockaddr *)&lead->listen, a,
		    sizeof(a)), px_mode_name(lead->mode), g->n,
		    g->n == 1 ? "" : "s");
		px_group_specs(g, &c->zones, PX_DIM_CLIENT, &ck, &czp, cspec);
		px_group_specs(g, &c->zones, PX_DIM_SERVER, &dk, &dzp, sspec);
		for (j = 0; j < g->n; j++) {
			const struct px_service *svc = g->svc[j];
			char cwhy[128], swhy[128];
			int cscan = px_addrlist_spec(&svc->clients, &c->zones,
			    &ck, &czp, cwhy, sizeof(cwhy));
			int sscan = px_addrlist_spec(&svc->servers, &c->zones,
			    &dk, &dzp, swhy, sizeof(swhy));
			bool port_ok = px_addrlist_port_ok(&svc->servers, port);

			fprintf(out, "    %s (%s %s, %s:%ld): %s\n", svc->name,
			    svc->analyser->name, px_mode_name(svc->mode),
			    svc->file, svc->line, cscan >= 0 && sscan >= 0 &&
			    port_ok ? "matches" : "does not match");
			px_trace_list(out, "clients", svc, &svc->clients, cscan,
			    cwhy);
			px_trace_list(out, "servers", svc, &svc->servers, sscan,
			    swhy);
			if (svc->servers.nports != 0)
				fprintf(out, "      port %u: %s ports= (%s:%ld)\n",
				    (unsigned)port, port_ok ? "in" : "not in",
				    svc->file, svc->servers.line);
			if (cscan != cspec[j] || sscan != sspec[j]) {
				fprintf(out, "      BUG: the dispatch trees say "
				    "/%d and /%d\n", cspec[j], sspec[j]);
				bad = 1;
			}
		}
		addr0 = sspec[0];
		px_group_ports(g, port, sspec);
		pick = px_group_choose(g, cspec, sspec, tie);
		if (pick >= 0)
			fprintf(out, "  => %s takes it%s\n", g->svc[pick]->name,
			    lead->mode == PX_MODE_FORWARD ? " (forward mode: "
			    "each request's server is checked the same way)" : "");
		else if (pick == -1)
			fprintf(out, "  => refused: %s\n", g->n == 1 ?
			    (cspec[0] < 0 ? "client not allowed" :
			    addr0 >= 0 ? "server port not allowed" :
			    "server not allowed") :
			    "no service for this client and server");
		else
			fprintf(out, "  => refused: %s and %s are as specific "
			    "as each other\n", g->svc[tie[0]]->name,
			    g->svc[tie[1]]->name);
	}
	if (shown == 0)
		fprintf(out, "no transparent, redirect or forward service: "
		    "fixed services connect to their <target> only\n");
	return bad ? 2 : 0;
}
