// Loading on a worker thread: progress, cancellation and the memory check.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>

#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/core/numeric.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::suite_checkpoint;

TEST(Loader, ProgressRisesToOne) {
  std::vector<float> seen;
  LoadControl ctl;
  ctl.on_progress = [&](float p) { seen.push_back(p); };
  auto m = load_model(suite_checkpoint("l2h2d32_f32_prefix_buffers"), ctl);
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_NEAR(seen.back(), 1.0f, 1e-6);
  EXPECT_GT(m->n_params, 0u);
}

TEST(Loader, CancelThrowsClearError) {
  std::atomic<bool> cancel{true};
  LoadControl ctl;
  ctl.cancel = &cancel;
  try {
    load_model(suite_checkpoint("l2h2d32_f32_prefix_buffers"), ctl);
    FAIL() << "expected cancellation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
  }
}

// A sharded Llama-family checkpoint whose embedding is 64 MiB (four 16 MiB
// chunks), made once per build folder.
std::string big_sharded_llama() {
  const fs::path dir = fs::path(KVSCOPE_BUILD_DIR) / "test-data" / "sharded-64mib";
  if (!fs::exists(dir / "model.safetensors.index.json")) {
    fs::create_directories(dir.parent_path());
    testutil::run_numpy_ref("make --out " + testutil::shell_quote(dir.string()) +
                                " --vocab 65536 --embd 256 --heads 4 --kv-heads 2 --layers 1 --inner 64 --ctx 16"
                                " --shards 2 --synthetic-vocab",
                            (dir.parent_path() / "sharded-64mib.log").string(),
                            std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_ref_llama.py");
  }
  return dir.string();
}

TEST(Loader, ShardedLlamaLoadReportsProgressWithinATensorAndStopsWithinAChunkWhenCancelled) {
  const std::string dir = big_sharded_llama();
  // Progress moves inside the embedding, not only between tensors.
  std::vector<float> seen;
  LoadControl ctl;
  ctl.on_progress = [&](float p) { seen.push_back(p); };
  const auto m = load_model(dir, ctl);
  ASSERT_EQ(m->config.vocab_size, 65536);
  ASSERT_GE(seen.size(), 5u);
  EXPECT_LT(seen.front(), 0.3f);  // after the first 16 MiB of the 64 MiB embedding
  EXPECT_NEAR(seen.back(), 1.0f, 1e-6);

  // Cancelled at the first progress report (the window closing mid-load):
  // no further chunk is read, and the error says the load was cancelled.
  std::atomic<bool> cancel{false};
  int reports_after_cancel = 0;
  ctl.cancel = &cancel;
  ctl.on_progress = [&](float) {
    if (cancel.load()) ++reports_after_cancel;
    cancel = true;
  };
  try {
    load_model(dir, ctl);
    FAIL() << "expected cancellation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loading cancelled"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reports_after_cancel, 0);

  // Set before the load: nothing is read at all, not even the index.
  cancel = true;
  ctl.on_progress = [&](float) { ++reports_after_cancel; };
  try {
    load_model(dir, ctl);
    FAIL() << "expected cancellation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + ": loading cancelled"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reports_after_cancel, 0);
}

TEST(Loader, RefusesWhatDoesNotFitInMemory) {
  ASSERT_GT(available_memory_bytes(), 0u);
  const fs::path dir = fs::path(KVSCOPE_BUILD_DIR) / "test-data" / "too-big";
  fs::create_directories(dir);
  testutil::copy_checkpoint("l2h2d32_f32_prefix_buffers", dir.string());
  // A config claiming ~1 TB of weights: refused before any allocation.
  testutil::write_file((dir / "config.json").string(),
                       R"({"n_layer": 1000, "n_head": 16, "n_embd": 8192, "n_positions": 1024, "vocab_size": 50257})");
  try {
    load_model(dir.string());
    FAIL() << "expected a memory error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("model.safetensors"), std::string::npos) << w;
    EXPECT_NE(w.find(" of memory is available"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// The half-precision copies kept for decode must hold exactly the stored values.
// A GPT-2 F16 checkpoint is kept at half precision and nothing else: every
// matrix holds the file's 16-bit values (checked against the file's own
// bytes), none has an f32 copy, and the resident size counted by hand from
// the shapes is what the model reports (and `inspect` prints).
TEST(Loader, Gpt2F16KeepsOnlyTheStoredHalves) {
  const std::string dir = suite_checkpoint("l3h4d48_f16_noprefix");
  auto m = load_model(dir);
  const Config& c = m->config;
  const Gpt2Weights& w = std::get<Gpt2Weights>(m->weights);
  const SafeTensors st = SafeTensors::open(dir + "/model.safetensors");
  for (const Gpt2Layer& L : w.layers) {
    for (const WeightMatrix* x : {&L.attn_w_t, &L.attn_proj_w_t, &L.fc_w_t, &L.mlp_proj_w_t, &w.wte}) {
      EXPECT_EQ(x->type, StoredType::kF16);
      EXPECT_TRUE(x->f32.empty());
      EXPECT_EQ(x->half.size(), static_cast<size_t>(x->rows * x->cols));
    }
  }
  // The embedding's bits are the file's bits (the file stores wte (vocab, d)
  // row-major; the matrix may hold them as panels, weight_matrix.h).
  std::vector<uint16_t> raw(static_cast<size_t>(w.wte.rows * w.wte.cols));
  st.read_raw("wte.weight", raw.data());
  std::vector<uint16_t> held(raw.size());
  for (int64_t r = 0; r < w.wte.rows; ++r)
    for (int64_t k = 0; k < w.wte.cols; ++k)
      held[static_cast<size_t>(r * w.wte.cols + k)] =
          w.wte
              .half[w.wte.panels ? panel_index(r, k, w.wte.rows, w.wte.cols) : static_cast<size_t>(r * w.wte.cols + k)];
  EXPECT_EQ(held, raw);
  // Panels for what the products read; an untied embedding is only looked up.
  EXPECT_EQ(w.wte.panels, kPanelWeights && w.lm_head.empty());
  if (!w.lm_head.empty()) {
    EXPECT_EQ(w.lm_head.panels, kPanelWeights);
  }
  for (const Gpt2Layer& L : w.layers) EXPECT_EQ(L.fc_w_t.panels, kPanelWeights);
  const uint64_t d = static_cast<uint64_t>(c.n_embd), L = static_cast<uint64_t>(c.n_layer);
  const uint64_t head = w.lm_head.empty() ? 0 : static_cast<uint64_t>(c.vocab_size) * d * 2;
  const uint64_t want = L * (12 * d * d * 2 + 13 * d * 4) + static_cast<uint64_t>(c.vocab_size) * d * 2 + head +
                        static_cast<uint64_t>(c.n_positions) * d * 4 + 2 * d * 4;
  EXPECT_EQ(m->weight_bytes(), want);
}

TEST(Loader, HalfRoundTripIsExactForEveryF16Value) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00u);          // overflow -> inf
  EXPECT_EQ(f32_to_f16(1.0f + 1e-4f), 0x3c00u);  // rounds to nearest
}

}  // namespace
}  // namespace kvscope
