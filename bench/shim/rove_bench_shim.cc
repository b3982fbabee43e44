/* SPDX-License-Identifier: MIT */
// rove_bench_shim: the C API of rove_bench_shim.h over Google Benchmark 1.7.1.
#include "rove_bench_shim.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

benchmark::State &S(rbs_state *st) { return *reinterpret_cast<benchmark::State *>(st); }

benchmark::internal::Benchmark *B(rbs_bench *b) {
  return reinterpret_cast<benchmark::internal::Benchmark *>(b);
}

benchmark::Counter::Flags counter_flags(unsigned flags) {
  int f = benchmark::Counter::kDefaults;
  if (flags & RBS_COUNTER_RATE) f |= benchmark::Counter::kIsRate;
  if (flags & RBS_COUNTER_AVG_ITERATIONS) f |= benchmark::Counter::kAvgIterations;
  if (flags & RBS_COUNTER_INVERT) f |= benchmark::Counter::kInvert;
  return static_cast<benchmark::Counter::Flags>(f);
}

bool has_flag(int argc, char **argv, const char *prefix) {
  const size_t len = std::strlen(prefix);
  for (int i = 1; i < argc; ++i)
    if (argv[i] && std::strncmp(argv[i], prefix, len) == 0) return true;
  return false;
}

}  // namespace

extern "C" {

rbs_bench *rbs_register(const char *name, rbs_fn fn, void *user) {
  if (!name || !fn) return nullptr;
  benchmark::internal::Benchmark *b = benchmark::RegisterBenchmark(
      name, [fn, user](benchmark::State &st) {
        fn(reinterpret_cast<rbs_state *>(&st), user);
      });
  return reinterpret_cast<rbs_bench *>(b);
}

void rbs_args(rbs_bench *b, const int64_t *args, int n) {
  B(b)->Args(std::vector<int64_t>(args, args + n));
}

void rbs_arg_names(rbs_bench *b, const char *const *names, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.emplace_back(names[i]);
  B(b)->ArgNames(v);
}

void rbs_use_real_time(rbs_bench *b) { B(b)->UseRealTime(); }
void rbs_min_time(rbs_bench *b, double seconds) { B(b)->MinTime(seconds); }
void rbs_set_iterations(rbs_bench *b, int64_t n) { B(b)->Iterations(n); }
void rbs_repetitions(rbs_bench *b, int n) { B(b)->Repetitions(n); }

void rbs_time_unit(rbs_bench *b, rbs_unit unit) {
  static const benchmark::TimeUnit units[] = {benchmark::kNanosecond, benchmark::kMicrosecond,
                                              benchmark::kMillisecond, benchmark::kSecond};
  if (unit >= RBS_NS && unit <= RBS_S) B(b)->Unit(units[unit]);
}

void rbs_add_context(const char *key, const char *value) {
  benchmark::AddCustomContext(key, value);
}

int rbs_keep_running(rbs_state *st) { return S(st).KeepRunning() ? 1 : 0; }
int rbs_keep_running_batch(rbs_state *st, int64_t n) {
  return S(st).KeepRunningBatch(n) ? 1 : 0;
}
void rbs_pause(rbs_state *st) { S(st).PauseTiming(); }
void rbs_resume(rbs_state *st) { S(st).ResumeTiming(); }
int64_t rbs_range(rbs_state *st, int i) { return S(st).range(static_cast<size_t>(i)); }
int64_t rbs_iterations(rbs_state *st) { return S(st).iterations(); }

void rbs_counter(rbs_state *st, const char *name, double value, unsigned flags) {
  benchmark::Counter::OneK k =
      (flags & RBS_COUNTER_KIBI) ? benchmark::Counter::kIs1024 : benchmark::Counter::kIs1000;
  S(st).counters[name] = benchmark::Counter(value, counter_flags(flags), k);
}
void rbs_counter_plain(rbs_state *st, const char *name, double value) {
  rbs_counter(st, name, value, 0);
}
void rbs_counter_rate(rbs_state *st, const char *name, double total) {
  rbs_counter(st, name, total, RBS_COUNTER_RATE);
}
void rbs_set_items_processed(rbs_state *st, int64_t items) { S(st).SetItemsProcessed(items); }
void rbs_set_bytes_processed(rbs_state *st, int64_t bytes) { S(st).SetBytesProcessed(bytes); }
void rbs_set_label(rbs_state *st, const char *label) { S(st).SetLabel(label); }
void rbs_skip_with_error(rbs_state *st, const char *msg) { S(st).SkipWithError(msg); }

int rbs_main(int argc, char **argv, double default_min_time) {
  // Google Benchmark parses flags in order, so a default placed first loses to the user's.
  std::string min_time_flag, prog = "rove_bench";
  std::vector<char *> args(argv, argv + (argc > 0 ? argc : 0));
  if (args.empty()) args.push_back(&prog[0]);
  if (default_min_time > 0 && !has_flag(static_cast<int>(args.size()), args.data(),
                                        "--benchmark_min_time=")) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "--benchmark_min_time=%g", default_min_time);
    min_time_flag = buf;
    args.insert(args.begin() + 1, &min_time_flag[0]);
  }
  args.push_back(nullptr);
  int n = static_cast<int>(args.size()) - 1;
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  size_t matched = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (matched == 0) {
    std::fprintf(stderr, "%s: no benchmark matches the filter '%s'\n", args[0],
                 benchmark::GetBenchmarkFilter().c_str());
    return 1;
  }
  return 0;
}

}  // extern "C"
