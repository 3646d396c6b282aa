#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "netns_nursery.h"
#include "rtnl.h"

#define NETNS_RUN_DIR "/run/netns"

/* One request: the header, the family message, then attributes. */
struct rtnl_req {
	struct nlmsghdr h;
	char body[1024 - sizeof(struct nlmsghdr)];
};

static void *req_init(struct rtnl_req *r, uint16_t type, uint16_t flags, size_t fixed)
{
	memset(r, 0, sizeof(*r));
	r->h.nlmsg_len = (uint32_t)NLMSG_LENGTH(fixed);
	r->h.nlmsg_type = type;
	r->h.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags);
	return NLMSG_DATA(&r->h);
}

static struct rtattr *attr_add(struct rtnl_req *r, uint16_t type, const void *data, size_t len)
{
	size_t at = NLMSG_ALIGN(r->h.nlmsg_len);
	if (at + RTA_SPACE(len) > sizeof(*r))
		return NULL; /* requests are fixed and small: cannot happen */
	struct rtattr *a = (struct rtattr *)((char *)r + at);
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = (uint32_t)(at + RTA_SPACE(len));
	return a;
}

static struct rtattr *nest_begin(struct rtnl_req *r, uint16_t type)
{
	return attr_add(r, type, NULL, 0);
}

static void nest_end(struct rtnl_req *r, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((char *)r + r->h.nlmsg_len - (char *)nest);
}

/* Sends the request and waits for the kernel's answer to it: the ack (or
 * the error), after any reply message, whose head goes into *reply. */
static int rtnl_talk(int sk, struct rtnl_req *r, const char *what, struct rtnl_req *reply)
{
	static __thread uint32_t seq;
	r->h.nlmsg_seq = ++seq;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(sk, r, r->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return cxlcr_error("%s: netlink: %s", what, strerror(errno));
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	for (;;) {
		ssize_t n = recv(sk, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cxlcr_error("%s: netlink: %s", what, strerror(errno));
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != r->h.nlmsg_seq)
				continue; /* an answer to an earlier, abandoned request */
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error)
					return cxlcr_error("%s: %s", what, strerror(-e->error));
				return 0;
			}
			if (reply) /* its head: the family message is what we read */
				memcpy(reply, h, h->nlmsg_len < sizeof(*reply) ? h->nlmsg_len : sizeof(*reply));
		}
	}
}

int cxlcr_rtnl_open(void)
{
	int sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (sk < 0)
		return cxlcr_error("netlink socket: %s", strerror(errno));
	return sk;
}

/* Runs in a thread of its own, which may change its namespaces: the
 * process's other threads keep theirs. */
struct ns_job {
	int netns_fd;       /* join this namespace (open_in) */
	const char *path;   /* or make a new one and bind it here (create) */
	int fd;             /* out: the socket, or an fd of the new namespace */
	char err[CXLCR_ERROR_MAX];
};

static void *ns_thread(void *arg)
{
	struct ns_job *j = arg;
	j->fd = -1;
	if (j->path) {
		cxlcr_netns_enter_nursery(); /* a TCP hash of its own, or the machine's */
		if (unshare(CLONE_NEWNET) < 0) {
			snprintf(j->err, sizeof(j->err), "new network namespace: %s", strerror(errno));
			return NULL;
		}
		if (mount("/proc/thread-self/ns/net", j->path, "none", MS_BIND, NULL) < 0) {
			snprintf(j->err, sizeof(j->err), "bind %s: %s", j->path, strerror(errno));
			return NULL;
		}
		j->fd = open(j->path, O_RDONLY | O_CLOEXEC);
	} else {
		if (setns(j->netns_fd, CLONE_NEWNET) < 0) {
			snprintf(j->err, sizeof(j->err), "join network namespace: %s", strerror(errno));
			return NULL;
		}
		j->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	}
	if (j->fd < 0)
		snprintf(j->err, sizeof(j->err), "%s: %s", j->path ? j->path : "netlink socket", strerror(errno));
	return NULL;
}

static int run_ns_job(struct ns_job *j)
{
	pthread_t t;
	j->err[0] = 0;
	int e = pthread_create(&t, NULL, ns_thread, j);
	if (e)
		return cxlcr_error("thread: %s", strerror(e));
	pthread_join(t, NULL);
	return j->fd >= 0 ? j->fd : cxlcr_error("%s", j->err);
}

int cxlcr_rtnl_open_in(int netns_fd)
{
	struct ns_job j = { .netns_fd = netns_fd };
	return run_ns_job(&j);
}

int cxlcr_netns_create(const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", NETNS_RUN_DIR, name);
	mkdir(NETNS_RUN_DIR, 0755);
	int f = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (f < 0)
		return cxlcr_error("network namespace %s: %s", name, strerror(errno));
	close(f);
	struct ns_job j = { .netns_fd = -1, .path = path };
	int fd = run_ns_job(&j);
	if (fd < 0) {
		umount2(path, MNT_DETACH);
		unlink(path);
	}
	return fd;
}

/* The index and flags (IFF_*) of link `name`: its index, or -1. */
static int link_info(int sk, const char *name, unsigned *flags)
{
	struct rtnl_req r, reply;
	req_init(&r, RTM_GETLINK, 0, sizeof(struct ifinfomsg));
	attr_add(&r, IFLA_IFNAME, name, strlen(name) + 1);
	memset(&reply, 0, sizeof(reply));
	char what[64];
	snprintf(what, sizeof(what), "link %s", name);
	if (rtnl_talk(sk, &r, what, &reply) < 0)
		return -1;
	const struct ifinfomsg *ifi = NLMSG_DATA(&reply.h);
	if (reply.h.nlmsg_type != RTM_NEWLINK || ifi->ifi_index <= 0)
		return cxlcr_error("link %s: no answer", name);
	if (flags)
		*flags = ifi->ifi_flags;
	return ifi->ifi_index;
}

int cxlcr_rtnl_link_index(int sk, const char *name)
{
	return link_info(sk, name, NULL);
}

int cxlcr_rtnl_link_running(int sk, const char *name)
{
	unsigned flags = 0;
	if (link_info(sk, name, &flags) < 0)
		return -1;
	return (flags & IFF_UP) && (flags & IFF_RUNNING) ? 1 : 0;
}

int cxlcr_rtnl_link_set(int sk, const char *name, int master, bool up)
{
	struct rtnl_req r;
	struct ifinfomsg *ifi = req_init(&r, RTM_SETLINK, 0, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	if (up) {
		ifi->ifi_flags = IFF_UP;
		ifi->ifi_change = IFF_UP;
	}
	attr_add(&r, IFLA_IFNAME, name, strlen(name) + 1);
	if (master >= 0) {
		uint32_t m = (uint32_t)master;
		attr_add(&r, IFLA_MASTER, &m, sizeof(m));
	}
	char what[64];
	snprintf(what, sizeof(what), "link %s", name);
	return rtnl_talk(sk, &r, what, NULL);
}

int cxlcr_rtnl_link_attach(int sk, const char *name, const char *bridge)
{
	int index = cxlcr_rtnl_link_index(sk, bridge);
	return index < 0 ? -1 : cxlcr_rtnl_link_set(sk, name, index, true);
}

int cxlcr_rtnl_veth_add(int sk, const char *name, const char *peer, const uint8_t peer_mac[6],
			int peer_netns_fd)
{
	struct rtnl_req r;
	struct ifinfomsg *ifi = req_init(&r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	attr_add(&r, IFLA_IFNAME, name, strlen(name) + 1);
	struct rtattr *info = nest_begin(&r, IFLA_LINKINFO);
	attr_add(&r, IFLA_INFO_KIND, "veth", 4);
	struct rtattr *data = nest_begin(&r, IFLA_INFO_DATA);
	struct rtattr *p = nest_begin(&r, VETH_INFO_PEER);
	/* The peer's own ifinfomsg, then its attributes. */
	struct ifinfomsg peer_ifi = { .ifi_family = AF_UNSPEC };
	size_t at = NLMSG_ALIGN(r.h.nlmsg_len);
	memcpy((char *)&r + at, &peer_ifi, sizeof(peer_ifi));
	r.h.nlmsg_len = (uint32_t)(at + NLMSG_ALIGN(sizeof(peer_ifi)));
	attr_add(&r, IFLA_IFNAME, peer, strlen(peer) + 1);
	attr_add(&r, IFLA_ADDRESS, peer_mac, 6);
	uint32_t nsfd = (uint32_t)peer_netns_fd;
	attr_add(&r, IFLA_NET_NS_FD, &nsfd, sizeof(nsfd));
	nest_end(&r, p);
	nest_end(&r, data);
	nest_end(&r, info);
	char what[64];
	snprintf(what, sizeof(what), "veth %s", name);
	return rtnl_talk(sk, &r, what, NULL);
}

int cxlcr_rtnl_link_del(int sk, const char *name)
{
	struct rtnl_req r;
	struct ifinfomsg *ifi = req_init(&r, RTM_DELLINK, 0, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	attr_add(&r, IFLA_IFNAME, name, strlen(name) + 1);
	char what[64];
	snprintf(what, sizeof(what), "delete link %s", name);
	return rtnl_talk(sk, &r, what, NULL);
}

/* Deletes one neighbour entry: the family message and NDA_DST of a dump. */
static int neigh_del(int sk, const struct ndmsg *n, const void *dst, size_t dst_len)
{
	struct rtnl_req r;
	struct ndmsg *m = req_init(&r, RTM_DELNEIGH, 0, sizeof(*m));
	*m = *n;
	attr_add(&r, NDA_DST, dst, dst_len);
	return rtnl_talk(sk, &r, "delete neighbour", NULL);
}

int cxlcr_rtnl_neigh_flush_unresolved(int sk)
{
	struct {
		struct nlmsghdr h;
		struct ndmsg n;
	} req = { .h = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETNEIGH,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 0x6e656967 },
		  .n = { .ndm_family = AF_INET } };
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(sk, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return cxlcr_error("neighbours: netlink: %s", strerror(errno));
	/* Collect first, delete after the dump: the socket answers in order. */
	struct {
		struct ndmsg n;
		uint32_t dst;
	} doomed[64];
	int count = 0;
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	for (bool done = false; !done;) {
		ssize_t len = recv(sk, buf, sizeof(buf), 0);
		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0)
			return cxlcr_error("neighbours: netlink: %s", strerror(errno));
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			const struct ndmsg *n = NLMSG_DATA(h);
			if (h->nlmsg_type != RTM_NEWNEIGH || !(n->ndm_state & (NUD_INCOMPLETE | NUD_FAILED)) ||
			    count == (int)(sizeof(doomed) / sizeof(doomed[0])))
				continue;
			int alen = (int)RTM_PAYLOAD(h);
			for (struct rtattr *a = (struct rtattr *)((char *)n + NLMSG_ALIGN(sizeof(*n))); RTA_OK(a, alen);
			     a = RTA_NEXT(a, alen)) {
				if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == 4) {
					doomed[count].n = *n;
					memcpy(&doomed[count].dst, RTA_DATA(a), 4);
					count++;
				}
			}
		}
	}
	for (int i = 0; i < count; i++)
		neigh_del(sk, &doomed[i].n, &doomed[i].dst, 4);
	return count;
}

int cxlcr_rtnl_addr_add(int sk, const char *name, uint32_t ip, int prefix)
{
	int index = cxlcr_rtnl_link_index(sk, name);
	if (index < 0)
		return -1;
	struct rtnl_req r;
	struct ifaddrmsg *ifa = req_init(&r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_index = (uint32_t)index;
	uint32_t be = htonl(ip);
	attr_add(&r, IFA_LOCAL, &be, sizeof(be));
	attr_add(&r, IFA_ADDRESS, &be, sizeof(be));
	char what[64];
	snprintf(what, sizeof(what), "address on %s", name);
	return rtnl_talk(sk, &r, what, NULL);
}
