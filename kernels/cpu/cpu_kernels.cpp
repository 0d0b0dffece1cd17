// SPDX-License-Identifier: Apache-2.0
// The CPU backend's kernel table: one registration function per family (kernel_support.hpp lists them). Every op of
// kOpTable has a CPU kernel except from_data and to, which dispatch runs itself; the kernel tests check that.
#include "kernel_support.hpp"

namespace crossfire::cpu {

void register_kernels(CpuBackend& b) {
  register_creation_kernels(b);    // creation.cpp: zeros, ones, full, arange, rand, randn
  register_elementwise_kernels(b);  // elementwise.cpp: unary, binary, compare, logic, where, cast
  register_reduce_kernels(b);      // reduce.cpp: sum, mean, max, argmax, softmax
  register_linalg_kernels(b);      // linalg.cpp: matmul, unfold, fold, conv2d
  register_layout_kernels(b);      // layout.cpp: reshape, permute, slice, expand, cat, index_select
}

}  // namespace crossfire::cpu
