/*
 * The control protocol over TCP (proto/control.proto; the rules in
 * docs/control-plane.md): how a command line or a daemon reaches the
 * daemon of a pod host at the address the pod's host table gives, from any
 * machine of the pod, and how that daemon serves it.
 *
 *   client                               daemon (a worker per connection)
 *   "CXC1"                      ->
 *                               <-       CtlHello { fresh random challenge }
 *   CtlEnvelope { CtlRequest { challenge, argv, nonce }, MAC under the pod key } ->
 *                               <-       CtlAnswer { CtlFrame { output }, MAC } ...
 *                                        CtlAnswer { CtlFrame { status }, MAC }
 *                                        or CtlAnswer { CtlFrame { refused } } (nothing done)
 *
 * The key is in the pool (struct cxlcr_pod_key): whoever maps the pool is
 * inside the pod's trust boundary. A request answering another connection's
 * challenge (a replay) or without a MAC under the key is refused; so is an
 * answer (output or status) without a MAC under the key over the request's
 * nonce and its own number (forged, or recorded from another request).
 * The verb's stdout and stderr cannot travel as descriptors over TCP: in
 * the worker they are pipes that a relay thread sends back as frames.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "rpc.h"
#include "rpc_tcp.h"
#include "rpc_wire.h"

/* The pod's key from an open pool: 0, or -1 with one line. */
static int key_of(struct cxlcr_pool *pool, bool create, uint8_t key[CTL_KEY_BYTES])
{
	int rc = cxlcr_pod_key_get(pool, create, key);
	if (rc == 1)
		return cxlcr_error("pool %s has no pod key yet (no daemon has started on it)", pool->path);
	return rc;
}

/* host's control address in an open pool's host table: 0; 1 (and one
 * line) if the host is not up or has no control address; -1 on error. */
static int address_of(struct cxlcr_pool *pool, const char *host, struct sockaddr_in *addr)
{
	struct cxlcr_host_identity id;
	if (cxlcr_host_lookup_id(pool, host, &id) < 0) {
		cxlcr_error("host %s is not up (no running daemon of that name in the pod's host table)", host);
		return 1;
	}
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_port = htons((uint16_t)id.port);
	if (!id.port || !id.address[0] || inet_pton(AF_INET, id.address, &addr->sin_addr) != 1) {
		cxlcr_error("host %s has no control address in the pod's host table (its daemon listens "
			    "on no TCP port, or on every address: give it `address` in cxlcrd.conf)", host);
		return 1;
	}
	return 0;
}

int rpc_pod_key(uint8_t key[CTL_KEY_BYTES], bool create)
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return -1;
	int rc = key_of(&pool, create, key);
	cxlcr_pool_close(&pool);
	return rc;
}

int rpc_host_address(const char *host, struct sockaddr_in *addr)
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return -1;
	int rc = address_of(&pool, host, addr);
	cxlcr_pool_close(&pool);
	return rc ? -1 : 0;
}

/* Both, with one look at the pool (a call's only one on the client). */
static int lookup(const char *host, struct sockaddr_in *addr, uint8_t key[CTL_KEY_BYTES])
{
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return -1;
	int rc = address_of(&pool, host, addr);
	if (rc == 0 && key_of(&pool, false, key) < 0)
		rc = -1;
	cxlcr_pool_close(&pool);
	return rc;
}

bool rpc_host_up(const char *host)
{
	struct sockaddr_in a;
	return host && *host && (rpc_host_address(host, &a) == 0 || host_is_local_pod_host(host));
}

/* ---- the client ---- */

/* A TCP connection to addr by deadline. */
static int connect_by(const struct sockaddr_in *addr, uint64_t deadline)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	if (s < 0)
		return -1;
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s, (const struct sockaddr *)addr, sizeof(*addr)) < 0 && errno != EINPROGRESS)
		goto fail;
	for (;;) {
		int ms = ctl_ms_left(deadline);
		struct pollfd p = { .fd = s, .events = POLLOUT };
		int rc = ms ? poll(&p, 1, ms) : 0;
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc == 0) {
			errno = ETIMEDOUT;
			goto fail;
		}
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			errno = err;
			goto fail;
		}
		break;
	}
	fcntl(s, F_SETFL, 0);
	return s;
fail:;
	int e = errno;
	close(s);
	errno = e;
	return -1;
}

/* Sends are bounded by the deadline too (a daemon that stopped reading). */
static void send_by(int s, uint64_t deadline)
{
	uint64_t now = cxlcr_mono_ns();
	uint64_t us = now >= deadline ? 1000 : (deadline - now) / 1000;
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* One frame's body from the daemon, or -1 with the error line set. */
static int read_answer(int s, const char *host, int timeout_ms, uint64_t deadline, uint8_t **buf, size_t *len)
{
	if (ctl_read_frame(s, buf, len, deadline) == 0)
		return 0;
	if (errno == ETIMEDOUT)
		return cxlcr_error("host %s: no answer within %d ms (the request's deadline, $" RPC_TIMEOUT_ENV ")",
				   host, timeout_ms);
	if (errno == EMSGSIZE)
		return cxlcr_error("host %s: malformed answer (a frame over %u bytes)", host, CTL_FRAME_MAX);
	return cxlcr_error("host %s: its daemon closed the connection before answering", host);
}

int rpc_call_tcp(const char *host, int argc, char **argv, int out_fd, int err_fd, int timeout_ms)
{
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct sockaddr_in addr;
	struct ctl_seal seal = { .seq = 0 };
	uint8_t challenge[CTL_CHALLENGE_BYTES];
	char why[CTL_REFUSED_MAX];
	if (sodium_init() < 0)
		return cxlcr_error("libsodium cannot start");
	int found = lookup(host, &addr, seal.key);
	if (found != 0) {
		sodium_memzero(&seal, sizeof(seal));
		return found > 0 ? RPC_NO_ADDRESS : -1;
	}
	randombytes_buf(seal.nonce, sizeof(seal.nonce));
	int s = connect_by(&addr, deadline);
	if (s < 0) {
		int e = errno;
		sodium_memzero(&seal, sizeof(seal));
		/* A port that drops packets: say which deadline ended the wait. */
		if (e == ETIMEDOUT)
			return cxlcr_error("host %s: its daemon does not answer at %s:%u (no connection within %d ms, "
					   "the request's deadline, $" RPC_TIMEOUT_ENV ")",
					   host, inet_ntoa(addr.sin_addr), ntohs(addr.sin_port), timeout_ms);
		return cxlcr_error("host %s: its daemon does not answer at %s:%u (%s)", host,
				   inet_ntoa(addr.sin_addr), ntohs(addr.sin_port), strerror(e));
	}
	send_by(s, deadline);
	uint8_t *buf = NULL, *req = NULL;
	size_t len, req_len;
	int rc = -1;
	if (ctl_write_all(s, CTL_MAGIC, CTL_MAGIC_LEN) < 0) {
		cxlcr_error("host %s: cannot send the request: %s", host, strerror(errno));
		goto out;
	}
	if (read_answer(s, host, timeout_ms, deadline, &buf, &len) < 0)
		goto out;
	if (ctl_hello_parse(buf, len, challenge, why, sizeof(why)) < 0) {
		cxlcr_error("host %s: %s", host, why);
		goto out;
	}
	if (!(req = ctl_request_encode(challenge, &seal, argc, argv, &req_len)))
		goto out;
	if (ctl_write_all(s, req, req_len) < 0) {
		cxlcr_error("host %s: cannot send the request: %s", host, strerror(errno));
		goto out;
	}
	for (;;) {
		struct ctl_frame f;
		free(buf);
		buf = NULL;
		if (read_answer(s, host, timeout_ms, deadline, &buf, &len) < 0)
			break;
		if (ctl_frame_parse(buf, len, &seal, &f, why, sizeof(why)) < 0) {
			cxlcr_error("host %s: %s", host, why);
			break;
		}
		if (f.kind == CTL_REFUSED) {
			cxlcr_error("host %s refused the request: %s", host, f.refused);
			break;
		}
		if (f.kind == CTL_STATUS) {
			rc = f.status;
			break;
		}
		/* The caller may have closed its output: the verb goes on. */
		if (ctl_write_all(f.stream == 1 ? out_fd : err_fd, f.data, f.len) < 0)
			(void)0;
		free(f.data);
	}
out:
	sodium_memzero(&seal, sizeof(seal));
	free(buf);
	free(req);
	close(s);
	return rc;
}

/* ---- the daemon ---- */

/* The key and the request's nonce the answers of this worker's connection
 * are sealed with (rpc_tcp_accept()), and how many were sent. */
static struct ctl_seal answer_seal;

bool rpc_tcp_is_control(int conn)
{
	char magic[CTL_MAGIC_LEN];
	struct pollfd p = { .fd = conn, .events = POLLIN };
	uint64_t deadline = cxlcr_mono_ns() + RPC_REQUEST_READ_S * 1000000000ull;
	/* The fork API's JSON never starts with the magic: wait for 4 bytes
	 * or the connection's end, whichever comes first. The peek must not
	 * block: the accepted socket has no receive timeout yet, and an idle
	 * connection held its worker for ever (tests/t_ctl_limits.sh). */
	for (;;) {
		ssize_t n = recv(conn, magic, sizeof(magic), MSG_PEEK | MSG_DONTWAIT);
		if (n == (ssize_t)sizeof(magic))
			return !memcmp(magic, CTL_MAGIC, CTL_MAGIC_LEN);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return false;
		if (n > 0 && memcmp(magic, CTL_MAGIC, (size_t)n))
			return false;
		uint64_t now = cxlcr_mono_ns();
		if (now >= deadline)
			return false;
		/* A partial magic: wait for more without spinning. */
		p.revents = 0;
		if (poll(&p, 1, 10) < 0 && errno != EINTR)
			return false;
	}
}

/* The relay: the verb's stdout and stderr (pipes) back to the client.
 * Whoever holds the lock writes frames: the relay thread while the verb
 * runs, then the worker itself, which drains the pipes and sends the status
 * at once (no wake-up of the thread on the answer's path). */
static struct relay {
	int conn, out, err, stop;     /* read ends; stop: an eventfd */
	pthread_t thread;
	pthread_mutex_t lock;
	bool running, stopping, client_ok;
	pid_t owner;                  /* the worker: a child of it has no relay thread */
} relay = { -1, -1, -1, -1, 0, PTHREAD_MUTEX_INITIALIZER, false, false, true, 0 };

/* Sends one read of a pipe as a frame (under the lock); returns what read
 * returned. A client that has gone makes the output go nowhere: the verb
 * must not block on a full pipe. */
static ssize_t relay_one(int fd, int stream)
{
	static uint8_t data[CTL_CHUNK], frame[CTL_CHUNK + 128];
	ssize_t n = read(fd, data, sizeof(data));
	if (n <= 0)
		return n;
	size_t len = ctl_frame_encode(frame, sizeof(frame), &answer_seal, stream, data, (size_t)n, 0, NULL);
	if (relay.client_ok && (!len || ctl_write_all(relay.conn, frame, len) < 0))
		relay.client_ok = false;
	return n;
}

static bool pipe_ended(ssize_t r)
{
	return r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN);
}

static void *relay_main(void *unused)
{
	bool out_open = true, err_open = true;
	while (out_open || err_open) {
		struct pollfd p[3] = { { .fd = out_open ? relay.out : -1, .events = POLLIN },
				       { .fd = err_open ? relay.err : -1, .events = POLLIN },
				       { .fd = relay.stop, .events = POLLIN } };
		int rc = poll(p, 3, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		pthread_mutex_lock(&relay.lock);
		bool done = rc < 0 || relay.stopping;
		if (!done && p[0].revents && pipe_ended(relay_one(relay.out, 1)))
			out_open = false;
		if (!done && p[1].revents && pipe_ended(relay_one(relay.err, 2)))
			err_open = false;
		pthread_mutex_unlock(&relay.lock);
		if (done)
			break;
	}
	return NULL;
}

/* stdout and stderr become pipes to the relay. */
static int relay_start(int conn)
{
	int o[2], e[2];
	if (pipe2(o, O_CLOEXEC) < 0)
		return cxlcr_error("pipe: %s", strerror(errno));
	if (pipe2(e, O_CLOEXEC) < 0) {
		close(o[0]), close(o[1]);
		return cxlcr_error("pipe: %s", strerror(errno));
	}
	relay.conn = conn, relay.out = o[0], relay.err = e[0];
	relay.stop = eventfd(0, EFD_CLOEXEC);
	fflush(NULL);
	dup2(o[1], 1);
	dup2(e[1], 2);
	close(o[1]);
	close(e[1]);
	if (relay.stop < 0 || pthread_create(&relay.thread, NULL, relay_main, NULL) != 0)
		return cxlcr_error("cannot start the output relay");
	relay.running = true;
	relay.owner = getpid();
	return 0;
}

void rpc_tcp_reply(int conn, int status)
{
	uint8_t frame[128];
	if (relay.running && relay.owner != getpid())
		return; /* a child of the worker: the worker answers */
	if (relay.running) {
		/* What the pipes hold now goes first (children of the verb
		 * may keep them open for ever: no waiting for their end). */
		pthread_mutex_lock(&relay.lock);
		relay.stopping = true;
		fcntl(relay.out, F_SETFL, O_NONBLOCK);
		fcntl(relay.err, F_SETFL, O_NONBLOCK);
		while (relay_one(relay.out, 1) > 0)
			;
		while (relay_one(relay.err, 2) > 0)
			;
	}
	size_t len = ctl_frame_encode(frame, sizeof(frame), &answer_seal, 0, NULL, 0, status, NULL);
	if (len)
		ctl_write_all(conn, frame, len);
	sodium_memzero(&answer_seal, sizeof(answer_seal)); /* the last answer */
	if (relay.running) {
		uint64_t one = 1;
		pthread_mutex_unlock(&relay.lock);
		if (write(relay.stop, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(relay.thread, NULL);
		relay.running = false;
	}
}

/* A refused request gets one line, and nothing is done. */
static int refuse(int conn, const char *why)
{
	uint8_t frame[CTL_REFUSED_MAX + 128];
	size_t len = ctl_frame_encode(frame, sizeof(frame), NULL, 0, NULL, 0, 0, why);
	if (len)
		ctl_write_all(conn, frame, len);
	return cxlcr_error("%s", why);
}

int rpc_tcp_accept(int conn, int *argc, char ***argv)
{
	char magic[CTL_MAGIC_LEN], why[256];
	uint8_t challenge[CTL_CHALLENGE_BYTES], key[CTL_KEY_BYTES], *hello, *buf;
	size_t len;
	uint64_t deadline = cxlcr_mono_ns() + RPC_REQUEST_READ_S * 1000000000ull;
	if (sodium_init() < 0)
		return cxlcr_error("libsodium cannot start");
	if (recv(conn, magic, sizeof(magic), MSG_WAITALL) != (ssize_t)sizeof(magic))
		return cxlcr_error("malformed request");
	randombytes_buf(challenge, sizeof(challenge));
	if (!(hello = ctl_hello_encode(challenge, &len)))
		return -1;
	int sent = ctl_write_all(conn, hello, len);
	free(hello);
	if (sent < 0)
		return cxlcr_error("the caller gave up before its request was served");
	if (ctl_read_frame(conn, &buf, &len, deadline) < 0)
		return errno == EMSGSIZE ? refuse(conn, "malformed request (over the size limit)")
					 : cxlcr_error("truncated request");
	if (rpc_pod_key(key, false) < 0) {
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		free(buf);
		return refuse(conn, why);
	}
	int rc = ctl_request_parse(buf, len, challenge, key, argc, argv, answer_seal.nonce, why, sizeof(why));
	if (rc == 0) /* the answers go to this request: seal them */
		memcpy(answer_seal.key, key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	free(buf);
	return rc < 0 ? refuse(conn, why) : 0;
}

int rpc_tcp_begin(int conn)
{
	return relay_start(conn);
}
