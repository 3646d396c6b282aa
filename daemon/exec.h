/*
 * Running the tools cxlcr drives (ip, nsenter, iptables, criu): argv lists,
 * never a shell, with a time limit on each, and the tool's last line of
 * stderr kept for the one-line error that reaches the operator.
 */
#ifndef CXLCR_EXEC_H
#define CXLCR_EXEC_H

/* Runs argv (NULL-terminated) and waits at most timeout_s seconds. Returns
 * its exit status, or -1 (killed, timed out, or could not start) with the
 * reason in cxlcr_last_error(). A non-zero status also sets the error. */
int exec_argv(char *const argv[], int timeout_s);

/* exec_argv(), with pass_fd handed to the tool as its fd 3. */
int exec_argv_fd(char *const argv[], int timeout_s, int pass_fd);

/* exec_argv() on a NULL-terminated list of arguments. */
int exec_run(int timeout_s, const char *arg0, ...) __attribute__((sentinel));

#endif
