#ifndef RBMREC_CORE_RNG_H_
#define RBMREC_CORE_RNG_H_

#include <cmath>
#include <cstdint>

namespace rbmrec {

// SplitMix64 finaliser: a bijective 64-bit mix, used to derive independent
// streams from (seed, epoch, user) so that results never depend on which
// thread handles which user.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t StreamSeed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return Mix64(Mix64(Mix64(seed) ^ a) ^ (b * 0xd6e8feb86659fd93ULL));
}

// xoshiro256+ generator (Blackman & Vigna). Small, fast, and fully
// determined by its seed. Not thread-safe: one per thread or per task.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) {
      seed = Mix64(seed);
      s = seed;
    }
  }
  uint64_t Next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }
  // Uniform in [0, 1) with 24 bits of precision.
  float Uniform() {
    return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f);
  }
  // Uniform double in [0, 1) with 53 bits of precision.
  double UniformDouble() {
    return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
  }
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Standard normal (Box-Muller, both outputs used; deterministic).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = UniformDouble();
    const double u2 = UniformDouble();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(6.283185307179586 * u2);
    has_spare_ = true;
    return r * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_RNG_H_
