/* SPDX-License-Identifier: Apache-2.0 */
/* compiler/rtc/rtc_worker.h -- toolchain calls in worker processes.
 *
 * Why: ROCm 5.2's hiprtc and comgr keep LLVM's command-line option registry in process-global
 * state. Two compiles on two threads of one process race on it: crashes (SIGSEGV, SIGABRT,
 * "Option 'h' registered more than once", double free) and, worse, successful compiles whose
 * code picked up another compile's options. So every hiprtc compile and every comgr query runs
 * in a worker process: `hkc` re-executed in a hidden mode (`hkc --rtc-worker`), one toolchain
 * call at a time, talking to its parent over a socket. A worker that crashes or hangs costs one
 * retry, never the parent.
 *
 * The protocol (one connected AF_UNIX stream socket, the worker's end on fd HKC_WORKER_FD):
 *
 *   message := magic "HKW1" | kind u32 | n_fields u32 | n_fields x (size u32 | bytes)
 *
 * little-endian, at most HKC_WMSG_FIELDS fields of at most HKC_WMSG_FIELD_MAX bytes each. The
 * parent sends a request (kind = the job, e.g. HKC_JOB_HIPRTC_COMPILE), the worker answers
 * with exactly one reply (kind = 0 for success, else failure; fields per job, see
 * rtc_amd_worker.c). A reply that breaks these rules is a broken worker, like one that died.
 * Nothing here knows about AMD: the same pool can drive any call that must not share a process
 * (or, later, run on another machine behind the same messages).
 */
#ifndef HKC_RTC_WORKER_H
#define HKC_RTC_WORKER_H

#include <stddef.h>
#include <stdint.h>

#define HKC_WORKER_ARG "--rtc-worker" /* argv[1] of a worker process */
#define HKC_WORKER_FD 3               /* the worker's end of the socket */
#define HKC_WMSG_FIELDS 8
#define HKC_WMSG_FIELD_MAX (256u << 20) /* a code object or a disassembly is far smaller */

typedef struct hkc_wfield {
  void *data; /* received fields are malloc'd with one NUL byte past size */
  size_t size;
} hkc_wfield_t;

typedef struct hkc_wmsg {
  uint32_t kind; /* request: job kind; reply: 0 success, else failure */
  uint32_t n;    /* fields in use */
  hkc_wfield_t f[HKC_WMSG_FIELDS];
} hkc_wmsg_t;

/* Appends a field pointing at data (not copied); -1 when the message is full or too large. */
int hkc_wmsg_add(hkc_wmsg_t *m, const void *data, size_t size);
/* Writes one message; 0 / -1 (the peer is gone, or an I/O error). Never raises SIGPIPE. */
int hkc_wmsg_write(int fd, const hkc_wmsg_t *m);
/* Reads one message within timeout_ms (< 0: no limit). 0 ok; HKC_WMSG_EOF when the peer closed
 * before a byte; HKC_WMSG_TIMEOUT; HKC_WMSG_BAD for anything malformed or cut short. */
enum { HKC_WMSG_EOF = -1, HKC_WMSG_TIMEOUT = -2, HKC_WMSG_BAD = -3 };
int hkc_wmsg_read(int fd, hkc_wmsg_t *m, int timeout_ms);
/* Frees the fields of a message read by hkc_wmsg_read (or filled by a handler with owned data). */
void hkc_wmsg_free(hkc_wmsg_t *m);

/* Worker side: answers requests on fd until the parent closes it. The handler fills reply with
 * malloc'd fields (freed after sending). Returns the process exit status to use. */
typedef void (*hkc_worker_handler_t)(const hkc_wmsg_t *request, hkc_wmsg_t *reply);
int hkc_worker_serve(int fd, hkc_worker_handler_t handler);

/* Parent side: up to max_workers processes `exe mode_arg` started on demand; a call takes an
 * idle one (waiting when all are busy). Thread-safe. */
typedef struct hkc_wpool hkc_wpool_t;
hkc_wpool_t *hkc_wpool_create(const char *exe, const char *mode_arg, int max_workers, int timeout_ms);
/* Sends request, reads the reply. A worker that dies, hangs past the timeout or sends garbage
 * is killed and replaced and the request sent once more; when that fails too, -1 and why
 * says what happened both times (signal, timeout, malformed reply). 0: reply filled (free it
 * with hkc_wmsg_free); its kind says whether the job itself succeeded. */
int hkc_wpool_call(hkc_wpool_t *pool, const hkc_wmsg_t *request, hkc_wmsg_t *reply, char *why, size_t why_size);
/* Workers started so far and workers replaced after a failure (for tests and -v). */
void hkc_wpool_counts(hkc_wpool_t *pool, unsigned *out_started, unsigned *out_replaced);
/* Closes every worker's socket (they exit), reaps them, frees the pool. */
void hkc_wpool_destroy(hkc_wpool_t *pool);

#endif /* HKC_RTC_WORKER_H */
