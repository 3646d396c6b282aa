#ifndef CXLCR_NETNS_NURSERY_H
#define CXLCR_NETNS_NURSERY_H
#include <stdbool.h>

/* Moves the calling thread into the nursery, the network namespace that
 * service namespaces are unshared from so that each gets a small TCP hash
 * of its own (netns_nursery.c says why), making it first if it is not
 * there. Call it in the thread or process that is about to unshare
 * CLONE_NEWNET, never in one that must stay where it is. 0, or -1 if the
 * nursery cannot be used (the caller then goes on in its own namespace:
 * only the freeze is longer). */
int cxlcr_netns_enter_nursery(void);

#endif
