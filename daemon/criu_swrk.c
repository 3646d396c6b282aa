#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/error.h"
#include "cli.h"
#include "criu.h"
#include "criu_swrk.h"
#include "rpc.pb-c.h"

int criu_swrk_start(struct criu_swrk *w, const int *fds, int nfds, int netns_fd, bool hold)
{
	memset(w, 0, sizeof(*w));
	w->sk = -1;
	if (nfds > 7)
		return cxlcr_error("criu swrk: %d fds, at most 7", nfds);
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return cxlcr_error("criu swrk: socketpair: %s", strerror(errno));
	int all[8];
	for (int i = 0; i < nfds; i++)
		all[i] = fds[i];
	all[nfds] = sp[1];
	char sk_s[16];
	snprintf(sk_s, sizeof(sk_s), "%d", 3 + nfds);
	/* Global options come before the command: the plugin's directory,
	 * and a test's action script (criu.h) where one is asked for. */
	char *argv[8] = { "criu", "--lib", (char *)installed_plugin_dir() };
	int n = 3;
	const char *script = criu_test_action_script();
	if (script) {
		argv[n++] = "--action-script";
		argv[n++] = (char *)script;
	}
	argv[n++] = "swrk";
	argv[n++] = sk_s;
	argv[n] = NULL;
	int rc = exec_tool_start(argv, all, nfds + 1, netns_fd, hold ? EXEC_HELD : EXEC_KEPT, &w->child);
	close(sp[1]);
	if (rc < 0) {
		close(sp[0]);
		return -1;
	}
	w->sk = sp[0];
	w->started = true;
	return 0;
}

/* The request: CRIU's restore options, as `criu restore` takes them on its
 * command line (criu.c used to pass exactly these). */
static int send_request(int sk, const struct criu_restore_opts *o)
{
	CriuOpts opts = CRIU_OPTS__INIT;
	opts.images_dir_fd = -1;
	opts.images_dir = (char *)o->dir;
	opts.log_file = (char *)o->log_file;
	opts.has_log_level = true;
	opts.log_level = o->log_level;
	if (o->tcp_close) {
		opts.has_tcp_close = true;
		opts.tcp_close = true;
	} else {
		opts.has_tcp_established = true;
		opts.tcp_established = true;
	}
	opts.has_network_lock = true;
	opts.network_lock = CRIU_NETWORK_LOCK_METHOD__SKIP;
	opts.has_manage_cgroups_mode = true;
	opts.manage_cgroups_mode = CRIU_CG_MODE__IGNORE;
	if (o->leave_stopped) {
		opts.has_leave_stopped = true;
		opts.leave_stopped = true;
	}
	InheritFd inherit[CRIU_SWRK_INHERIT_MAX], *list[CRIU_SWRK_INHERIT_MAX];
	int n = o->n_inherit < CRIU_SWRK_INHERIT_MAX ? o->n_inherit : CRIU_SWRK_INHERIT_MAX;
	for (int i = 0; i < n; i++) {
		inherit_fd__init(&inherit[i]);
		inherit[i].key = (char *)o->inherit[i].key;
		inherit[i].fd = o->inherit[i].fd;
		list[i] = &inherit[i];
	}
	opts.n_inherit_fd = (size_t)n;
	opts.inherit_fd = list;
	CriuReq req = CRIU_REQ__INIT;
	req.type = CRIU_REQ_TYPE__RESTORE;
	req.opts = &opts;
	size_t len = criu_req__get_packed_size(&req);
	uint8_t *buf = malloc(len);
	if (!buf)
		return cxlcr_error("criu swrk: out of memory for its request");
	criu_req__pack(&req, buf);
	ssize_t sent = send(sk, buf, len, MSG_NOSIGNAL);
	int e = errno;
	free(buf);
	/* A worker that died already says why when it is waited for. */
	return sent == (ssize_t)len ? 0 : cxlcr_error("criu swrk: its request: %s", strerror(e));
}

/* CRIU's answer, in the socket once it has ended: 0 and the restored init's
 * pid, or -1. */
static int read_answer(int sk, pid_t *pid)
{
	static uint8_t buf[65536];
	ssize_t n = recv(sk, buf, sizeof(buf), MSG_DONTWAIT);
	if (n <= 0)
		return cxlcr_error("criu swrk ended without answering its restore request");
	CriuResp *r = criu_resp__unpack(NULL, (size_t)n, buf);
	if (!r)
		return cxlcr_error("criu swrk: its answer cannot be read");
	int rc = 0;
	if (r->type != CRIU_REQ_TYPE__RESTORE || !r->success || !r->restore || r->restore->pid <= 0)
		rc = cxlcr_error("criu restore failed%s%s", r->cr_errmsg ? ": " : "", r->cr_errmsg ? r->cr_errmsg : "");
	else
		*pid = r->restore->pid;
	criu_resp__free_unpacked(r, NULL);
	return rc;
}

int criu_swrk_restore(struct criu_swrk *w, const struct criu_restore_opts *o, int timeout_s, pid_t *pid)
{
	if (!w->started)
		return cxlcr_error("criu swrk was not started");
	int sent = send_request(w->sk, o);
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	int rc = exec_tool_finish(&w->child, timeout_s);
	w->started = false;
	if (rc == 0)
		rc = sent < 0 ? cxlcr_error("%s", why) : read_answer(w->sk, pid);
	if (rc != 0)
		exec_held_release(false, NULL, 0); /* a success without an answer: never let run */
	close(w->sk);
	w->sk = -1;
	return rc;
}

void criu_swrk_abort(struct criu_swrk *w)
{
	if (!w->started)
		return;
	/* Its request socket closed, a waiting worker ends by itself; the
	 * keeper, told as for a verb that died, ends what it left. */
	close(w->sk);
	w->sk = -1;
	exec_tool_abort(&w->child);
	w->started = false;
}
