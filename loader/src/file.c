/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file.c -- how libhkrt opens the files it reads (hk_pack_open_file*, hk_weights_open_file).
 *
 * A path names whatever the caller was given: a FIFO would block the open until a writer
 * comes (forever, for a FIFO nobody writes), a device would be read without end. So every
 * input is opened with O_NONBLOCK, judged by fstat of the descriptor itself (no window between
 * a check and the open), refused unless it is a regular file, and only then switched back to
 * blocking reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status_internal.h"
#include "util_internal.h"

const char *hk_errno_text(int err) {
  static _Thread_local char buf[64];
  const char *s = strerror_r(err, buf, sizeof buf); /* GNU: its text, or a static one */
  if (strncmp(s, "Unknown error", 13) == 0) {
    snprintf(buf, sizeof buf, "unexpected error code %d", err);
    return buf;
  }
  return s;
}

/* What a file that is not regular is, for messages. */
static const char *file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

hk_status_t hk_file_open_input(const char *path, int *out_fd, uint64_t *out_size) {
  *out_fd = -1;
  *out_size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  HK_FAIL_IF(fd < 0, HK_STATUS_IO, "cannot open %s: %s", path, hk_errno_text(errno));
  struct stat st;
  int flags;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return HK_ERROR(HK_STATUS_IO, "cannot stat %s: %s", path, hk_errno_text(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return HK_ERROR(HK_STATUS_IO, "cannot open %s: not a regular file (%s)", path, file_kind(st.st_mode));
  }
  if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int e = errno;
    close(fd);
    return HK_ERROR(HK_STATUS_IO, "cannot open %s: %s", path, hk_errno_text(e));
  }
  *out_fd = fd;
  *out_size = (uint64_t)st.st_size;
  return HK_OK;
}
