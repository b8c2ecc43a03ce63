/* SPDX-License-Identifier: Apache-2.0 */
/* The compile cache's shared second level on Redis (contract in cache_remote.h).
 *
 * One connection per open remote, made at open (on the calling thread, so that an unreachable
 * server is reported before any compile starts) and used under a lock by the pool's threads.
 * Keys and values are opaque here; cache.c names the keys and checks the values. Failure
 * policy: the first error of any kind turns the remote off for the whole process (g_off), with
 * one warning; later opens in the same build (the tuner's pools, the build's pool) then do
 * nothing. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#ifdef HKC_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "rtc/cache_remote.h"
#include "util/util.h"

#define REMOTE_URL_MAX 512
#define REMOTE_HOST_MAX 256
#define REMOTE_DEFAULT_PORT 6379
#define REMOTE_MAX_DB 1000000 /* SELECT's index; Redis' default is 16 databases */
#define REMOTE_MAX_TIMEOUT_MS 60000

struct hkc_remote_cache {
  char url[REMOTE_URL_MAX];
  char host[REMOTE_HOST_MAX];
  int port, db, timeout_ms;
  pthread_mutex_t lock;
#ifdef HKC_HAVE_HIREDIS
  redisContext *ctx; /* NULL: not connected (off) */
#endif
};

static atomic_int g_off;                                       /* the remote failed: off for this process */
static pthread_mutex_t g_warn_lock = PTHREAD_MUTEX_INITIALIZER; /* warnings come from pool threads */

/* The one warning; turns the remote off. Any thread. */
static void remote_off(const hkc_remote_cache_t *r, const char *what) {
  if (atomic_exchange(&g_off, 1)) return;
  pthread_mutex_lock(&g_warn_lock);
  hkc_warning((hkc_loc_t){0}, "shared compile cache %s: %s; building on without it (the local cache and compiles "
              "only, no more tries in this build)", r->url, what);
  pthread_mutex_unlock(&g_warn_lock);
}

/* "redis://host[:port][/db]"; host may be "[v6 address]". 0 / -1 with why. */
static int parse_url(const char *url, hkc_remote_cache_t *r, char *why, size_t why_size) {
  static const char scheme[] = "redis://";
  if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
    snprintf(why, why_size, "not a redis:// URL (expected redis://host[:port][/db])");
    return -1;
  }
  const char *p = url + sizeof scheme - 1, *host_end;
  if (*p == '[') {
    host_end = strchr(p, ']');
    if (!host_end) {
      snprintf(why, why_size, "unterminated [address]");
      return -1;
    }
    p++;
  } else {
    host_end = p + strcspn(p, ":/");
  }
  size_t n = (size_t)(host_end - p);
  if (n == 0 || n >= sizeof r->host) {
    snprintf(why, why_size, "no host, or a host name over %d bytes", REMOTE_HOST_MAX - 1);
    return -1;
  }
  memcpy(r->host, p, n);
  r->host[n] = '\0';
  p = host_end + (*host_end == ']');
  r->port = REMOTE_DEFAULT_PORT;
  r->db = 0;
  if (*p == ':') {
    char *end;
    long v = strtol(p + 1, &end, 10);
    if (end == p + 1 || v < 1 || v > 65535) {
      snprintf(why, why_size, "bad port");
      return -1;
    }
    r->port = (int)v;
    p = end;
  }
  if (*p == '/' && p[1]) {
    char *end;
    long v = strtol(p + 1, &end, 10);
    if (end == p + 1 || *end || v < 0 || v > REMOTE_MAX_DB) {
      snprintf(why, why_size, "bad database number");
      return -1;
    }
    r->db = (int)v;
    p = end;
  } else if (*p == '/') {
    p++;
  }
  if (*p) {
    snprintf(why, why_size, "unexpected \"%.40s\" (expected redis://host[:port][/db])", p);
    return -1;
  }
  return 0;
}

#ifdef HKC_HAVE_HIREDIS
static struct timeval timeout_tv(int ms) { return (struct timeval){ms / 1000, (ms % 1000) * 1000}; }

/* A reply that is not what was asked for is a failure like any other: the remote goes off. */
static int reply_ok(hkc_remote_cache_t *r, redisReply *reply, const char *cmd) {
  char why[256];
  if (!reply && r->ctx && r->ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    snprintf(why, sizeof why, "%s: no answer within %d ms", cmd, r->timeout_ms);
  } else if (!reply) {
    snprintf(why, sizeof why, "%s: %s", cmd, r->ctx && r->ctx->err ? r->ctx->errstr : "no reply");
  } else if (reply->type == REDIS_REPLY_ERROR) {
    snprintf(why, sizeof why, "%s: server error: %.200s", cmd, reply->str ? reply->str : "?");
  } else {
    return 1;
  }
  remote_off(r, why);
  freeReplyObject(reply);
  redisFree(r->ctx);
  r->ctx = NULL;
  return 0;
}

static int remote_connect(hkc_remote_cache_t *r) {
  r->ctx = redisConnectWithTimeout(r->host, r->port, timeout_tv(r->timeout_ms));
  if (!r->ctx || r->ctx->err) {
    char why[300];
    snprintf(why, sizeof why, "cannot connect (%s, timeout %d ms)", r->ctx ? r->ctx->errstr : "out of memory",
             r->timeout_ms);
    remote_off(r, why);
    redisFree(r->ctx);
    r->ctx = NULL;
    return -1;
  }
  if (redisSetTimeout(r->ctx, timeout_tv(r->timeout_ms)) != REDIS_OK) {
    remote_off(r, "cannot set the command timeout");
    redisFree(r->ctx);
    r->ctx = NULL;
    return -1;
  }
  /* PING: a port that accepts but is not a Redis server (or hangs) fails here, at open */
  redisReply *reply = redisCommand(r->ctx, "PING");
  if (!reply_ok(r, reply, "PING")) return -1;
  freeReplyObject(reply);
  if (r->db) {
    reply = redisCommand(r->ctx, "SELECT %d", r->db);
    if (!reply_ok(r, reply, "SELECT")) return -1;
    freeReplyObject(reply);
  }
  return 0;
}
#endif

hkc_remote_cache_t *hkc_remote_cache_open(const char *url, int timeout_ms) {
  if (!url || !url[0] || atomic_load(&g_off)) return NULL;
  hkc_remote_cache_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  snprintf(r->url, sizeof r->url, "%s", url);
  r->timeout_ms = timeout_ms > 0 ? (timeout_ms < REMOTE_MAX_TIMEOUT_MS ? timeout_ms : REMOTE_MAX_TIMEOUT_MS)
                                 : HKC_REMOTE_TIMEOUT_MS_DEFAULT;
  char why[256];
  if (strlen(url) >= sizeof r->url || parse_url(url, r, why, sizeof why) != 0) {
    if (strlen(url) >= sizeof r->url) snprintf(why, sizeof why, "URL longer than %d bytes", REMOTE_URL_MAX - 1);
    remote_off(r, why);
    free(r);
    return NULL;
  }
#ifdef HKC_HAVE_HIREDIS
  if (remote_connect(r) != 0) {
    free(r);
    return NULL;
  }
  pthread_mutex_init(&r->lock, NULL);
  return r;
#else
  remote_off(r, "this hkc was built without hiredis (libhiredis-dev)");
  free(r);
  return NULL;
#endif
}

void hkc_remote_cache_close(hkc_remote_cache_t *remote) {
  if (!remote) return;
#ifdef HKC_HAVE_HIREDIS
  if (remote->ctx) redisFree(remote->ctx);
#endif
  pthread_mutex_destroy(&remote->lock);
  free(remote);
}

const char *hkc_remote_cache_url(const hkc_remote_cache_t *remote) { return remote ? remote->url : ""; }

int hkc_remote_cache_get(hkc_remote_cache_t *remote, const char *key, size_t max, char **out_data,
                         size_t *out_size) {
  *out_data = NULL;
  *out_size = 0;
  if (!remote || atomic_load(&g_off)) return -1;
  int rc = -1;
#ifdef HKC_HAVE_HIREDIS
  pthread_mutex_lock(&remote->lock);
  if (remote->ctx) {
    redisReply *reply = redisCommand(remote->ctx, "GET %s", key);
    if (reply_ok(remote, reply, "GET")) {
      if (reply->type == REDIS_REPLY_STRING && reply->len > 0 && (size_t)reply->len <= max) {
        *out_data = malloc((size_t)reply->len);
        if (*out_data) {
          memcpy(*out_data, reply->str, (size_t)reply->len);
          *out_size = (size_t)reply->len;
          rc = 0;
        }
      }
      freeReplyObject(reply);
    }
  }
  pthread_mutex_unlock(&remote->lock);
#else
  (void)key;
  (void)max;
#endif
  return rc;
}

void hkc_remote_cache_set(hkc_remote_cache_t *remote, const char *key, const void *const *parts,
                          const size_t *sizes, size_t n_parts) {
  if (!remote || atomic_load(&g_off)) return;
#ifdef HKC_HAVE_HIREDIS
  size_t total = 0;
  for (size_t i = 0; i < n_parts; i++) total += sizes[i];
  char *value = malloc(total ? total : 1);
  if (!value) return;
  for (size_t i = 0, at = 0; i < n_parts; at += sizes[i], i++) memcpy(value + at, parts[i], sizes[i]);
  pthread_mutex_lock(&remote->lock);
  if (remote->ctx) {
    const char *argv[3] = {"SET", key, value};
    const size_t argl[3] = {3, strlen(key), total};
    redisReply *reply = redisCommandArgv(remote->ctx, 3, argv, argl);
    if (reply_ok(remote, reply, "SET")) freeReplyObject(reply);
  }
  pthread_mutex_unlock(&remote->lock);
  free(value);
#else
  (void)key;
  (void)parts;
  (void)sizes;
  (void)n_parts;
#endif
}
