// SPDX-License-Identifier: Apache-2.0
// Kernel throughput: every op of kOpTable, at three sizes, on every available backend, registered by one loop over
// the table (contract section 2: the benchmarks enumerate the table, they keep no list of ops). Arguments come from
// the generator in op_cases.cpp. Each benchmark runs the backend's kernel directly on a pre-allocated output
// (Backend::launch), so it measures the kernel, not the allocator; ops that dispatch runs itself (from_data, to)
// go through the public call(). CPU benchmarks are timed in CPU time, other backends in wall time. Reported as
// bytes_per_second (inputs read + output written) and, for matmul and
// conv2d, FLOP/s. Ops a backend does not implement yet are reported as skipped with the backend's reason.
//
//   bench_kernels [google benchmark flags] [--crossfire_check_args]
// --crossfire_check_args builds every case, validates it, runs each supported one once at the small and medium
// sizes, and exits non-zero if the generator produced arguments dispatch rejects (ctest bench.kernel_args).
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "alloc_counter.hpp"
#include "crossfire/crossfire.hpp"
#include "op_cases.hpp"

namespace crossfire::bench {
namespace {

constexpr OpId kFromData = op_id("from_data");
constexpr OpId kTo = op_id("to");

// Ops dispatch itself runs (no backend kernel): benchmarked through call().
bool runs_in_dispatch(OpId id) { return id == kFromData || id == kTo; }

void set_rates(benchmark::State& state, const OpCase& c) {
  state.SetBytesProcessed(int64_t(c.bytes_moved) * state.iterations());
  if (c.flops > 0) state.counters["FLOP/s"] = benchmark::Counter(c.flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(c.label);
}

void kernel_benchmark(benchmark::State& state, OpId id, Device device, SizeClass size, DType dtype) {
  Backend& b = backend_for(device);
  KernelFn fn = b.kernel(id);
  if (fn == nullptr && !runs_in_dispatch(id)) {
    state.SkipWithError(fmt::format("unsupported: {}", b.unsupported_reason(id)).c_str());
    return;
  }
  std::unique_ptr<OpCase> c;
  try {
    c = make_op_case(id, device, size, dtype);
  } catch (const std::exception& e) {
    state.SkipWithError(fmt::format("cannot build arguments: {}", e.what()).c_str());
    return;
  }
  const OpDef& op = op_def(id);
  AllocationScope allocs;
  if (fn != nullptr) {
    const OutputSpec spec = validate(id, c->args);
    Tensor out(b.allocate(spec.device, spec.dtype, spec.shape, op.name));
    const KernelCall call{op, id, c->args, *out.impl()};
    allocs = AllocationScope();
    for (auto _ : state) {
      b.launch(fn, call);
      b.synchronize();
      benchmark::ClobberMemory();
    }
  } else {
    for (auto _ : state) {
      Tensor out = crossfire::call(id, c->args);
      b.synchronize();
      benchmark::DoNotOptimize(out.impl());
    }
  }
  allocs.report(state);
  set_rates(state, *c);
}

// The same GEMM as the CPU matmul kernel at the same size, straight through Eigen (row-major, like crossfire's
// tensors), single-threaded like the backend. The CPU matmul's target is >= 90% of this.
void eigen_gemm(benchmark::State& state, SizeClass size) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Index m = Eigen::Index(matmul_dim(size));
  Matrix a = Matrix::Random(m, m), b = Matrix::Random(m, m), c(m, m);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 3.0 * double(m * m) * sizeof(float);
  state.SetBytesProcessed(int64_t(bytes) * state.iterations());
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * double(m) * double(m) * double(m), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fmt::format("[{0}, {0}] x [{0}, {0}] f32", m));
}

std::vector<Device> bench_devices() {
  std::vector<Device> out;
  for (BackendKind k : backend_kinds())
    if (backend(k).available()) out.push_back(Device{k, 0});
  return out;
}

// The dtypes benchmarked beside f32 (at the large size), where an op takes them and a backend computes them.
constexpr std::array kOtherDTypes = {DType::f16, DType::bf16, DType::i64};

void register_kernel(OpId id, Device d, SizeClass s, DType dt) {
  // f32 is the unsuffixed name; another dtype is appended ("kernel/add/cpu/large/f16").
  std::string name = fmt::format("kernel/{}/{}/{}", op_def(id).name, backend_name(d.backend), size_name(s));
  if (dt != DType::f32) name += fmt::format("/{}", dtype_name(dt));
  auto* bm = benchmark::RegisterBenchmark(name.c_str(), kernel_benchmark, id, d, s, dt);
  bm->Unit(benchmark::kMicrosecond);
  // An asynchronous backend's kernels run while the host thread waits: wall time is the measure there. CPU
  // kernels run on the calling thread, and CPU time (the default) is the robust measure on a shared machine.
  if (d.backend != BackendKind::cpu) bm->UseRealTime();
}

void register_all() {
  const std::vector<Device> devices = bench_devices();
  for (OpId id = 0; id < kNumOps; ++id) {
    for (Device d : devices) {
      for (SizeClass s : kAllSizes) register_kernel(id, d, s, DType::f32);
      // Half precision and i64, at the large size only (add at 4 Mi elements, matmul at 512), on each backend
      // that computes the dtype.
      for (DType dt : kOtherDTypes)
        if (takes_dtype(id, dt) && backend_for(d).dtypes().contains(dt)) register_kernel(id, d, SizeClass::large, dt);
    }
  }
  for (SizeClass s : kAllSizes) {
    const std::string name = fmt::format("reference/eigen_gemm/cpu/{}", size_name(s));
    benchmark::RegisterBenchmark(name.c_str(), eigen_gemm, s)->Unit(benchmark::kMicrosecond);
  }
}

int check_args() {
  int failures = 0, unsupported = 0, ran = 0;
  // Every size in f32; f16, bf16 and i64 at the small size (run) and the large one (registered; built and
  // validated).
  std::vector<std::pair<SizeClass, DType>> cases;
  for (SizeClass s : kAllSizes) cases.push_back({s, DType::f32});
  for (DType dt : kOtherDTypes)
    for (SizeClass s : {SizeClass::small, SizeClass::large}) cases.push_back({s, dt});
  for (Device d : bench_devices()) {
    Backend& b = backend_for(d);
    for (OpId id = 0; id < kNumOps; ++id) {
      for (const auto& [s, dt] : cases) {
        if (dt != DType::f32 && (!takes_dtype(id, dt) || !b.dtypes().contains(dt))) continue;
        const std::string where =
            fmt::format("{} on {} ({}, {})", op_def(id).name, d.str(), size_name(s), dtype_name(dt));
        try {
          std::unique_ptr<OpCase> c = make_op_case(id, d, s, dt);  // validates
          if (b.kernel(id) == nullptr && !runs_in_dispatch(id)) {
            ++unsupported;
            continue;
          }
          if (s != SizeClass::large) {
            crossfire::call(id, c->args);
            b.synchronize();
            ++ran;
          }
        } catch (const Unsupported&) {
          ++unsupported;
        } catch (const std::exception& e) {
          fmt::print(stderr, "FAIL {}: {}\n", where, e.what());
          ++failures;
        }
      }
    }
  }
  fmt::print("bench_kernels: {} ops x {} backends x 3 sizes (f32; f16, bf16 and i64 at two): {} failures, {} unsupported "
             "(skipped), {} ran\n",
             kNumOps, bench_devices().size(), failures, unsupported, ran);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace crossfire::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--crossfire_check_args") == 0) return crossfire::bench::check_args();
    fmt::print(stderr, "bench_kernels: unknown argument {}\n", argv[i]);
    return 2;
  }
  crossfire::bench::add_device_context();
  crossfire::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
