/*
 * libcxlcr: the fork API of cxlcr, for FaaS platforms and other programs
 * that clone running services on the hosts of a CXL memory pod.
 *
 *     #include <cxlcr/cxlcr.h>        cc ... -lcxlcr (static: libcxlcr.a -ljansson -lsodium)
 *
 *     struct cxlcr_api *api = cxlcr_api_connect("tcp:10.78.0.10:7390", token);
 *     struct cxlcr_fork_result r;
 *     if (!api || cxlcr_api_fork(api, "web", "h1", 2, &r) < 0)
 *             fprintf(stderr, "fork: %s\n", cxlcr_api_error(api));
 *     else
 *             for (unsigned i = 0; i < r.count; i++)
 *                     printf("%s on %s at %s\n", r.child[i].name, r.child[i].host,
 *                            r.child[i].address);
 *     cxlcr_api_close(api);
 *
 * Endpoints. Every pod host's cxlcrd serves the API on
 *   - a Unix socket, /run/cxlcr/podN/HOST.api: only root (or the daemon's
 *     own user) may connect, checked with SO_PEERCRED; no token;
 *   - TCP at the host's own address, port 7390 (cxlcrd --api-port, or
 *     $CXLCR_API_PORT; 0 turns it off): every request must be sealed under
 *     a key derived from the pod's token, 64 hex digits derived from the
 *     pod's key in the pool, which each host's daemon (and `cxlcr pod up`)
 *     keeps in its own /run/cxlcr/podN/api-token (mode 0600). The token
 *     itself never travels.
 * A request goes to the daemon of the parent's host; the children may be
 * placed on any host of its pod.
 *
 * Wire protocol: JSON in UTF-8, one request line and one reply line (each
 * ended by "\n") per connection; a request is at most 4096 bytes, a reply
 * at most 65536. The request (fields in any order, none other allowed):
 *
 *   {"op":"fork","service":"web","host":"h1","count":2,"nonce":"5e1a..."}
 *
 *   op       "fork" (the only operation so far)
 *   service  the parent service, as `cxlcr ps` names it
 *   host     the pod host the children run on
 *   count    how many children, an integer 1..CXLCR_API_MAX_CHILDREN
 *   mode     optional, "share" or "copy": copy-on-write views of the
 *            snapshot, or the child's own memory filled by a pager (the
 *            default: share on a file pool, copy on a devdax pool or for a
 *            tiered snapshot)
 *   fetch    optional, copy mode only: how the pager brings a child's
 *            pages: "background" (hot pages before it runs, the rest while
 *            it runs; the default), "eager" (all before it runs) or "lazy"
 *            (each on its first touch)
 *   nonce    optional: 64 lowercase hex digits, fresh and random for each
 *            request; the reply then comes sealed for it (below). The
 *            library sends one over TCP and takes no reply without it.
 *
 * The reply on success (numbers: milliseconds, bytes, pids):
 *
 *   {"ok":true,"children":[{"name":"web.1","host":"h1",
 *    "address":"10.79.1.5","pid":1234,"restore_ms":40.1,
 *    "prefetched_pages":0}, ...],
 *    "freeze_ms":12.0,"snapshot_ms":8.0,"restore_ms":41.0,
 *    "total_ms":95.0,"image_bytes":2097152,"snapshot_bytes":1048576,
 *    "mode":"share"}
 *
 * and on any failure, one line saying what failed:
 *
 *   {"ok":false,"error":"not authorised"}
 *
 * Over TCP, both ways are sealed. The client first sends the line
 * {"op":"hello"}; the daemon answers with a fresh random challenge,
 * {"challenge":"<64 hex digits>"} (or a refusal, "busy"). The client then
 * sends its request line wrapped, still one line:
 *
 *   {"sealed":"<the request line, as a JSON string>","mac":"<64 hex digits>"}
 *
 * mac: HMAC-SHA-512-256 (libsodium) under the API key over the label
 * "cxlcr fork API request" with its NUL, the challenge's 32 bytes, 8 zero
 * bytes and the request line's bytes; the API key is BLAKE2b-256 keyed
 * with the token's 32 bytes of the text "cxlcr fork API reply key, version
 * 1". A request not sealed so (the token in the clear, a wrong token, or
 * a request recorded on another connection and played again) is refused,
 * "not authorised", and changes nothing. The reply comes back sealed the
 * same way for the request's nonce, under the label "cxlcr fork API
 * reply". A refusal the daemon makes before it trusts the request (not
 * authorised, a request it cannot read, "busy") comes unsealed: a client
 * takes an unsealed reply only as a failure.
 *
 * Readers must ignore reply fields they do not know. Malformed JSON
 * (and a key given twice in any object), an unknown op, a missing or
 * unknown field, a count out of range
 * and an oversized request are refused with such an error reply.
 */
#ifndef CXLCR_CXLCR_H
#define CXLCR_CXLCR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CXLCR_API_PORT          7390
#define CXLCR_API_MAX_CHILDREN  64   /* a snapshot has at most 64 borrowers */
#define CXLCR_API_NAME_MAX      64   /* service and host names, with the NUL */
#define CXLCR_API_TOKEN_LEN     64   /* hex digits of a pod's token */

/* One child of a fork: a service of its own, named PARENT.N. */
struct cxlcr_fork_child {
	char name[CXLCR_API_NAME_MAX];
	char host[CXLCR_API_NAME_MAX];
	char address[16];              /* its own IPv4 address, dotted */
	int pid;                       /* as the child's host sees it */
	double restore_ms;             /* this child's restore */
	unsigned long long prefetched_pages; /* its parent's pages changed since the previous
					      * snapshot, being made its own now it runs */
};

struct cxlcr_fork_result {
	unsigned count;
	struct cxlcr_fork_child child[CXLCR_API_MAX_CHILDREN];
	double freeze_ms;              /* the parent was frozen this long */
	double snapshot_ms;            /* part of it: copying the arena's pages */
	double restore_ms;             /* all children restored (concurrently) */
	double total_ms;               /* request to the last child running */
	uint64_t image_bytes;          /* CRIU's images of the parent */
	uint64_t snapshot_bytes;       /* heap pages stored in the snapshot */
	char mode[8];                  /* "share" or "copy": how the children got their heap */
};

/* A connection to one daemon. */
struct cxlcr_api;

/*
 * Opens a connection to endpoint: a Unix socket path, or "tcp:HOST:PORT"
 * (HOST a name or an IPv4 address). token is the pod's token for TCP; NULL
 * takes $CXLCR_API_TOKEN. Returns NULL if the daemon cannot be reached;
 * cxlcr_api_error(NULL) then says why (per thread).
 */
struct cxlcr_api *cxlcr_api_connect(const char *endpoint, const char *token);

/*
 * Forks count children of service onto host and fills *result. Returns 0,
 * or -1 with cxlcr_api_error(api) saying what failed: the daemon's error
 * line, or why it could not be asked. A handle may be used for several
 * requests, one at a time (each on a connection of its own).
 */
int cxlcr_api_fork(struct cxlcr_api *api, const char *service, const char *host, unsigned count,
		   struct cxlcr_fork_result *result);
/* The same with the children's mode: "share", "copy", or NULL (the
 * daemon's default for its pool), and in copy mode their fetch policy:
 * "background", "eager", "lazy", or NULL (background). */
int cxlcr_api_fork_mode(struct cxlcr_api *api, const char *service, const char *host, unsigned count,
			const char *mode, const char *fetch, struct cxlcr_fork_result *result);

/*
 * Stops a child that the fork API made (its name from cxlcr_api_fork's
 * result) and gives back what it held: its processes, its address, its
 * borrow of the snapshot. Returns 0, or -1 with cxlcr_api_error(api).
 * Only children can be released, and only those the API made count
 * against the pod's quota of live children (the daemon refuses a fork past
 * it).
 *   wire: {"op":"release","service":CHILD,"token":...} -> {"ok":true,...}
 */
int cxlcr_api_release(struct cxlcr_api *api, const char *child);

/* The last error of api (of the last cxlcr_api_connect() if api is NULL):
 * one line, never NULL. */
const char *cxlcr_api_error(const struct cxlcr_api *api);

/* Closes the connection and frees api (NULL is fine). */
void cxlcr_api_close(struct cxlcr_api *api);

#ifdef __cplusplus
}
#endif

#endif
