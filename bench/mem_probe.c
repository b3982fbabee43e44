/* SPDX-License-Identifier: MIT */
/* mem_probe: peak resident memory of one RoVE attention forward (causal, batch 1) for a
 * range of sequence lengths, each in a fresh process, to show that memory grows as
 * O(n*d) (no n x n matrix is ever materialised).
 *
 *   mem_probe [--heads H] [--dim D] [--threads T] [--isa NAME] [--tsv] [N ...]
 *
 * Default: 12 heads x 64, N = 1024 2048 4096 8192 16384, the library's default threads
 * and ISA. For each N the probe re-executes itself (/proc/self/exe) with --child; the
 * child reads ru_maxrss (the high-water mark of its resident set) at start, after
 * allocating and filling q, k, v and out, and after the forward, and reports the three.
 * The table shows the inputs (4 tensors of N x H x D floats), the forward's own peak
 * on top of them ("workspace"), and for contrast the size of one N x N fp32 score
 * matrix. Output: a markdown table, or tab-separated values with --tsv.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rove.h"

typedef struct probe_opts {
  int heads, dim, threads, tsv;
  const char *isa;
} probe_opts;

static long maxrss_kb(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static rove_isa parse_isa(const char *s) {
  rove_isa isa;
  return rove_isa_parse(s, &isa) == ROVE_OK ? isa : (rove_isa)-1;
}

/* The child: one forward at n; prints "rss0 rss_inputs rss_peak seconds isa threads". */
static int child(long n, const probe_opts *o) {
  const long r0 = maxrss_kb();
  const size_t count = (size_t)n * (size_t)o->heads * (size_t)o->dim;
  float *buf[4];
  for (int i = 0; i < 4; i++) {
    buf[i] = malloc(count * sizeof(float));
    if (!buf[i]) return 3;
    for (size_t j = 0; j < count; j++) /* touch every page: inputs count as resident */
      buf[i][j] = (float)((j * 2654435761u) % 2001) / 1000.0f - 1.0f;
  }
  const long r1 = maxrss_kb();
  rove_attention_config cfg;
  rove_attention_config_init(&cfg, o->heads, o->heads, o->dim);
  cfg.isa = parse_isa(o->isa);
  cfg.n_threads = o->threads;
  rove_plan *plan = NULL;
  rove_status st = rove_plan_create(&cfg, &plan);
  rove_attention_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1;
  a.q_len = a.kv_len = (int32_t)n;
  a.q = buf[0];
  a.k = buf[1];
  a.v = buf[2];
  a.out = buf[3];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (st == ROVE_OK) st = rove_attention_forward(plan, &a);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (st != ROVE_OK) {
    fprintf(stderr, "mem_probe: n=%ld: %s\n", n, rove_status_string(st));
    return 1;
  }
  const long r2 = maxrss_kb();
  printf("%ld %ld %ld %.3f %s %d\n", r0, r1, r2,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
         rove_isa_name(rove_plan_isa(plan)), (int)rove_plan_threads(plan));
  rove_plan_destroy(plan);
  for (int i = 0; i < 4; i++) free(buf[i]);
  return 0;
}

/* Run the child for @p n and read its one line into @p line. Returns 0 on success. */
static int run_child(const char *self, long n, const probe_opts *o, char *line, size_t cap) {
  int fd[2];
  if (pipe(fd)) return -1;
  char ns[32], hs[32], ds[32], ts[32];
  snprintf(ns, sizeof ns, "%ld", n);
  snprintf(hs, sizeof hs, "%d", o->heads);
  snprintf(ds, sizeof ds, "%d", o->dim);
  snprintf(ts, sizeof ts, "%d", o->threads);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    char *args[] = {(char *)self, "--child", ns, hs, ds, ts, (char *)o->isa, NULL};
    execv(self, args);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  int ok = f && fgets(line, (int)cap, f) != NULL;
  if (f) fclose(f);
  else close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void print_row(long n, const probe_opts *o, const char *line, long *prev_ws) {
  long r0, r1, r2;
  double sec;
  char isa[32];
  int thr;
  if (sscanf(line, "%ld %ld %ld %lf %31s %d", &r0, &r1, &r2, &sec, isa, &thr) != 6) return;
  const double mib = 1.0 / 1024.0; /* KiB -> MiB */
  const long ws = r2 - r1;
  const double nn = (double)n * (double)n * 4.0 / (1024.0 * 1024.0);
  char growth[32] = "";
  if (*prev_ws > 0) snprintf(growth, sizeof growth, "%.2fx", (double)ws / (double)*prev_ws);
  *prev_ws = ws;
  if (o->tsv)
    printf("%ld\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\t%s\t%d\n", n, o->heads, o->dim,
           r2 * mib, (r1 - r0) * mib, ws * mib, nn, sec, isa, thr);
  else
    printf("| %ld | %d x %d | %.1f | %.1f | %.1f | %s | %.0f | %.2f | %s, %d thr |\n", n,
           o->heads, o->dim, r2 * mib, (r1 - r0) * mib, ws * mib, growth, nn, sec, isa, thr);
}

static int usage(void) {
  fprintf(stderr, "usage: mem_probe [--heads H] [--dim D] [--threads T] [--isa NAME] "
                  "[--tsv] [N ...]\n");
  return 2;
}

int main(int argc, char **argv) {
  probe_opts o = {12, 64, 0, 0, "auto"};
  if (argc == 7 && strcmp(argv[1], "--child") == 0) {
    o.heads = atoi(argv[3]);
    o.dim = atoi(argv[4]);
    o.threads = atoi(argv[5]);
    o.isa = argv[6];
    return child(atol(argv[2]), &o);
  }
  long ns[32];
  int count = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--tsv") == 0) o.tsv = 1;
    else if (i + 1 < argc && strcmp(a, "--heads") == 0) o.heads = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(a, "--dim") == 0) o.dim = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(a, "--threads") == 0) o.threads = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(a, "--isa") == 0) o.isa = argv[++i];
    else if (a[0] >= '1' && a[0] <= '9' && count < 32) ns[count++] = atol(a);
    else return usage();
  }
  if ((int)parse_isa(o.isa) < 0 || o.heads <= 0 || o.dim <= 0 || o.threads < 0) return usage();
  if (count == 0)
    for (long n = 1024; n <= 16384; n *= 2) ns[count++] = n;
  if (o.tsv)
    printf("n\theads\tdim\tpeak_rss_mib\tinputs_mib\tworkspace_mib\tnxn_fp32_mib\t"
           "seconds\tisa\tthreads\n");
  else
    printf("| n | heads x dim | peak RSS MiB | q,k,v,out MiB | forward extra MiB | "
           "extra growth | one n x n fp32 MiB | forward s | run |\n"
           "|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
  long prev = 0;
  int rc = 0;
  for (int i = 0; i < count; i++) {
    char line[256];
    if (run_child("/proc/self/exe", ns[i], &o, line, sizeof line)) {
      fprintf(stderr, "mem_probe: the probe for n=%ld failed\n", ns[i]);
      rc = 1;
      continue;
    }
    print_row(ns[i], &o, line, &prev);
    fflush(stdout);
  }
  return rc;
}
