// SPDX-License-Identifier: Apache-2.0
// f32 transcendentals accurate to a few ulp (contract section 6's bound for exp/log/tanh/sigmoid is 4 eps):
// GLSL's built-ins are allowed 3 + 2|x| ulp for exp, and lavapipe's (gallivm polynomials, exp via exp2 of a rounded
// product) miss the bound for large |x|. Each function reduces the range exactly, then evaluates a short series.
// With CF_F64, double-precision versions for pow, randn and arange (only on devices with shaderFloat64).

#define CF_INF uintBitsToFloat(0x7f800000u)
#define CF_NAN uintBitsToFloat(0x7fc00000u)
const float LN2_HI = 0.693145751953125;       // few mantissa bits: k * LN2_HI is exact
const float LN2_LO = 1.4286068202862268e-06;  // ln 2 - LN2_HI

float pow2i(int k) { return uintBitsToFloat(uint(k + 127) << 23); }  // 2^k, k in [-126, 127]

// a / b, corrected by one residual step where a driver's division is not correctly rounded.
float cf_div(float a, float b) {
  float q = a / b;
  float aq = abs(q);
  if (aq > 1e-30 && aq < 1e30 && abs(b) > 1e-30 && abs(b) < 1e30) {
    precise float r = fma(-q, b, a);
    q = q + r / b;
  }
  return q;
}

float cf_exp(float x) {
  uint bx = floatBitsToUint(x);
  if (is_nan(bx)) return x;
  if (x > 88.72284) return CF_INF;
  if (x < -103.98) return 0.0;
  float k = roundEven(x * 1.44269504);
  // No fma here: a driver may lower fma to mul + add and then reassociate; `precise` products and differences are
  // kept as written (k * LN2_HI and x - k * LN2_HI are exact).
  precise float kh = k * LN2_HI;
  precise float kl = k * LN2_LO;
  precise float r = (x - kh) - kl;
  precise float p = 1.984126984126984e-04 * r + 1.388888888888889e-03;
  p = p * r + 8.333333333333333e-03;
  p = p * r + 4.1666666666666664e-02;
  p = p * r + 0.16666666666666666;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int ki = int(k);
  int k1 = ki / 2;
  return p * pow2i(k1) * pow2i(ki - k1);
}

// log(1 + f) + e * ln 2 for f in [sqrt(1/2) - 1, sqrt(2) - 1] (fdlibm's decomposition; series of 2 atanh(s)).
float log_kernel(float f, float e) {
  precise float s = f / (2.0 + f);
  precise float z = s * s;
  precise float R = z * (0.6666666666666666 + z * (0.4 + z * (0.2857142857142857 + z * (0.2222222222222222 +
                                                                                           z * 0.18181818181818182))));
  precise float hfsq = 0.5 * f * f;
  precise float res = e * LN2_HI - ((hfsq - (s * (hfsq + R) + e * LN2_LO)) - f);
  return res;
}

float cf_log(float x) {
  uint bx = floatBitsToUint(x);
  if (is_nan(bx)) return x;
  if ((bx & 0x7fffffffu) == 0u) return -CF_INF;
  if ((bx >> 31) != 0u) return CF_NAN;
  if (bx == 0x7f800000u) return CF_INF;
  int e;
  uint mant;
  if (bx < 0x00800000u) {  // denormal: x = bx * 2^-149, and float(bx) is exact
    uint bm = floatBitsToUint(float(bx));
    e = int(bm >> 23) - 127 - 149;
    mant = bm & 0x7fffffu;
  } else {
    e = int(bx >> 23) - 127;
    mant = bx & 0x7fffffu;
  }
  float m = uintBitsToFloat(mant | 0x3f800000u);
  if (m > 1.4142135) {
    m *= 0.5;
    e += 1;
  }
  return log_kernel(m - 1.0, float(e));
}

// log(1 - v) for v = 1 - u exactly representable, u in (0, 1) (randn's u1 near 1).
float cf_log1m(float v) {
  if (v <= 0.29289321) return log_kernel(-v, 0.0);
  if (v <= 0.5) return log_kernel(1.0 - 2.0 * v, -1.0);  // 1 - v = (2 - 2v) / 2, and 1 - 2v is exact
  return cf_log(1.0 - v);
}

float cf_sqrt_normal(float x) {
  float y = sqrt(x);
  precise float r = fma(-y, y, x);
  return y + r * (0.5 / y);
}

float cf_sqrt(float x) {
  uint bx = floatBitsToUint(x);
  if (is_nan(bx) || (bx & 0x7fffffffu) == 0u || bx == 0x7f800000u) return x;
  if ((bx >> 31) != 0u) return CF_NAN;
  if (bx < 0x00800000u) return cf_sqrt_normal(float(bx) * 2.0) * pow2i(-75);  // sqrt(2 bx * 2^-150)
  return cf_sqrt_normal(x);
}

float cf_tanh(float x) {
  uint bx = floatBitsToUint(x);
  if (is_nan(bx)) return x;
  float ax = uintBitsToFloat(bx & 0x7fffffffu);
  float r;
  if (ax < 1.220703125e-4) {
    return x;
  } else if (ax < 0.55) {
    // Taylor series of tanh (Bernoulli numbers) in z = x^2, to x^19.
    precise float z = ax * ax;
    precise float p = -2.3912911424355248e-04 * z + 5.90027440945586e-04;
    p = p * z - 1.4558343870513183e-03;
    p = p * z + 3.592128036572481e-03;
    p = p * z - 8.863235529902197e-03;
    p = p * z + 2.1869488536155203e-02;
    p = p * z - 5.396825396825397e-02;
    p = p * z + 0.13333333333333333;
    p = p * z - 0.3333333333333333;
    precise float t = ax + ax * (z * p);
    r = t;
  } else if (ax < 9.0) {
    float e = cf_exp(2.0 * ax);
    r = cf_div(e - 1.0, e + 1.0);
  } else {
    r = 1.0;
  }
  return (bx >> 31) != 0u ? -r : r;
}

float cf_sigmoid(float x) {
  uint bx = floatBitsToUint(x);
  if (is_nan(bx)) return x;
  return cf_div(1.0, 1.0 + cf_exp(-x));
}

// sin and cos of 2 pi u for u in [0, 1), reduced exactly by quarter turns.
vec2 cf_sincos_2pi(float u) {
  float q = roundEven(4.0 * u);
  float f = 4.0 * u - q;  // exact, in [-0.5, 0.5]
  precise float a = f * 1.5707963267948966;
  precise float z = a * a;
  precise float s = a + a * z * (-0.16666666666666666 + z * (8.333333333333333e-03 + z * (-1.984126984126984e-04 +
                                                                                         z * 2.755731922398589e-06)));
  precise float c = 1.0 + z * (-0.5 + z * (4.1666666666666664e-02 + z * (-1.388888888888889e-03 +
                                                                        z * (2.48015873015873e-05 - z * 2.755731922398589e-07))));
  int qi = int(q) & 3;
  if (qi == 0) return vec2(s, c);
  if (qi == 1) return vec2(c, -s);
  if (qi == 2) return vec2(-s, -c);
  return vec2(-c, s);
}

// pow with C's special cases (pow(x, 0) = 1, pow(1, y) = 1, negative x with integer y).
bool pow_special(float x, float y, out float r, out float sign) {
  uint bx = floatBitsToUint(x), by = floatBitsToUint(y);
  sign = 1.0;
  r = 0.0;
  if ((by & 0x7fffffffu) == 0u || bx == 0x3f800000u) {
    r = 1.0;
    return true;
  }
  if (is_nan(bx) || is_nan(by)) {
    r = CF_NAN;
    return true;
  }
  if ((bx >> 31) != 0u && (bx & 0x7fffffffu) != 0u) {
    float ay = abs(y);
    if (ay == CF_INF) {
      if (abs(x) == 1.0) r = 1.0;
      else r = (abs(x) > 1.0) == (y > 0.0) ? CF_INF : 0.0;
      return true;
    }
    if (floor(ay) != ay) {
      r = CF_NAN;
      return true;
    }
    if (ay < 16777216.0 && (int(ay) & 1) == 1) sign = -1.0;
  }
  return false;
}

float cf_pow_f32(float x, float y) {
  float r, sign;
  if (pow_special(x, y, r, sign)) return r;
  float t = y * cf_log(abs(x));
  return sign * cf_exp(t);
}

#ifdef CF_F64
double pow2d(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }

// A float widened exactly (denormals too, which a flushing driver would turn into 0).
double widen(float x) {
  uint bx = floatBitsToUint(x);
  if ((bx & 0x7f800000u) == 0u && (bx & 0x7fffffu) != 0u) {
    double m = double(bx & 0x7fffffu) * pow2d(-149);
    return (bx >> 31) != 0u ? -m : m;
  }
  return double(x);
}

double exp_d(double x) {  // for x in [-745, 709]
  double k = roundEven(x * 1.4426950408889634LF);
  precise double r = x - k * 6.93147180369123816490e-01LF;
  r = r - k * 1.90821492927058770002e-10LF;
  precise double p = 1.6059043836821613e-10LF * r + 2.08767569878681e-09LF;
  p = p * r + 2.505210838544172e-08LF;
  p = p * r + 2.755731922398589e-07LF;
  p = p * r + 2.7557319223985893e-06LF;
  p = p * r + 2.48015873015873e-05LF;
  p = p * r + 1.984126984126984e-04LF;
  p = p * r + 1.388888888888889e-03LF;
  p = p * r + 8.333333333333333e-03LF;
  p = p * r + 4.1666666666666664e-02LF;
  p = p * r + 0.16666666666666666LF;
  p = p * r + 0.5LF;
  p = p * r + 1.0LF;
  p = p * r + 1.0LF;
  int ki = int(k);
  int k1 = ki / 2;
  return p * pow2d(k1) * pow2d(ki - k1);
}

double log_d(double x) {  // x > 0, finite, normal
  uvec2 w = unpackDouble2x32(x);
  int e = int((w.y >> 20) & 0x7ffu) - 1023;
  double m = packDouble2x32(uvec2(w.x, (w.y & 0xfffffu) | 0x3ff00000u));
  if (m > 1.4142135623730951LF) {
    m *= 0.5LF;
    e += 1;
  }
  precise double f = m - 1.0LF;
  precise double s = f / (2.0LF + f);
  precise double z = s * s;
  precise double p = z * (1.0LF / 19.0LF) + 1.0LF / 17.0LF;
  p = p * z + 1.0LF / 15.0LF;
  p = p * z + 1.0LF / 13.0LF;
  p = p * z + 1.0LF / 11.0LF;
  p = p * z + 1.0LF / 9.0LF;
  p = p * z + 1.0LF / 7.0LF;
  p = p * z + 1.0LF / 5.0LF;
  p = p * z + 1.0LF / 3.0LF;
  precise double res = double(e) * 6.93147180369123816490e-01LF + (double(e) * 1.90821492927058770002e-10LF +
                                                                     2.0LF * s + 2.0LF * s * z * p);
  return res;
}

float cf_pow_f64(float x, float y) {
  float r, sign;
  if (pow_special(x, y, r, sign)) return r;
  uint bx = floatBitsToUint(x) & 0x7fffffffu;
  if (bx == 0u) return sign * ((y > 0.0) ? 0.0 : CF_INF);
  if (bx == 0x7f800000u) return sign * ((y > 0.0) ? CF_INF : 0.0);
  double t = widen(y) * log_d(widen(uintBitsToFloat(bx)));
  if (t > 89.0LF) return sign * CF_INF;
  if (t < -104.0LF) return sign * 0.0;
  return sign * float(exp_d(t));
}

dvec2 sincos_2pi_d(double u) {
  double q = roundEven(4.0LF * u);
  double f = 4.0LF * u - q;
  precise double a = f * 1.5707963267948966LF;
  precise double z = a * a;
  precise double s = -7.647163731819816e-13LF * z + 1.6059043836821613e-10LF;  // -1/15!, 1/13!
  s = s * z - 2.505210838544172e-08LF;
  s = s * z + 2.755731922398589e-06LF;
  s = s * z - 1.984126984126984e-04LF;
  s = s * z + 8.333333333333333e-03LF;
  s = s * z - 0.16666666666666666LF;
  s = a + a * z * s;
  precise double c = 4.779477332387385e-14LF * z - 1.1470745597729725e-11LF;  // 1/16!, -1/14!
  c = c * z + 2.08767569878681e-09LF;
  c = c * z - 2.755731922398589e-07LF;
  c = c * z + 2.48015873015873e-05LF;
  c = c * z - 1.388888888888889e-03LF;
  c = c * z + 4.1666666666666664e-02LF;
  c = c * z - 0.5LF;
  c = 1.0LF + z * c;
  int qi = int(q) & 3;
  if (qi == 0) return dvec2(s, c);
  if (qi == 1) return dvec2(c, -s);
  if (qi == 2) return dvec2(-s, -c);
  return dvec2(-c, s);
}
#endif
