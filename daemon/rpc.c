#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../common/pool_format.h"
#include "cli.h"
#include "pod.h"
#include "rpc.h"
#include "rpc_tcp.h"
#include "rpc_wire.h"

#define RPC_MAGIC    0x43505243u /* "CRPC" */
#define RPC_MAX_ARGS 256
#define RPC_MAX_LEN  65536

struct rpc_request {
	uint32_t magic;
	uint32_t argc;
	uint32_t len;   /* bytes of NUL-terminated arguments that follow */
};

const char *host_socket_path(const char *host, char *buf, size_t len)
{
	const struct pod *pod = pod_current(false);
	snprintf(buf, len, "%s/%s.sock", pod ? pod->dir : POD_RUN_DIR "/no-pod", host);
	return buf;
}

bool host_is_local_pod_host(const char *host)
{
	char path[128];
	struct stat st;
	return host && *host && stat(host_socket_path(host, path, sizeof(path)), &st) == 0 &&
	       S_ISSOCK(st.st_mode);
}

int rpc_timeout_ms(void)
{
	const char *env = getenv(RPC_TIMEOUT_ENV);
	char *end;
	long ms = env && *env ? strtol(env, &end, 10) : 0;
	return env && *env && !*end && ms > 0 && ms <= 86400000 ? (int)ms : RPC_TIMEOUT_DEFAULT_MS;
}

/* Sends and connects time out at deadline too (SO_SNDTIMEO bounds a Unix
 * socket's connect when the daemon's backlog is full). */
static void send_timeout(int s, uint64_t deadline)
{
	int ms = ctl_ms_left(deadline);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	if (!ms)
		tv.tv_usec = 1000;
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int rpc_call(const char *host, int argc, char **argv, int out_fd, int err_fd)
{
	return rpc_call_within(host, argc, argv, out_fd, err_fd, rpc_timeout_ms());
}

/* The transport of a call: TCP to the address the host table gives (from
 * any machine of the pod, with no socket under /run), unless
 * $CXLCR_RPC_TRANSPORT is "unix" (the daemon's Unix socket on this
 * machine: the earlier path, kept for comparison), or the host has no
 * control address but a socket here (a daemon without a TCP port). */
static int rpc_call_unix(const char *host, int argc, char **argv, int out_fd, int err_fd, int timeout_ms);

int rpc_call_within(const char *host, int argc, char **argv, int out_fd, int err_fd, int timeout_ms)
{
	const char *t = getenv(RPC_TRANSPORT_ENV);
	if (t && !strcmp(t, "unix"))
		return rpc_call_unix(host, argc, argv, out_fd, err_fd, timeout_ms);
	int rc = rpc_call_tcp(host, argc, argv, out_fd, err_fd, timeout_ms);
	if (rc == RPC_NO_ADDRESS)
		rc = (!t || strcmp(t, "tcp")) && host_is_local_pod_host(host)
			     ? rpc_call_unix(host, argc, argv, out_fd, err_fd, timeout_ms)
			     : -1; /* the lookup's line stands */
	return rc;
}

static int rpc_call_unix(const char *host, int argc, char **argv, int out_fd, int err_fd, int timeout_ms)
{
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	host_socket_path(host, addr.sun_path, sizeof(addr.sun_path));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return cxlcr_error("socket: %s", strerror(errno));
	send_timeout(s, deadline);
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;
		close(s);
		return cxlcr_error("host %s: its daemon does not answer (%s)%s", host, strerror(e),
				   e == ENOENT ? "; is the pod up (`cxlcr pod up`)?" : "");
	}
	size_t len = 0;
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (argc > RPC_MAX_ARGS || len > RPC_MAX_LEN) {
		close(s);
		return cxlcr_error("command line too long for a request");
	}
	char *payload = malloc(len ? len : 1);
	if (!payload) {
		close(s);
		return cxlcr_error("out of memory");
	}
	size_t at = 0;
	for (int i = 0; i < argc; i++) {
		size_t n = strlen(argv[i]) + 1;
		memcpy(payload + at, argv[i], n);
		at += n;
	}
	struct rpc_request req = { RPC_MAGIC, (uint32_t)argc, (uint32_t)len };
	/* The header carries our stdout and stderr. */
	int fds[2] = { out_fd, err_fd };
	char control[CMSG_SPACE(sizeof(fds))] = { 0 };
	struct iovec iov = { &req, sizeof(req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	int32_t status = -1;
	int rc = -1;
	if (sendmsg(s, &msg, MSG_NOSIGNAL) != sizeof(req) || ctl_write_all(s, payload, len) < 0)
		cxlcr_error("host %s: cannot send the request: %s", host, strerror(errno));
	else if (ctl_read_exact(s, &status, sizeof(status), deadline) < 0)
		cxlcr_error(errno == ETIMEDOUT ? "host %s: no answer within %d ms (the request's deadline, $"
						 RPC_TIMEOUT_ENV ")"
					       : "host %s: its daemon closed the connection before answering",
			    host, timeout_ms);
	else
		rc = status;
	free(payload);
	close(s);
	return rc;
}

int rpc_listen(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(addr.sun_path))
		return cxlcr_error("socket path too long: %s", path);
	strcpy(addr.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return cxlcr_error("socket: %s", strerror(errno));
	unlink(path);
	if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0 || chmod(path, 0600) < 0 ||
	    listen(s, 64) < 0) {
		int e = errno;
		close(s);
		return cxlcr_error("cannot listen on %s: %s", path, strerror(e));
	}
	return s;
}

int rpc_check_peer(int conn)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return cxlcr_error("cannot read the peer's credentials: %s", strerror(errno));
	if (cred.uid != 0 && cred.uid != geteuid())
		return cxlcr_error("request from uid %u refused (root only)", cred.uid);
	return 0;
}

/* The connection being served by this worker, until it has its answer;
 * whether over TCP (the answer is a frame). */
static int serving = -1;
static bool serving_tcp;

int rpc_caller_fd(void)
{
	return serving;
}

void rpc_reply_now(int status)
{
	if (serving < 0)
		return;
	fflush(NULL);
	int32_t s = status;
	if (!serving_tcp)
		ctl_write_all(serving, &s, sizeof(s));
	int conn = serving;
	serving = -1;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 1);
		dup2(null, 2);
		close(null);
	}
	/* Over TCP the output is relayed: all of it goes before the status. */
	if (serving_tcp)
		rpc_tcp_reply(conn, status);
}

int rpc_serve_tcp(int conn, int (*dispatch)(int argc, char **argv))
{
	int argc;
	char **argv;
	/* A client that sends nothing does not hold a worker for ever; small
	 * frames (the greeting, the status after the output) go at once. */
	struct timeval tv = { RPC_REQUEST_READ_S, 0 };
	int one = 1;
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (rpc_tcp_accept(conn, &argc, &argv) < 0)
		return -1;
	/* As over the Unix socket: a caller that has given up gets nothing done. */
	struct pollfd p = { .fd = conn, .events = POLLRDHUP };
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return cxlcr_error("the caller gave up before its request was served");
	if (rpc_tcp_begin(conn) < 0)
		return -1;
	serving = conn;
	serving_tcp = true;
	int32_t status = dispatch(argc, argv);
	rpc_reply_now(status);
	return status;
}

int rpc_serve(int conn, int (*dispatch)(int argc, char **argv))
{
	struct rpc_request req;
	int fds[2] = { -1, -1 };
	char control[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = { &req, sizeof(req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	if (rpc_check_peer(conn) < 0)
		return -1;
	/* A client that sends nothing does not hold a worker for ever. */
	struct timeval tv = { RPC_REQUEST_READ_S, 0 };
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) != sizeof(req) || req.magic != RPC_MAGIC ||
	    req.argc == 0 || req.argc > RPC_MAX_ARGS || req.len > RPC_MAX_LEN)
		return cxlcr_error("malformed request");
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(fds)))
		return cxlcr_error("request without stdout and stderr");
	memcpy(fds, CMSG_DATA(c), sizeof(fds));

	/* ... nor one that trickles its arguments: one deadline for them all. */
	uint64_t deadline = cxlcr_mono_ns() + RPC_REQUEST_READ_S * 1000000000ull;
	char *payload = malloc(req.len + 1);
	char **argv = calloc(req.argc + 1, sizeof(char *));
	if (!payload || !argv || ctl_read_exact(conn, payload, req.len, deadline) < 0)
		return cxlcr_error("truncated request");
	payload[req.len] = 0;
	/* A caller that has given up (past its deadline) gets nothing done:
	 * what it asked for would happen behind the back of whoever decided
	 * what to do instead. */
	struct pollfd p = { .fd = conn, .events = POLLRDHUP };
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return cxlcr_error("the caller gave up before its request was served");
	size_t at = 0;
	for (uint32_t i = 0; i < req.argc; i++) {
		if (at >= req.len)
			return cxlcr_error("malformed request arguments");
		argv[i] = payload + at;
		at += strlen(payload + at) + 1;
	}
	fflush(NULL);
	dup2(fds[0], 1);
	dup2(fds[1], 2);
	close(fds[0]);
	close(fds[1]);
	serving = conn;
	int32_t status = dispatch((int)req.argc, argv);
	rpc_reply_now(status);
	return status;
}

int rpc_call_capture(const char *host, int argc, char **argv, char *out, size_t out_len, char *why,
		     size_t why_len)
{
	return rpc_call_capture_within(host, argc, argv, out, out_len, why, why_len, rpc_timeout_ms());
}

int rpc_call_relay_within(const char *host, int argc, char **argv, int out_fd, char *why, size_t why_len,
			  int timeout_ms)
{
	int e = memfd_create("cxlcr-err", MFD_CLOEXEC);
	if (e < 0)
		return cxlcr_error("memfd_create: %s", strerror(errno));
	int rc = rpc_call_within(host, argc, argv, out_fd, e, timeout_ms);
	ssize_t n = pread(e, why, why_len - 1, 0);
	why[n > 0 ? n : 0] = 0;
	why[strcspn(why, "\n")] = 0;
	close(e);
	if (rc < 0)
		snprintf(why, why_len, "%s", cxlcr_last_error());
	if (!strncmp(why, "cxlcr: ", 7))
		memmove(why, why + 7, strlen(why + 7) + 1);
	return rc;
}

int rpc_call_capture_within(const char *host, int argc, char **argv, char *out, size_t out_len, char *why,
			    size_t why_len, int timeout_ms)
{
	int o = memfd_create("cxlcr-out", MFD_CLOEXEC);
	if (o < 0)
		return cxlcr_error("memfd_create: %s", strerror(errno));
	int rc = rpc_call_relay_within(host, argc, argv, o, why, why_len, timeout_ms);
	if (out) {
		ssize_t n = pread(o, out, out_len - 1, 0);
		out[n > 0 ? n : 0] = 0;
	}
	close(o);
	return rc;
}
