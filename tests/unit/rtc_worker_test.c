/* SPDX-License-Identifier: Apache-2.0 */
/* The worker protocol and pool (compiler/rtc_worker.c) against a fake worker: this test
 * binary re-executed with --fake-worker, whose jobs echo, crash, hang, exit, crash once, or
 * answer with garbage. No toolchain needed. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rtc_worker.h"
#include "test_util.h"

enum { JOB_ECHO = 1, JOB_CRASH, JOB_HANG, JOB_GARBAGE, JOB_CRASH_ONCE, JOB_EXIT, JOB_CUT_SHORT, JOB_PID };
#define FAKE_ARG "--fake-worker"

/* ---- the fake worker ---------------------------------------------------------------------- */
static void fake_handler(const hkc_wmsg_t *req, hkc_wmsg_t *reply) {
  switch (req->kind) {
  case JOB_ECHO:
    reply->kind = 0;
    for (uint32_t i = 0; i < req->n; i++) {
      void *d = malloc(req->f[i].size + 1);
      memcpy(d, req->f[i].data, req->f[i].size);
      hkc_wmsg_add(reply, d, req->f[i].size);
    }
    return;
  case JOB_CRASH: /* abort: under ASan a SIGSEGV becomes a report and exit status 1 */
    abort();
  case JOB_HANG:
    for (;;) pause();
  case JOB_GARBAGE: {
    static const char junk[] = "this is not a reply at all";
    (void)!write(HKC_WORKER_FD, junk, sizeof junk);
    reply->kind = 0;
    return;
  }
  case JOB_CRASH_ONCE: { /* field 0: a marker path; crash when it does not exist yet */
    struct stat st;
    if (stat(req->f[0].data, &st) != 0) {
      FILE *f = fopen(req->f[0].data, "w");
      if (f) fclose(f);
      abort();
    }
    reply->kind = 7;
    return;
  }
  case JOB_EXIT:
    _exit(3);
  case JOB_CUT_SHORT: { /* a header promising a field, then nothing */
    static const unsigned char head[12] = {'H', 'K', 'W', '1', 0, 0, 0, 0, 1, 0, 0, 0};
    (void)!write(HKC_WORKER_FD, head, sizeof head);
    _exit(0);
  }
  case JOB_PID: {
    char *s = malloc(32);
    snprintf(s, 32, "%d", (int)getpid());
    reply->kind = 0;
    hkc_wmsg_add(reply, s, strlen(s));
    return;
  }
  default:
    reply->kind = 99;
  }
}

/* ---- helpers ------------------------------------------------------------------------------- */
static hkc_wpool_t *new_pool(int max, int timeout_ms) {
  hkc_wpool_t *pool = hkc_wpool_create("/proc/self/exe", FAKE_ARG, max, timeout_ms);
  assert_non_null(pool);
  return pool;
}

static int call(hkc_wpool_t *pool, uint32_t kind, const char *field, hkc_wmsg_t *reply, char *why, size_t n) {
  hkc_wmsg_t req = {.kind = kind};
  if (field) hkc_wmsg_add(&req, field, strlen(field));
  return hkc_wpool_call(pool, &req, reply, why, n);
}

static void expect_echo(hkc_wpool_t *pool) {
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_ECHO, "still here", &reply, why, sizeof why), 0);
  assert_int_equal(reply.kind, 0);
  assert_int_equal(reply.n, 1);
  assert_string_equal(reply.f[0].data, "still here");
  hkc_wmsg_free(&reply);
}

/* ---- tests --------------------------------------------------------------------------------- */
static void test_echo_fields(void **state) {
  hkc_wpool_t *pool = new_pool(1, 10000);
  unsigned char big[100000];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 131 + 7);
  hkc_wmsg_t req = {.kind = JOB_ECHO}, reply;
  assert_int_equal(hkc_wmsg_add(&req, "", 0), 0);
  assert_int_equal(hkc_wmsg_add(&req, big, sizeof big), 0);
  assert_int_equal(hkc_wmsg_add(&req, "abc", 3), 0);
  char why[512];
  assert_int_equal(hkc_wpool_call(pool, &req, &reply, why, sizeof why), 0);
  assert_int_equal(reply.n, 3);
  assert_int_equal(reply.f[0].size, 0);
  assert_int_equal(reply.f[1].size, sizeof big);
  assert_memory_equal(reply.f[1].data, big, sizeof big);
  assert_string_equal(reply.f[2].data, "abc");
  hkc_wmsg_free(&reply);
  unsigned started, replaced;
  hkc_wpool_counts(pool, &started, &replaced);
  assert_int_equal(started, 1);
  assert_int_equal(replaced, 0);
  hkc_wpool_destroy(pool);
}

static void test_message_limits(void **state) {
  hkc_wmsg_t m = {0};
  for (int i = 0; i < HKC_WMSG_FIELDS; i++) assert_int_equal(hkc_wmsg_add(&m, "x", 1), 0);
  assert_int_equal(hkc_wmsg_add(&m, "x", 1), -1); /* full */
  hkc_wmsg_t m2 = {0};
  assert_int_equal(hkc_wmsg_add(&m2, "x", (size_t)HKC_WMSG_FIELD_MAX + 1), -1);
}

/* Raw bytes into one end of a socket pair, hkc_wmsg_read on the other. */
static int read_bytes(const void *bytes, size_t n, int timeout_ms) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  if (n) assert_int_equal(write(sv[0], bytes, n), (ssize_t)n);
  close(sv[0]);
  hkc_wmsg_t m;
  int rc = hkc_wmsg_read(sv[1], &m, timeout_ms);
  if (rc == 0) hkc_wmsg_free(&m);
  close(sv[1]);
  return rc;
}

static void test_malformed_messages(void **state) {
  const unsigned char ok[] = {'H', 'K', 'W', '1', 5, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 'h', 'i'};
  assert_int_equal(read_bytes(ok, sizeof ok, 1000), 0);
  assert_int_equal(read_bytes(ok, 0, 1000), HKC_WMSG_EOF);
  for (size_t cut = 1; cut < sizeof ok; cut++) assert_int_equal(read_bytes(ok, cut, 1000), HKC_WMSG_BAD);
  unsigned char bad_magic[sizeof ok];
  memcpy(bad_magic, ok, sizeof ok);
  bad_magic[0] = 'X';
  assert_int_equal(read_bytes(bad_magic, sizeof ok, 1000), HKC_WMSG_BAD);
  const unsigned char too_many[] = {'H', 'K', 'W', '1', 0, 0, 0, 0, 200, 0, 0, 0};
  assert_int_equal(read_bytes(too_many, sizeof too_many, 1000), HKC_WMSG_BAD);
  const unsigned char too_big[] = {'H', 'K', 'W', '1', 0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f};
  assert_int_equal(read_bytes(too_big, sizeof too_big, 1000), HKC_WMSG_BAD);

  /* a peer that says nothing: timeout */
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  hkc_wmsg_t m;
  assert_int_equal(hkc_wmsg_read(sv[1], &m, 50), HKC_WMSG_TIMEOUT);
  close(sv[0]);
  close(sv[1]);
}

static void test_crash_is_retried_then_reported(void **state) {
  hkc_wpool_t *pool = new_pool(2, 10000);
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_CRASH, NULL, &reply, why, sizeof why), -1);
  assert_non_null(strstr(why, "signal 6"));
  assert_non_null(strstr(why, "retried once"));
  unsigned started, replaced;
  hkc_wpool_counts(pool, &started, &replaced);
  assert_int_equal(replaced, 2);
  expect_echo(pool); /* the pool still works */
  hkc_wpool_destroy(pool);
}

static void test_crash_once_succeeds_on_retry(void **state) {
  hkc_wpool_t *pool = new_pool(1, 10000);
  char *dir = hk_test_tmpdir(), marker[512];
  snprintf(marker, sizeof marker, "%s/crashed", dir);
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_CRASH_ONCE, marker, &reply, why, sizeof why), 0);
  assert_int_equal(reply.kind, 7);
  hkc_wmsg_free(&reply);
  unsigned started, replaced;
  hkc_wpool_counts(pool, &started, &replaced);
  assert_int_equal(started, 2);
  assert_int_equal(replaced, 1);
  unlink(marker);
  rmdir(dir);
  free(dir);
  hkc_wpool_destroy(pool);
}

static void test_hang_times_out(void **state) {
  hkc_wpool_t *pool = new_pool(1, 300);
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_HANG, NULL, &reply, why, sizeof why), -1);
  assert_non_null(strstr(why, "took longer than"));
  expect_echo(pool);
  hkc_wpool_destroy(pool);
}

static void test_garbage_and_cut_short(void **state) {
  hkc_wpool_t *pool = new_pool(1, 10000);
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_GARBAGE, NULL, &reply, why, sizeof why), -1);
  assert_non_null(strstr(why, "malformed reply"));
  assert_int_equal(call(pool, JOB_CUT_SHORT, NULL, &reply, why, sizeof why), -1);
  assert_non_null(strstr(why, "malformed reply"));
  assert_int_equal(call(pool, JOB_EXIT, NULL, &reply, why, sizeof why), -1);
  assert_non_null(strstr(why, "exited with status 3"));
  expect_echo(pool);
  hkc_wpool_destroy(pool);
}

static void test_missing_executable(void **state) {
  hkc_wpool_t *pool = hkc_wpool_create("/nonexistent/hkc", FAKE_ARG, 1, 1000);
  assert_non_null(pool);
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_ECHO, "x", &reply, why, sizeof why), -1);
  assert_non_null(strstr(why, "/nonexistent/hkc"));
  hkc_wpool_destroy(pool);
}

/* Many threads, a pool of 2: every reply is right and at most 2 processes ever run. */
typedef struct {
  hkc_wpool_t *pool;
  int id, ok;
} echo_job_t;

static void *echo_thread(void *arg) {
  echo_job_t *j = arg;
  j->ok = 1;
  for (int r = 0; r < 20; r++) {
    char text[64], why[512];
    snprintf(text, sizeof text, "thread %d round %d", j->id, r);
    hkc_wmsg_t reply;
    if (call(j->pool, JOB_ECHO, text, &reply, why, sizeof why) != 0 || reply.n != 1 ||
        strcmp(reply.f[0].data, text) != 0)
      j->ok = 0;
    hkc_wmsg_free(&reply);
  }
  return NULL;
}

static void test_threads_share_the_pool(void **state) {
  hkc_wpool_t *pool = new_pool(2, 10000);
  echo_job_t jobs[6];
  pthread_t th[6];
  for (int i = 0; i < 6; i++) {
    jobs[i] = (echo_job_t){.pool = pool, .id = i};
    assert_int_equal(pthread_create(&th[i], NULL, echo_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 6; i++) assert_true(jobs[i].ok);
  unsigned started, replaced;
  hkc_wpool_counts(pool, &started, &replaced);
  assert_true(started >= 1 && started <= 2);
  assert_int_equal(replaced, 0);
  hkc_wpool_destroy(pool);
}

/* Destroy reaps every worker: none is left running. */
static void test_destroy_reaps(void **state) {
  hkc_wpool_t *pool = new_pool(1, 10000);
  hkc_wmsg_t reply;
  char why[512];
  assert_int_equal(call(pool, JOB_PID, NULL, &reply, why, sizeof why), 0);
  const pid_t pid = (pid_t)atoi(reply.f[0].data);
  hkc_wmsg_free(&reply);
  assert_true(pid > 0);
  assert_int_equal(kill(pid, 0), 0);
  hkc_wpool_destroy(pool);
  assert_int_equal(kill(pid, 0), -1); /* reaped: the pid is gone */
  assert_int_equal(errno, ESRCH);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], FAKE_ARG) == 0) _exit(hkc_worker_serve(HKC_WORKER_FD, fake_handler));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_echo_fields),
      cmocka_unit_test(test_message_limits),
      cmocka_unit_test(test_malformed_messages),
      cmocka_unit_test(test_crash_is_retried_then_reported),
      cmocka_unit_test(test_crash_once_succeeds_on_retry),
      cmocka_unit_test(test_hang_times_out),
      cmocka_unit_test(test_garbage_and_cut_short),
      cmocka_unit_test(test_missing_executable),
      cmocka_unit_test(test_threads_share_the_pool),
      cmocka_unit_test(test_destroy_reaps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
