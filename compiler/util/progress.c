/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The progress of long commands on stderr (util.h, "progress"): phases of counted items,
 * shown as plain lines or as one line rewritten in place on a terminal. Items finish on the
 * compile pool's threads, so every print holds the reporter's lock; on a terminal the lock
 * is also held while a diagnostic prints (hkc_diag_set_hooks), after the line was cleared.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util/util.h"

/* Width assumed when the terminal does not say (a pseudo-terminal without a size). */
#define HKC_PROGRESS_COLUMNS 80

typedef struct phase {
  char name[64];
  size_t total, done;
} phase_t;

struct hkc_reporter {
  int mode;
  char who[32];
  int columns;      /* TTY: the line is cut to columns - 1 so that it never wraps */
  int shown;        /* TTY: a line is on the screen */
  phase_t *phases;
  size_t n_phases, cap_phases;
  pthread_mutex_t lock;
};

/* TTY: replaces the line on the screen by text, cut to the width. Lock held. */
static void show(hkc_reporter_t *r, const char *text) {
  fprintf(stderr, "\r\033[K%.*s", r->columns - 1, text);
  fflush(stderr);
  r->shown = 1;
}

static void clear_line(hkc_reporter_t *r) {
  if (!r->shown) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  r->shown = 0;
}

static void before_diag(void *arg) {
  hkc_reporter_t *r = arg;
  pthread_mutex_lock(&r->lock);
  clear_line(r);
}

static void after_diag(void *arg) { pthread_mutex_unlock(&((hkc_reporter_t *)arg)->lock); }

hkc_reporter_t *hkc_reporter_create(int mode, const char *who) {
  if (mode == HKC_PROGRESS_TTY && !isatty(STDERR_FILENO)) mode = HKC_PROGRESS_OFF;
  if (mode <= HKC_PROGRESS_OFF || mode > HKC_PROGRESS_VERBOSE) return NULL;
  hkc_reporter_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->mode = mode;
  snprintf(r->who, sizeof r->who, "%s", who);
  struct winsize ws;
  r->columns = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col : HKC_PROGRESS_COLUMNS;
  pthread_mutex_init(&r->lock, NULL);
  if (mode == HKC_PROGRESS_TTY) hkc_diag_set_hooks(before_diag, after_diag, r);
  return r;
}

void hkc_reporter_destroy(hkc_reporter_t *r) {
  if (!r) return;
  if (r->mode == HKC_PROGRESS_TTY) hkc_diag_set_hooks(NULL, NULL, NULL);
  clear_line(r);
  pthread_mutex_destroy(&r->lock);
  free(r->phases);
  free(r);
}

int hkc_reporter_mode(const hkc_reporter_t *r) { return r ? r->mode : HKC_PROGRESS_OFF; }

int hkc_reporter_begin(hkc_reporter_t *r, const char *name, size_t total, const char *what, ...) {
  if (!r) return -1;
  char text[256];
  va_list ap;
  va_start(ap, what);
  vsnprintf(text, sizeof text, what, ap);
  va_end(ap);
  pthread_mutex_lock(&r->lock);
  int id = -1;
  if (hkc_reserve((void **)&r->phases, &r->cap_phases, r->n_phases + 1, sizeof *r->phases) == 0) {
    phase_t *p = &r->phases[r->n_phases];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->total = total;
    p->done = 0;
    id = (int)r->n_phases++;
  }
  if (r->mode == HKC_PROGRESS_TTY && total) {
    char line[320];
    snprintf(line, sizeof line, "[0/%zu] %s", total, name);
    show(r, line);
  } else if (r->mode >= HKC_PROGRESS_LINES) {
    fprintf(stderr, "%s: %s: %zu %s\n", r->who, name, total, text);
    fflush(stderr);
  }
  pthread_mutex_unlock(&r->lock);
  return id;
}

void hkc_reporter_item(hkc_reporter_t *r, int phase, const char *item, ...) {
  if (!r) return;
  char text[256], line[400];
  va_list ap;
  va_start(ap, item);
  vsnprintf(text, sizeof text, item, ap);
  va_end(ap);
  pthread_mutex_lock(&r->lock);
  if (phase >= 0 && (size_t)phase < r->n_phases && r->phases[phase].done < r->phases[phase].total) {
    phase_t *p = &r->phases[phase];
    p->done++;
    snprintf(line, sizeof line, "[%zu/%zu] %s: %s", p->done, p->total, p->name, text);
    if (r->mode == HKC_PROGRESS_TTY) {
      show(r, line);
    } else if (r->mode == HKC_PROGRESS_VERBOSE) {
      fprintf(stderr, "%s\n", line);
      fflush(stderr);
    }
  }
  pthread_mutex_unlock(&r->lock);
}

void hkc_reporter_note(hkc_reporter_t *r, const char *text, ...) {
  if (!r || r->mode < HKC_PROGRESS_LINES) return;
  va_list ap;
  va_start(ap, text);
  pthread_mutex_lock(&r->lock);
  fprintf(stderr, "%s: ", r->who);
  vfprintf(stderr, text, ap);
  fputc('\n', stderr);
  fflush(stderr);
  pthread_mutex_unlock(&r->lock);
  va_end(ap);
}
