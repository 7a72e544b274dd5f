#include "app/cli/record_json.h"

#include "app/cli/cli_json.h"

namespace kvscope {

using nlohmann::json;

namespace {

json top_json(const StepChoice& r, const Tokenizer& tok) {
  json top = json::array();
  for (const Candidate& c : r.top) {
    top.push_back({{"token", c.token},
                   {"piece", tok.display_piece(c.token)},
                   {"bytes", bytes_json(tok.token_bytes(c.token))},
                   {"prob", c.prob}});
  }
  return top;
}

}  // namespace

json step_json(const StepRecord& r, const Tokenizer& tok) {
  json j;
  if (r.prefill) {
    j["event"] = "prefill";
    j["tokens"] = r.prompt_tokens;
    j["pieces"] = r.prompt_pieces;
    json pb = json::array();
    for (int t : r.prompt_tokens) pb.push_back(bytes_json(tok.token_bytes(t)));
    j["pieces_bytes"] = pb;
  } else {
    j["event"] = "step";
    j["index"] = r.index;
  }
  j["mode"] = to_string(r.mode);
  j["token"] = r.token;
  j["piece"] = r.piece;
  j["bytes"] = bytes_json(r.raw_piece);
  j["prob"] = r.prob;
  j["top"] = top_json(r, tok);
  j["flops"] = r.flops;
  j["flops_total"] = r.flops_total;
  j["kv_bytes"] = r.kv_bytes;
  j["kv_positions"] = r.kv_positions;
  j["evicted"] = r.evicted;
  if (r.kv_layout.evicting()) {
    j["held_by_layer"] = r.kv_held_by_layer;
    j["scores_by_layer"] = r.kv_score_by_layer;  // the score of each held position, as ranked
    json dropped = json::array();                // (layer) [position, score] of each row this forward dropped
    for (const std::vector<KVDrop>& l : r.kv_dropped_by_layer) {
      json row = json::array();
      for (const KVDrop& d : l) row.push_back({d.pos, d.score});
      dropped.push_back(std::move(row));
    }
    j["dropped_by_layer"] = std::move(dropped);
    if (r.kv_layout.per_head()) {
      j["held_by_head"] = r.kv_held_by_head;  // (layer, kv_head) the positions each K/V head holds
      // SnapKV compresses the prompt once, after the prefill: a prompt no longer than the budget keeps everything.
      if (r.index == 0 && r.seq_len <= r.kv_layout.budget)
        j["snapkv_note"] = "prompt of " + std::to_string(r.seq_len) + " positions <= budget " +
                           std::to_string(r.kv_layout.budget) + ": nothing compressed";
    }
  }
  if (r.kv_layout.paged()) {
    j["kv_blocks"] = r.kv_blocks;
    j["kv_slots_wasted"] = r.kv_slots_wasted;
  }
  j["recomputed"] = r.recomputed;
  j["ms"] = r.ms;
  return j;
}

}  // namespace kvscope
