/*
 * The daemon side of the fork API (protocol: include/cxlcr/cxlcr.h).
 *
 * Each cxlcrd listens on a Unix socket, POD_DIR/HOST.api, where the peer's
 * credentials authenticate it (root only, as for the verb socket), and on
 * TCP at its host's own address, where every request must carry the pod's
 * token (derived from the pod's key in the pool; each host keeps it in its
 * own POD_DIR/api-token for local clients). Every request is served in a worker process,
 * which calls fork_service().
 *
 *   api.c        listening, and serving one request
 *   api_token.c  the pod's token: derived from the pod's key, kept, compared
 */
#ifndef CXLCR_API_H
#define CXLCR_API_H
#include <stdbool.h>
#include <stddef.h>

#include "../include/cxlcr/cxlcr.h"
#include "pod.h"

#define API_PORT_ENV     "CXLCR_API_PORT"
#define API_TOKEN_FILE   "api-token"

/* POD_DIR/HOST.api of the current pool's pod. */
const char *api_socket_path(const char *host, char *buf, size_t len);

/* The TCP port: $CXLCR_API_PORT, or CXLCR_API_PORT (7390); 0 is off, -1
 * junk. */
int api_port_from_env(void);

/* A listening TCP socket at address if given, else at host's own address
 * in the emulated pod (any address of this network namespace if host is
 * not an hN of the pod). */
int api_listen_tcp(const char *host, const char *address, int port);

/* Serves one request on conn (a worker's job): over TCP the token is
 * required, on the Unix socket the peer must be root. Writes one line for
 * the daemon's log into summary. Returns 0 when the fork was done. */
int api_serve(int conn, bool over_tcp, char *summary, size_t len);

/* The pod's token (CXLCR_API_TOKEN_LEN hex digits and a NUL into buf),
 * derived from the pod's key in the pool (made first if create and the
 * pool has none). 0, or -1 with cxlcr_last_error(). */
int api_token_derive(bool create, char *buf, size_t len);
/* Writes the pod's token into POD_DIR/api-token, mode 0600, for local
 * clients. 0, or -1 with cxlcr_last_error(). */
int api_token_ensure(const struct pod *pod);

#endif
