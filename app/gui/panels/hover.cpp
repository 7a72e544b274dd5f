// The tooltip for what the mouse is over in the 3D view: a token, a KV block
// (its state, layout, the beam landing on it, its rows) or a binned column.
#include <imgui.h>

#include <algorithm>
#include <string>

#include "app/gui/panels/panels.h"
#include "model/core/units.h"
#include "model/engine/engine.h"
#include "render/scene/scene_format.h"

namespace kvscope {
namespace {

// An aggregated column of a long sequence (scene_lod.h): what it sums up.
void aggregated_tooltip(const SequenceState& seq, const Pick& pick, int layer, int head) {
  const int p0 = pick.pos, p1 = std::min(pick.pos + pick.span, static_cast<int>(seq.tokens.size()));
  begin_wrapped_tooltip();
  ImGui::Text("positions %d\xE2\x80\x93%d: %d positions drawn as one column", p0, p1 - 1, p1 - p0);
  ImGui::TextDisabled("(a long sequence: older positions are binned, the newest have a column each)");
  const StepRecord* r = seq.current.get();
  if (pick.kind == Pick::kKv) {
    double sum = 0;
    int n = 0;
    for (int p = p0; p < p1; ++p)
      if (seq.knorm(p, pick.layer) >= 0) sum += seq.knorm(p, pick.layer), ++n;
    ImGui::Text("layer %d: %s; mean |K| = %.3f over %d rows", pick.layer, to_string(pick.state), n > 0 ? sum / n : 0.0,
                n);
  }
  if (r && r->n_rows > 0) {
    double w = 0;
    for (int p = p0; p < std::min(p1, r->seq_len); ++p) w += attention_weight(*r, layer, head, p);
    ImGui::Text("ray from the newest token: weight %.4f summed over these keys (%s, %s)", w,
                layer < 0 ? "mean of layers" : ("layer " + std::to_string(layer)).c_str(),
                head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str());
  }
  end_wrapped_tooltip();
}

// What happened to a KV block's rows this step, by its state.
void kv_state_line(const SequenceState& seq, const Pick& pick) {
  switch (pick.state) {
    case KvState::kEmpty:
      ImGui::TextUnformatted(pick.pos >= seq.seq_len() ? "empty: computed in the next step"
                                                       : "empty: NO CACHE keeps nothing between steps");
      break;
    case KvState::kResident:
      ImGui::TextUnformatted("held in the KV cache, read again this step");
      break;
    case KvState::kNew:
      ImGui::TextUnformatted("computed this step and added to the cache");
      break;
    case KvState::kPrefill:
      ImGui::TextUnformatted("computed in the prefill pass, kept in the cache");
      break;
    case KvState::kRefill:
      ImGui::TextUnformatted("recomputed to rebuild the cache, kept");
      break;
    case KvState::kRecomputed:
      ImGui::TextUnformatted("recomputed this step, then thrown away (NO CACHE)");
      break;
    case KvState::kNewDropped:
      ImGui::TextUnformatted("computed this step, then thrown away (NO CACHE)");
      break;
    case KvState::kEvicting:
    case KvState::kEvicted:
      break;  // kv_layout_tooltip says when and why
  }
}

}  // namespace

void hover_tooltip(const EngineState& engine, const Pick& pick, int layer, int head, bool newest_hidden) {
  if (pick.kind == Pick::kNothing || !engine.seq.current) return;
  if (newest_hidden && pick.pos == engine.seq.seq_len()) return;
  const SequenceState& seq = engine.seq;
  if (pick.pos < 0 || pick.pos >= static_cast<int>(seq.tokens.size())) return;
  if (pick.span > 1) return aggregated_tooltip(seq, pick, layer, head);
  const TokenInfo& t = seq.tokens[pick.pos];
  begin_wrapped_tooltip();
  if (pick.kind == Pick::kToken) {
    ImGui::Text("token %d at position %d", t.id, pick.pos);
    ImGui::Text("text:  %s", visible_piece(t.piece).c_str());
    const std::string raw = engine.model ? engine.model->tokenizer.token_bytes(t.id) : std::string();
    ImGui::Text("bytes: %s", format_hex_bytes(raw).c_str());
    if (t.prompt) {
      ImGui::TextUnformatted("part of the prompt");
    } else {
      ImGui::Text("chosen at step %d with probability %s", t.chosen_at, percent_text(t.prob, 1).c_str());
    }
    if (pick.pos == seq.seq_len()) ImGui::TextUnformatted("newest: its K/V are computed in the next step");
  } else {
    ImGui::Text("KV block: layer %d, position %d (%s)", pick.layer, pick.pos, visible_piece(t.piece).c_str());
    if (pick.kv_head >= 0 && seq.n_kv_head > 0) {
      const int group = seq.n_head / seq.n_kv_head;
      ImGui::Text("K/V head %d: query heads %d\xE2\x80\x93%d read this K/V head", pick.kv_head, pick.kv_head * group,
                  pick.kv_head * group + group - 1);
    }
    const float kn = seq.knorm(pick.pos, pick.layer), vn = seq.vnorm(pick.pos, pick.layer);
    kv_state_line(seq, pick);
    kv_layout_tooltip(seq, pick.pos, pick.layer, pick.state);
    // The beam that lands here: the newest query's attention to this position.
    const StepRecord* r = seq.current.get();
    if (r && r->n_rows > 0 && pick.pos < r->seq_len) {
      const float w = attention_weight(*r, layer, head, pick.pos);
      ImGui::Text("ray from the newest token \"%s\": weight %.4f (%s, %s)",
                  newest_hidden ? "?" : visible_piece(seq.tokens[static_cast<size_t>(r->seq_len)].piece).c_str(), w,
                  layer < 0 ? "mean of layers" : ("layer " + std::to_string(layer)).c_str(),
                  head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str());
    }
    if (kn >= 0) {
      const int d = seq.kv_dim > 0 ? seq.kv_dim : seq.n_embd;
      if (seq.n_kv_head > 0 && seq.n_kv_head < seq.n_head) {
        ImGui::Text("holds K and V rows of %d numbers each (%d K/V heads, each read by %d query heads)", d,
                    seq.n_kv_head, seq.n_head / seq.n_kv_head);
      } else {
        ImGui::Text("holds K and V rows of %d numbers each (%d heads)", d, seq.n_head);
      }
      ImGui::Text("|K| = %.3f   |V| = %.3f", kn, vn);
      kv_rows_tooltip(engine, pick.layer, head, pick.pos, static_cast<int>(engine.seq_count) - 1);
      const KVDtype dt = seq.current->kv_layout.dtype;
      ImGui::TextDisabled("(%s of memory when cached as %s)", format_bytes(2 * kv_row_bytes(dt, d)).c_str(),
                          to_string(dt));
    }
  }
  end_wrapped_tooltip();
}

}  // namespace kvscope
