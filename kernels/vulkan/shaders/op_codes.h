// SPDX-License-Identifier: Apache-2.0
// Op codes and dtype codes shared by the shaders (GLSL) and the kernels (C++): this file is valid in both
// languages, so the two sides cannot drift apart. Dtype codes equal crossfire::DType's values.
const int CF_F32 = 0;
const int CF_I32 = 1;
const int CF_BOOL = 2;
const int CF_F16 = 3;
const int CF_BF16 = 4;
const int CF_I64 = 5;

// elementwise.comp (CF_OP: each code is a module of its own, elementwise_<code>; kernels/vulkan/CMakeLists.txt)
const int CF_NEG = 1;
const int CF_ABS = 2;
const int CF_EXP = 3;
const int CF_LOG = 4;
const int CF_SQRT = 5;
const int CF_TANH = 6;
const int CF_SIGMOID = 7;
const int CF_RELU = 8;
const int CF_NOT = 9;
const int CF_CAST = 10;
const int CF_CLAMP = 11;
const int CF_ADD = 20;
const int CF_SUB = 21;
const int CF_MUL = 22;
const int CF_DIV = 23;
const int CF_POW = 24;
const int CF_MAXIMUM = 25;
const int CF_MINIMUM = 26;
const int CF_EQ = 27;
const int CF_NE = 28;
const int CF_LT = 29;
const int CF_LE = 30;
const int CF_GT = 31;
const int CF_GE = 32;
const int CF_AND = 33;
const int CF_OR = 34;
const int CF_WHERE = 40;

// reduce.comp
const int CF_SUM = 1;
const int CF_MEAN = 2;
const int CF_MAX = 3;
const int CF_ARGMAX = 4;
