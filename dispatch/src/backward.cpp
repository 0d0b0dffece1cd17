// Backward rules (contract section 5), written with forward ops only. (Being filled in: see issue 2.)
#include <stdexcept>

#include "crossfire/error.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/ops.hpp"

namespace crossfire::backward_rules {
#define PENDING(name) \
  void name(const BackwardCall&) { throw Unsupported(#name, BackendKind::cpu, "backward rule not written yet"); }
PENDING(neg) PENDING(abs) PENDING(exp) PENDING(log) PENDING(sqrt) PENDING(tanh) PENDING(sigmoid) PENDING(relu)
PENDING(add) PENDING(sub) PENDING(mul) PENDING(div) PENDING(pow) PENDING(maximum) PENDING(minimum) PENDING(where)
PENDING(sum) PENDING(mean) PENDING(max) PENDING(matmul) PENDING(reshape) PENDING(permute) PENDING(slice)
PENDING(expand) PENDING(cat) PENDING(index_select) PENDING(softmax) PENDING(conv2d) PENDING(unfold) PENDING(fold)
PENDING(to)
}  // namespace crossfire::backward_rules
