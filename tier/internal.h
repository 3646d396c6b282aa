/*
 * What the files of tier/ share, and nothing else includes: the libfabric
 * endpoint both ends use (fabric.c), the tier table in the pool (table.c).
 */
#ifndef CXLCR_TIER_INTERNAL_H
#define CXLCR_TIER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include "../common/pool.h"
#include "format.h"

/* The provider when $CXLCR_TIER_PROVIDER does not name one. */
#define TIER_DEFAULT_PROVIDER "tcp;ofi_rxm"

/* One reliable-datagram endpoint (FI_EP_RDM) with RMA, its completion
 * queue, its address vector, and one registered buffer. */
struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *buf;                   /* the registered buffer */
	size_t buf_size;
	bool buf_owned;              /* mapped by fab_open(), unmapped by fab_close() */
	void *desc;                  /* its descriptor, for local access */
	bool mr_virt;                /* remote addresses are virtual (FI_MR_VIRT_ADDR) */
	char provider[32];
};

/* Opens an endpoint of provider (NULL: $CXLCR_TIER_PROVIDER or the
 * default); node/service bind it (a server: its address; NULL for a
 * client), remote: its buffer may be written and read by peers. */
int fab_open(struct fab *f, const char *provider, const char *node, const char *service, size_t buf_size,
	     bool remote);
/* The same with buf (buf_size bytes, the caller's, which outlive f) as
 * its registered buffer: a second endpoint of a server over the same
 * memory. */
int fab_open_on(struct fab *f, const char *provider, const char *node, const char *service, void *buf,
		size_t buf_size, bool remote);
void fab_close(struct fab *f);
/* Loads libfabric and has it start its providers (fi_getinfo for
 * provider), keeping nothing open: see tier_warm(). */
int fab_warm(const char *provider);
/* The endpoint's address (fi_getname). */
int fab_name(struct fab *f, uint8_t *addr, uint32_t *len);
/* A peer's address, for fab_rma(). */
int fab_peer(struct fab *f, const uint8_t *addr, uint32_t len, fi_addr_t *peer);
/* One RMA read (write false) or write of len bytes between f->buf + local
 * and the peer's registered memory at remote (its address as the peer's
 * provider wants it) with key, waiting for the completion at most
 * timeout_ms: 0, or -1 with one line. */
int fab_rma(struct fab *f, bool write, fi_addr_t peer, size_t local, size_t len, uint64_t remote, uint64_t key,
	    int timeout_ms);
/* Lets the provider make progress (a server's loop): waits up to
 * timeout_ms; true if there was something to do. */
bool fab_progress(struct fab *f, int timeout_ms);

/* The tier table, mapped (table.c). */
struct tier_table {
	struct cxlcr_pool *pool;
	struct cxlcr_region region;
	uint8_t *base;
	struct cxlcr_tier_header *header;
	struct cxlcr_tier_server *servers;
	struct cxlcr_tier_extent *extents;
};

/* 0, 1 if there is none (and !create), -1 with one line. */
int table_open(struct cxlcr_pool *pool, bool create, struct tier_table *t);
void table_close(struct tier_table *t);
/* A consistent copy of server i, or -1 (unused, or corrupt: one line). */
int table_server(const struct tier_table *t, uint32_t i, struct cxlcr_tier_server *copy);
uint32_t table_server_crc(const struct cxlcr_tier_server *s);
uint32_t table_extent_crc(const struct cxlcr_tier_extent *e);
/* Is extent e in use (its owner a live region, its server the same
 * incarnation)? */
bool table_extent_live(const struct tier_table *t, const struct cxlcr_tier_extent *e);

/* A client's connection to one memory server of the table (client.c):
 * its own endpoint with a bounce buffer of buf_size bytes. */
struct conn {
	struct fab fab;
	fi_addr_t peer;
	struct cxlcr_tier_server server;  /* as the table had it */
	uint32_t index;
	int timeout_ms;
	uint64_t key;                     /* of the server's memory at the endpoint it reached */
	bool bulk;                        /* that endpoint is the server's bulk one */
};

/* bulk: to the server's bulk endpoint if it has one (reads and writes of
 * many pages that nothing waits for page by page), else its main one. */
int conn_open(struct cxlcr_pool *pool, uint32_t index, size_t buf_size, bool bulk, struct conn *c);
void conn_close(struct conn *c);
/* RMA between the bounce buffer at local and the server at offset. */
int conn_rma(struct conn *c, bool write, size_t local, size_t len, uint64_t offset);

#endif
