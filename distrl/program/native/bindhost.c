/* LD_PRELOAD shim: a server that binds the wildcard address binds $DISTRL_BIND_HOST.
 *
 * The servers compiled into dm-reverb 0.7.2 and Launchpad's courier listen on
 * "[::]:port" with no way to choose the interface. distrl loads this library into
 * its node processes so they listen on loopback in local runs and on the machine's
 * cluster address on Ray (see distrl/bindhost.py). Only wildcard binds change; a
 * bind to a given address, and every process without the variable, are untouched.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static int real_bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn next;
  if (!next) next = (bind_fn)dlsym(RTLD_NEXT, "bind");
  return next(fd, addr, len);
}

/* An IPv6 form of host: itself, or ::ffff:a.b.c.d for an IPv4 host (a dual-stack
 * socket bound there accepts IPv4 connections to a.b.c.d). */
static int host_in6(const char *host, struct in6_addr *out) {
  struct in_addr v4;
  if (inet_pton(AF_INET6, host, out) == 1) return 1;
  if (inet_pton(AF_INET, host, &v4) != 1) return 0;
  memset(out, 0, sizeof *out);
  out->s6_addr[10] = 0xff;
  out->s6_addr[11] = 0xff;
  memcpy(&out->s6_addr[12], &v4, sizeof v4);
  return 1;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  const char *host = getenv("DISTRL_BIND_HOST");
  if (host == NULL || *host == '\0' || addr == NULL) return real_bind(fd, addr, len);
  if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in in = *(const struct sockaddr_in *)addr;
    if (in.sin_addr.s_addr == htonl(INADDR_ANY) && inet_pton(AF_INET, host, &in.sin_addr) == 1)
      return real_bind(fd, (const struct sockaddr *)&in, sizeof in);
  } else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6 = *(const struct sockaddr_in6 *)addr;
    if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr) && host_in6(host, &in6.sin6_addr))
      return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
  }
  return real_bind(fd, addr, len);
}
