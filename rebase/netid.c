/*
 * A fork child's identity on the pod network. Its network namespace comes
 * back from the parent's images: the service link (spec->ifname) with the
 * parent's MAC (netdev-N.img), the parent's addresses on it (ifaddr-N.img)
 * and the routes that name the parent's address as their source
 * (route-N.img). The child gets its own MAC and IPv4 address instead, in
 * the parent's subnet; its IPv6 link-local address, when it is the one the
 * kernel derives from the parent's MAC (EUI-64), follows the new MAC.
 *
 * netdev-N.img is a protobuf image. ifaddr-N.img and route-N.img are the
 * raw output of `ip addr save` and `ip route save` that CRIU keeps: a
 * 4-byte magic of iproute2's, then netlink messages (RTM_NEWADDR,
 * RTM_NEWROUTE), each padded to 4 bytes. They are rewritten in place,
 * attribute by attribute; nothing changes size.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "image_io.h"
#include "internal.h"
#include "netdev.pb-c.h"

#define IPADDR_SAVE_MAGIC  0x47361222u   /* iproute2, ip/ipaddress.c */
#define ROUTE_SAVE_MAGIC   0x45311224u   /* iproute2, ip/iproute.c */
#define NETLINK_IMAGE_MAX  (16u << 20)

/* The parent's identity on its service link, and the child's. */
struct identity {
	uint32_t ifindex;
	uint8_t parent_mac[6];
	uint32_t parent_ip;                /* network order */
	uint8_t parent_prefix;
	bool have_parent_ip;
	const struct cxlcr_rebase_fork *spec;
};

/* ---- netdev-N.img ---- */

/* Reads every link of the namespace; the service link gets the child's
 * MAC. Returns the image to write in *out (only if the link is here). */
static int rewrite_netdev(int src_dir, const char *name, struct identity *id, int *found,
			  struct image_out *out)
{
	struct image_file f;
	int rc = image_load(src_dir, name, CRIU_NETDEV_MAGIC, &f);
	if (rc <= 0)
		return rc == 0 ? cxlcr_error("image %s: missing", name) : -1;
	image_begin(out, name, CRIU_NETDEV_MAGIC);
	ProtobufCMessage *m;
	*found = 0;
	while ((rc = image_next(&f, &net_device_entry__descriptor, &m)) > 0) {
		NetDeviceEntry *nd = (NetDeviceEntry *)m;
		if (!strcmp(nd->name, id->spec->ifname)) {
			if (!nd->has_address || nd->address.len != 6) {
				rc = cxlcr_error("image %s: link %s has no MAC address", name, nd->name);
			} else {
				memcpy(id->parent_mac, nd->address.data, 6);
				memcpy(nd->address.data, id->spec->child_mac, 6);
				id->ifindex = nd->ifindex;
				(*found)++;
			}
		}
		image_put(out, m);
		protobuf_c_message_free_unpacked(m, NULL);
		if (rc < 0)
			break;
	}
	image_free(&f);
	if (rc < 0 || !*found) {
		image_out_free(out);
		return rc < 0 ? -1 : 0;
	}
	if (*found > 1) {
		image_out_free(out);
		return cxlcr_error("image %s: %d links are called %s", name, *found, id->spec->ifname);
	}
	return 0;
}

/* ---- the netlink dumps ---- */

/* Walks the messages of an `ip ... save` image, checking the framing, and
 * calls fn on each: fn returns 0 to go on, -1 to fail. */
static int walk_messages(struct image_file *f, uint32_t magic, uint16_t type, size_t body,
			 int (*fn)(struct nlmsghdr *, struct identity *, const char *), struct identity *id)
{
	uint32_t head;
	if (f->len < sizeof(head))
		return cxlcr_error("image %s: truncated (%zu bytes, no magic)", f->name, f->len);
	memcpy(&head, f->data, sizeof(head));
	if (head != magic)
		return cxlcr_error("image %s: not an iproute2 dump (magic %#x, expected %#x)", f->name,
				   head, magic);
	size_t pos = sizeof(head);
	while (pos < f->len) {
		struct nlmsghdr h;
		if (f->len - pos < sizeof(h))
			return cxlcr_error("image %s: truncated (%zu stray bytes at offset %zu)", f->name,
					   f->len - pos, pos);
		memcpy(&h, f->data + pos, sizeof(h));
		if (h.nlmsg_len < NLMSG_LENGTH(body) || NLMSG_ALIGN(h.nlmsg_len) > f->len - pos)
			return cxlcr_error("image %s: truncated or corrupt message at offset %zu (length %u)",
					   f->name, pos, h.nlmsg_len);
		if (h.nlmsg_type != type)
			return cxlcr_error("image %s: corrupt: message of type %u at offset %zu", f->name,
					   h.nlmsg_type, pos);
		/* The data is malloc'd, and messages are 4-byte aligned in it. */
		struct nlmsghdr *msg = (struct nlmsghdr *)(void *)(f->data + pos);
		if (fn(msg, id, f->name) < 0)
			return -1;
		pos += NLMSG_ALIGN(h.nlmsg_len);
	}
	return 0;
}

/* The attributes of message msg after a body of body bytes; a malformed
 * list is corrupt. */
#define FOR_EACH_ATTR(msg, body, rta, left)                                                   \
	for (struct rtattr *rta = (struct rtattr *)((char *)NLMSG_DATA(msg) + NLMSG_ALIGN(body)); \
	     rta; rta = NULL)                                                                     \
		for (int left = (int)(msg)->nlmsg_len - (int)NLMSG_LENGTH(body); RTA_OK(rta, left);     \
		     rta = RTA_NEXT(rta, left))

static int attrs_end_cleanly(struct nlmsghdr *msg, size_t body, const char *img)
{
	int left = (int)msg->nlmsg_len - (int)NLMSG_LENGTH(body);
	struct rtattr *rta = (struct rtattr *)((char *)NLMSG_DATA(msg) + NLMSG_ALIGN(body));
	while (RTA_OK(rta, left))
		rta = RTA_NEXT(rta, left);
	if (left > 0)
		return cxlcr_error("image %s: corrupt attribute list (%d stray bytes)", img, left);
	return 0;
}

static uint32_t prefix_mask(uint8_t prefix)
{
	return prefix ? htonl(~0u << (32 - prefix)) : 0;
}

static void eui64_link_local(const uint8_t mac[6], uint8_t out[16])
{
	memset(out, 0, 16);
	out[0] = 0xfe;
	out[1] = 0x80;
	out[8] = mac[0] ^ 0x02;
	out[9] = mac[1];
	out[10] = mac[2];
	out[11] = 0xff;
	out[12] = 0xfe;
	out[13] = mac[3];
	out[14] = mac[4];
	out[15] = mac[5];
}

/* First pass over ifaddr: the parent's IPv4 address on the link. */
static int find_parent_ip(struct nlmsghdr *msg, struct identity *id, const char *img)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(msg);
	if (attrs_end_cleanly(msg, sizeof(*ifa), img) < 0)
		return -1;
	if (ifa->ifa_family != AF_INET || ifa->ifa_index != id->ifindex)
		return 0;
	uint32_t local = 0, address = 0;
	FOR_EACH_ATTR(msg, sizeof(*ifa), rta, left)
	{
		if (RTA_PAYLOAD(rta) != 4)
			continue;
		if (rta->rta_type == IFA_LOCAL)
			memcpy(&local, RTA_DATA(rta), 4);
		else if (rta->rta_type == IFA_ADDRESS)
			memcpy(&address, RTA_DATA(rta), 4);
	}
	uint32_t ip = local ? local : address;
	if (!ip)
		return 0;
	if (id->have_parent_ip && ip != id->parent_ip) {
		char a[16], b[16];
		return cxlcr_error("image %s: %s has two IPv4 addresses (%s, %s): which is the service's?",
				   img, id->spec->ifname, inet_ntop(AF_INET, &id->parent_ip, a, sizeof(a)),
				   inet_ntop(AF_INET, &ip, b, sizeof(b)));
	}
	id->parent_ip = ip;
	id->parent_prefix = ifa->ifa_prefixlen;
	id->have_parent_ip = true;
	return 0;
}

/* Second pass over ifaddr: the child's addresses instead. */
static int rewrite_address(struct nlmsghdr *msg, struct identity *id, const char *img)
{
	(void)img;
	const struct ifaddrmsg *ifa = NLMSG_DATA(msg);
	if (ifa->ifa_index != id->ifindex)
		return 0;
	if (ifa->ifa_family == AF_INET) {
		uint32_t mask = prefix_mask(ifa->ifa_prefixlen);
		uint32_t parent_brd = id->parent_ip | ~mask, child_brd = id->spec->child_ip | ~mask;
		FOR_EACH_ATTR(msg, sizeof(*ifa), rta, left)
		{
			uint32_t v;
			if (RTA_PAYLOAD(rta) != 4)
				continue;
			memcpy(&v, RTA_DATA(rta), 4);
			if ((rta->rta_type == IFA_ADDRESS || rta->rta_type == IFA_LOCAL) && v == id->parent_ip)
				memcpy(RTA_DATA(rta), &id->spec->child_ip, 4);
			else if (rta->rta_type == IFA_BROADCAST && v == parent_brd)
				memcpy(RTA_DATA(rta), &child_brd, 4);
		}
	} else if (ifa->ifa_family == AF_INET6) {
		uint8_t parent_ll[16], child_ll[16];
		eui64_link_local(id->parent_mac, parent_ll);
		eui64_link_local(id->spec->child_mac, child_ll);
		FOR_EACH_ATTR(msg, sizeof(*ifa), rta, left)
		{
			if ((rta->rta_type == IFA_ADDRESS || rta->rta_type == IFA_LOCAL) &&
			    RTA_PAYLOAD(rta) == 16 && !memcmp(RTA_DATA(rta), parent_ll, 16))
				memcpy(RTA_DATA(rta), child_ll, 16);
		}
	}
	return 0;
}

/* route: a preferred source that is the parent's address becomes the
 * child's. */
static int rewrite_route(struct nlmsghdr *msg, struct identity *id, const char *img)
{
	const struct rtmsg *rtm = NLMSG_DATA(msg);
	if (attrs_end_cleanly(msg, sizeof(*rtm), img) < 0)
		return -1;
	if (rtm->rtm_family != AF_INET)
		return 0;
	FOR_EACH_ATTR(msg, sizeof(*rtm), rta, left)
	{
		if (rta->rta_type == RTA_PREFSRC && RTA_PAYLOAD(rta) == 4 &&
		    !memcmp(RTA_DATA(rta), &id->parent_ip, 4))
			memcpy(RTA_DATA(rta), &id->spec->child_ip, 4);
	}
	return 0;
}

static int rewrite_ifaddr(struct image_file *f, struct identity *id)
{
	if (walk_messages(f, IPADDR_SAVE_MAGIC, RTM_NEWADDR, sizeof(struct ifaddrmsg), find_parent_ip, id) < 0)
		return -1;
	if (!id->have_parent_ip)
		return cxlcr_error("image %s: no IPv4 address on %s", f->name, id->spec->ifname);
	uint32_t mask = prefix_mask(id->parent_prefix);
	if ((id->parent_ip & mask) != (id->spec->child_ip & mask)) {
		char a[16], b[16];
		return cxlcr_error("the child's address %s is outside the parent's subnet %s/%u",
				   inet_ntop(AF_INET, &id->spec->child_ip, a, sizeof(a)),
				   inet_ntop(AF_INET, &id->parent_ip, b, sizeof(b)), id->parent_prefix);
	}
	return walk_messages(f, IPADDR_SAVE_MAGIC, RTM_NEWADDR, sizeof(struct ifaddrmsg), rewrite_address, id);
}

static int write_raw(int dst_dir, const struct image_file *f)
{
	struct image_out o;
	image_begin(&o, f->name, 0);
	image_put_raw(&o, f->data, f->len);
	return image_write(dst_dir, &o);
}

int rebase_netns(int src_dir, int dst_dir, unsigned ns_id, const struct cxlcr_rebase_fork *spec,
		 int *found, struct cxlcr_rebase_stats *stats)
{
	char netdev[64], ifaddr[64], route[64];
	snprintf(netdev, sizeof(netdev), "netdev-%u.img", ns_id);
	snprintf(ifaddr, sizeof(ifaddr), "ifaddr-%u.img", ns_id);
	snprintf(route, sizeof(route), "route-%u.img", ns_id);
	struct identity id = { .spec = spec };
	struct image_out netdev_out;
	if (rewrite_netdev(src_dir, netdev, &id, found, &netdev_out) < 0)
		return -1;
	if (!*found)
		return 0;

	struct image_file addrs = { 0 }, routes = { 0 };
	int rc = image_load_raw(src_dir, ifaddr, NETLINK_IMAGE_MAX, &addrs);
	if (rc == 0)
		rc = cxlcr_error("image %s: missing (the addresses of %s)", ifaddr, spec->ifname);
	if (rc > 0)
		rc = rewrite_ifaddr(&addrs, &id);
	/* A namespace without routes has an empty dump, or none. */
	int have_routes = rc < 0 ? 0 : image_load_raw(src_dir, route, NETLINK_IMAGE_MAX, &routes);
	if (have_routes < 0)
		rc = -1;
	if (rc >= 0 && have_routes > 0 && routes.len > 0)
		rc = walk_messages(&routes, ROUTE_SAVE_MAGIC, RTM_NEWROUTE, sizeof(struct rtmsg),
				   rewrite_route, &id);
	if (rc >= 0)
		rc = image_write(dst_dir, &netdev_out);
	else
		image_out_free(&netdev_out);
	if (rc >= 0)
		rc = write_raw(dst_dir, &addrs);
	if (rc >= 0 && have_routes > 0)
		rc = write_raw(dst_dir, &routes);
	if (rc >= 0)
		stats->files_rewritten += 2 + (have_routes > 0);
	image_free(&addrs);
	image_free(&routes);
	return rc < 0 ? -1 : 0;
}
