/*
 * The libfabric endpoint of both ends of the cold tier: a reliable datagram
 * endpoint (FI_EP_RDM) with one-sided RMA, the provider chosen by
 * configuration ("tcp;ofi_rxm" here, "verbs;ofi_rxm" on RDMA NICs: the same
 * code), and one registered buffer: the server's whole memory, or a
 * client's bounce buffer (providers with FI_MR_LOCAL move data only
 * between registered buffers).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "../common/error.h"
#include "../common/util.h"
#include "internal.h"

#define FAB_VERSION FI_VERSION(1, 9)
#define LIBFABRIC "libfabric.so.1"

/*
 * libfabric is loaded when the tier is first used, not linked: loading it
 * runs its providers' constructors (libpsm_infinipath calibrates a timer
 * with 600 sleeps), ~200 ms in every process that links it, and cxlcr,
 * cxlcrd and their workers rarely touch the tier. Only the functions
 * libfabric exports are looked up; the rest are inline calls through the
 * objects' operations.
 */
static struct {
	bool loaded;
	__typeof__(fi_getinfo) *getinfo;
	__typeof__(fi_freeinfo) *freeinfo;
	__typeof__(fi_dupinfo) *dupinfo;
	__typeof__(fi_fabric) *fabric;
	__typeof__(fi_strerror) *strerror;
} lib;
#define fi_getinfo lib.getinfo
#define fi_freeinfo lib.freeinfo
#define fi_fabric lib.fabric
#define fi_strerror lib.strerror

/*
 * ofi_rxm's settings for an endpoint that has one RMA in flight at a time
 * (a pager's reader, the background fetch) or answers RMA only (the memory
 * server): rxm sends no message of ours, so its buffers carry only its own
 * connection traffic. Its defaults (16 KiB buffers, a deep queue on each
 * connection) made every fi_endpoint() and first connection allocate and
 * touch ~70 MiB of buffer pools: ~250 ms of page faults before a tiered
 * child's first cold page on a guest where a fault costs ~10 us (measured:
 * a reader's open 190-200 ms and its first read 50-60 ms, against ~20 ms
 * and 16-19 ms with these). Its pools still come in chunks of 1,024
 * buffers, so the buffer's size is what a connection touches: 512 B
 * instead of 4 KiB took a fresh reader's open from ~3.5 to ~2 ms here.
 * And rxm looks at its connections only every cm_progress_interval us of
 * completion-queue reads, 10 ms by default, on both ends: a connection,
 * made on the first RMA, took 4-9 ms of that waiting on an idle pod, and
 * ~1.3 ms with 100 us (the cost: one more look at the connections per
 * read of the queue, at most every 100 us).
 *
 * rxm reads them once, when libfabric starts (the first fi_getinfo()), so
 * they are in the environment for that call only: a service that a daemon
 * starts later does not inherit them. An operator's own values are left
 * as they are. FI_OFI_RXM_BUFFER_SIZE is part of rxm's protocol: every
 * host and memory server of a pod must use the same one (reads between
 * two that differ time out), which this one definition gives them unless
 * an operator sets it on some and not others.
 */
static const char *const rxm_settings[][2] = {
	{ "FI_OFI_RXM_BUFFER_SIZE", "512" },
	{ "FI_OFI_RXM_MSG_RX_SIZE", "32" },
	{ "FI_OFI_RXM_MSG_TX_SIZE", "32" },
	{ "FI_OFI_RXM_CM_PROGRESS_INTERVAL", "100" },
};
#define RXM_SETTINGS (sizeof(rxm_settings) / sizeof(rxm_settings[0]))

static int getinfo_set(uint32_t version, const char *node, const char *service, uint64_t flags,
			 const struct fi_info *hints, struct fi_info **info)
{
	static bool started;
	bool set[RXM_SETTINGS] = { false };
	for (size_t i = 0; !started && i < RXM_SETTINGS; i++)
		set[i] = !getenv(rxm_settings[i][0]) && setenv(rxm_settings[i][0], rxm_settings[i][1], 1) == 0;
	int rc = fi_getinfo(version, node, service, flags, hints, info);
	for (size_t i = 0; i < RXM_SETTINGS; i++)
		if (set[i])
			unsetenv(rxm_settings[i][0]);
	started = true;
	return rc;
}

static int load_libfabric(void)
{
	if (lib.loaded)
		return 0;
	void *h = dlopen(LIBFABRIC, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return cxlcr_error("the cold tier needs %s: %s", LIBFABRIC, dlerror());
	lib.getinfo = dlsym(h, "fi_getinfo");
	lib.freeinfo = dlsym(h, "fi_freeinfo");
	lib.dupinfo = dlsym(h, "fi_dupinfo");
	lib.fabric = dlsym(h, "fi_fabric");
	lib.strerror = dlsym(h, "fi_strerror");
	if (!lib.getinfo || !lib.freeinfo || !lib.dupinfo || !lib.fabric || !lib.strerror) {
		dlclose(h);
		return cxlcr_error("%s lacks a function the cold tier needs", LIBFABRIC);
	}
	lib.loaded = true;
	return 0;
}

static int fab_fail(struct fab *f, const char *what, int rc)
{
	int e = rc < 0 ? -rc : rc;
	cxlcr_error("libfabric (%s): %s: %s", f->provider, what, fi_strerror(e));
	fab_close(f);
	return -1;
}

/* The provider to use: the caller's, else $CXLCR_TIER_PROVIDER, else ours. */
static const char *pick_provider(const char *provider)
{
	if (provider && *provider)
		return provider;
	const char *env = getenv("CXLCR_TIER_PROVIDER");
	return env && *env ? env : TIER_DEFAULT_PROVIDER;
}

/*
 * Asks for an RDM endpoint with RMA of this provider, and tells it which
 * memory registration modes we can live with: local registration (we only
 * move data through our registered buffer), virtual addresses or offsets
 * (we store which), provider keys, registrations bound to the endpoint.
 */
static int get_info(struct fab *f, const char *node, const char *service, bool remote)
{
	struct fi_info *hints = lib.dupinfo(NULL); /* fi_allocinfo() */
	if (!hints)
		return cxlcr_error("libfabric: out of memory");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_READ | FI_WRITE | (remote ? FI_REMOTE_READ | FI_REMOTE_WRITE : 0);
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(f->provider);
	int rc = getinfo_set(FAB_VERSION, node, service, node ? FI_SOURCE : 0, hints, &f->info);
	fi_freeinfo(hints);
	if (rc)
		return cxlcr_error("libfabric: no provider '%s' with RMA on an RDM endpoint%s%s: %s", f->provider,
				   node ? " at " : "", node ? node : "", fi_strerror(-rc));
	return 0;
}

int fab_warm(const char *provider)
{
	struct fab f = { 0 };
	cxlcr_copy_field(f.provider, sizeof(f.provider), pick_provider(provider));
	if (load_libfabric() < 0 || get_info(&f, NULL, NULL, false) < 0)
		return -1;
	fi_freeinfo(f.info);
	return 0;
}

int fab_open(struct fab *f, const char *provider, const char *node, const char *service, size_t buf_size,
	     bool remote)
{
	return fab_open_on(f, provider, node, service, NULL, buf_size, remote);
}

int fab_open_on(struct fab *f, const char *provider, const char *node, const char *service, void *buf,
		size_t buf_size, bool remote)
{
	memset(f, 0, sizeof(*f));
	cxlcr_copy_field(f->provider, sizeof(f->provider), pick_provider(provider));
	if (load_libfabric() < 0 || get_info(f, node, service, remote) < 0)
		return -1;
	int rc;
	if ((rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL)))
		return fab_fail(f, "fi_fabric", rc);
	if ((rc = fi_domain(f->fabric, f->info, &f->domain, NULL)))
		return fab_fail(f, "fi_domain", rc);
	struct fi_av_attr av = { .type = FI_AV_MAP };
	if ((rc = fi_av_open(f->domain, &av, &f->av, NULL)))
		return fab_fail(f, "fi_av_open", rc);
	struct fi_cq_attr cq = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_FD, .size = 64 };
	if ((rc = fi_cq_open(f->domain, &cq, &f->cq, NULL))) {
		cq.wait_obj = FI_WAIT_NONE;
		if ((rc = fi_cq_open(f->domain, &cq, &f->cq, NULL)))
			return fab_fail(f, "fi_cq_open", rc);
	}
	if ((rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)))
		return fab_fail(f, "fi_endpoint", rc);
	if ((rc = fi_ep_bind(f->ep, &f->av->fid, 0)) || (rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)))
		return fab_fail(f, "fi_ep_bind", rc);
	if ((rc = fi_enable(f->ep)))
		return fab_fail(f, "fi_enable", rc);
	f->buf = buf;
	if (!buf) {
		f->buf = mmap(NULL, buf_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			      0);
		if (f->buf == MAP_FAILED) {
			f->buf = NULL;
			cxlcr_error("cannot map %zu bytes: %s", buf_size, strerror(errno));
			fab_close(f);
			return -1;
		}
		f->buf_owned = true;
	}
	f->buf_size = buf_size;
	uint64_t mode = f->info->domain_attr->mr_mode;
	uint64_t access = FI_READ | FI_WRITE | (remote ? FI_REMOTE_READ | FI_REMOTE_WRITE : 0);
	if ((rc = fi_mr_reg(f->domain, f->buf, buf_size, access, 0, 0, 0, &f->mr, NULL)))
		return fab_fail(f, "fi_mr_reg", rc);
	if (mode & FI_MR_ENDPOINT) {
		if ((rc = fi_mr_bind(f->mr, &f->ep->fid, 0)) || (rc = fi_mr_enable(f->mr)))
			return fab_fail(f, "fi_mr_bind", rc);
	}
	f->desc = fi_mr_desc(f->mr);
	f->mr_virt = (mode & FI_MR_VIRT_ADDR) != 0;
	return 0;
}

void fab_close(struct fab *f)
{
	if (f->mr)
		fi_close(&f->mr->fid);
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
	if (f->buf && f->buf_owned)
		munmap(f->buf, f->buf_size);
	memset(f, 0, sizeof(*f));
}

int fab_name(struct fab *f, uint8_t *addr, uint32_t *len)
{
	size_t n = CXLCR_TIER_ADDR_MAX;
	int rc = fi_getname(&f->ep->fid, addr, &n);
	if (rc)
		return cxlcr_error("libfabric (%s): fi_getname: %s", f->provider, fi_strerror(-rc));
	*len = (uint32_t)n;
	return 0;
}

int fab_peer(struct fab *f, const uint8_t *addr, uint32_t len, fi_addr_t *peer)
{
	(void)len;
	int rc = fi_av_insert(f->av, addr, 1, peer, 0, NULL);
	if (rc != 1)
		return cxlcr_error("libfabric (%s): the memory server's address is not one it takes", f->provider);
	return 0;
}

/* Sleeps until the completion queue's descriptor says there is something
 * to do, or timeout_ms (fi_trywait first: it says when the provider must
 * be driven instead). False if nothing woke it. */
static bool wait_fd(struct fab *f, int timeout_ms)
{
	int fd = -1;
	if (fi_control(&f->cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0) {
		struct fid *fids[1] = { &f->cq->fid };
		if (fi_trywait(f->fabric, fids, 1) != FI_SUCCESS)
			return true;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		return poll(&p, 1, timeout_ms) > 0;
	}
	struct timespec ts = { 0, (long)timeout_ms * 1000000L };
	nanosleep(&ts, NULL);
	return true;
}

/*
 * Every operation has a context of its own, freed when its completion is
 * read. One given up on (no answer in time) keeps its context: its late
 * completion, if it ever comes, is told from the current one's by that
 * address, dropped, and the context freed then.
 */
static void drop_late(void *ctx)
{
	free(ctx);
}

/* Waits for the completion of the operation with this context, asleep in
 * poll() between looks (a waiter that spins is, on busy CPUs, the one not
 * running when its completion comes). */
static int wait_done(struct fab *f, void *ctx, uint64_t deadline, const char *what)
{
	for (;;) {
		struct fi_cq_entry e;
		ssize_t n = fi_cq_read(f->cq, &e, 1);
		if (n == 1) {
			if (e.op_context == ctx) {
				free(ctx);
				return 0;
			}
			drop_late(e.op_context);
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			if (fi_cq_readerr(f->cq, &err, 0) != 1)
				continue;
			if (err.op_context != ctx) {
				drop_late(err.op_context);
				continue;
			}
			free(ctx);
			return cxlcr_error("%s failed: %s", what,
					   fi_cq_strerror(f->cq, err.prov_errno, err.err_data, NULL, 0));
		}
		if (n != -FI_EAGAIN)
			return cxlcr_error("%s: %s", what, fi_strerror((int)-n));
		if (cxlcr_mono_ns() > deadline)
			return cxlcr_error("%s: no answer from the memory server", what);
		wait_fd(f, 1);
	}
}

int fab_rma(struct fab *f, bool write, fi_addr_t peer, size_t local, size_t len, uint64_t remote, uint64_t key,
	    int timeout_ms)
{
	const char *what = write ? "RMA write to the memory server" : "RMA read from the memory server";
	if (local > f->buf_size || len > f->buf_size - local)
		return cxlcr_error("%s: %zu bytes at %zu overrun the buffer", what, len, local);
	void *c = calloc(1, sizeof(struct fi_context));
	if (!c)
		return cxlcr_error("%s: out of memory", what);
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		ssize_t rc = write ? fi_write(f->ep, (char *)f->buf + local, len, f->desc, peer, remote, key, c)
				   : fi_read(f->ep, (char *)f->buf + local, len, f->desc, peer, remote, key, c);
		if (rc == 0)
			break;
		if (rc != -FI_EAGAIN) {
			free(c); /* never posted */
			return cxlcr_error("%s: %s", what, fi_strerror((int)-rc));
		}
		/* Progress (rxm connects to the peer on the first operation,
		 * and says EAGAIN until it has): a completion read here is
		 * a late one of an operation given up on. */
		struct fi_cq_entry e;
		ssize_t n = fi_cq_read(f->cq, &e, 1);
		if (n == 1) {
			drop_late(e.op_context);
		} else if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			if (fi_cq_readerr(f->cq, &err, 0) == 1)
				drop_late(err.op_context);
		}
		if (cxlcr_mono_ns() > deadline) {
			free(c); /* never posted */
			return cxlcr_error("%s: no answer from the memory server", what);
		}
	}
	return wait_done(f, c, deadline, what);
}

/*
 * A server's wait: the documented pattern for manual progress (fi_trywait,
 * then poll the completion queue's file descriptor), and a read of the
 * queue after it either way, which is what drives the provider (rxm
 * accepts connections and serves RMA requests there). The poll is short:
 * not every socket of the provider wakes it, and an RMA request the
 * server does not progress waits until it does. Returns true if there
 * was something to do (the caller goes round again at once).
 */
bool fab_progress(struct fab *f, int timeout_ms)
{
	struct fi_cq_entry e;
	bool busy = wait_fd(f, timeout_ms);
	ssize_t n = fi_cq_read(f->cq, &e, 1);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		fi_cq_readerr(f->cq, &err, 0);
	}
	return busy || n != -FI_EAGAIN;
}
