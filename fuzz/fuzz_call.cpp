// SPDX-License-Identifier: Apache-2.0
// fuzz_call: hostile calls straight into dispatch. The bytes pick an op from the table and build its argument pack
// (harness/hostile_call.hpp: roles right or wrong, tensors of any dtype, rank, size and CPU device, attributes
// with huge, negative and out-of-range values, lists empty or long, devices of no known backend); validate() must
// end exactly as dispatch's generic path does, output_spec() as validate() does short of the device check, and call() must either succeed or raise a crossfire::Error (contract section 7): never
// crash, hang, trip a sanitizer or allocate without bound. An error must leave the counters and
// the autodiff tape unchanged, unless it was raised by a kernel (index_select's data-dependent range check).
#include <memory>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "crossfire/harness/generate.hpp"
#include "crossfire/harness/hostile_call.hpp"
#include "crossfire/harness/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossfire;
  using namespace crossfire::harness;
  static const std::vector<Device> cpu_devices = [] {
    std::vector<Device> d;
    for (int i = 0; i < backend(BackendKind::cpu).device_count(); ++i) d.push_back(Device::cpu(i));
    return d;
  }();
  ByteChoices c({data, size});
  const std::unique_ptr<HostileCall> h = make_hostile_call(c, cpu_devices);
  const OpId id = h->id;
  const OpDef& op = op_def(id);
  const ArgPack& pack = h->pack;

  // The specialised and generic paths must end the same way (Note [Specialised fast path] in dispatch.cpp);
  // tests/harness/fast_path_test.cpp checks the same on many more calls, including the call() half.
  std::string fast, generic;
  std::optional<Shape> accepted;  // the result's shape, when validate() accepts the call
  std::optional<ErrorKind> fast_kind;
  std::string fast_op;
  try {
    accepted = validate(id, pack).shape;
    fast = accepted->str();
  } catch (const Error& e) {
    fast = e.what();
    fast_kind = e.kind();
    fast_op = e.op();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: validate: not a crossfire::Error: %s\n", std::string(op.name).c_str(), e.what());
    std::abort();
  }
  try {
    generic = detail::validate_generic(id, pack).shape.str();
  } catch (const Error& e) {
    generic = e.what();
  }
  // Every result keeps the element bound, however its inputs were shaped (Note [The element bound]).
  if (accepted && !accepted->within_element_bound()) {
    std::fprintf(stderr, "%s: validate() accepted the result shape %s, over the element bound\n",
                 std::string(op.name).c_str(), fast.c_str());
    std::abort();
  }
  if (fast != generic) {
    std::fprintf(stderr, "%s: validate() says \"%s\", the generic path says \"%s\"\n", std::string(op.name).c_str(),
                 fast.c_str(), generic.c_str());
    std::abort();
  }

  // output_spec() (every check but the device's) must end as validate() does wherever validate() did not stop at
  // the device check or after step 5 (a device that does not exist, a missing kernel): an output rule never sees a
  // call that steps 1, 3 and 4 refuse (Note [Output rules see only checked calls]; the harness's stand-in for
  // `cat tensors=[]` once read past the empty list).
  const bool after_step5 = fast_kind == ErrorKind::backend_unavailable || fast_kind == ErrorKind::unsupported ||
                           (fast_kind == ErrorKind::invalid_argument && fast_op == "device");
  if (fast_kind != ErrorKind::device_mismatch && !after_step5 && op.family != OpFamily::creation &&
      op.family != OpFamily::transfer) {
    std::string spec;
    try {
      spec = output_spec(CallView{op, pack, cpu_devices[0]}).shape.str();
    } catch (const Error& e) {
      spec = e.what();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: output_spec: not a crossfire::Error: %s\n", std::string(op.name).c_str(), e.what());
      std::abort();
    }
    if (spec != fast) {
      std::fprintf(stderr, "%s: output_spec() says \"%s\", validate() says \"%s\"\n", std::string(op.name).c_str(),
                   spec.c_str(), fast.c_str());
      std::abort();
    }
  }

  // A valid call whose result would be large is validated only: a kernel's loop over millions of elements takes the
  // same branches as over thousands and checks nothing more, while it cost the fuzzer a tenth of its executions
  // (a profile: docs/fuzzing.md). 2^16 elements is past every block size a CPU kernel branches on.
  if (accepted && accepted->numel() > (int64_t(1) << 16)) return 0;
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
