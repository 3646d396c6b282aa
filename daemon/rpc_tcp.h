/*
 * The control protocol over TCP (daemon/rpc_tcp.c): the transport rpc.h's
 * calls use to reach a host's daemon at its address in the pod's host
 * table, and the daemon's side of it.
 */
#ifndef CXLCR_RPC_TCP_H
#define CXLCR_RPC_TCP_H
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

/* The pod's key, from the pool (with create, made if there is none). */
int rpc_pod_key(uint8_t key[32], bool create);
/* The control address of host's running daemon, from the host table. */
int rpc_host_address(const char *host, struct sockaddr_in *addr);
/* Whether host's daemon can be reached: in the host table with a control
 * address, or by its Unix socket on this machine. */
bool rpc_host_up(const char *host);

/* rpc_call_within() over TCP; RPC_NO_ADDRESS (with one line) if host is
 * not in the host table with a control address. */
#define RPC_NO_ADDRESS (-2)
int rpc_call_tcp(const char *host, int argc, char **argv, int out_fd, int err_fd, int timeout_ms);

/* Daemon side. Whether a connection to the TCP port speaks this protocol
 * (else it is the fork API's). */
bool rpc_tcp_is_control(int conn);
/* Greets, reads and checks the request: its arguments (one allocation),
 * or -1 after the refusal's one line went to the client. */
int rpc_tcp_accept(int conn, int *argc, char ***argv);
/* stdout and stderr go to the client from now on. */
int rpc_tcp_begin(int conn);
/* Sends the rest of the output, then the exit status. */
void rpc_tcp_reply(int conn, int status);

#endif
