// SPDX-License-Identifier: Apache-2.0
// main() of a data-movement shader whose source(i) gives the element of the input that output element i copies,
// and whose output has dtype DT: elements narrower than a word (bool: 4 to a word, f16 and bf16: 2) are packed,
// and each invocation writes one whole word, so no two invocations share one; an i64 element is two words (Note
// [i64 as two words]), one invocation each. A shader that defines CF_SOURCE_MAY_BE_PADDING (unfold) may return
// kPadding from source(i): that element is 0.
#ifdef CF_SOURCE_MAY_BE_PADDING
uint element(uint i) {
  uint s = source(i);
  return s == kPadding ? 0u : BITS(a_, DT, s);
}
uint word_of_i64(uint w) {
  uint s = source(w >> 1);
  return s == kPadding ? 0u : a_[2u * s + (w & 1u)];
}
#else
uint element(uint i) { return BITS(a_, DT, source(i)); }
uint word_of_i64(uint w) { return a_[2u * source(w >> 1) + (w & 1u)]; }
#endif

void main() {
  if (DT == CF_I64) {
    uint w = flat_index();
    if (w < 2u * p.n) o_[w] = word_of_i64(w);
    return;
  }
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
