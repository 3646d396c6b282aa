/*
 * The daemon's workers, counted (workers.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "workers.h"

static struct worker {
	pid_t pid;              /* 0: free */
	int endpoint;
	uint64_t peer;
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

void workers_add(pid_t pid, int endpoint, uint64_t peer)
{
	for (int i = 0; i < WORKERS_MAX; i++) {
		if (!workers[i].pid) {
			workers[i] = (struct worker){ pid, endpoint, peer };
			return;
		}
	}
}

void workers_reap(void (*died)(pid_t pid))
{
	pid_t pid;
	int status;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		bool worker = false;
		for (int i = 0; i < WORKERS_MAX; i++)
			if (workers[i].pid == pid) {
				workers[i].pid = 0;
				worker = true;
			}
		if (worker && died && WIFSIGNALED(status))
			died(pid);
	}
}
