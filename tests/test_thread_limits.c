/* SPDX-License-Identifier: MIT */
/* Thread creation under resource limits (issue 13, item 9): when librove used OpenMP,
 * libgomp ended the process when it could not create a thread of a team. librove's own
 * pool (src/threads.c) runs a team of the threads it could create, down to the caller.
 *
 * A child process lowers its address-space limit (RLIMIT_AS) to ~1 GiB above what it uses,
 * so that only ~100 thread stacks of 8 MiB fit, then runs a forward with n_threads = 1000
 * on more than 1000 tasks: it must return ROVE_OK with the output of a one-thread run,
 * bitwise (any team size gives the same result). With libgomp, the child printed "Thread
 * creation failed" and exited with status 1 from inside rove_attention_forward.
 * The work runs in a child so that the limit does not reach the other tests; the child
 * starts no thread before it sets the limit.
 * Sanitizer builds skip it (77): ASan/UBSan runtimes reserve terabytes of address space
 * and cannot run under RLIMIT_AS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ROVE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ROVE_TEST_SANITIZED 1
#endif
#endif

#ifndef ROVE_TEST_SANITIZED
/* Bytes of address space this process maps now (VmSize of /proc/self/status). */
static long long vm_size_bytes(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %lld kB", &kb) == 1) break;
  fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

/* 64 heads of d = 2 over 1600 tokens: > 1000 query tiles on every ISA (tile_q <= 96), a
 * fraction of a GFLOP. Returns 0 when the limited run matches the one-thread run. */
static int child_run(void) {
  enum { H = 64, D = 2, N = 1600 };
  const size_t elems = (size_t)N * H * D;
  float *q = malloc(elems * sizeof(float)), *k = malloc(elems * sizeof(float));
  float *v = malloc(elems * sizeof(float)), *out1 = malloc(elems * sizeof(float));
  float *outn = malloc(elems * sizeof(float));
  if (!q || !k || !v || !out1 || !outn) return 10;
  uint32_t s = 12345;
  for (size_t i = 0; i < elems; i++) {
    s = s * 1664525u + 1013904223u;
    q[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    k[i] = q[i] * 0.5f + 0.25f;
    v[i] = 1.0f - q[i];
  }
  rove_attention_config c;
  rove_attention_config_init(&c, H, H, D);
  c.n_threads = 1;
  rove_plan *p1 = NULL;
  if (rove_plan_create(&c, &p1) != ROVE_OK) return 11;
  rove_attention_args a = {0};
  a.batch = 1, a.q_len = N, a.kv_len = N, a.q = q, a.k = k, a.v = v, a.out = out1;
  if (rove_attention_forward(p1, &a) != ROVE_OK) return 12;

  struct rlimit lim;
  const long long used = vm_size_bytes();
  if (used <= 0 || getrlimit(RLIMIT_AS, &lim) != 0) return 13;
  lim.rlim_cur = (rlim_t)(used + (1ll << 30));
  if (setrlimit(RLIMIT_AS, &lim) != 0) return 14;

  c.n_threads = 1000;
  rove_plan *pn = NULL;
  if (rove_plan_create(&c, &pn) != ROVE_OK) return 15;
  a.out = outn;
  if (rove_attention_forward(pn, &a) != ROVE_OK) return 16;
  if (memcmp(out1, outn, elems * sizeof(float)) != 0) return 17;
  /* A second call reuses the team it could make (and tries for the rest again). */
  memset(outn, 0, elems * sizeof(float));
  if (rove_attention_forward(pn, &a) != ROVE_OK) return 18;
  if (memcmp(out1, outn, elems * sizeof(float)) != 0) return 19;
  rove_plan_destroy(pn);
  rove_plan_destroy(p1);
  free(q), free(k), free(v), free(out1), free(outn);
  return 0;
}

static void test_team_under_address_space_limit(void **state) {
  (void)state;
  fflush(NULL);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(child_run());
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) != 0)
    fprintf(stderr, "child exited with %d (10+ = a step of child_run)\n",
            WEXITSTATUS(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

#endif /* !ROVE_TEST_SANITIZED */

int main(void) {
  rove_test_isa_gate();
#ifdef ROVE_TEST_SANITIZED
  fprintf(stderr, "test_thread_limits: skipped (sanitizer runtimes cannot run under RLIMIT_AS)\n");
  return 77;
#else
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_team_under_address_space_limit)};
  return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
