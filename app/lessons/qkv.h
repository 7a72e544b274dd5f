// The attention of one head at one step, opened up:
//   scores  = q · Kᵀ / √d_head         (one per cached key)
//   weights = softmax(scores)          (the beams' brightness)
//   output  = weights · V              (the head's output, before c_proj)
// q is the query row the engine computed for the newest position (recorded
// in StepRecord::q), K and V the rows of every position it attends to
// (gathered from the records that computed them). The weights shown are the
// engine's own (StepRecord::attn, the numbers the beams draw); the softmax of
// the recomputed scores is shown next to them as a check.
#pragma once

#include <string>
#include <vector>

#include "model/core/index_check.h"
#include "model/decoding/generator.h"

namespace kvscope {

struct QkvInspection {
  bool ok = false;
  std::string missing;  // why not (no query rows recorded, K/V dropped by the history budget...)
  int layer = 0, head = 0, head_dim = 0;
  int query_pos = 0;           // the newest position: the query row's
  std::vector<int> positions;  // (n) the key positions attended to
  std::vector<float> q;        // (head_dim)
  std::vector<float> k, v;     // (n, head_dim)
  std::vector<float> scores;   // (n) q·k / √d_head
  std::vector<float> weights;  // (n) the engine's attention weights (the beams)
  std::vector<float> softmax;  // (n) softmax(scores), recomputed here
  float max_weight_diff = 0;   // max |softmax - weights|
  std::vector<float> output;   // (head_dim) Σ_j weights_j · v_j

  int n() const { return static_cast<int>(positions.size()); }
  const float* k_row(int j) const {
    KVSCOPE_CHECK_INDEX("inspected key", j, n());
    return k.data() + static_cast<size_t>(j) * head_dim;
  }
  const float* v_row(int j) const {
    KVSCOPE_CHECK_INDEX("inspected value", j, n());
    return v.data() + static_cast<size_t>(j) * head_dim;
  }
};

// The arithmetic from explicit rows: q (head_dim), k and v (n, head_dim),
// the engine's weights (n). Fills scores, softmax, max_weight_diff, output.
void compute_qkv(QkvInspection& in);

// Record `step` of `records` (one generation, in order), `layer`, `head`.
QkvInspection inspect_qkv(const std::vector<RecordPtr>& records, int step, int layer, int head);

// The K and V rows of `pos` at `layer` (this head's slice) as the records up
// to `step` hold them; false when none holds them (trimmed or not computed).
bool kv_rows_of(const std::vector<RecordPtr>& records, int step, int layer, int head, int pos, std::vector<float>& k,
                std::vector<float>& v);

}  // namespace kvscope
