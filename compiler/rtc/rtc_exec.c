/* SPDX-License-Identifier: Apache-2.0 */
/* Running a toolchain's command-line programs (toolchain.h): a program's stdout captured into
 * memory, and temporary files for its inputs. Used by the host and NVIDIA entries'
 * disassembly (objdump, nvdisasm, cuobjdump). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtc/rtc.h"

/* Exit status of a child that could not exec its program (the shell's convention). */
#define EXEC_NOT_FOUND 127

int hkc_rtc_exec_capture(char *const argv[], char **out_text) {
  *out_text = NULL;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execvp(argv[0], argv);
    _exit(EXEC_NOT_FOUND);
  }
  close(fds[1]);
  char *text = NULL;
  size_t len = 0, cap = 0;
  int oom = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      size_t want = cap ? cap * 2 : 65536;
      char *grown = realloc(text, want);
      if (!grown) {
        oom = 1;
        break;
      }
      text = grown;
      cap = want;
    }
    ssize_t n = read(fds[0], text + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fds[0]); /* on OOM the child gets SIGPIPE */
  if (text) text[len] = '\0';
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      free(text);
      return -1;
    }
  *out_text = text;
  if (oom || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == EXEC_NOT_FOUND ? -1 : WEXITSTATUS(status);
}

char *hkc_rtc_temp_file(const void *data, size_t size, const char *suffix) {
  char *path = malloc(4096);
  if (!path) return NULL;
  snprintf(path, 4096, "%s/hkc-disasm-XXXXXX%s", hkc_env_tmp_dir(), suffix);
  int fd = mkstemps(path, (int)strlen(suffix));
  if (fd < 0) {
    free(path);
    return NULL;
  }
  const char *p = data;
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) {
      close(fd);
      unlink(path);
      free(path);
      return NULL;
    }
    p += n;
    size -= (size_t)n;
  }
  close(fd);
  return path;
}
