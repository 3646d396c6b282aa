/*
 * A client of one memory server: an endpoint of the server's provider,
 * the server's address from the tier table, and RMA to offsets of its
 * memory (the provider's remote addressing applied here, once).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "internal.h"
#include "tier.h"

/*
 * The local address that routes to the server, for the client's own
 * endpoint: left to itself the provider takes the first interface it finds,
 * which on a machine with several (a pod's workers run in the machine's
 * namespace, beside other pods' bridges) may be one the server cannot
 * answer. The kernel's route to the server decides, as for any socket.
 */
static bool source_for(const struct cxlcr_tier_server *s, char *ip, size_t len)
{
	const struct sockaddr_in *to = (const void *)s->addr;
	if (s->addr_len < sizeof(*to) || to->sin_family != AF_INET)
		return false;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in me;
	socklen_t n = sizeof(me);
	bool ok = fd >= 0 && connect(fd, (const struct sockaddr *)to, sizeof(*to)) == 0 &&
		  getsockname(fd, (struct sockaddr *)&me, &n) == 0 && inet_ntop(AF_INET, &me.sin_addr, ip, (socklen_t)len);
	if (fd >= 0)
		close(fd);
	return ok;
}

int tier_timeout_ms(void)
{
	const char *e = getenv("CXLCR_TIER_TIMEOUT_MS");
	int v = e ? atoi(e) : 0;
	return v > 0 ? v : TIER_TIMEOUT_MS;
}

/* The server's bulk endpoint: its address with the bulk port (a provider
 * whose addresses are IP socket addresses: tcp, and verbs through
 * rdma_cm). False if it has none, or addresses of another kind. */
static bool bulk_address(const struct cxlcr_tier_server *s, uint8_t *addr)
{
	memcpy(addr, s->addr, sizeof(s->addr));
	if (!s->bulk_port || s->bulk_port > 65535)
		return false;
	if (s->addr_len == sizeof(struct sockaddr_in) && ((struct sockaddr_in *)(void *)addr)->sin_family == AF_INET) {
		((struct sockaddr_in *)(void *)addr)->sin_port = htons((uint16_t)s->bulk_port);
		return true;
	}
	if (s->addr_len == sizeof(struct sockaddr_in6) &&
	    ((struct sockaddr_in6 *)(void *)addr)->sin6_family == AF_INET6) {
		((struct sockaddr_in6 *)(void *)addr)->sin6_port = htons((uint16_t)s->bulk_port);
		return true;
	}
	return false;
}

int conn_open(struct cxlcr_pool *pool, uint32_t index, size_t buf_size, bool bulk, struct conn *c)
{
	memset(c, 0, sizeof(*c));
	struct tier_table t;
	int rc = table_open(pool, false, &t);
	if (rc != 0)
		return rc < 0 ? -1 : cxlcr_error("the pod has no memory server (cxlcr tier up)");
	rc = index < CXLCR_TIER_SERVERS ? table_server(&t, index, &c->server) : -1;
	table_close(&t);
	if (rc < 0)
		return c->server.incarnation ? -1 : cxlcr_error("memory server %u is not in the tier table", index);
	if (c->server.state != CXLCR_TIER_SERVER_UP)
		return cxlcr_error("memory server %s is down", c->server.name);
	char provider[sizeof(c->server.provider) + 1];
	cxlcr_copy_field(provider, sizeof(provider), c->server.provider);
	char src[INET_ADDRSTRLEN];
	bool have_src = source_for(&c->server, src, sizeof(src));
	uint8_t addr[sizeof(c->server.addr)];
	c->bulk = bulk && bulk_address(&c->server, addr);
	c->key = c->bulk ? c->server.bulk_mr_key : c->server.mr_key;
	if (fab_open(&c->fab, provider, have_src ? src : NULL, have_src ? "0" : NULL, buf_size, false) < 0 ||
	    fab_peer(&c->fab, c->bulk ? addr : c->server.addr, c->server.addr_len, &c->peer) < 0) {
		fab_close(&c->fab);
		return -1;
	}
	c->index = index;
	c->timeout_ms = tier_timeout_ms();
	return 0;
}

bool tier_warm(struct cxlcr_pool *pool, bool always)
{
	for (uint32_t i = 0; pool && i < CXLCR_TIER_SERVERS; i++) {
		struct tier_server_info s;
		if (tier_server_get(pool, i, &s) == 0 && s.up)
			return fab_warm(s.provider) == 0;
	}
	return always && fab_warm(NULL) == 0;
}

void conn_close(struct conn *c)
{
	fab_close(&c->fab);
}

int conn_rma(struct conn *c, bool write, size_t local, size_t len, uint64_t offset)
{
	if (offset > c->server.size || len > c->server.size - offset)
		return cxlcr_error("memory server %s: %zu bytes at %llu lie beyond its %llu", c->server.name, len,
				   (unsigned long long)offset, (unsigned long long)c->server.size);
	uint64_t remote = c->server.mr_virt ? c->server.mr_base + offset : offset;
	if (fab_rma(&c->fab, write, c->peer, local, len, remote, c->key, c->timeout_ms) < 0)
		return cxlcr_error("memory server %s: %s", c->server.name, cxlcr_last_error());
	return 0;
}
