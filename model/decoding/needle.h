// Needle in a haystack: how much of a fact an eviction rule keeps. A long
// prompt holds one fact (the needle) at a chosen depth among filler
// sentences (the haystack) and ends with a question whose answer is a word
// only the needle gives. The prompt is prefilled in one forward (the layout's
// eviction acts after it, as in generation); then the answer's tokens are fed
// one per forward (teacher forcing), each predicted from what the cache
// still holds. The first answer token comes from the prefill's own forward,
// which every query computes over the whole prompt (eviction acts only after
// a forward), so only a multi-token answer shows what was evicted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

// The texts of a probe. Each haystack sentence and the needle begin with
// their separator (" " or "\n") so that pieces encode as the whole text does.
struct NeedleText {
  std::vector<std::string> haystack;  // filler sentences, in order
  std::string needle;                 // e.g. " There was also a kind robot named Zubrik"
  std::string answer;                 // the needle's last words, which the question's end calls for: "ubrik"
  std::string question;               // ends the prompt, e.g. "\nOne day, Z"
};

struct NeedleProbe {
  std::vector<int> prompt;  // haystack before, needle, haystack after, question
  std::vector<int> answer;  // the answer's tokens, as the needle spells them
  int needle_first = 0;     // the needle's tokens in the prompt: [needle_first, needle_end)
  int needle_end = 0;
  int answer_first = 0;  // the answer's tokens inside the needle: [answer_first, answer_first + answer.size())
  double depth = 0;      // the haystack share before the needle, as placed (0..1)
};

// The haystack's first sentences that fit `max_prompt` tokens with the needle
// and the question, the needle after the sentence boundary nearest `depth`
// (0: first, 1: last, before the question). Throws kvscope::Error when the
// answer is not in the needle's tokens, the needle and question alone do not
// fit, or depth is outside [0, 1].
NeedleProbe make_needle_probe(const Tokenizer& tok, const NeedleText& t, double depth, int max_prompt);

struct NeedleOutcome {
  std::vector<double> answer_prob;  // (answer) p(answer token i | prompt, answer[0, i)) under the layout
  std::vector<int> predicted;       // (answer) the most likely token at each of those places
  bool correct = false;             // predicted == answer: greedy decoding writes the answer
  // After the prefill's eviction, for each of the needle's answer positions
  // the share of layers (of (layer, K/V head) pairs where heads hold their
  // own positions) that still hold it, averaged over those positions.
  double answer_held = 0;
  double needle_held = 0;  // the same over every position of the needle
  uint64_t kv_bytes = 0;   // the cache after the prefill's eviction
};

// Runs the probe in `cache` (emptied before and after).
NeedleOutcome run_needle(Engine& engine, KVCache& cache, const NeedleProbe& p);

}  // namespace kvscope
