// Placeholder until the reference evaluator lands (issue 2): only RefTensor::from works.
#include "reference/reference.hpp"

#include <cstring>

namespace crossfire::reference {

RefTensor RefTensor::from(const Tensor& t) {
  RefTensor r{t.dtype(), t.shape(), {}};
  std::vector<uint8_t> bytes = t.to_host_bytes();
  r.values.resize(size_t(t.numel()));
  for (size_t i = 0; i < r.values.size(); ++i) {
    if (t.dtype() == DType::f32) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      r.values[i] = v;
    } else if (t.dtype() == DType::i32) {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      r.values[i] = v;
    } else {
      r.values[i] = bytes[i];
    }
  }
  return r;
}

RefResult evaluate(const RefCall&) { throw InvalidArgument("reference", "", "not written yet"); }

}  // namespace crossfire::reference
