// SPDX-License-Identifier: Apache-2.0
// main() of a data-movement shader whose element(i) gives the stored bits of output element i (BITS in
// common.glsl) and whose output has dtype DT: elements narrower than a word (bool: 4 to a word, f16 and bf16: 2)
// are packed, and each invocation writes one whole word, so no two invocations share one.
void main() {
  const uint k = per_word(DT);
  if (k == 1u) {
    uint i = flat_index();
    if (i < p.n) o_[i] = element(i);
    return;
  }
  uint w = flat_index();
  if (w < (p.n + k - 1u) / k) {
    uint v = 0u;
    for (uint e = 0u; e < k; ++e) {
      uint i = w * k + e;
      if (i < p.n) v |= element(i) << ((32u / k) * e);
    }
    o_[w] = v;
  }
}
