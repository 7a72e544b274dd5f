// The page's kernel checks, one executable (kvscope_linear_check, built by
// make web, run under node by tests/web/web_test.mjs): the products
// (linear_check.cpp, which holds main), the attention and the sampler's
// softmax (attend_check.cpp).
#pragma once

#include <algorithm>
#include <cstdio>
#include <random>

namespace kvscope::web_checks {

struct Tally {
  int cases = 0, failed = 0;
  double worst = 0;  // the largest error seen (relative, or absolute for attention weights and probabilities <= 1)
  void add(bool ok, double error) {
    ++cases;
    failed += ok ? 0 : 1;
    worst = std::max(worst, error);
  }
};

Tally attend_check(std::mt19937& rng);
Tally softmax_check(std::mt19937& rng);

}  // namespace kvscope::web_checks
