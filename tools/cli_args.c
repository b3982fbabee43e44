/* SPDX-License-Identifier: MIT */
/* Command-line parsing and the usage text of the `rove` tool. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void cli_print_usage(FILE *f) {
  fprintf(f,
          "usage: rove <command> [options]\n"
          "\n"
          "librove %s: CPU attention with rotary position embeddings and RoVE.\n"
          "\n"
          "commands:\n"
          "  info                 version, CPU features, ISAs, chosen ISA, default threads,\n"
          "                       KV cache storage types\n"
          "  demo [options]       GPT-2-small attention (12 heads x 64, n = 1024, causal)\n"
          "                       with RoVE and with plain RoPE: checked against a double\n"
          "                       precision oracle, timed, compared; then a toy 2-layer\n"
          "                       decoder: prompt tokens/s and decode steps/s\n"
          "      --n N            sequence length (default 1024)\n"
          "      --heads H        attention heads (default 12)\n"
          "      --dim D          head dim, even (default 64)\n"
          "      --threads T      threads, 0 = library default (default 0)\n"
          "      --isa NAME       auto|scalar|avx2|avx512|neon (default auto)\n"
          "      --seed S         random seed (default 42)\n"
          "      --runs R         interleaved RoVE/RoPE pairs of timed runs (the toy\n"
          "                       decoder: at most 4); medians reported (default 21)\n"
          "      --prompt N       toy decoder (2 layers, d_model = heads x dim): prompt\n"
          "                       tokens (default 512)\n"
          "      --steps N        toy decoder decode steps (default 128)\n"
          "      --decoder        run only the toy decoder section\n"
          "      --kv TYPE        toy decoder KV cache storage: f32|bf16|f16|q8 (default\n"
          "                       f32); another type also runs f32 caches beside it and\n"
          "                       reports bytes per token, times and the outputs' max |diff|\n"
          "  check [options]      compare the library with the oracle over a sweep of\n"
          "                       shapes and options, for every ISA available\n"
          "      --isa NAME       only this ISA (auto = the best one)\n"
          "      --quick          a smaller sweep\n"
          "      --threads T      threads, 0 = library default (default 0)\n"
          "  bench [options]      quick sweep of causal prefill, RoVE vs plain RoPE, per ISA\n"
          "                       and thread count, as a markdown table (n = 256 .. max-n,\n"
          "                       head dim 64 and 128; the full suite is scripts/bench.sh)\n"
          "      --max-n N        largest n, 256 .. 16384: n doubles from 256 up to it\n"
          "                       (scalar stops at 256; default 1024)\n"
          "      --heads H        heads (default 12)\n"
          "      --threads T      the multi-threaded rows' threads, 0 = default (default 0)\n"
          "      --isa NAME       only this ISA (default, and auto: every one available)\n"
          "      --runs R         interleaved RoVE/RoPE pairs per case, at least (short\n"
          "                       cases get more); medians reported (default 7)\n"
          "      --kv LIST        also a decode table: one step through KV caches stored as\n"
          "                       LIST, 'all' or comma-separated f32,bf16,f16,q8 (bench/'s\n"
          "                       decode_cache cases: heads x 64, n = 1024, 4096, ...\n"
          "                       max-kv; each type's output against an f32 cache's)\n"
          "      --max-kv N       the decode table's largest n (with --kv or --decode;\n"
          "                       default 16384)\n"
          "      --decode         only the decode table (--kv defaults to all)\n"
          "  help [COMMAND]       this text (also -h, --help)\n"
          "  version              the version of librove (also --version)\n"
          "\n"
          "Exit status: 0 success, 1 a check failed or librove returned an error,\n"
          "2 bad command line. ROVE_ISA=scalar|avx2|avx512|neon caps the automatic ISA\n"
          "choice; ROVE_VERBOSE=1 makes librove log each plan's ISA.\n",
          rove_version_string());
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "rove%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'rove help' for usage.\n");
  return CLI_EXIT_USAGE;
}

int cli_isa_from_name(const char *s, rove_isa *out) {
  char low[32]; /* the CLI takes any case; librove's names are lower case */
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof low) return -1;
  for (size_t i = 0; i <= n; i++)
    low[i] = (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] - 'A' + 'a' : s[i]);
  return rove_isa_parse(low, out) == ROVE_OK ? 0 : -1;
}

int cli_dtype_from_name(const char *s, rove_dtype *out) {
  char low[32]; /* as for the ISA names: any case */
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof low) return -1;
  for (size_t i = 0; i <= n; i++)
    low[i] = (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] - 'A' + 'a' : s[i]);
  return rove_dtype_parse(low, out) == ROVE_OK ? 0 : -1;
}

double cli_kv_bytes_per_token(rove_dtype t, int32_t kv_heads, int32_t head_dim) {
  const double rows = 2.0 * kv_heads; /* a K and a V row per KV head */
  switch (t) {
    case ROVE_DTYPE_BF16:
    case ROVE_DTYPE_F16:
      return rows * head_dim * 2.0;
    case ROVE_DTYPE_Q8:
      return rows * (head_dim + 4.0 * ((head_dim + ROVE_Q8_BLOCK - 1) / ROVE_Q8_BLOCK));
    default:
      return rows * head_dim * 4.0;
  }
}

/* "all" or a comma-separated list of storage type names -> mask of 1u << type. */
static int parse_dtypes(const char *s, uint32_t *mask) {
  char name[32];
  uint32_t m = 0;
  char low[4] = {0}; /* "all" in any case */
  for (int i = 0; i < 3 && s[i]; i++) low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
  if (strlen(s) == 3 && strcmp(low, "all") == 0) {
    *mask = (1u << ROVE_DTYPE_COUNT) - 1u;
    return 0;
  }
  for (const char *p = s;; p++) {
    const char *comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    rove_dtype t;
    if (len == 0 || len >= sizeof name) return -1;
    memcpy(name, p, len);
    name[len] = '\0';
    if (cli_dtype_from_name(name, &t) != 0) return -1;
    m |= 1u << t;
    if (!comma) break;
    p = comma;
  }
  *mask = m;
  return 0;
}

/* Decimal integer (optional sign) filling the whole string. */
static int parse_i64(const char *s, int64_t *out) {
  char *end = NULL;
  if (!*s || isspace((unsigned char)*s)) return -1;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end != '\0') return -1;
  if (errno == ERANGE) return -2; /* a number, but far out of any range */
  *out = (int64_t)v;
  return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;
  if (*s == '+' && isdigit((unsigned char)s[1])) s++; /* "+5", as the signed options take */
  if (!isdigit((unsigned char)*s)) return -1; /* strtoull would take "-5", " 5", "+-5" */
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end != '\0') return -1;
  if (errno == ERANGE) return -2;
  *out = (uint64_t)v;
  return 0;
}

/* Store the value of one option; returns 0 or CLI_EXIT_USAGE (message printed). */
static int set_value(const char *cmd, const cli_opt *o, const char *val) {
  int64_t v;
  int rc;
  switch (o->kind) {
    case CLI_OPT_I32:
      rc = parse_i64(val, &v);
      if (rc == -1) return cli_usage_error(cmd, "%s expects an integer, got '%s'", o->name, val);
      if (rc != 0 || v < o->lo || v > o->hi)
        return cli_usage_error(cmd, "%s %s is out of range [%" PRId64 ", %" PRId64 "]",
                               o->name, val, o->lo, o->hi);
      *(int32_t *)o->dst = (int32_t)v;
      return 0;
    case CLI_OPT_U64:
      rc = parse_u64(val, (uint64_t *)o->dst);
      if (rc == -2) return cli_usage_error(cmd, "%s %s is out of range", o->name, val);
      if (rc != 0)
        return cli_usage_error(cmd, "%s expects a non-negative integer, got '%s'", o->name,
                               val);
      return 0;
    case CLI_OPT_ISA:
      if (cli_isa_from_name(val, (rove_isa *)o->dst) != 0)
        return cli_usage_error(cmd, "unknown ISA '%s' (expected auto, scalar, avx2, avx512 "
                               "or neon)", val);
      return 0;
    case CLI_OPT_DTYPE:
      if (cli_dtype_from_name(val, (rove_dtype *)o->dst) != 0)
        return cli_usage_error(cmd, "%s: unknown storage type '%s' (expected f32, bf16, f16 "
                               "or q8)", o->name, val);
      return 0;
    case CLI_OPT_DTYPES:
      if (parse_dtypes(val, (uint32_t *)o->dst) != 0)
        return cli_usage_error(cmd, "%s: bad storage type list '%s' (expected 'all' or a "
                               "comma-separated list of f32, bf16, f16, q8)", o->name, val);
      return 0;
    case CLI_OPT_FLAG:
      break;
  }
  return cli_usage_error(cmd, "%s takes no value", o->name);
}

static const cli_opt *find_opt(const cli_opt *opts, size_t n, const char *arg, size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(opts[i].name) == len && strncmp(opts[i].name, arg, len) == 0) return &opts[i];
  return NULL;
}

int cli_seen(uint32_t seen, const cli_opt *opts, size_t n_opts, const char *name) {
  for (size_t i = 0; i < n_opts && i < 32; i++)
    if (strcmp(opts[i].name, name) == 0) return (seen >> i) & 1u;
  return 0;
}

int cli_parse_opts(const char *cmd, int argc, char **argv, const cli_opt *opts, size_t n_opts) {
  uint32_t seen;
  return cli_parse_opts_seen(cmd, argc, argv, opts, n_opts, &seen);
}

int cli_parse_opts_seen(const char *cmd, int argc, char **argv, const cli_opt *opts,
                        size_t n_opts, uint32_t *seen) {
  *seen = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      cli_print_usage(stdout);
      return 1;
    }
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const cli_opt *o = find_opt(opts, n_opts, arg, len);
    if (!o) {
      if (strncmp(arg, "-", 1) == 0) return cli_usage_error(cmd, "unknown option '%s'", arg);
      return cli_usage_error(cmd, "unexpected argument '%s'", arg);
    }
    if (o - opts < 32) *seen |= 1u << (o - opts);
    if (o->kind == CLI_OPT_FLAG) {
      if (eq) return cli_usage_error(cmd, "%s takes no value", o->name);
      *(int *)o->dst = 1;
      continue;
    }
    const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!val) return cli_usage_error(cmd, "%s needs a value", o->name);
    int rc = set_value(cmd, o, val);
    if (rc != 0) return rc;
  }
  return 0;
}
