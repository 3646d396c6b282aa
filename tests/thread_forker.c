/*
 * A service for tests/t_fork_copy_thread.sh: its heap in the arena (a few
 * allocations through the preload), a listening socket on PORT, and a
 * thread other than the main one that serves it: each line "fork" makes
 * that thread fork a process that waits for ever, and answers "forked\n".
 * A copy-mode fork child of it must not leave such a grandchild running
 * when its pager dies.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int listener;

static void serve(int conn)
{
	char line[64];
	ssize_t n;
	while ((n = read(conn, line, sizeof(line) - 1)) > 0) {
		line[n] = 0;
		if (strncmp(line, "fork", 4))
			continue;
		pid_t pid = fork();
		if (pid == 0) {
			for (;;)
				pause();
		}
		const char *said = pid > 0 ? "forked\n" : "failed\n";
		if (write(conn, said, strlen(said)) < 0)
			break;
	}
	close(conn);
}

static void *server(void *arg)
{
	(void)arg;
	for (;;) {
		int conn = accept(listener, NULL, NULL);
		if (conn >= 0)
			serve(conn);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: thread_forker PORT\n");
		return 2;
	}
	/* Some heap, in the arena. */
	char *keep[64];
	for (int i = 0; i < 64; i++) {
		keep[i] = malloc(4096);
		if (keep[i])
			memset(keep[i], i, 4096);
	}
	listener = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(listener, 8) < 0) {
		perror("thread_forker: listen");
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, server, NULL) != 0) {
		fprintf(stderr, "thread_forker: pthread_create failed\n");
		return 1;
	}
	printf("thread_forker: listening on %s\n", argv[1]);
	fflush(stdout);
	for (;;)
		pause();
}
