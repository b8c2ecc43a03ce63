/* SPDX-License-Identifier: Apache-2.0 */
/* Worker processes and their message protocol; contract in rtc_worker.h. */
#include "rtc/rtc_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WMSG_MAGIC 0x31574b48u /* "HKW1" little-endian */
#define WPOOL_MAX 1024
#define WHY_MAX 256

extern char **environ;

/* ---- messages --------------------------------------------------------------------------- */
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int hkc_wmsg_add(hkc_wmsg_t *m, const void *data, size_t size) {
  if (m->n >= HKC_WMSG_FIELDS || size > HKC_WMSG_FIELD_MAX) return -1;
  m->f[m->n].data = (void *)data;
  m->f[m->n].size = size;
  m->n++;
  return 0;
}

static int write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

int hkc_wmsg_write(int fd, const hkc_wmsg_t *m) {
  if (m->n > HKC_WMSG_FIELDS) return -1;
  unsigned char head[12];
  put32(head, WMSG_MAGIC);
  put32(head + 4, m->kind);
  put32(head + 8, m->n);
  if (write_all(fd, head, sizeof head) != 0) return -1;
  for (uint32_t i = 0; i < m->n; i++) {
    if (m->f[i].size > HKC_WMSG_FIELD_MAX) return -1;
    unsigned char len[4];
    put32(len, (uint32_t)m->f[i].size);
    if (write_all(fd, len, 4) != 0 || (m->f[i].size && write_all(fd, m->f[i].data, m->f[i].size) != 0)) return -1;
  }
  return 0;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads exactly size bytes before deadline (< 0: none). 0, or an HKC_WMSG_* code; `started`
 * turns an end of file into a cut-short (bad) message. */
static int read_full(int fd, void *data, size_t size, int64_t deadline, int started) {
  char *p = data;
  while (size) {
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) return HKC_WMSG_TIMEOUT;
      struct pollfd pfd = {.fd = fd, .events = POLLIN};
      int r = poll(&pfd, 1, left > 0x7fffffff ? 0x7fffffff : (int)left);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return HKC_WMSG_BAD;
      if (r == 0) return HKC_WMSG_TIMEOUT;
    }
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return started ? HKC_WMSG_BAD : HKC_WMSG_EOF;
    if (n == 0) return started ? HKC_WMSG_BAD : HKC_WMSG_EOF;
    started = 1;
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

void hkc_wmsg_free(hkc_wmsg_t *m) {
  for (uint32_t i = 0; i < m->n && i < HKC_WMSG_FIELDS; i++) free(m->f[i].data);
  memset(m, 0, sizeof *m);
}

int hkc_wmsg_read(int fd, hkc_wmsg_t *m, int timeout_ms) {
  memset(m, 0, sizeof *m);
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  unsigned char head[12];
  int rc = read_full(fd, head, sizeof head, deadline, 0);
  if (rc != 0) return rc;
  const uint32_t n = get32(head + 8);
  if (get32(head) != WMSG_MAGIC || n > HKC_WMSG_FIELDS) return HKC_WMSG_BAD;
  m->kind = get32(head + 4);
  for (uint32_t i = 0; i < n; i++) {
    unsigned char len[4];
    if ((rc = read_full(fd, len, 4, deadline, 1)) != 0) goto fail;
    const uint32_t size = get32(len);
    if (size > HKC_WMSG_FIELD_MAX) {
      rc = HKC_WMSG_BAD;
      goto fail;
    }
    char *data = malloc((size_t)size + 1);
    if (!data) {
      rc = HKC_WMSG_BAD;
      goto fail;
    }
    m->f[i].data = data;
    m->f[i].size = size;
    m->n = i + 1;
    data[size] = '\0';
    if (size && (rc = read_full(fd, data, size, deadline, 1)) != 0) goto fail;
  }
  return 0;
fail:
  hkc_wmsg_free(m);
  return rc == HKC_WMSG_EOF ? HKC_WMSG_BAD : rc;
}

/* ---- the worker's loop ------------------------------------------------------------------- */
int hkc_worker_serve(int fd, hkc_worker_handler_t handler) {
  for (;;) {
    hkc_wmsg_t req, reply;
    int rc = hkc_wmsg_read(fd, &req, -1);
    if (rc == HKC_WMSG_EOF) return 0; /* the parent is done with us */
    if (rc != 0) return 2;
    memset(&reply, 0, sizeof reply);
    handler(&req, &reply);
    rc = hkc_wmsg_write(fd, &reply);
    hkc_wmsg_free(&req);
    hkc_wmsg_free(&reply);
    if (rc != 0) return 2;
  }
}

/* ---- the pool ----------------------------------------------------------------------------- */
typedef enum { SLOT_EMPTY = 0, SLOT_IDLE, SLOT_BUSY } slot_state_t;
typedef struct worker {
  pid_t pid;
  int fd; /* parent's end of the socket */
  slot_state_t state;
} worker_t;

struct hkc_wpool {
  pthread_mutex_t lock;
  pthread_cond_t idle;
  char *exe, *mode_arg;
  int timeout_ms;
  int max;
  worker_t workers[WPOOL_MAX];
  int n; /* slots ever used; a slot whose worker failed to restart is SLOT_EMPTY */
  unsigned started, replaced;
};

hkc_wpool_t *hkc_wpool_create(const char *exe, const char *mode_arg, int max_workers, int timeout_ms) {
  hkc_wpool_t *pool = calloc(1, sizeof *pool);
  if (!pool) return NULL;
  pool->exe = strdup(exe);
  pool->mode_arg = strdup(mode_arg);
  if (!pool->exe || !pool->mode_arg) {
    free(pool->exe);
    free(pool->mode_arg);
    free(pool);
    return NULL;
  }
  pool->max = max_workers < 1 ? 1 : max_workers > WPOOL_MAX ? WPOOL_MAX : max_workers;
  pool->timeout_ms = timeout_ms;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->idle, NULL);
  return pool;
}

/* Starts one worker process; 0 / -1 (why filled). */
static int spawn_worker(hkc_wpool_t *pool, worker_t *w, char *why, size_t why_size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(why, why_size, "socketpair: %s", strerror(errno));
    return -1;
  }
  /* dup2 onto the same number would keep close-on-exec: move the child's end out of the way */
  if (sv[1] == HKC_WORKER_FD) {
    int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, HKC_WORKER_FD + 1);
    close(sv[1]);
    sv[1] = moved;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], HKC_WORKER_FD);
  posix_spawn_file_actions_adddup2(&fa, 2, 1); /* toolchain chatter goes to stderr, never our stdout */
  char *argv[] = {pool->exe, pool->mode_arg, NULL};
  pid_t pid;
  int err = sv[1] < 0 ? errno : posix_spawn(&pid, pool->exe, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (sv[1] >= 0) close(sv[1]);
  if (err != 0) {
    close(sv[0]);
    snprintf(why, why_size, "cannot start worker %s: %s", pool->exe, strerror(err));
    return -1;
  }
  w->pid = pid;
  w->fd = sv[0];
  pool->started++;
  return 0;
}

/* Ends a worker (already off the pool's list) and says how it ended in why. */
static void reap_worker(worker_t *w, int killed, char *why, size_t why_size) {
  close(w->fd);
  int status = 0;
  pid_t r = 0;
  if (!killed) /* it closed its end: give it a moment to finish dying so we can name the signal */
    for (int i = 0; i < 100 && (r = waitpid(w->pid, &status, WNOHANG)) == 0; i++) usleep(10000);
  if (r == 0 || killed) {
    kill(w->pid, SIGKILL);
    r = waitpid(w->pid, &status, 0);
  }
  if (!why) return;
  if (killed) return; /* the caller has said why */
  if (r == w->pid && WIFSIGNALED(status))
    snprintf(why, why_size, "worker %d died with signal %d (%s)", (int)w->pid, WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else if (r == w->pid && WIFEXITED(status))
    snprintf(why, why_size, "worker %d exited with status %d mid-job", (int)w->pid, WEXITSTATUS(status));
  else
    snprintf(why, why_size, "worker %d vanished", (int)w->pid);
}

/* Takes an idle worker, starting one in an empty slot; waits when all are busy. Slots never
 * move, so a worker_t pointer stays valid while its caller holds it. */
static worker_t *acquire(hkc_wpool_t *pool, char *why, size_t why_size) {
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    worker_t *empty = NULL;
    for (int i = 0; i < pool->n; i++) {
      if (pool->workers[i].state == SLOT_IDLE) {
        pool->workers[i].state = SLOT_BUSY;
        pthread_mutex_unlock(&pool->lock);
        return &pool->workers[i];
      }
      if (pool->workers[i].state == SLOT_EMPTY && !empty) empty = &pool->workers[i];
    }
    if (!empty && pool->n < pool->max) empty = &pool->workers[pool->n++];
    if (empty) {
      if (spawn_worker(pool, empty, why, why_size) != 0) {
        empty->state = SLOT_EMPTY;
        pthread_mutex_unlock(&pool->lock);
        return NULL;
      }
      empty->state = SLOT_BUSY;
      pthread_mutex_unlock(&pool->lock);
      return empty;
    }
    pthread_cond_wait(&pool->idle, &pool->lock);
  }
}

static void release(hkc_wpool_t *pool, worker_t *w) {
  pthread_mutex_lock(&pool->lock);
  w->state = SLOT_IDLE;
  pthread_cond_signal(&pool->idle);
  pthread_mutex_unlock(&pool->lock);
}

/* A broken worker: reaped (why says how it ended unless it was killed), its slot emptied for
 * the next acquire to restart. */
static void replace(hkc_wpool_t *pool, worker_t *w, int killed, char *why, size_t why_size) {
  worker_t dead = *w;
  reap_worker(&dead, killed, why, why_size);
  pthread_mutex_lock(&pool->lock);
  pool->replaced++;
  w->state = SLOT_EMPTY;
  w->fd = -1;
  pthread_cond_signal(&pool->idle);
  pthread_mutex_unlock(&pool->lock);
}

int hkc_wpool_call(hkc_wpool_t *pool, const hkc_wmsg_t *request, hkc_wmsg_t *reply, char *why, size_t why_size) {
  char first[WHY_MAX] = "", now[WHY_MAX];
  memset(reply, 0, sizeof *reply);
  for (int attempt = 0; attempt < 2; attempt++) {
    worker_t *w = acquire(pool, now, sizeof now);
    if (!w) {
      snprintf(why, why_size, "%s", now);
      return -1;
    }
    int killed = 0;
    if (hkc_wmsg_write(w->fd, request) != 0) {
      now[0] = '\0'; /* it died before taking the job: reap says how */
    } else {
      int rc = hkc_wmsg_read(w->fd, reply, pool->timeout_ms);
      if (rc == 0) {
        release(pool, w);
        return 0;
      }
      if (rc == HKC_WMSG_TIMEOUT) {
        snprintf(now, sizeof now, "worker %d took longer than %d s and was killed", (int)w->pid,
                 pool->timeout_ms / 1000);
        killed = 1;
      } else if (rc == HKC_WMSG_BAD) {
        snprintf(now, sizeof now, "worker %d sent a malformed reply and was killed", (int)w->pid);
        killed = 1;
      }
    }
    replace(pool, w, killed, killed ? NULL : now, sizeof now);
    if (attempt == 0) snprintf(first, sizeof first, "%s", now);
  }
  snprintf(why, why_size, "%s; retried once: %s", first, now);
  return -1;
}

void hkc_wpool_counts(hkc_wpool_t *pool, unsigned *out_started, unsigned *out_replaced) {
  pthread_mutex_lock(&pool->lock);
  if (out_started) *out_started = pool->started;
  if (out_replaced) *out_replaced = pool->replaced;
  pthread_mutex_unlock(&pool->lock);
}

void hkc_wpool_destroy(hkc_wpool_t *pool) {
  if (!pool) return;
  for (int i = 0; i < pool->n; i++)
    if (pool->workers[i].state != SLOT_EMPTY) close(pool->workers[i].fd); /* EOF: each worker exits */
  for (int i = 0; i < pool->n; i++) {
    if (pool->workers[i].state == SLOT_EMPTY) continue;
    int status;
    pid_t r = 0;
    for (int t = 0; t < 200 && (r = waitpid(pool->workers[i].pid, &status, WNOHANG)) == 0; t++) usleep(5000);
    if (r == 0) {
      kill(pool->workers[i].pid, SIGKILL);
      waitpid(pool->workers[i].pid, &status, 0);
    }
  }
  pthread_mutex_destroy(&pool->lock);
  pthread_cond_destroy(&pool->idle);
  free(pool->exe);
  free(pool->mode_arg);
  free(pool);
}
