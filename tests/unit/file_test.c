/* SPDX-License-Identifier: Apache-2.0 */
/* libhkrt's file opening (loader/src/file.c): a regular file opens for blocking reads; a FIFO
 * (with no writer: a blocking open would never return), a device, a directory and a missing
 * path are refused at once with a message naming what they are; the public readers that use
 * it (hk_pack_open_file, hk_weights_open_file) refuse the same way; errno values the C library
 * does not know never read "Unknown error N". Every call that could block runs under an alarm
 * that fails the test instead of hanging it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hk/hkrt.h"
#include "test_util.h"
#include "util_internal.h"

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "file_test: a call blocked for 10 s (an open that waits for a FIFO's writer)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

static void test_regular_file_opens_blocking(void **state) {
  (void)state;
  char *dir = hk_test_tmpdir(), path[4200];
  snprintf(path, sizeof path, "%s/f", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("0123456789", f);
  fclose(f);
  int fd = -1;
  uint64_t size = 0;
  assert_int_equal(hk_file_open_input(path, &fd, &size), HK_OK);
  assert_true(fd >= 0);
  assert_int_equal(size, 10);
  const int flags = fcntl(fd, F_GETFL);
  assert_int_equal(flags & O_NONBLOCK, 0);    /* reads of the file block as usual */
  assert_int_not_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  char buf[16];
  assert_int_equal(read(fd, buf, sizeof buf), 10);
  close(fd);
  unlink(path);
  rmdir(dir);
  free(dir);
}

/* hk_file_open_input on path fails with HK_STATUS_IO and a message holding want. */
static void expect_refused(const char *path, const char *want) {
  int fd = 7;
  uint64_t size = 7;
  alarm(10);
  assert_int_equal(hk_file_open_input(path, &fd, &size), HK_STATUS_IO);
  alarm(0);
  assert_int_equal(fd, -1);
  assert_int_equal(size, 0);
  if (!strstr(hk_last_error(), want)) fail_msg("message '%s' does not hold '%s'", hk_last_error(), want);
  assert_null(strstr(hk_last_error(), "Unknown error"));
}

static void test_special_files_refused_at_once(void **state) {
  (void)state;
  char *dir = hk_test_tmpdir(), fifo[4200], missing[4200], want[4300];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo);
  expect_refused(fifo, want);
  expect_refused("/dev/zero", "/dev/zero: not a regular file (a device)");
  expect_refused("/dev/null", "/dev/null: not a regular file (a device)");
  snprintf(want, sizeof want, "%s: not a regular file (a directory)", dir);
  expect_refused(dir, want);
  snprintf(missing, sizeof missing, "%s/missing", dir);
  expect_refused(missing, "No such file or directory");

  /* the public readers go through it: a FIFO fails at once, naming what it is */
  hk_pack_t *pack = NULL;
  hk_weights_t *weights = NULL;
  alarm(10);
  assert_int_equal(hk_pack_open_file(fifo, NULL, &pack), HK_STATUS_IO);
  assert_non_null(strstr(hk_last_error(), "not a regular file (a FIFO)"));
  assert_int_equal(hk_weights_open_file(fifo, NULL, &weights), HK_STATUS_IO);
  assert_non_null(strstr(hk_last_error(), "not a regular file (a FIFO)"));
  assert_int_equal(hk_weights_open_file("/dev/zero", NULL, &weights), HK_STATUS_IO);
  assert_non_null(strstr(hk_last_error(), "not a regular file (a device)"));
  alarm(0);
  assert_null(pack);
  assert_null(weights);
  unlink(fifo);
  rmdir(dir);
  free(dir);
}

static void test_errno_text(void **state) {
  (void)state;
  assert_string_equal(hk_errno_text(ENOENT), strerror(ENOENT));
  assert_string_equal(hk_errno_text(0x4b43), "unexpected error code 19267");
  assert_null(strstr(hk_errno_text(-5), "Unknown"));
}

int main(void) {
  signal(SIGALRM, on_alarm);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_regular_file_opens_blocking),
      cmocka_unit_test(test_special_files_refused_at_once),
      cmocka_unit_test(test_errno_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
