// The sequence state: per-position facts accumulated from the step records
// (scene.h), and how a token piece is made visible on screen.
#include <algorithm>
#include <cmath>
#include <string>

#include "model/tokenizer/tokenizer.h"
#include "render/scene/scene.h"
#include "render/scene/scene_kv.h"

namespace kvscope {

void append_record(SequenceState& seq, const RecordPtr& rec) {
  if (!rec) return;
  const StepRecord& r = *rec;
  if (r.prefill || seq.n_records == 0) {
    seq = SequenceState();
    seq.n_layer = r.n_layer;
    seq.n_head = r.n_head;
    seq.n_embd = r.n_embd;
    seq.n_kv_head = r.n_kv_head > 0 ? r.n_kv_head : r.n_head;
    seq.kv_dim = r.n_kv_head > 0 && r.head_dim > 0 ? r.n_kv_head * r.head_dim : r.n_embd;
    seq.n_prompt = r.n_prompt;
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
      TokenInfo t;
      t.id = r.prompt_tokens[i];
      t.piece = i < r.prompt_pieces.size() ? r.prompt_pieces[i] : std::string();
      t.prompt = true;
      seq.tokens.push_back(std::move(t));
    }
    seq.k_norm_max.assign(static_cast<size_t>(seq.n_layer), 0.0f);
  }
  // The chosen token lands at position seq_len; anything after it belongs to
  // another branch of history and is dropped.
  seq.tokens.resize(static_cast<size_t>(r.seq_len));
  TokenInfo t;
  t.id = r.token;
  t.piece = r.piece;
  t.prob = r.prob;
  t.chosen_at = r.index;
  seq.tokens.push_back(std::move(t));

  const size_t n_pos = seq.tokens.size();
  seq.k_norm.resize(n_pos * seq.n_layer, -1.0f);
  seq.v_norm.resize(n_pos * seq.n_layer, -1.0f);
  // The newest token has no K/V yet.
  for (int l = 0; l < seq.n_layer; ++l) {
    seq.k_norm[(n_pos - 1) * seq.n_layer + l] = -1.0f;
    seq.v_norm[(n_pos - 1) * seq.n_layer + l] = -1.0f;
  }
  // K/V rows written by this forward: positions [seq_len - n_kv, seq_len),
  // stored (layer, n_kv, n_kv_head * head_dim); GPT-2's are n_embd wide.
  const int d = r.n_kv_head > 0 && r.head_dim > 0 ? r.n_kv_head * r.head_dim : r.n_embd;
  if (r.k.size() >= static_cast<size_t>(r.n_layer) * r.n_kv * d &&
      r.v.size() >= static_cast<size_t>(r.n_layer) * r.n_kv * d) {
    for (int l = 0; l < r.n_layer && l < seq.n_layer; ++l) {
      for (int i = 0; i < r.n_kv; ++i) {
        const int pos = r.seq_len - r.n_kv + i;
        if (pos < 0 || static_cast<size_t>(pos) >= n_pos) continue;
        const float* k = &r.k[(static_cast<size_t>(l) * r.n_kv + i) * d];
        const float* v = &r.v[(static_cast<size_t>(l) * r.n_kv + i) * d];
        double sk = 0, sv = 0;
        for (int e = 0; e < d; ++e) {
          sk += static_cast<double>(k[e]) * k[e];
          sv += static_cast<double>(v[e]) * v[e];
        }
        const float nk = static_cast<float>(std::sqrt(sk));
        seq.k_norm[static_cast<size_t>(pos) * seq.n_layer + l] = nk;
        seq.v_norm[static_cast<size_t>(pos) * seq.n_layer + l] = static_cast<float>(std::sqrt(sv));
        seq.k_norm_max[l] = std::max(seq.k_norm_max[l], nk);
      }
    }
  }
  append_cache_state(seq, r);
  seq.current = rec;
  seq.n_records++;
}

const float* SequenceState::quant_error(int pos, int layer) const {
  const size_t i = (static_cast<size_t>(pos) * n_layer + layer) * 4;
  if (pos < 0 || layer < 0 || layer >= n_layer || i + 4 > qerr.size() || qerr[i] < 0) return nullptr;
  return &qerr[i];
}

int SequenceState::dropped_at_step(int pos, int layer) const {
  const size_t i = static_cast<size_t>(pos) * n_layer + layer;
  return pos < 0 || layer < 0 || layer >= n_layer || i >= dropped_at.size() ? -1 : dropped_at[i];
}

double SequenceState::dropped_with_score(int pos, int layer) const {
  const size_t i = static_cast<size_t>(pos) * n_layer + layer;
  return dropped_at_step(pos, layer) < 0 || i >= dropped_score.size() ? -1.0 : dropped_score[i];
}

SequenceState build_sequence(const std::vector<RecordPtr>& records, size_t count) {
  SequenceState seq;
  count = std::min(count, records.size());
  for (size_t i = 0; i < count; ++i) append_record(seq, records[i]);
  return seq;
}

namespace {

// Control characters of `piece` from `i` on made visible (visible_piece's rules after its leading spaces).
void append_visible(const std::string& piece, size_t i, std::string& out) {
  auto hex = [](unsigned char b) {
    static const char* digits = "0123456789abcdef";
    return std::string{'\\', 'x', digits[b >> 4], digits[b & 15]};
  };
  for (; i < piece.size(); ++i) {
    const char c = piece[i];
    if (c == '\n') {
      out += "\xE2\x86\xB5";  // U+21B5
    } else if (c == '\t') {
      out += "\xE2\x86\x92";  // U+2192
    } else if (c == '\r') {
      out += "\\r";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += hex(static_cast<unsigned char>(c));  // no glyph: the font would draw U+FFFD
    } else if (static_cast<unsigned char>(c) == 0xc2 && i + 1 < piece.size() &&
               static_cast<unsigned char>(piece[i + 1]) >= 0x80 && static_cast<unsigned char>(piece[i + 1]) < 0xa0) {
      // C1 controls (U+0080..U+009F, e.g. NEL) likewise, as their two UTF-8 bytes.
      out += hex(0xc2) + hex(static_cast<unsigned char>(piece[++i]));
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string visible_piece(const std::string& piece) {
  std::string out;
  size_t i = 0;
  for (; i < piece.size() && piece[i] == ' '; ++i) out += "\xC2\xB7";  // U+00B7
  append_visible(piece, i, out);
  return out;
}

std::string visible_text(const std::string& text) {
  std::string out;
  append_visible(escape_invalid_utf8(text), 0, out);
  return out;
}

}  // namespace kvscope
