// Cache layouts against the independent float64 reference (tools/numpy_ref.py):
// q8_0 / q4_0 blocks byte for byte, and generation under every layout and
// combination (f16, q8_0, q4_0, window + sinks, paged) in KV CACHE mode, NO
// CACHE mode and when switching, with exact position and byte counters.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/core/numeric.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/engine/kernels.h"
#include "model/kv/kv_cache.h"
#include "model/kv/kv_quant.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

constexpr double kTol = 1e-4;
double lay_tol(KVDtype d) {
  return d == KVDtype::kF16 ? 1e-3 : kTol;
}

// Rows that exercise the rounding rules: random, all zero, exact .5 ties,
// the largest magnitude appearing twice with both signs, huge and tiny values.
std::vector<std::vector<float>> quant_rows(int n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 40; ++r) {
    std::vector<float> x(static_cast<size_t>(n));
    const float s = std::pow(10.0f, static_cast<float>(r % 7) - 3.0f);
    for (float& v : x) v = normal(rng) * s;
    rows.push_back(x);
  }
  rows.emplace_back(static_cast<size_t>(n), 0.0f);
  // q8_0 ties: amax = 127 * 2^-3 makes d = 2^-3, and (m + 0.5) * 2^-3 sits halfway.
  std::vector<float> t8(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t8[static_cast<size_t>(i)] = (i % 32 == 0) ? 127.0f / 8 : ((i % 61) - 30 + 0.5f) / 8;
  rows.push_back(t8);
  // q4_0 ties: the largest value -8 makes d = 1, and k - 8.5 + 8.5 lands on integers.
  std::vector<float> t4(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    t4[static_cast<size_t>(i)] = (i % 32 == 5) ? -8.0f : static_cast<float>(i % 16) - 8.5f + 1.0f;
  rows.push_back(t4);
  // Equal magnitudes of both signs: the first one picks d's sign.
  std::vector<float> pm(static_cast<size_t>(n), 0.25f);
  for (int b = 0; b < n / 32; ++b) {
    pm[static_cast<size_t>(b) * 32 + 3] = (b % 2) ? 3.0f : -3.0f;
    pm[static_cast<size_t>(b) * 32 + 9] = (b % 2) ? -3.0f : 3.0f;
  }
  rows.push_back(pm);
  std::vector<float> ext(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    ext[static_cast<size_t>(i)] = (i % 3 == 0 ? 1e5f : i % 3 == 1 ? -3e-6f : 1e-30f) * (1 + i % 5);
  rows.push_back(ext);
  return rows;
}

TEST(KVQuant, BlocksByteIdenticalToReference) {
  const int n = 96;
  const auto rows = quant_rows(n);
  testutil::TempDir tmp("kv-quant");
  std::string raw;
  for (const auto& r : rows) raw.append(reinterpret_cast<const char*>(r.data()), r.size() * 4);
  testutil::write_file(tmp / "rows.f32", raw);
  for (KVDtype dt : {KVDtype::kQ8_0, KVDtype::kQ4_0}) {
    const std::string name = to_string(dt);
    testutil::run_numpy_ref("quant --dtype " + name + " --n " + std::to_string(n) + " --rows " + (tmp / "rows.f32") +
                                " --out " + (tmp / (name + ".bin")),
                            tmp / "quant.log");
    const std::string want = testutil::read_file(tmp / (name + ".bin"));
    const size_t rb = kv_row_bytes(dt, n);
    ASSERT_EQ(want.size(), rows.size() * rb) << name;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::vector<uint8_t> got(rb);
      if (dt == KVDtype::kQ8_0) {
        quantize_row_q8_0(rows[r].data(), n, got.data());
      } else {
        quantize_row_q4_0(rows[r].data(), n, got.data());
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data() + r * rb, rb), 0) << name << " row " << r;
    }
  }
}

TEST(KVQuant, DequantizeFollowsTheFormulas) {
  const int n = 64;
  const auto rows = quant_rows(n);
  for (const auto& x : rows) {
    std::vector<uint8_t> q8(kv_row_bytes(KVDtype::kQ8_0, n)), q4(kv_row_bytes(KVDtype::kQ4_0, n));
    quantize_row_q8_0(x.data(), n, q8.data());
    quantize_row_q4_0(x.data(), n, q4.data());
    std::vector<float> y8(static_cast<size_t>(n)), y4(y8.size());
    dequantize_row_q8_0(q8.data(), n, y8.data());
    dequantize_row_q4_0(q4.data(), n, y4.data());
    for (int i = 0; i < n; ++i) {
      const int b = i / 32, j = i % 32;
      uint16_t d8, d4;
      std::memcpy(&d8, &q8[static_cast<size_t>(b) * 34], 2);
      std::memcpy(&d4, &q4[static_cast<size_t>(b) * 18], 2);
      const int c8 = static_cast<int8_t>(q8[static_cast<size_t>(b) * 34 + 2 + j]);
      const uint8_t byte = q4[static_cast<size_t>(b) * 18 + 2 + j % 16];
      const int c4 = j < 16 ? (byte & 15) : (byte >> 4);
      EXPECT_EQ(y8[static_cast<size_t>(i)], static_cast<float>(c8) * f16_to_f32(d8));
      EXPECT_EQ(y4[static_cast<size_t>(i)], static_cast<float>(c4 - 8) * f16_to_f32(d4));
      // Ranged reads (a head's slice straddling blocks) give the same values.
      float one;
      dequantize_q8_0_range(q8.data(), i, 1, &one);
      EXPECT_EQ(one, y8[static_cast<size_t>(i)]);
    }
  }
}

// The attention kernel dequantizes in registers: the same as dequantizing the
// rows first and running f32 attention, for head slices at any offset, over
// a paged cache's runs.
TEST(KVQuant, AttentionKernelReadsRowsAsStored) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int kvd = 160, len = 37;
  for (KVDtype dt : {KVDtype::kF16, KVDtype::kQ8_0, KVDtype::kQ4_0}) {
    const size_t rb = kv_row_bytes(dt, kvd);
    std::vector<float> kf(static_cast<size_t>(kvd) * len), vf(kf.size());
    KVLayout lay;
    lay.n_layer = 1;
    lay.n_kv_head = 1;
    lay.head_dim = kvd;
    lay.n_ctx = len;
    lay.dtype = dt;
    lay.block = 8;
    KVCache cache(lay);
    const SeqId s = cache.add_sequence();
    for (int j = 0; j < len; ++j) {
      std::vector<float> k(static_cast<size_t>(kvd)), v(k.size());
      for (int i = 0; i < kvd; ++i) {
        k[static_cast<size_t>(i)] = normal(rng);
        v[static_cast<size_t>(i)] = normal(rng);
      }
      const KVSlot at = cache.append(s, j);
      cache.write(0, at, k.data(), v.data());
      cache.read_row(0, at, false, &kf[static_cast<size_t>(j) * kvd]);
      cache.read_row(0, at, true, &vf[static_cast<size_t>(j) * kvd]);
    }
    std::vector<KVRun> visible;
    cache.visible(s, len - 1, visible);
    std::vector<KVRowRun> runs;
    for (const KVRun& r : visible) {
      const size_t at = static_cast<size_t>(r.slot) * rb;
      runs.push_back(KVRowRun{cache.k_rows(r.block, 0) + at, cache.v_rows(r.block, 0) + at, r.n});
    }
    ASSERT_EQ(runs.size(), 5u);  // pages of 8: 37 keys in 5 runs
    for (int hd : {16, 32, 40, 64}) {
      for (int col = 0; col + hd <= kvd; col += hd == 40 ? 40 : 24) {
        std::vector<float> q(static_cast<size_t>(hd));
        for (float& x : q) x = normal(rng);
        std::vector<float> p1(static_cast<size_t>(len)), p2(p1.size()), o1(static_cast<size_t>(hd)), o2(o1.size());
        attend_runs(q.data(), KVRunsView{dt, runs.data(), static_cast<int>(runs.size()), rb, col}, hd, len, 0.2f,
                    p1.data(), o1.data());
        attend(q.data(), kf.data() + col, vf.data() + col, kvd, hd, len, 0.2f, p2.data(), o2.data());
        for (int j = 0; j < len; ++j)
          EXPECT_NEAR(p1[static_cast<size_t>(j)], p2[static_cast<size_t>(j)], 1e-6) << to_string(dt) << " hd " << hd;
        for (int i = 0; i < hd; ++i)
          EXPECT_NEAR(o1[static_cast<size_t>(i)], o2[static_cast<size_t>(i)], 1e-5) << to_string(dt) << " hd " << hd;
      }
    }
  }
}

struct LayoutCase {
  const char* ckpt;
  KVDtype dtype;
  int window, sinks, block;
  int n_prompt = 4, steps = 10;  // the reference picks a prompt clear of rounding ties: fewer rows, easier
};

std::string describe(const LayoutCase& lc) {
  KVLayout l;
  l.dtype = lc.dtype;
  l.window = lc.window;
  l.sinks = lc.sinks;
  l.block = lc.block;
  return std::string(lc.ckpt) + " " + l.describe();
}

enum class Sched { kKV, kNoCache, kSwitch };

// Generation under a layout against the reference's greedy run of that layout.
void check_layout(const LayoutCase& lc) {
  testutil::TempDir tmp("kv-layout");
  const std::string dir = testutil::suite_checkpoint(lc.ckpt);
  testutil::run_numpy_ref(std::string("kvref --model ") + dir + " --kv-dtype " + to_string(lc.dtype) + " --kv-window " +
                              std::to_string(lc.window) + " --kv-sinks " + std::to_string(lc.sinks) + " --n-prompt " +
                              std::to_string(lc.n_prompt) + " --steps " + std::to_string(lc.steps) + " --out " +
                              (tmp / "ref.json"),
                          tmp / "ref.log");
  const json ref = testutil::read_json(tmp / "ref.json");
  const std::vector<int> prompt = ref.at("prompt").get<std::vector<int>>();
  std::shared_ptr<const Model> m = load_model(dir);
  const Config& c = m->config;
  const int L = c.n_layer, H = c.n_head;
  for (Sched sc : {Sched::kKV, Sched::kNoCache, Sched::kSwitch}) {
    const std::string who = describe(lc) + (sc == Sched::kKV        ? " [kv]"
                                            : sc == Sched::kNoCache ? " [no cache]"
                                                                    : " [switch]");
    Generator gen(m);
    GenerateOptions opt;
    opt.max_new = lc.steps + 1;
    opt.sampler.greedy = true;
    opt.kv.dtype = lc.dtype;
    opt.kv.window = lc.window;
    opt.kv.sinks = lc.sinks;
    opt.kv.block = lc.block;
    gen.start_tokens(prompt, opt);
    int held_before = 0;
    for (int s = 0;; ++s) {
      const bool kv = sc == Sched::kKV || (sc == Sched::kSwitch && (s % 3) != 1);
      gen.set_mode(kv ? CacheMode::kKV : CacheMode::kNoCache);
      RecordPtr r = gen.step();
      if (!r) break;
      const std::string where = who + " step " + std::to_string(s);
      const json& st = ref.at("steps").at(static_cast<size_t>(s));
      ASSERT_EQ(r->seq_len, st.at("seq_len").get<int>()) << where;
      ASSERT_EQ(r->token, st.at("token").get<int>()) << where;
      EXPECT_NEAR(r->prob, st.at("prob").get<double>(), kTol) << where;
      for (size_t i = 0; i < 10; ++i)
        EXPECT_NEAR(r->top[i].prob, st.at("top").at(i).at(1).get<double>(), kTol) << where << " rank " << i;
      // The newest attention row, zero where the window hides a key.
      const int T = r->seq_len, rows = st.at("n_rows").get<int>();
      const std::vector<double> ra = st.at("attn").get<std::vector<double>>();
      double worst = 0;
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h)
          for (int k = 0; k < T; ++k)
            worst = std::max(worst, std::fabs(r->attention(l, h, r->n_rows - 1, k) -
                                              ra[((static_cast<size_t>(l) * H + h) * rows + rows - 1) * T + k]));
      // f16 rows: where a K value computed in f32 lies within its rounding error of
      // a half-precision rounding boundary, the engine and the float64 reference
      // store neighbouring halves (2^-11 apart), which moves a weight by up to a
      // few 1e-4 (4.3e-4 seen with the portable kernels); any other format, 1e-4.
      EXPECT_LE(worst, lay_tol(opt.kv.dtype)) << where << " attention";
      // Counters: exactly what the window keeps, bytes from the format.
      const KVLayout lay = opt.kv.on_model(c);
      if (r->mode == CacheMode::kKV) {
        const int held = lc.window ? std::min(T, lc.window + lc.sinks) : T;
        EXPECT_EQ(r->kv_positions, held) << where;
        EXPECT_EQ(r->kv_held.count(), held) << where;
        // As runs: the sinks and the window apart once the window has moved past them, else one.
        EXPECT_EQ(r->kv_held.runs().size(), held < T && lc.sinks > 0 ? 2u : 1u) << where;
        if (!r->refill && !r->prefill) {
          EXPECT_EQ(r->evicted, held_before + 1 - held) << where;
        }
        const uint64_t per = 2ull * L * kv_row_bytes(lc.dtype, c.n_embd);
        if (lc.block) {
          EXPECT_EQ(r->kv_bytes, static_cast<uint64_t>(r->kv_blocks) * lc.block * per) << where;
          EXPECT_EQ(r->kv_slots_wasted, r->kv_blocks * lc.block - held) << where;
        } else {
          EXPECT_EQ(r->kv_bytes, static_cast<uint64_t>(held) * per) << where;
        }
        EXPECT_EQ(lay.bytes_per_position(), per);
        held_before = held;
      } else {
        EXPECT_EQ(r->kv_bytes, 0u) << where;
        EXPECT_EQ(r->kv_positions, 0) << where;
        held_before = 0;
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(gen.tokens(), ref.at("tokens").get<std::vector<int>>()) << who;
  }
}

class LayoutP : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(LayoutP, MatchesNumpyReference) {
  check_layout(GetParam());
}

const LayoutCase kLayouts[] = {
    {"l2h2d32_f32_prefix_buffers", KVDtype::kF16, 0, 0, 0},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kQ8_0, 0, 0, 0},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kQ4_0, 0, 0, 0},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kF32, 5, 0, 0},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kF32, 5, 2, 0},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kF32, 0, 0, 4},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kQ8_0, 0, 0, 3},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kQ8_0, 4, 1, 0},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kQ4_0, 6, 0, 2},
    {"l2h2d32_f32_prefix_buffers", KVDtype::kF16, 5, 2, 1},
    {"l2h4d64_f16_prefix_u8buffers", KVDtype::kQ8_0, 0, 0, 16, 3, 6},
    {"l2h4d64_f16_prefix_u8buffers", KVDtype::kQ4_0, 5, 1, 0, 3, 6},
};

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutP, ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<LayoutCase>& i) {
                           std::string n = describe(i.param);
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace kvscope
