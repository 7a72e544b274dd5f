// The f32 copies the WebAssembly build keeps of a small 16-bit model's
// matrices (WeightMatrix::wide), exercised natively through
// LoadControl::wide_max_bytes (native builds keep none): which models get
// them (one rule for both families: the bytes of the weight matrices the
// model reads, at their stored dtypes), and that the resident size, the
// bytes a step reads and the memory check count them. Every expected number
// is counted by hand from the config's shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "model/models/gpt2.h"
#include "model/models/llama.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::llama_suite_dir;
using testutil::suite_checkpoint;

constexpr uint64_t kAlways = ~0ull;  // every model keeps copies

// Every value of a GPT-2 model's weight matrices: each layer's 12 d^2, the
// embedding and an untied head.
uint64_t gpt2_matrix_values(const Config& c, bool untied) {
  const uint64_t d = static_cast<uint64_t>(c.n_embd), V = static_cast<uint64_t>(c.vocab_size);
  return static_cast<uint64_t>(c.n_layer) * 12 * d * d + V * d * (untied ? 2 : 1);
}

// The same for a Llama-family model: q, k, v, o, gate, up, down per layer.
uint64_t llama_matrix_values(const Config& c) {
  const uint64_t d = static_cast<uint64_t>(c.n_embd), V = static_cast<uint64_t>(c.vocab_size);
  const uint64_t q = static_cast<uint64_t>(c.n_head) * static_cast<uint64_t>(c.head_dim());
  const uint64_t kv = static_cast<uint64_t>(c.kv_heads()) * static_cast<uint64_t>(c.head_dim());
  const uint64_t ff = static_cast<uint64_t>(c.n_inner);
  const uint64_t layer = 2 * q * d + 2 * kv * d + 3 * ff * d;
  return static_cast<uint64_t>(c.n_layer) * layer + V * d * (c.tie_word_embeddings ? 1 : 2);
}

// Bytes of every tensor the folder's safetensors files hold.
uint64_t tensor_bytes_in_files(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    const SafeTensors st = SafeTensors::open_header(e.path().string());
    for (const auto& kv : st.tensors()) total += kv.second.end - kv.second.begin;
  }
  return total;
}

// Every matrix has an exact f32 copy of its 16-bit values in their layout
// (row-major or panels), or none has one.
void expect_copies(const std::vector<const WeightMatrix*>& ms, bool wide, const std::string& where) {
  for (const WeightMatrix* m : ms) {
    if (m->empty()) continue;
    if (!wide) {
      EXPECT_TRUE(m->wide.empty()) << where;
      continue;
    }
    ASSERT_EQ(m->wide.size(), static_cast<size_t>(m->rows * m->cols)) << where;
    for (int64_t r = 0; r < m->rows; r += 3) {
      const int64_t c = r % m->cols;
      const size_t i = m->panels ? panel_index(r, c, m->rows, m->cols) : static_cast<size_t>(r * m->cols + c);
      ASSERT_EQ(m->wide[i], m->at(r, c)) << where;
    }
  }
}

// The matrices the products read: the layers', the head, and the embedding
// where it is the (tied) head. An untied embedding is only looked up a row
// at a time and never has a copy, whatever the rule decides.
std::vector<const WeightMatrix*> all_matrices(const Model& m) {
  std::vector<const WeightMatrix*> ms = std::visit([](const auto& w) { return w.layer_matrices(); }, m.weights);
  const WeightMatrix& embed = std::visit([](const auto& w) -> const WeightMatrix& { return w.embedding(); }, m.weights);
  const WeightMatrix& head = std::visit([](const auto& w) -> const WeightMatrix& { return w.lm_head; }, m.weights);
  if (head.empty()) {
    ms.push_back(&embed);
  } else {
    EXPECT_TRUE(embed.wide.empty()) << "an untied embedding has no f32 copy";
    ms.push_back(&head);
  }
  return ms;
}

// GPT-2 decides by its weight matrices at their stored dtype: not by the
// file, which also holds the position table, the vectors and (here) unused
// attn.bias buffers. A limit of exactly those bytes keeps copies; one byte
// less keeps none.
TEST(WideCopies, Gpt2DecidesByTheMatricesItReads) {
  for (const std::string name : {"l2h4d64_f16_prefix_u8buffers", "l1h1d16_bf16_untied"}) {
    const std::string dir = suite_checkpoint(name);
    const Config c = load_config(dir + "/config.json");
    const uint64_t matrix_bytes = 2 * gpt2_matrix_values(c, name.find("untied") != std::string::npos);
    ASSERT_GT(tensor_bytes_in_files(dir), matrix_bytes);  // what the limit would have been compared with
    LoadControl ctl;
    ctl.wide_max_bytes = matrix_bytes;
    const auto wide = load_model(dir, ctl);
    const KeptWeights kept = plan_gpt2_load(SafeTensors::open_header(dir + "/model.safetensors"), c, matrix_bytes).kept;
    EXPECT_EQ(kept.matrix_bytes, matrix_bytes) << name;
    EXPECT_EQ(kept.resident, wide->weight_bytes()) << name << ": the plan is what the loader kept";
    expect_copies(all_matrices(*wide), true, name + " at its matrices' bytes");
    ctl.wide_max_bytes = matrix_bytes - 1;
    expect_copies(all_matrices(*load_model(dir, ctl)), false, name + " one byte under");
    expect_copies(all_matrices(*load_model(dir)), false, name + " native build's rule");
  }
}

// An all-F32 model under the limit is `wide` by the rule, but there is
// nothing to copy: no copy bytes (so the memory check names none); a
// lookup-only matrix is never copied either, though it counts for the limit.
TEST(WideCopies, AnF32ModelHasNoCopiesToCount) {
  const KeptWeights k = plan_kept_weights({{StoredType::kF32, 1000}, {StoredType::kF32, 24}}, 10, kAlways);
  EXPECT_TRUE(k.wide);
  EXPECT_EQ(k.resident_copies, 0u);
  EXPECT_FALSE(k.copies());
  EXPECT_EQ(k.resident, 4u * 1034u);
  const KeptWeights h = plan_kept_weights({{StoredType::kF32, 1000}, {StoredType::kBF16, 24}}, 0, kAlways);
  EXPECT_EQ(h.resident_copies, 4u * 24u);
  EXPECT_EQ(h.resident, 4u * 1000u + 6u * 24u);
  const KeptWeights u = plan_kept_weights({{StoredType::kF16, 100, true}, {StoredType::kF16, 24}}, 0, 248);
  EXPECT_TRUE(u.wide);
  EXPECT_EQ(u.resident_copies, 4u * 24u);
  EXPECT_EQ(u.resident, 2u * 124u + 4u * 24u);
  EXPECT_FALSE(plan_kept_weights({{StoredType::kF16, 100, true}, {StoredType::kF16, 24}}, 0, 247).wide);
}

// The Llama family decides by the same rule: its matrices (the norm weights
// are not matrices), whether in one file or in shards.
TEST(WideCopies, LlamaDecidesByTheMatricesItReads) {
  for (const std::string name : {"llama_gqa3_bf16_untied_sharded_llama3", "llama_gqa2_f16_headdim_linear"}) {
    const std::string dir = llama_suite_dir() + "/" + name;
    const Config c = load_config(dir + "/config.json");
    const uint64_t matrix_bytes = 2 * llama_matrix_values(c);
    ASSERT_GT(tensor_bytes_in_files(dir), matrix_bytes);  // the norm weights too
    LoadControl ctl;
    ctl.wide_max_bytes = matrix_bytes;
    const LlamaLoadResult r = load_llama_weights(dir, c, ctl);
    EXPECT_EQ(r.kept.matrix_bytes, matrix_bytes) << name;
    EXPECT_EQ(r.kept.resident, r.weights.resident_bytes()) << name << ": the plan is what the loader kept";
    EXPECT_TRUE(r.kept.wide) << name;
    std::vector<const WeightMatrix*> ms = r.weights.layer_matrices();
    if (c.tie_word_embeddings) {
      ms.push_back(&r.weights.embed);
    } else {
      EXPECT_TRUE(r.weights.embed.wide.empty()) << name << ": an untied embedding is only looked up, never copied";
      EXPECT_EQ(r.kept.resident_copies, 4 * (llama_matrix_values(c) - static_cast<uint64_t>(c.vocab_size * c.n_embd)))
          << name;
      ms.push_back(&r.weights.lm_head);
    }
    expect_copies(ms, true, name + " at its matrices' bytes");
    ctl.wide_max_bytes = matrix_bytes - 1;
    const LlamaLoadResult under = load_llama_weights(dir, c, ctl);
    EXPECT_FALSE(under.kept.wide) << name;
    expect_copies(under.weights.layer_matrices(), false, name + " one byte under");
  }
}

// GPT-2 F16 with copies: resident = the f16 values + 4 bytes a value more;
// a decode step's products read the copies (4 bytes a value) and the token's
// embedding row as stored (2); the memory check counts the copies; and the
// tokens are the plain model's (the copies are exact).
TEST(WideCopies, Gpt2ResidentBytesReadAndMemoryCheckCountTheCopies) {
  const std::string dir = suite_checkpoint("l3h4d48_f16_noprefix");
  LoadControl ctl;
  ctl.wide_max_bytes = kAlways;
  const auto wide = load_model(dir, ctl);
  const auto plain = load_model(dir);
  const Config& c = wide->config;
  ASSERT_TRUE(std::get<Gpt2Weights>(wide->weights).lm_head.empty());
  const uint64_t d = static_cast<uint64_t>(c.n_embd), L = static_cast<uint64_t>(c.n_layer);
  const uint64_t P = static_cast<uint64_t>(c.n_positions);
  const uint64_t values = gpt2_matrix_values(c, false), vectors = L * 13 * d + 2 * d;
  EXPECT_EQ(wide->weight_bytes(), values * (2 + 4) + (vectors + P * d) * 4);
  EXPECT_EQ(plain->weight_bytes(), values * 2 + (vectors + P * d) * 4);
  EXPECT_EQ(forward_read_bytes(*wide, 0), values * 4 + d * 2 + (vectors + d) * 4);
  EXPECT_EQ(forward_read_bytes(*plain, 0), values * 2 + d * 2 + (vectors + d) * 4);

  const std::string st = dir + "/model.safetensors";
  const uint64_t kv = kv_bytes_per_position(c) * P;
  const SafeTensors header = SafeTensors::open_header(st);
  const Gpt2LoadPlan with = plan_gpt2_load(header, c, kAlways), without = plan_gpt2_load(header, c, 0);
  EXPECT_TRUE(with.kept.wide);
  EXPECT_FALSE(without.kept.wide);
  // The largest temporary: a Conv1D weight (d, 4d) transposed, or the
  // position table (P, d) as read, in f32 and copied, at 4 bytes a value.
  // The file itself is not counted: it is read a tensor at a time.
  const uint64_t scratch = std::max<uint64_t>(16 * d * d, 12 * P * d);
  EXPECT_EQ(with.need_bytes, wide->weight_bytes() + scratch + kv);
  EXPECT_EQ(without.need_bytes, plain->weight_bytes() + scratch + kv);
  EXPECT_EQ(with.need_bytes - without.need_bytes, 4 * values);
  EXPECT_EQ(with.kept.resident_copies, 4 * values);
  EXPECT_TRUE(with.kept.copies());
  EXPECT_FALSE(without.kept.copies());

  // The records (the Cost panel's "bytes read") count what the step read.
  std::vector<int> prompt = {1, 2, 3, 4};
  GenerateOptions opt;
  opt.max_new = 6;
  std::vector<RecordPtr> a, b;
  for (auto [m, out] : {std::pair{wide, &a}, std::pair{plain, &b}}) {
    Generator g(m);
    g.start_tokens(prompt, opt);
    while (RecordPtr r = g.step()) out->push_back(r);
  }
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->token, b[i]->token) << "step " << i;
    EXPECT_EQ(a[i]->read_bytes, b[i]->read_bytes + values * 2) << "step " << i;
  }
}

// The same for a Llama-family F16 checkpoint, through load_model.
TEST(WideCopies, LlamaResidentBytesReadAndMemoryCheckCountTheCopies) {
  const std::string dir = llama_suite_dir() + "/llama_gqa2_f16_headdim_linear";
  LoadControl ctl;
  ctl.wide_max_bytes = kAlways;
  const auto wide = load_model(dir, ctl);
  const auto plain = load_model(dir);
  const Config& c = wide->config;
  ASSERT_FALSE(c.qkv_bias);
  const uint64_t d = static_cast<uint64_t>(c.n_embd), L = static_cast<uint64_t>(c.n_layer);
  const uint64_t values = llama_matrix_values(c), vectors = L * 2 * d + d;
  EXPECT_EQ(wide->weight_bytes(), values * (2 + 4) + vectors * 4);
  EXPECT_EQ(plain->weight_bytes(), values * 2 + vectors * 4);
  // The head once (tied: the embedding), one embedding row as stored.
  const uint64_t read_values = values - (c.tie_word_embeddings ? 0 : static_cast<uint64_t>(c.vocab_size) * d);
  EXPECT_EQ(forward_read_bytes(*wide, 0), read_values * 4 + d * 2 + vectors * 4);
  EXPECT_EQ(forward_read_bytes(*plain, 0), read_values * 2 + d * 2 + vectors * 4);

  const uint64_t kv =
      2 * L * static_cast<uint64_t>(c.kv_heads() * c.head_dim()) * 4 * static_cast<uint64_t>(c.n_positions);
  const uint64_t need_wide = load_llama_weights(dir, c, ctl).need_bytes;
  const uint64_t need_plain = load_llama_weights(dir, c, {}).need_bytes;
  EXPECT_EQ(need_wide, wide->weight_bytes() + kv);
  EXPECT_EQ(need_plain, plain->weight_bytes() + kv);
  EXPECT_EQ(need_wide - need_plain, 4 * values);
}

}  // namespace
}  // namespace kvscope
