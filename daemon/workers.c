/*
 * The daemon's workers, counted (workers.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "workers.h"

static struct worker {
	pid_t pid;              /* 0: free */
	int endpoint;
	uint64_t peer;
	uint64_t started_ns;    /* CLOCK_MONOTONIC */
	bool killed;            /* past its deadline, SIGKILLed, not reaped yet */
} workers[WORKERS_MAX];

#define PEER_UID_TAG (1ull << 40)

uint64_t workers_peer_of(int conn)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getpeername(conn, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET)
		return ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
		return PEER_UID_TAG | (uint64_t)cred.uid;
	return ~0ull; /* unknown: all such peers count as one */
}

bool workers_admit(int endpoint, uint64_t peer, char *why, size_t len)
{
	int all = 0, here = 0, theirs = 0;
	for (int i = 0; i < WORKERS_MAX; i++) {
		if (!workers[i].pid)
			continue;
		all++;
		if (workers[i].endpoint == endpoint) {
			here++;
			theirs += workers[i].peer == peer;
		}
	}
	if (all >= WORKERS_MAX || here >= WORKERS_PER_ENDPOINT)
		snprintf(why, len, "busy: %d requests are being served", here);
	else if (theirs >= WORKERS_PER_PEER)
		snprintf(why, len, "busy: %d requests of yours are being served", theirs);
	else
		return true;
	return false;
}

void workers_add(pid_t pid, int endpoint, uint64_t peer, uint64_t now_ns)
{
	for (int i = 0; i < WORKERS_MAX; i++) {
		if (!workers[i].pid) {
			workers[i] = (struct worker){ pid, endpoint, peer, now_ns, false };
			return;
		}
	}
}

void workers_reap(void (*died)(pid_t pid, int sig, bool overdue))
{
	pid_t pid;
	int status;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		bool worker = false, overdue = false;
		for (int i = 0; i < WORKERS_MAX; i++)
			if (workers[i].pid == pid) {
				workers[i].pid = 0;
				worker = true;
				overdue = workers[i].killed;
			}
		if (worker && died && WIFSIGNALED(status))
			died(pid, WTERMSIG(status), overdue);
	}
}

void workers_kill_all(void)
{
	for (int i = 0; i < WORKERS_MAX; i++)
		if (workers[i].pid > 0)
			kill(workers[i].pid, SIGKILL);
}

int workers_deadline_ms(int rpc_timeout_ms)
{
	const char *env = getenv(WORKER_DEADLINE_ENV);
	char *end;
	long ms = env && *env ? strtol(env, &end, 10) : 0;
	if (env && *env && !*end && ms > 0 && ms <= 86400000)
		return (int)ms;
	return 2 * rpc_timeout_ms + 60000;
}

/*
 * A worker that is stalled (SIGSTOP, a debugger, a page fault that never
 * ends) holds its service's lease, and perhaps the service frozen, for as
 * long as it stays so: nothing else ends it, since only a death makes the
 * daemon take its leases over (worker_died). Past its deadline, when
 * whoever asked has given up anyway, the daemon kills it (SIGKILL ends a
 * stopped process too), and the reap that follows takes its leases over:
 * the stalled worker is fenced out for good, whatever it would have done
 * next.
 */
uint64_t workers_kill_overdue(uint64_t now_ns, uint64_t deadline_ns, void (*overdue)(pid_t pid, uint64_t ran_ns))
{
	uint64_t next = UINT64_MAX;
	for (int i = 0; i < WORKERS_MAX; i++) {
		struct worker *w = &workers[i];
		if (!w->pid || w->killed)
			continue;
		uint64_t due = w->started_ns + deadline_ns;
		if (now_ns < due) {
			next = due < next ? due : next;
			continue;
		}
		/* Not reaped yet, so the pid is still this worker's. */
		if (kill(w->pid, SIGKILL) == 0 || errno == ESRCH)
			w->killed = true;
		if (overdue)
			overdue(w->pid, now_ns - w->started_ns);
	}
	return next;
}
