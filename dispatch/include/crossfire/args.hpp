// SPDX-License-Identifier: Apache-2.0
// Arguments of one op call, as dispatch sees them: a fixed-size pack of non-owning views, built on the caller's
// stack, so that a call costs no heap allocation (see Note [Validation fast path] in dispatch.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <span>
#include <vector>

#include "crossfire/device.hpp"
#include "crossfire/tensor.hpp"

namespace crossfire {

// The role of a parameter in an op's signature (contract section 2).
enum class ParamRole : uint8_t {
  tensor,             // a Tensor; always present
  optional_tensor,    // may be absent (conv2d's bias)
  tensor_list,        // zero or more tensors (cat's inputs)
  int_attr,           // an integer (an axis, a seed)
  optional_int_attr,  // an integer that may be absent (sum's axis: absent means all elements)
  float_attr,         // a scalar (full's value)
  bool_attr,          // a flag (keepdim)
  int_list_attr,      // a list of integers (a shape, a permutation, strides)
  dtype_attr,         // a dtype (cast's target)
  device_attr,        // a device (creation ops' target, to's destination)
  bytes_attr,         // raw bytes (from_data's values)
};
inline constexpr int kNumParamRoles = int(ParamRole::bytes_attr) + 1;
std::string_view param_role_name(ParamRole r);
constexpr bool is_tensor_role(ParamRole r) {
  return r == ParamRole::tensor || r == ParamRole::optional_tensor || r == ParamRole::tensor_list;
}

inline constexpr int kMaxParams = 8;

// A list of integers passed to an op (a shape, axes, strides): a view that also binds to a braced list, so that
// `zeros({2, 3}, ...)` reads naturally. The braced list lives until the end of the full expression, which is
// longer than the call.
class IntList {
 public:
  IntList() = default;
  IntList(std::initializer_list<int64_t> v) : s_(v.begin(), v.size()) {}
  IntList(std::span<const int64_t> s) : s_(s) {}
  IntList(const std::vector<int64_t>& v) : s_(v) {}
  template <size_t N>
  IntList(const std::array<int64_t, N>& a) : s_(a) {}
  operator std::span<const int64_t>() const { return s_; }
  std::span<const int64_t> span() const { return s_; }
  size_t size() const { return s_.size(); }

 private:
  std::span<const int64_t> s_;
};

// One argument. Views only: whatever it points at must outlive the call.
struct Arg {
  ParamRole role;
  bool present;  // false only for an absent optional_tensor / optional_int_attr
  union {
    const Tensor* tensor;
    std::span<const Tensor> list;
    int64_t i;
    double f;
    bool b;
    std::span<const int64_t> ints;
    DType dtype;
    Device device;
    std::span<const uint8_t> bytes;
  };

  Arg() : role(ParamRole::int_attr), present(true), i(0) {}

  static Arg of(const Tensor& t) {
    Arg a(ParamRole::tensor);
    a.tensor = &t;
    return a;
  }
  static Arg optional(const Tensor* t) {  // nullptr or an undefined Tensor means absent
    Arg a(ParamRole::optional_tensor);
    a.present = t != nullptr && t->defined();
    a.tensor = a.present ? t : nullptr;
    return a;
  }
  static Arg of(std::span<const Tensor> ts) {
    Arg a(ParamRole::tensor_list);
    a.list = ts;
    return a;
  }
  static Arg integer(int64_t v) {
    Arg a(ParamRole::int_attr);
    a.i = v;
    return a;
  }
  static Arg optional_integer(bool present, int64_t v) {
    Arg a(ParamRole::optional_int_attr);
    a.present = present;
    a.i = present ? v : 0;
    return a;
  }
  static Arg scalar(double v) {
    Arg a(ParamRole::float_attr);
    a.f = v;
    return a;
  }
  static Arg flag(bool v) {
    Arg a(ParamRole::bool_attr);
    a.b = v;
    return a;
  }
  static Arg of(IntList v) {
    Arg a(ParamRole::int_list_attr);
    a.ints = v.span();
    return a;
  }
  static Arg of(DType d) {
    Arg a(ParamRole::dtype_attr);
    a.dtype = d;
    return a;
  }
  static Arg of(Device d) {
    Arg a(ParamRole::device_attr);
    a.device = d;
    return a;
  }
  static Arg of(std::span<const uint8_t> bytes) {
    Arg a(ParamRole::bytes_attr);
    a.bytes = bytes;
    return a;
  }

 private:
  explicit Arg(ParamRole r) : role(r), present(true), i(0) {}
};

// The arguments of one call, in signature order.
//
// The storage is a union so that making a pack does not construct kMaxParams arguments only to overwrite the
// first few: on the dispatch hot path that was a tenth of the instructions of a 1-element add. Only [0, count)
// is ever constructed, written or read; Arg is trivially copyable and destructible, so copies move the bytes.
struct ArgPack {
  union {
    std::array<Arg, kMaxParams> args;  // only [0, count) are meaningful
  };
  int count = 0;

  ArgPack() {}
  template <class... A>
    requires(sizeof...(A) > 0 && (std::is_convertible_v<A, const Arg&> && ...))
  explicit ArgPack(A&&... a) {
    static_assert(sizeof...(A) <= kMaxParams);
    (push(a), ...);
  }
  ArgPack(const ArgPack& o) : count(o.count) { copy_from(o); }
  ArgPack& operator=(const ArgPack& o) {
    count = o.count;
    copy_from(o);
    return *this;
  }
  ~ArgPack() {}

  void push(const Arg& a) { new (&args[size_t(count++)]) Arg(a); }
  const Arg& operator[](int i) const { return args[size_t(i)]; }

  // Appends an argument built in place, one method per Arg factory: `ArgPack().of(lhs).of(rhs)`. This is how the
  // typed API (ops.hpp) builds its packs; see Note [Arguments are built in place].
  ArgPack& of(const Tensor& t) { new (slot()) Arg(Arg::of(t)); return *this; }
  ArgPack& optional(const Tensor* t) { new (slot()) Arg(Arg::optional(t)); return *this; }
  ArgPack& of(std::span<const Tensor> ts) { new (slot()) Arg(Arg::of(ts)); return *this; }
  ArgPack& integer(int64_t v) { new (slot()) Arg(Arg::integer(v)); return *this; }
  ArgPack& optional_integer(bool present, int64_t v) { new (slot()) Arg(Arg::optional_integer(present, v)); return *this; }
  ArgPack& scalar(double v) { new (slot()) Arg(Arg::scalar(v)); return *this; }
  ArgPack& flag(bool v) { new (slot()) Arg(Arg::flag(v)); return *this; }
  ArgPack& of(IntList v) { new (slot()) Arg(Arg::of(v)); return *this; }
  ArgPack& of(DType d) { new (slot()) Arg(Arg::of(d)); return *this; }
  ArgPack& of(Device d) { new (slot()) Arg(Arg::of(d)); return *this; }
  ArgPack& of(std::span<const uint8_t> bytes) { new (slot()) Arg(Arg::of(bytes)); return *this; }

 private:
  // Note [Arguments are built in place]
  // `new (slot) Arg(prvalue)` constructs the factory's result directly in the slot (guaranteed copy elision), so
  // every field of an argument is written once, where dispatch will read it. Building Args first and copying them
  // in (as a std::array or a braced list would) made the compiler write each Arg with 8-byte stores and read it
  // back with one 16-byte load: a failed store-to-load forward per argument, which cost a 3-argument call more
  // than all of its validation (measured with bench_dispatch; docs/benchmarks.md).
  void* slot() { return &args[size_t(count++)]; }
  void copy_from(const ArgPack& o) {
    for (int i = 0; i < count; ++i) new (&args[size_t(i)]) Arg(o.args[size_t(i)]);
  }
};
static_assert(std::is_trivially_copyable_v<Arg> && std::is_trivially_destructible_v<Arg>);

}  // namespace crossfire
