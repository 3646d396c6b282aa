/*
 * Remote fork: see fork.h. (Being built: this stub answers every request
 * with an error until the snapshot/rebase path lands.)
 */
#include <stdio.h>
#include <string.h>

#include "fork.h"

int fork_service(const struct fork_request *req, struct fork_reply *rep)
{
	memset(rep, 0, sizeof(*rep));
	snprintf(rep->error, sizeof(rep->error), "fork of %s: not available yet", req->service);
	return -1;
}
