// The KV cache's layout in the scene: which positions a sliding window has
// evicted, the stripes of a quantized row format, and the marks on the
// ground (sink and window bars, page frames of a paged cache). Pure
// functions of the step records, like the rest of the scene builder.
#pragma once

#include "render/scene/scene.h"

namespace kvscope {

// True when the record's cache (KV CACHE with a sliding window) no longer
// holds `pos` after its forward: positions before seq_len missing from kv_held.
// Evicting by score: missing from layer `layer`'s held positions
// (kv_held_by_layer), or with layer -1 from every layer's.
bool evicted_from_cache(const StepRecord& r, int pos, int layer = -1);

// Evicting by score: the score layer `layer` ranks held position `pos` by
// after the record's forward (kv_score_by_layer); false when it is not held.
bool held_score(const StepCache& r, int pos, int layer, double* score);
// The highest score layer `layer` holds after the record's forward (0: none).
double max_held_score(const StepCache& r, int layer);

// Stripes drawn across a stored row of this dtype: its bits per value
// (f16 16, q8_0 8, q4_0 4), 0 for f32.
float kv_bands(KVDtype d);

// Adds the cache facts of `r` (already appended to seq.tokens) to `seq`:
// the quantization errors of the rows it wrote and, for a sliding window,
// the record that evicted each position; evicting by score, the record that
// dropped each (position, layer) and the score it was dropped with.
void append_cache_state(SequenceState& seq, const StepRecord& r);

// The page (block of the pool) holding `pos` after the record's forward and
// how many sequences reference it; false when the cache is not paged or no
// longer holds `pos`.
bool page_of(const StepCache& r, int pos, int* page, int* refs);

// Sink and window bars under the stacks and, for a paged cache, an outline
// frame around each page's positions (shared pages highlighted), with labels.
// Evicting by score: a score bar under every held KV block (and, on the step
// it is dropped, under the evicted one) and a caption naming the rule.
void add_cache_marks(Scene& s, const SequenceState& seq, const Layout& L, float flash);

}  // namespace kvscope
