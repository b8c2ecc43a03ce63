/* SPDX-License-Identifier: Apache-2.0 */
/* The progress reporter (util.h, "progress"): per mode, what reaches stderr -- a phase's
 * total when it begins, "[done/total] phase: item" per item (-v), nothing per item in plain
 * lines, one line rewritten in place and cut to the width on a terminal (a pseudo-terminal
 * here), cleared before a diagnostic; a phase never counts past its total, items of unknown
 * phases are dropped, and items from several threads are numbered 1..N without a gap. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/util.h"

/* stderr into a file (or a terminal) until restore(); what was written is read back. */
static int g_saved = -1;
static FILE *g_file;

static void capture_file(void) {
  fflush(stderr);
  g_saved = dup(STDERR_FILENO);
  g_file = tmpfile();
  assert_non_null(g_file);
  assert_int_equal(dup2(fileno(g_file), STDERR_FILENO), STDERR_FILENO);
}

/* Restores stderr; returns what the file received (malloc'd). */
static char *restore(void) {
  fflush(stderr);
  dup2(g_saved, STDERR_FILENO);
  close(g_saved);
  char *text = calloc(1, 1 << 20);
  assert_non_null(text);
  rewind(g_file);
  size_t n = fread(text, 1, (1 << 20) - 1, g_file);
  text[n] = '\0';
  fclose(g_file);
  return text;
}

static void test_verbose_lines(void **state) {
  (void)state;
  capture_file();
  hkc_reporter_t *r = hkc_reporter_create(HKC_PROGRESS_VERBOSE, "hkc test");
  assert_non_null(r);
  const int a = hkc_reporter_begin(r, "compile sm_90a", 2, "kernel(s) (%d cached)", 1);
  hkc_reporter_item(r, a, "k1");
  hkc_reporter_item(r, a, "k2 %s", "(cached)");
  hkc_reporter_item(r, a, "k3");  /* past the total: dropped */
  hkc_reporter_item(r, 99, "lost"); /* no such phase */
  hkc_reporter_note(r, "done in %d s", 3);
  hkc_reporter_destroy(r);
  char *text = restore();
  assert_string_equal(text, "hkc test: compile sm_90a: 2 kernel(s) (1 cached)\n"
                            "[1/2] compile sm_90a: k1\n"
                            "[2/2] compile sm_90a: k2 (cached)\n"
                            "hkc test: done in 3 s\n");
  free(text);
}

static void test_plain_lines_no_items(void **state) {
  (void)state;
  capture_file();
  hkc_reporter_t *r = hkc_reporter_create(HKC_PROGRESS_LINES, "hkc test");
  const int a = hkc_reporter_begin(r, "pack", 1, "file");
  hkc_reporter_item(r, a, "out.hkpack");
  hkc_reporter_destroy(r);
  /* no reporter (-q), and TTY on a file: nothing at all */
  assert_null(hkc_reporter_create(HKC_PROGRESS_OFF, "hkc test"));
  assert_null(hkc_reporter_create(HKC_PROGRESS_TTY, "hkc test"));
  hkc_reporter_item(NULL, hkc_reporter_begin(NULL, "pack", 1, "file"), "x");
  hkc_reporter_note(NULL, "x");
  hkc_reporter_destroy(NULL);
  char *text = restore();
  assert_string_equal(text, "hkc test: pack: 1 file\n");
  free(text);
}

typedef struct {
  hkc_reporter_t *r;
  int phase;
} worker_arg_t;

static void *worker(void *p) {
  worker_arg_t *w = p;
  for (int i = 0; i < 100; i++) hkc_reporter_item(w->r, w->phase, "item");
  return NULL;
}

static void test_threads_number_without_gaps(void **state) {
  (void)state;
  capture_file();
  hkc_reporter_t *r = hkc_reporter_create(HKC_PROGRESS_VERBOSE, "hkc test");
  worker_arg_t w = {r, hkc_reporter_begin(r, "tune gfx90a", 400, "candidate(s)")};
  pthread_t t[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, &w), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  hkc_reporter_destroy(r);
  char *text = restore();
  char *line = strchr(text, '\n') + 1; /* after the phase's line */
  for (int i = 1; i <= 400; i++) {
    char want[64];
    int n = snprintf(want, sizeof want, "[%d/400] tune gfx90a: item\n", i);
    assert_memory_equal(line, want, (size_t)n);
    line += n;
  }
  assert_int_equal(*line, '\0');
  free(text);
}

/* A pseudo-terminal of 30 columns on stderr: the line is rewritten, cut to 29 columns,
 * cleared before a warning and at the end. */
static void test_terminal(void **state) {
  (void)state;
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
    skip(); /* no pseudo-terminals in this sandbox */
    return;
  }
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  assert_true(slave >= 0);
  struct winsize ws = {.ws_row = 24, .ws_col = 30};
  ioctl(slave, TIOCSWINSZ, &ws);
  fflush(stderr);
  g_saved = dup(STDERR_FILENO);
  dup2(slave, STDERR_FILENO);
  hkc_reporter_t *r = hkc_reporter_create(HKC_PROGRESS_TTY, "hkc test");
  assert_non_null(r);
  const int a = hkc_reporter_begin(r, "compile gfx90a", 2, "kernel(s)");
  hkc_reporter_item(r, a, "hk_gemm_bf16_bias_a8_t9c517ba6_and_more");
  hkc_warning((hkc_loc_t){0}, "careful");
  hkc_reporter_item(r, a, "k2");
  hkc_reporter_note(r, "not on a terminal");
  hkc_reporter_destroy(r);
  fflush(stderr);
  dup2(g_saved, STDERR_FILENO);
  close(g_saved);
  close(slave);
  char text[4096];
  size_t len = 0;
  for (ssize_t n; len < sizeof text - 1 && (n = read(master, text + len, sizeof text - 1 - len)) > 0;)
    len += (size_t)n; /* until EIO: the other side is closed and everything was read */
  close(master);
  text[len] = '\0';
  /* the terminal turns "\n" into "\r\n" */
  assert_string_equal(text, "\r\033[K[0/2] compile gfx90a"
                            "\r\033[K[1/2] compile gfx90a: hk_gemm"
                            "\r\033[Khkc: warning: careful\r\n"
                            "\r\033[K[2/2] compile gfx90a: k2"
                            "\r\033[K");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_verbose_lines),
      cmocka_unit_test(test_plain_lines_no_items),
      cmocka_unit_test(test_threads_number_without_gaps),
      cmocka_unit_test(test_terminal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
