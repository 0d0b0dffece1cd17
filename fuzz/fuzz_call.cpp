// fuzz_call: hostile calls straight into dispatch. The bytes pick an op from the table and build its argument pack
// (roles right or wrong, tensors of any dtype, rank, size and CPU device, attributes with huge, negative and
// out-of-range values, lists empty or long); call() must either succeed or raise a crossfire::Error (contract
// section 7): never crash, hang, trip a sanitizer or allocate without bound. An error must leave the counters and
// the autodiff tape unchanged, unless it was raised by a kernel (index_select's data-dependent range check).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossfire;
  using namespace crossfire::harness;
  ByteChoices c({data, size});
  const OpId id = OpId(c.range(0, kNumOps - 1));
  const OpDef& op = op_def(id);
  static const int cpu_devices = backend(BackendKind::cpu).device_count();
  auto device = [&] { return Device::cpu(int(c.range(0, cpu_devices))); };  // one past the end: no such device
  auto hostile_int = [&]() -> int64_t {
    switch (c.range(0, 5)) {
      case 0: return c.range(-3, 6);
      case 1: return int64_t(1) << c.range(20, 62);
      case 2: return -(int64_t(1) << c.range(0, 62));
      case 3: return INT64_MIN;
      case 4: return INT64_MAX;
      default: return c.range(0, 4);
    }
  };
  std::vector<Tensor> owned;
  owned.reserve(64);
  auto tensor = [&]() -> const Tensor& {
    DType dt = kAllDTypes[size_t(c.range(0, 2))];
    Shape s;
    int rank = int(c.range(0, 5));
    for (int i = 0; i < rank; ++i) s.push_back(c.range(0, 4));
    std::vector<uint8_t> bytes(size_t(s.numel()) * dtype_size(dt));
    for (auto& b : bytes) b = uint8_t(c.range(0, dt == DType::boolean ? 1 : 255));
    owned.push_back(from_bytes(bytes, s.dims(), dt, Device::cpu(int(c.range(0, cpu_devices - 1)))));
    if (dt == DType::f32 && c.coin(1, 4)) owned.back().set_requires_grad(true);
    return owned.back();
  };
  std::vector<std::vector<int64_t>> int_lists(kMaxParams);
  std::vector<std::vector<Tensor>> lists(kMaxParams);
  std::vector<std::vector<uint8_t>> bytes(kMaxParams);
  ArgPack pack;
  int count = c.coin(1, 16) ? int(c.range(0, kMaxParams)) : op.num_params;
  for (int i = 0; i < count; ++i) {
    ParamRole role = i < op.num_params && !c.coin(1, 16) ? op.params[size_t(i)].role : ParamRole(c.range(0, 10));
    switch (role) {
      case ParamRole::tensor: pack.push(Arg::of(tensor())); break;
      case ParamRole::optional_tensor: pack.push(c.coin(1, 2) ? Arg::optional(nullptr) : Arg::optional(&tensor())); break;
      case ParamRole::tensor_list: {
        int n = int(c.range(0, 5));
        for (int j = 0; j < n; ++j) lists[size_t(i)].push_back(tensor());
        pack.push(Arg::of(std::span<const Tensor>(lists[size_t(i)])));
        break;
      }
      case ParamRole::int_attr: pack.push(Arg::integer(hostile_int())); break;
      case ParamRole::optional_int_attr: pack.push(Arg::optional_integer(c.coin(1, 2), hostile_int())); break;
      case ParamRole::float_attr: {
        static constexpr double kVals[] = {0.0, 1.0, -1.0, 0.5, 1e300, -1e300, 1e-300, INFINITY, NAN, 3.0};
        pack.push(Arg::scalar(kVals[size_t(c.range(0, 9))]));
        break;
      }
      case ParamRole::bool_attr: pack.push(Arg::flag(c.coin(1, 2))); break;
      case ParamRole::int_list_attr: {
        int n = int(c.range(0, 8));
        for (int j = 0; j < n; ++j) int_lists[size_t(i)].push_back(hostile_int());
        pack.push(Arg::of(IntList(int_lists[size_t(i)])));
        break;
      }
      case ParamRole::dtype_attr: pack.push(Arg::of(kAllDTypes[size_t(c.range(0, 2))])); break;
      case ParamRole::device_attr: pack.push(Arg::of(device())); break;
      case ParamRole::bytes_attr: {
        bytes[size_t(i)].resize(size_t(c.range(0, 64)));
        for (auto& b : bytes[size_t(i)]) b = uint8_t(c.range(0, 2));
        pack.push(Arg::of(std::span<const uint8_t>(bytes[size_t(i)])));
        break;
      }
    }
  }
  // Validation alone first: a valid call whose result would be huge (up to kMaxElements) is not run, so the
  // replay stays quick and small; validation itself must still end in success or a typed error.
  try {
    if (validate(id, pack).shape.numel() > (int64_t(1) << 22)) return 0;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: validate: not a crossfire::Error: %s\n", std::string(op.name).c_str(), e.what());
    std::abort();
  }
  WorldCounters before = world_counters();
  try {
    Tensor out = call(id, pack);
  } catch (const Error& e) {
    // Errors raised by a kernel (after allocation) may leave counters changed; validation errors may not.
    const bool from_kernel = e.kind() == ErrorKind::invalid_argument && op.family == OpFamily::index_select;
    if (!from_kernel && e.kind() != ErrorKind::out_of_memory && !(world_counters() == before)) {
      std::fprintf(stderr, "%s: %s left counters changed\n", std::string(op.name).c_str(), e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: not a crossfire::Error: %s\n", std::string(op.name).c_str(), e.what());
    std::abort();
  }
  return 0;
}
