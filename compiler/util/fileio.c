/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fileio.c -- how hkc reads and writes whole files (util.h, "files").
 *
 * Writes: a temporary file next to the destination, created with O_EXCL and mode 0666 (or
 * the caller's) so the umask decides, written, fsynced and renamed over the destination,
 * which must be absent or a regular file: a device node, FIFO, directory or symbolic link
 * there is never replaced (`hkc build -o /dev/null` run as root would otherwise replace
 * the system's /dev/null). Every write, fsync and rename goes through one table of
 * function pointers that tests replace (hkc_io_set_ops) to fail each in turn or to write
 * short; whatever fails, the temporary is removed and the destination keeps its bytes.
 *
 * Reads: regular files only (a device or FIFO would be read until memory runs out, or
 * block), at most a cap the caller names. Every input is opened by hkc_open_input: without
 * blocking, then judged by fstat of the descriptor it reads (no window between a check and
 * the open).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* Tries at a fresh temporary name before giving up: names collide only with another
 * writer's temporaries. */
#define HKC_TMP_TRIES 100

static const hkc_io_ops_t k_system_ops = {write, fsync, rename};
static const hkc_io_ops_t *g_ops = &k_system_ops;

void hkc_io_set_ops(const hkc_io_ops_t *ops) { g_ops = ops ? ops : &k_system_ops; }

const char *hkc_strerror(int err) {
  switch (err) {
  case HKC_ENOTREG: return "not a regular file (a socket or another special file)";
  case HKC_ENOTREG_FIFO: return "not a regular file (a FIFO)";
  case HKC_ENOTREG_DEVICE: return "not a regular file (a device)";
  default: break;
  }
  static _Thread_local char buf[64];
  /* strerror_r (GNU): its own text, or a static one for values it knows; "Unknown error N" else */
  const char *s = strerror_r(err, buf, sizeof buf);
  if (strncmp(s, "Unknown error", 13) == 0) {
    snprintf(buf, sizeof buf, "unexpected error code %d", err);
    return buf;
  }
  return s;
}

/* The errno for a file that is not regular (mode from stat). */
static int not_regular_errno(mode_t mode) {
  if (S_ISDIR(mode)) return EISDIR;
  if (S_ISFIFO(mode)) return HKC_ENOTREG_FIFO;
  if (S_ISCHR(mode) || S_ISBLK(mode)) return HKC_ENOTREG_DEVICE;
  return HKC_ENOTREG;
}

static void set_err(char *err, size_t size, const char *path, const char *what, int e) {
  if (err && size) snprintf(err, size, "cannot write %s: %s: %s", path, what, hkc_strerror(e));
}

int hkc_output_check(const char *path, char *err, size_t err_size) {
  struct stat st;
  if (strcmp(path, "-") == 0) { /* not a file named "-": standard output is no place for a pack */
    if (err && err_size) snprintf(err, err_size, "cannot write to standard output (-): give a file name");
    errno = EINVAL;
    return -1;
  }
  if (lstat(path, &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      set_err(err, err_size, path, "cannot stat it", errno);
      return -1;
    }
    /* absent: its directory must exist and be writable (said now, not after the work) */
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    const int rc = stat(dir, &st), e = errno;
    if (rc != 0 || !S_ISDIR(st.st_mode)) {
      if (err && err_size)
        snprintf(err, err_size, "cannot write %s: its directory %s %s", path, dir,
                 rc == 0 ? "is not a directory" : e == ENOENT ? "does not exist" : hkc_strerror(e));
      errno = rc == 0 ? ENOTDIR : e;
      return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
      set_err(err, err_size, path, "its directory is not writable", errno);
      return -1;
    }
    return 0;
  }
  if (S_ISREG(st.st_mode)) return 0;
  if (err && err_size)
    snprintf(err, err_size,
             "cannot write %s: it exists and is not a regular file (a %s): refusing to replace it",
             path, S_ISDIR(st.st_mode) ? "directory" : S_ISLNK(st.st_mode) ? "symbolic link"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device" : S_ISFIFO(st.st_mode) ? "FIFO" : "special file");
  errno = HKC_ENOTREG;
  return -1;
}

static int write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = g_ops->write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) { /* no progress and no error: a full device that does not say so */
      errno = ENOSPC;
      return -1;
    }
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

/* Creates "<dir>/.<base>.tmp.<unique>" with O_EXCL (never an existing file, never through a
 * link). *out_tmp is malloc'd. fd / -1 (errno). */
static int tmp_create(const char *path, unsigned mode, char **out_tmp) {
  static atomic_uint counter;
  const char *slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path) + 1 : 0;
  size_t cap = strlen(path) + 48;
  char *tmp = malloc(cap);
  if (!tmp) return -1;
  for (int i = 0; i < HKC_TMP_TRIES; i++) {
    unsigned n = atomic_fetch_add(&counter, 1);
    snprintf(tmp, cap, "%.*s.%s.tmp.%ld%06u", dir_len, path, path + dir_len, (long)getpid(), n % 1000000u);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
    if (fd >= 0) {
      *out_tmp = tmp;
      return fd;
    }
    if (errno != EEXIST) break;
  }
  int e = errno;
  free(tmp);
  errno = e;
  return -1;
}

int hkc_file_stage(const char *path, const hkc_chunk_t *chunks, size_t n, unsigned mode, char **out_tmp, char *err,
                   size_t err_size) {
  *out_tmp = NULL;
  if (hkc_output_check(path, err, err_size) != 0) return -1;
  char *tmp;
  int fd = tmp_create(path, mode, &tmp);
  if (fd < 0) {
    set_err(err, err_size, path, "cannot create a temporary file next to it", errno);
    return -1;
  }
  const char *step = NULL;
  for (size_t i = 0; i < n && !step; i++)
    if (chunks[i].size && write_all(fd, chunks[i].data, chunks[i].size) != 0) step = "write failed";
  if (!step && g_ops->fsync(fd) != 0) step = "fsync failed";
  int e = errno;
  if (close(fd) != 0 && !step) {
    step = "close failed";
    e = errno;
  }
  if (step) {
    unlink(tmp);
    free(tmp);
    set_err(err, err_size, path, step, e);
    return -1;
  }
  *out_tmp = tmp;
  return 0;
}

/* Makes the rename durable. Best effort (some file systems refuse fsync on a directory),
 * and not through the ops table: the file is in place whatever this does. */
static void dir_sync(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  free(dir);
}

int hkc_file_commit(char *tmp, const char *path, char *err, size_t err_size) {
  if (!tmp) return -1;
  int rc = hkc_output_check(path, err, err_size); /* again: it may have changed since the stage */
  if (rc == 0 && g_ops->rename(tmp, path) != 0) {
    set_err(err, err_size, path, "rename failed", errno);
    rc = -1;
  }
  if (rc != 0) unlink(tmp);
  else dir_sync(path);
  free(tmp);
  return rc;
}

void hkc_file_discard(char *tmp) {
  if (!tmp) return;
  unlink(tmp);
  free(tmp);
}

int hkc_file_replace(const char *path, const hkc_chunk_t *chunks, size_t n, unsigned mode, char *err,
                     size_t err_size) {
  char *tmp;
  if (hkc_file_stage(path, chunks, n, mode, &tmp, err, err_size) != 0) return -1;
  return hkc_file_commit(tmp, path, err, err_size);
}

int hkc_open_input(const char *path, uint64_t max, struct stat *out_st) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st;
  int e = 0, flags;
  if (fstat(fd, &st) != 0) e = errno;
  else if (!S_ISREG(st.st_mode)) e = not_regular_errno(st.st_mode);
  else if ((uint64_t)st.st_size > max) e = EFBIG;
  else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) e = errno;
  if (e) {
    close(fd);
    errno = e;
    return -1;
  }
  if (out_st) *out_st = st;
  return fd;
}

int hkc_read_file_stat(const char *path, size_t max, char **out_data, size_t *out_size, struct stat *out_st) {
  *out_data = NULL;
  *out_size = 0;
  struct stat st;
  int fd = hkc_open_input(path, max, &st);
  if (fd < 0) return -1;
  int e = 0;
  /* one byte over st_size and the NUL: a file that does not grow is read in one buffer */
  size_t len = 0, cap = (size_t)st.st_size + 2;
  char *buf = malloc(cap);
  if (!buf) e = ENOMEM;
  while (!e) { /* read to the end, not to st_size: the file may grow, but never past max */
    if (len + 1 == cap) {
      if (len > max) {
        e = EFBIG;
        break;
      }
      size_t next = cap > (max + 2) / 2 ? max + 2 : cap * 2;
      char *p = realloc(buf, next);
      if (!p) {
        e = ENOMEM;
        break;
      }
      buf = p;
      cap = next;
    }
    ssize_t got = read(fd, buf + len, cap - 1 - len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) e = errno;
    if (got <= 0) break;
    len += (size_t)got;
  }
  close(fd);
  if (!e && len > max) e = EFBIG;
  if (e) {
    free(buf);
    errno = e;
    return -1;
  }
  buf[len] = '\0';
  *out_data = buf;
  *out_size = len;
  if (out_st) *out_st = st;
  return 0;
}

int hkc_read_file_max(const char *path, size_t max, char **out_data, size_t *out_size) {
  return hkc_read_file_stat(path, max, out_data, out_size, NULL);
}

int hkc_input_check(const char *path, uint64_t max) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode)) errno = not_regular_errno(st.st_mode);
  else if ((uint64_t)st.st_size > max) errno = EFBIG;
  else return 0;
  return -1;
}

int hkc_read_file(const char *path, char **out_data, size_t *out_size) {
  return hkc_read_file_max(path, HKC_READ_MAX, out_data, out_size);
}
