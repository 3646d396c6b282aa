/*
 * How the cxlcr command line talks to the cxlcrd of a pod host.
 *
 * Over TCP to the host's control address in the pod's host table, from any
 * machine of the pod (rpc_tcp.h: the request authenticated with the pod's
 * key, the output relayed in frames); or, on the daemon's own machine, over
 * its Unix socket, where the client sends its verb and arguments with its
 * own stdout and stderr attached (SCM_RIGHTS). Either way the daemon runs the
 * very same verb code in a worker process, in that host's context, writing
 * straight to the client's terminal; then it sends back the exit status.
 * So a verb behaves the same whether it runs here or on a host, and its
 * progress and errors reach the operator unchanged.
 */
#ifndef CXLCR_RPC_H
#define CXLCR_RPC_H
#include <stdbool.h>
#include <stddef.h>

/* The socket of a host of the current pool's pod (see pod.h). */
const char *host_socket_path(const char *host, char *buf, size_t len);
/* Is host a pod host whose daemon's Unix socket is here? */
bool host_is_local_pod_host(const char *host);

/* Every call has a whole-request deadline: connecting, sending and
 * waiting for the answer together take at most $CXLCR_RPC_TIMEOUT_MS
 * (default RPC_TIMEOUT_DEFAULT_MS). A verb that passes it goes on as
 * docs/control-plane.md says (the source of a migrate resumes, fenced by
 * the epoch); the daemon does not serve a request whose caller has gone. */
#define RPC_TIMEOUT_ENV "CXLCR_RPC_TIMEOUT_MS"
#define RPC_TIMEOUT_DEFAULT_MS 300000
#define RPC_REQUEST_READ_S 10 /* the daemon reads a request's bytes within this */
/* In a worker: the connection of the request it serves until its answer
 * is sent, -1 otherwise. It reads POLLRDHUP once the caller has gone
 * (given up past its deadline, or died): nobody then waits for the verb,
 * and whoever gave up has decided what happens instead (exec.c stops the
 * tool the verb runs). */
int rpc_caller_fd(void);
int rpc_timeout_ms(void);

/* Runs `cxlcr argv...` on host's daemon; returns its exit status, or -1
 * (with cxlcr_last_error()) when the daemon cannot be reached or does not
 * answer within rpc_timeout_ms(). */
int rpc_call(const char *host, int argc, char **argv, int out_fd, int err_fd);
/* rpc_call() with a deadline of its own. */
int rpc_call_within(const char *host, int argc, char **argv, int out_fd, int err_fd, int timeout_ms);

/* rpc_call() with the verb's output in memory: its stdout into out (may be
 * NULL), the first line of its stderr, without "cxlcr: ", into why (or why
 * the daemon could not be reached). Returns as rpc_call(). */
int rpc_call_capture(const char *host, int argc, char **argv, char *out, size_t out_len, char *why,
		     size_t why_len);
/* rpc_call_capture() with a deadline of its own. */
int rpc_call_capture_within(const char *host, int argc, char **argv, char *out, size_t out_len, char *why,
			    size_t why_len, int timeout_ms);

/* rpc_call_capture_within() with the verb's stdout relayed to out_fd as it
 * comes (a pipe the caller reads while the verb still runs), and only its
 * stderr's first line kept, in why. */
int rpc_call_relay_within(const char *host, int argc, char **argv, int out_fd, char *why, size_t why_len,
			  int timeout_ms);

/* Daemon side: a listening socket at path, and one request served on conn
 * (in a worker process) with dispatch. Returns the verb's exit status. */
int rpc_listen(const char *path);
int rpc_serve(int conn, int (*dispatch)(int argc, char **argv));
/* The same for a connection to the daemon's TCP port that speaks the
 * control protocol (rpc_tcp.h): the request authenticated with the pod's
 * key, the output relayed in frames. */
int rpc_serve_tcp(int conn, int (*dispatch)(int argc, char **argv));
/* "unix" or "tcp": the transport of every call (default: TCP to the host
 * table's address; see use_unix() in rpc.c). */
#define RPC_TRANSPORT_ENV "CXLCR_RPC_TRANSPORT"
/* A verb whose answer is complete before its work is (clean-up, say)
 * hands the caller its exit status now, so that nobody waits for the rest:
 * what it writes afterwards goes nowhere, and the status it returns is not
 * sent again. Outside a daemon's worker it does nothing. */
void rpc_reply_now(int status);
/* Only root, or the user the daemon runs as, may drive it (SO_PEERCRED of
 * a Unix socket connection): 0, or -1 with cxlcr_last_error(). The fork
 * API's Unix socket is guarded the same way. */
int rpc_check_peer(int conn);

#endif
