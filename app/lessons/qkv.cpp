#include "app/lessons/qkv.h"

#include <algorithm>
#include <cmath>

namespace kvscope {

void compute_qkv(QkvInspection& in) {
  const int n = in.n(), d = in.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  in.scores.assign(n, 0.0f);
  for (int j = 0; j < n; ++j) {
    double s = 0;
    const float* kr = in.k_row(j);
    for (int i = 0; i < d; ++i) s += static_cast<double>(in.q[i]) * kr[i];
    in.scores[j] = static_cast<float>(s * scale);
  }
  // Over the keys the engine attended to (a weight of exactly 0 marks a key
  // outside the attention window, when the cache has one).
  in.softmax.assign(n, 0.0f);
  auto attended = [&](int j) { return j >= static_cast<int>(in.weights.size()) || in.weights[j] > 0.0f; };
  double mx = -1e300, sum = 0;
  for (int j = 0; j < n; ++j)
    if (attended(j)) mx = std::max(mx, static_cast<double>(in.scores[j]));
  for (int j = 0; j < n; ++j)
    if (attended(j)) sum += std::exp(in.scores[j] - mx);
  for (int j = 0; j < n; ++j)
    if (attended(j)) in.softmax[j] = static_cast<float>(std::exp(in.scores[j] - mx) / sum);
  in.max_weight_diff = 0;
  for (int j = 0; j < n && j < static_cast<int>(in.weights.size()); ++j)
    in.max_weight_diff = std::max(in.max_weight_diff, std::abs(in.softmax[j] - in.weights[j]));
  in.output.assign(d, 0.0f);
  for (int i = 0; i < d; ++i) {
    double o = 0;
    for (int j = 0; j < n; ++j) o += static_cast<double>(in.weights[j]) * in.v_row(j)[i];
    in.output[i] = static_cast<float>(o);
  }
}

bool kv_rows_of(const std::vector<RecordPtr>& records, int step, int layer, int head, int pos, std::vector<float>& k,
                std::vector<float>& v) {
  // The newest record up to `step` that computed `pos` and still holds its rows.
  for (int s = std::min(step, static_cast<int>(records.size()) - 1); s >= 0; --s) {
    const StepRecord& r = *records[s];
    const int first = r.seq_len - r.n_kv;
    if (pos < first || pos >= r.seq_len || r.k.empty() || r.v.empty()) continue;
    if (layer < 0 || layer >= r.n_layer || head < 0 || head >= r.n_head) return false;
    const int g = r.kv_head_of(head);  // grouped-query: the K/V head this query head reads
    const float* kr = r.k_row(layer, pos - first, g);
    const float* vr = r.v_row(layer, pos - first, g);
    k.assign(kr, kr + r.head_dim);
    v.assign(vr, vr + r.head_dim);
    return true;
  }
  return false;
}

QkvInspection inspect_qkv(const std::vector<RecordPtr>& records, int step, int layer, int head) {
  QkvInspection in;
  in.layer = layer;
  in.head = head;
  if (step < 0 || step >= static_cast<int>(records.size())) {
    in.missing = "no step yet";
    return in;
  }
  const StepRecord& r = *records[step];
  if (layer < 0 || layer >= r.n_layer || head < 0 || head >= r.n_head) {
    in.missing = "choose one layer and one head";
    return in;
  }
  if (r.n_rows == 0 || r.q.empty()) {
    in.missing = r.n_rows == 0 ? "this step's attention was dropped by the history budget"
                               : "this step's query rows were not recorded";
    return in;
  }
  in.head_dim = r.head_dim;
  in.query_pos = r.seq_len - 1;
  const int row = r.n_rows - 1;
  const float* q = r.q_row(layer, row, head);
  in.q.assign(q, q + r.head_dim);
  std::vector<float> kr, vr;
  for (int pos = 0; pos <= in.query_pos; ++pos) {
    const float w = r.attention(layer, head, row, pos);
    if (!kv_rows_of(records, step, layer, head, pos, kr, vr)) {
      in.missing = "the K/V rows of position " + std::to_string(pos) + " were dropped by the history budget";
      return in;
    }
    in.positions.push_back(pos);
    in.weights.push_back(w);
    in.k.insert(in.k.end(), kr.begin(), kr.end());
    in.v.insert(in.v.end(), vr.begin(), vr.end());
  }
  compute_qkv(in);
  in.ok = true;
  return in;
}

}  // namespace kvscope
