// The scene builder is a pure function of step records: these tests build
// records by hand (so every expected number is known independently of the
// engine) and check what the renderer would be asked to draw.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "model/decoding/generator.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"
#include "render/scene/scene_format.h"
#include "scene_fixtures.h"

namespace kvscope {
namespace {

using namespace scene_fixtures;  // kLayers, kHeads, kEmbd, make_record, make_history

const BlockInstance* kv_block(const Scene& s, int pos, int layer) {
  for (const auto& b : s.kv)
    if (b.pos == pos && b.layer == layer) return &b;
  return nullptr;
}

// Rounding never turns an uncertain token into a certainty, or a possible one into 0.
TEST(SceneFormat, PercentTextNeverRoundsToACertaintyOrToZero) {
  struct Case {
    double p;
    int decimals;
    const char* want;
  };
  const Case cases[] = {
      {0.63, 0, "63%"}, {1.0, 0, "100%"},     {0.9996, 0, ">99%"}, {0.994, 0, "99%"},
      {0.0, 0, "0%"},   {0.004, 0, "<1%"},    {0.005, 0, "<1%"},  // printf rounds 0.5 to the even 0
      {0.006, 0, "1%"}, {0.627, 1, "62.7%"},  {1.0, 1, "100.0%"},  {0.99996, 1, ">99.9%"},
      {0.0, 1, "0.0%"}, {0.0004, 1, "<0.1%"}, {0.0006, 1, "0.1%"},
  };
  for (const Case& c : cases) EXPECT_EQ(percent_text(c.p, c.decimals), c.want) << c.p << " " << c.decimals;
}

TEST(Scene, EmptyBeforePrefill) {
  Scene s = build_scene(std::vector<RecordPtr>{}, 0, ViewOptions());
  EXPECT_EQ(s.phase, Phase::kNone);
  EXPECT_TRUE(s.tokens.empty());
  EXPECT_TRUE(s.kv.empty());
  EXPECT_TRUE(s.rays.empty());
}

TEST(Scene, PrefillBurstLightsEveryPromptPositionAtOnce) {
  const int P = 5;
  auto h = make_history(P, {});
  Scene s = build_scene(h, 1, ViewOptions(), 0.0f);
  EXPECT_EQ(s.phase, Phase::kPrefill);
  EXPECT_EQ(s.banner, "PREFILL");
  EXPECT_EQ(s.seq_len, P);
  EXPECT_EQ(s.slot, P);
  // Prompt + the token the prefill chose; a full stack under each.
  ASSERT_EQ(s.tokens.size(), static_cast<size_t>(P + 1));
  ASSERT_EQ(s.kv.size(), static_cast<size_t>((P + 1) * kLayers));
  for (const auto& b : s.kv) {
    if (b.pos < P) {
      EXPECT_EQ(b.state, KvState::kPrefill) << b.pos << "," << b.layer;
      EXPECT_TRUE(is_flash(b.state));
      EXPECT_TRUE(is_held(b.state));
      EXPECT_GT(b.glow, 0.9f);  // at anim 0 the burst is at full brightness
    } else {
      EXPECT_EQ(b.state, KvState::kEmpty);  // the new token's K/V come next step
      EXPECT_EQ(b.colour.a, 0.0f);          // drawn as an outline
    }
  }
  // Settled: the burst has faded.
  Scene settled = build_scene(h, 1, ViewOptions(), 1.0f);
  for (const auto& b : settled.kv)
    if (b.pos < P) {
      EXPECT_LT(b.glow, 0.05f);
    }
}

TEST(Scene, BlockPositionsFollowTheLayout) {
  const Palette& pal = palette_for(false);
  const int P = 4;
  auto h = make_history(P, {CacheMode::kKV, CacheMode::kKV});
  Layout L;
  Scene s = build_scene(h, h.size(), ViewOptions(), 1.0f, L);
  const int T = P + 2;
  ASSERT_EQ(s.tokens.size(), static_cast<size_t>(T + 1));
  for (int p = 0; p <= T; ++p) {
    const auto& b = s.tokens[p];
    EXPECT_EQ(b.pos, p);
    EXPECT_FLOAT_EQ(b.center.x, p * L.pitch);
    EXPECT_FLOAT_EQ(b.center.y, L.token_bottom(kLayers) + L.token_h / 2);
    EXPECT_FLOAT_EQ(b.center.z, 0.0f);
  }
  // Prompt tokens dim, generated bright, newest brightest.
  EXPECT_EQ(glm::vec3(s.tokens[0].colour), pal.prompt_token);
  EXPECT_EQ(glm::vec3(s.tokens[P].colour), pal.generated_token);
  EXPECT_EQ(glm::vec3(s.tokens[T].colour), pal.new_token);
  for (int p = 0; p < T; ++p)
    for (int l = 0; l < kLayers; ++l) {
      const BlockInstance* b = kv_block(s, p, l);
      ASSERT_NE(b, nullptr);
      EXPECT_FLOAT_EQ(b->center.x, p * L.pitch);
      // Stacked from the ground up: the block's bottom sits on its layer's floor.
      EXPECT_NEAR(b->center.y - b->size.y / 2, l * L.layer_pitch, 1e-5);
      // Height from the real K norm, |K| = p + 1 + l, relative to the layer max.
      const float max_norm = static_cast<float>(T - 1 + 1 + l);
      const float frac = static_cast<float>(p + 1 + l) / max_norm;
      EXPECT_NEAR(b->size.y, L.kv_h * (L.kv_min_frac + (1 - L.kv_min_frac) * frac), 1e-5);
      // Taller blocks are brighter: the colour is the same quantity (the
      // newest position is tinted as new instead).
      if (p < T - 1) {
        EXPECT_EQ(b->state, KvState::kResident);
        EXPECT_NEAR(b->colour.g, glm::mix(pal.cache_low, pal.cache_high, frac).g, 1e-5);
      }
    }
}

TEST(Scene, KvDecodeLightsOnlyTheNewPosition) {
  const int P = 5;
  auto h = make_history(P, {CacheMode::kKV, CacheMode::kKV, CacheMode::kKV});
  Scene s = build_scene(h, h.size(), ViewOptions(), 0.1f);
  const int T = P + 3;
  EXPECT_EQ(s.phase, Phase::kDecodeKV);
  EXPECT_EQ(s.banner, "DECODE \xC2\xB7 KV CACHE");
  for (const auto& b : s.kv) {
    if (b.pos < T - 1) {
      EXPECT_EQ(b.state, KvState::kResident);
    } else if (b.pos == T - 1) {
      EXPECT_EQ(b.state, KvState::kNew);
    } else
      EXPECT_EQ(b.state, KvState::kEmpty);
    EXPECT_EQ(is_flash(b.state), b.pos == T - 1);
    EXPECT_EQ(is_held(b.state), b.pos < T);
  }
}

TEST(Scene, NoCacheFlashesEveryEarlierPositionAndHoldsNothing) {
  const Palette& pal = palette_for(false);
  const int P = 5;
  auto h = make_history(P, {CacheMode::kKV, CacheMode::kNoCache, CacheMode::kNoCache});
  Scene s = build_scene(h, h.size(), ViewOptions(), 0.0f);
  const int T = P + 3;
  EXPECT_EQ(s.phase, Phase::kDecodeNoCache);
  EXPECT_NE(s.banner.find("NO CACHE"), std::string::npos);
  EXPECT_NE(s.banner.find("recomputing " + std::to_string(T - 1) + " positions"), std::string::npos);
  int recomputed = 0, dropped = 0;
  for (const auto& b : s.kv) {
    EXPECT_FALSE(is_held(b.state)) << "NO CACHE keeps nothing: " << b.pos << "," << b.layer;
    if (b.pos < T - 1) {
      EXPECT_EQ(b.state, KvState::kRecomputed);
      EXPECT_EQ(glm::vec3(b.colour), pal.recomputed);  // red
      EXPECT_GT(b.glow, 0.9f);
      ++recomputed;
    } else if (b.pos == T - 1) {
      EXPECT_EQ(b.state, KvState::kNewDropped);
      ++dropped;
    } else {
      EXPECT_EQ(b.state, KvState::kEmpty);
    }
  }
  EXPECT_EQ(recomputed, (T - 1) * kLayers);
  EXPECT_EQ(dropped, kLayers);
  // Settled: the red blocks fade to outlines (thrown away), but stay visible.
  Scene settled = build_scene(h, h.size(), ViewOptions(), 1.0f);
  for (const auto& b : settled.kv)
    if (b.state == KvState::kRecomputed) {
      EXPECT_LT(b.colour.a, 0.5f);
      EXPECT_GT(b.colour.a, 0.0f);
    }
}

TEST(Scene, SwitchingBackToKvCacheRefillsTheCache) {
  const int P = 4;
  auto h = make_history(P, {CacheMode::kNoCache, CacheMode::kNoCache, CacheMode::kKV, CacheMode::kKV});
  const int T_refill = P + 3;
  Scene s = build_scene(h, 4, ViewOptions(), 0.0f);  // prefill, 2 x NO CACHE, the refill
  EXPECT_EQ(s.phase, Phase::kRefill);
  EXPECT_NE(s.banner.find("REFILL"), std::string::npos);
  for (const auto& b : s.kv) {
    if (b.pos < T_refill - 1) {
      EXPECT_EQ(b.state, KvState::kRefill);
    } else if (b.pos == T_refill - 1) {
      EXPECT_EQ(b.state, KvState::kNew);
    }
    if (b.pos < T_refill) {
      EXPECT_TRUE(is_held(b.state));
    }
  }
  // The step after is plain decode again.
  Scene next = build_scene(h, 5, ViewOptions(), 0.0f);
  EXPECT_EQ(next.phase, Phase::kDecodeKV);
  EXPECT_EQ(kv_block(next, 0, 0)->state, KvState::kResident);
}

TEST(Scene, BeamWeightsAreTheRecordsAttentionWeights) {
  const int P = 6;
  auto h = make_history(P, {CacheMode::kKV, CacheMode::kKV});
  const StepRecord& r = *h.back();
  const int T = r.seq_len;
  Layout L;
  for (int layer = -1; layer < kLayers; ++layer)
    for (int head = -1; head < kHeads; ++head) {
      ViewOptions v;
      v.layer = layer;
      v.head = head;
      Scene s = build_scene(h, h.size(), v, 1.0f, L);
      ASSERT_EQ(s.rays.size(), static_cast<size_t>(T)) << layer << "," << head;
      float sum = 0;
      for (int key = 0; key < T; ++key) {
        // Independent of attention_weight(): read the raw array.
        double expect = 0;
        int n = 0;
        for (int l = 0; l < kLayers; ++l)
          for (int hh = 0; hh < kHeads; ++hh) {
            if ((layer >= 0 && l != layer) || (head >= 0 && hh != head)) continue;
            expect += r.attn[((static_cast<size_t>(l) * kHeads + hh) * 1 + 0) * T + key];
            ++n;
          }
        expect /= n;
        const RayInstance& b = s.rays[key];
        EXPECT_EQ(b.key, key);
        EXPECT_NEAR(b.weight, expect, 1e-6);
        sum += b.weight;
        // From the write head to the selected layer's KV block of that key.
        EXPECT_EQ(b.from, s.head_pos);
        EXPECT_FLOAT_EQ(b.to.x, key * L.pitch);
        if (layer >= 0) {
          EXPECT_FLOAT_EQ(b.to.y, L.kv_bottom(layer) + L.kv_h / 2);
        }
        EXPECT_FLOAT_EQ(b.to.z, L.block_w / 2);  // on the block's front face
      }
      EXPECT_NEAR(sum, 1.0f, 1e-5);  // a softmax row
    }
}

TEST(Scene, MinWeightHidesWeakBeams) {
  auto h = make_history(8, {CacheMode::kKV});
  const StepRecord& r = *h.back();
  ViewOptions v;
  v.layer = 1;
  v.head = 0;
  v.min_weight = 0.1f;
  Scene s = build_scene(h, h.size(), v);
  int expect = 0;
  for (int key = 0; key < r.seq_len; ++key)
    if (r.attention(1, 0, 0, key) >= 0.1f) ++expect;
  EXPECT_EQ(s.rays.size(), static_cast<size_t>(expect));
  for (const auto& b : s.rays) EXPECT_GE(b.weight, 0.1f);
  v.rays = false;
  EXPECT_TRUE(build_scene(h, h.size(), v).rays.empty());
}

TEST(Scene, OutOfRangeLayerOrHeadFallsBackToTheMean) {
  auto h = make_history(5, {CacheMode::kKV});
  ViewOptions bad;
  bad.layer = kLayers + 3;
  bad.head = kHeads;
  Scene s = build_scene(h, h.size(), bad);
  Scene mean = build_scene(h, h.size(), ViewOptions());
  ASSERT_EQ(s.rays.size(), mean.rays.size());
  for (size_t i = 0; i < s.rays.size(); ++i) EXPECT_FLOAT_EQ(s.rays[i].weight, mean.rays[i].weight);
}

TEST(Scene, PrefillBeamsUseTheLastPromptRow) {
  const int P = 5;
  auto h = make_history(P, {});
  const StepRecord& r = *h[0];
  ViewOptions v;
  v.layer = 2;
  v.head = 1;
  Scene s = build_scene(h, 1, v);
  ASSERT_EQ(s.rays.size(), static_cast<size_t>(P));
  for (int key = 0; key < P; ++key)
    EXPECT_FLOAT_EQ(s.rays[key].weight, r.attn[((2 * kHeads + 1) * P + (P - 1)) * P + key]);
}

TEST(Scene, NewTokenDropsInFromTheWriteHead) {
  auto h = make_history(4, {CacheMode::kKV});
  Layout L;
  Scene start = build_scene(h, h.size(), ViewOptions(), 0.0f, L);
  Scene end = build_scene(h, h.size(), ViewOptions(), 1.0f, L);
  const int slot = end.slot;
  EXPECT_EQ(start.tokens[slot].center, start.head_pos);
  EXPECT_LT(start.tokens[slot].size.x, L.block_w);
  EXPECT_EQ(end.tokens[slot].center, L.token_center(slot, kLayers));
  EXPECT_FLOAT_EQ(end.tokens[slot].size.x, L.block_w);
  // Beams fade in; settled they are fully visible.
  EXPECT_FLOAT_EQ(start.rays[0].colour.a, 0.0f);
  EXPECT_FLOAT_EQ(end.rays[0].colour.a, 1.0f);
  // In between, nothing jumps: the token moves monotonically down the x = slot line.
  float prev_z = start.tokens[slot].center.z;
  for (float a = 0.5f; a <= 1.0f; a += 0.05f) {
    Scene mid = build_scene(h, h.size(), ViewOptions(), a, L);
    EXPECT_LE(mid.tokens[slot].center.z, prev_z + 1e-6f);
    prev_z = mid.tokens[slot].center.z;
  }
}

TEST(Scene, LabelsMakeSpacesVisible) {
  EXPECT_EQ(visible_piece(" the"), "\xC2\xB7the");
  EXPECT_EQ(visible_piece("  x"), "\xC2\xB7\xC2\xB7x");
  EXPECT_EQ(visible_piece("a b"), "a b");
  EXPECT_EQ(visible_piece("\n"), "\xE2\x86\xB5");
  EXPECT_EQ(visible_piece("\xE2\x9C\xA8"), "\xE2\x9C\xA8");  // UTF-8 passes through
  EXPECT_EQ(visible_piece("\\xe2\\x80"), "\\xe2\\x80");      // escaped partial bytes stay escaped
  // Control characters have no glyph: \xNN per byte, never the font's U+FFFD.
  EXPECT_EQ(visible_piece(std::string("\x01\x1b[0m\x7f", 6)), "\\x01\\x1b[0m\\x7f");
  EXPECT_EQ(visible_piece(std::string(1, '\0')), "\\x00");
  EXPECT_EQ(visible_piece("a\xC2\x85"), "a\\xc2\\x85");  // U+0085 (NEL), a C1 control
  EXPECT_EQ(visible_piece("\xC2\xA0"), "\xC2\xA0");      // U+00A0 is printable: passes through
  // Running text (a branch or a request in a panel): spaces stay, raw bytes cut mid-character escape too.
  EXPECT_EQ(visible_text(std::string(" a\x0e b\xb8\n\xE2\x9C\xA8 ", 11)), " a\\x0e b\\xb8\xE2\x86\xB5\xE2\x9C\xA8 ");
  auto h = make_history(3, {CacheMode::kKV});
  Scene s = build_scene(h, h.size(), ViewOptions());
  int token_labels = 0;
  for (const auto& l : s.labels)
    if (l.kind == LabelKind::kToken) {
      ++token_labels;
      if (l.pos == 1) {
        EXPECT_EQ(l.text, "\xC2\xB7w1");
      }
    }
  EXPECT_EQ(token_labels, static_cast<int>(s.tokens.size()));
}

TEST(Scene, ManyTokensStayCheap) {
  // Full context of a GPT-2-sized sequence: without a column limit one
  // instance per block and beam; by default at most max_columns columns.
  const int P = 1000;
  auto h = make_history(P, {CacheMode::kKV});
  ViewOptions all;
  all.max_columns = 0;
  Scene s = build_scene(h, h.size(), all);
  EXPECT_EQ(s.kv.size(), static_cast<size_t>((P + 2) * kLayers));
  EXPECT_EQ(s.rays.size(), static_cast<size_t>(P + 1));
  s = build_scene(h, h.size(), ViewOptions());
  EXPECT_LE(s.kv.size(), static_cast<size_t>(ViewOptions().max_columns * kLayers));
  EXPECT_LE(s.rays.size(), static_cast<size_t>(ViewOptions().max_columns));
}

TEST(Scene, PickFindsTheBlockUnderTheRay) {
  auto h = make_history(5, {CacheMode::kKV});
  Layout L;
  Scene s = build_scene(h, h.size(), ViewOptions(), 1.0f, L);
  const BlockInstance* b = kv_block(s, 2, 1);
  ASSERT_NE(b, nullptr);
  Pick p = pick(s, glm::vec3(b->center.x, b->center.y, -50.0f), glm::vec3(0, 0, 1));
  EXPECT_EQ(p.kind, Pick::kKv);
  EXPECT_EQ(p.pos, 2);
  EXPECT_EQ(p.layer, 1);
  const glm::vec3 t = L.token_center(3, kLayers);
  p = pick(s, glm::vec3(t.x, 100.0f, 0.0f), glm::vec3(0, -1, 0));  // from above: the token first
  EXPECT_EQ(p.kind, Pick::kToken);
  EXPECT_EQ(p.pos, 3);
  p = pick(s, glm::vec3(-100, 100, 100), glm::vec3(0, 1, 0));
  EXPECT_EQ(p.kind, Pick::kNothing);
}

TEST(Scene, PredictModeHidesOnlyTheNewestToken) {
  const Palette& pal = palette_for(false);
  const auto h = make_history(5, {CacheMode::kKV, CacheMode::kKV});
  ViewOptions v;
  const Scene shown = build_scene(h, h.size(), v);
  v.hide_newest = true;
  const Scene hidden = build_scene(h, h.size(), v);
  ASSERT_EQ(shown.tokens.size(), hidden.tokens.size());
  const int slot = hidden.slot;
  for (size_t i = 0; i < hidden.tokens.size(); ++i) {
    if (hidden.tokens[i].pos == slot) {
      EXPECT_EQ(glm::vec3(hidden.tokens[i].colour), pal.empty);  // a grey block, no token colour
    } else {
      EXPECT_EQ(hidden.tokens[i].colour, shown.tokens[i].colour);
    }
  }
  int found = 0;
  for (const Label& l : hidden.labels)
    if (l.kind == LabelKind::kToken && l.pos == slot) {
      EXPECT_EQ(l.text, "?");
      ++found;
    }
  EXPECT_EQ(found, 1);
  // The KV cache and the beams still show what ran.
  EXPECT_EQ(hidden.kv.size(), shown.kv.size());
  EXPECT_EQ(hidden.rays.size(), shown.rays.size());
}

// Predict mode: the write head's tag (drawn by the overlay in normal and
// presentation mode) names neither the newest token nor its probability
// until it is revealed.
TEST(Scene, PredictModeHidesTheNextTokenInTheWriteHeadsTag) {
  const auto h = make_history(5, {CacheMode::kKV, CacheMode::kKV});
  const StepRecord& r = *h.back();
  char prob[32];
  std::snprintf(prob, sizeof(prob), "%.0f%%", static_cast<double>(r.prob) * 100.0);
  for (bool hide : {false, true}) {
    ViewOptions v;
    v.hide_newest = hide;
    const Scene s = build_scene(h, h.size(), v);
    int heads = 0;
    for (const Label& l : s.labels) {
      if (l.kind != LabelKind::kHead) continue;
      ++heads;
      if (hide) {
        EXPECT_EQ(l.text, "next: ?");
        EXPECT_EQ(l.short_text.find(visible_piece(r.piece)), std::string::npos) << l.short_text;
      } else {
        EXPECT_NE(l.text.find(visible_piece(r.piece)), std::string::npos) << l.text;
        EXPECT_NE(l.text.find(prob), std::string::npos) << l.text;
      }
    }
    EXPECT_EQ(heads, 1);
  }
}

// Predict mode through the one view option: no label (text or its short
// form), tag or banner of the scene names the newest token or its
// probability, in any animation phase; the same scene without it does.
TEST(Scene, PredictModeNamesTheNextTokenNowhereInTheScene) {
  const auto h = make_history(5, {CacheMode::kKV, CacheMode::kKV});
  const StepRecord& r = *h.back();
  const std::string piece = visible_piece(r.piece);  // " t502" shown as "\xC2\xB7t502"
  char prob[32];
  std::snprintf(prob, sizeof(prob), "%.0f%%", static_cast<double>(r.prob) * 100.0);
  auto names_it = [&](const Scene& s) {
    int n = 0;
    auto has = [&](const std::string& t) {
      return t.find(piece) != std::string::npos || t.find(prob) != std::string::npos;
    };
    for (const Label& l : s.labels) n += has(l.text) || has(l.short_text) ? 1 : 0;
    return n + (has(s.banner) || has(s.banner_sub) ? 1 : 0);
  };
  for (const float anim : {0.0f, 0.5f, 1.0f}) {
    ViewOptions v;
    EXPECT_GE(names_it(build_scene(h, h.size(), v, anim)), 2) << anim;  // its block's label and the write head's tag
    v.hide_newest = true;
    EXPECT_EQ(names_it(build_scene(h, h.size(), v, anim)), 0) << anim;
  }
}

TEST(Scene, ColourBlindPaletteIsAValueInTheViewOptions) {
  const Palette& standard = palette_for(false);
  const Palette& safe = palette_for(true);
  EXPECT_NE(safe.new_kv, standard.new_kv);
  EXPECT_NE(safe.recomputed, standard.recomputed);
  // Okabe-Ito: the "new" green and the "recomputed" vermillion differ in lightness, not only in hue.
  auto luma = [](const glm::vec3& c) { return 0.2126f * c.r + 0.7152f * c.g + 0.0722f * c.b; };
  EXPECT_GT(std::abs(luma(safe.new_kv) - luma(safe.recomputed)), 0.05f);
  const auto h = make_history(5, {CacheMode::kNoCache});
  ViewOptions v;
  v.palette = safe;
  const Scene cb = build_scene(h, h.size(), v, 0.0f);
  const Scene plain = build_scene(h, h.size(), ViewOptions(), 0.0f);  // built after: nothing global was switched
  int cb_red = 0, plain_red = 0, n = 0;
  for (size_t i = 0; i < cb.kv.size(); ++i) {
    if (cb.kv[i].state != KvState::kRecomputed) continue;
    ++n;
    cb_red += glm::vec3(cb.kv[i].colour) == safe.recomputed;
    plain_red += glm::vec3(plain.kv[i].colour) == standard.recomputed;
  }
  EXPECT_GT(n, 0);
  EXPECT_EQ(cb_red, n) << "the scene uses the palette of its view options";
  EXPECT_EQ(plain_red, n);
  EXPECT_EQ(cb.palette.background, safe.background);  // the renderer's clear colour and the legend follow the scene
  EXPECT_EQ(plain.palette.background, standard.background);
}

TEST(Camera, PresetsFitTheWholeSequence) {
  auto h = make_history(40, {CacheMode::kKV, CacheMode::kKV});
  Scene s = build_scene(h, h.size(), ViewOptions());
  const float aspect = 16.0f / 9.0f;
  for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide}) {
    Camera c = preset_camera(p, s, aspect);
    const glm::mat4 vp = c.proj(aspect) * c.view();
    // The scene's box (TOP frames what stands in it: every block's corners,
    // not the box's empty top corners, which from above frame it wider).
    std::vector<glm::vec3> pts;
    for (int i = 0; i < 8; ++i)
      pts.push_back({(i & 1) ? s.bounds_max.x : s.bounds_min.x, (i & 2) ? s.bounds_max.y : s.bounds_min.y,
                     (i & 4) ? s.bounds_max.z : s.bounds_min.z});
    if (p == CameraPreset::kTop) {
      pts.clear();
      for (const auto* list : {&s.tokens, &s.kv, &s.markers})
        for (const BlockInstance& b : *list)
          for (int i = 0; i < 8; ++i)
            pts.push_back(b.center + 0.5f * b.size * glm::vec3((i & 1) ? 1 : -1, (i & 2) ? 1 : -1, (i & 4) ? 1 : -1));
    }
    for (const glm::vec3& q : pts) {
      glm::vec2 px;
      ASSERT_TRUE(project(vp, q, 1280, 720, px)) << to_string(p);
      EXPECT_GE(px.x, 0.0f) << to_string(p);
      EXPECT_LE(px.x, 1280.0f) << to_string(p);
      EXPECT_GE(px.y, 0.0f) << to_string(p);
      EXPECT_LE(px.y, 720.0f) << to_string(p);
    }
  }
  // FOLLOW keeps the write head in view.
  Camera f = preset_camera(CameraPreset::kFollow, s, aspect);
  glm::vec2 px;
  ASSERT_TRUE(project(f.proj(aspect) * f.view(), s.head_pos, 1280, 720, px));
  EXPECT_GT(px.x, 0.0f);
  EXPECT_LT(px.x, 1280.0f);
  CameraPreset parsed;
  EXPECT_TRUE(parse_camera("top", parsed));
  EXPECT_EQ(parsed, CameraPreset::kTop);
  EXPECT_FALSE(parse_camera("diagonal", parsed));
}

// A 30-layer model thousands of positions long: FOLLOW frames the newest
// columns bottom to top with the write head and its "next:" label below the
// step banner (the top 13 % of the window), and the stack's foot still in view.
TEST(Camera, FollowKeepsTheWriteHeadBelowTheBannerOnDeepModels) {
  const Layout L;
  for (int n_layer : {3, 12, 30}) {
    Scene s;
    s.n_layer = n_layer;
    s.slot = 3000;
    s.seq_len = 3000;
    s.head_pos = L.write_head(s.slot, n_layer);
    s.bounds_min = {L.x(0) - 2.2f * L.pitch, -0.1f, -L.block_w};
    s.bounds_max = {L.x(s.slot) + L.pitch, s.head_pos.y + 1.0f, L.head_z + 0.3f};
    for (float aspect : {16.0f / 9.0f, 4.0f / 3.0f}) {
      const float w = 720.0f * aspect, h = 720.0f;
      const Camera c = preset_camera(CameraPreset::kFollow, s, aspect);
      const glm::mat4 vp = c.proj(aspect) * c.view();
      glm::vec2 head, label, foot;
      ASSERT_TRUE(project(vp, s.head_pos, w, h, head));
      ASSERT_TRUE(project(vp, s.head_pos + glm::vec3(0.0f, 0.45f, 0.0f), w, h, label));
      ASSERT_TRUE(project(vp, {L.x(s.slot), 0.0f, 0.0f}, w, h, foot));
      EXPECT_GT(label.y, 0.13f * h) << n_layer << " layers";
      EXPECT_GT(head.x, 0.0f);
      EXPECT_LT(head.x, w);
      EXPECT_LT(foot.y, h) << n_layer << " layers";
      EXPECT_GT(foot.y, head.y);
    }
  }
}

TEST(Camera, ScreenRayHitsWhatProjectsThere) {
  auto h = make_history(10, {CacheMode::kKV});
  Scene s = build_scene(h, h.size(), ViewOptions());
  const float aspect = 1280.0f / 720.0f;
  Camera c = preset_camera(CameraPreset::kSide, s, aspect);
  const BlockInstance* b = kv_block(s, 4, 2);
  glm::vec2 px;
  ASSERT_TRUE(project(c.proj(aspect) * c.view(), b->center, 1280, 720, px));
  glm::vec3 o, d;
  screen_ray(c, aspect, px.x, px.y, 1280, 720, o, d);
  Pick p = pick(s, o, d);
  EXPECT_EQ(p.kind, Pick::kKv);
  EXPECT_EQ(p.pos, 4);
}

TEST(Format, HexBytes) {
  EXPECT_EQ(format_hex_bytes("A \xe2\x80"), "41 20 e2 80");
  EXPECT_EQ(format_hex_bytes(std::string("\xe2\x80\x99", 3)), "e2 80 99");
}

// A monospaced measure: 10 pixels a byte.
float mono_width(const std::string& s) {
  return 10.0f * static_cast<float>(s.size());
}

TEST(Format, SplitAfterKeepsTheSeparatorWithThePartBeforeIt) {
  EXPECT_EQ(split_after("a \xC2\xB7 b \xC2\xB7 c", " \xC2\xB7 "),
            (std::vector<std::string>{"a \xC2\xB7 ", "b \xC2\xB7 ", "c"}));
  EXPECT_EQ(split_after("one", " "), (std::vector<std::string>{"one"}));
}

TEST(Format, BalancedLinesLeaveNoWordAloneOnTheLastLine) {
  const std::string text = "nothing is kept: all 27 positions are computed again, then thrown away";  // 71 bytes
  const std::vector<std::string> words = split_after(text, " ");
  // Filled greedily 680 pixels wide it would end in a line "away"; balanced,
  // the same two lines break where the wider one is narrowest (33 and 36
  // bytes; one word later would make the first 37).
  EXPECT_EQ(balanced_lines(words, mono_width, 680.0f),
            (std::vector<std::string>{"nothing is kept: all 27 positions", "are computed again, then thrown away"}));
  // Three lines 300 pixels wide (greedily 23, 29 and 16 bytes): as many, none wider than 250 pixels.
  const std::vector<std::string> three = balanced_lines(words, mono_width, 300.0f);
  ASSERT_EQ(three.size(), 3u);
  std::string joined;
  for (const std::string& l : three) {
    EXPECT_LE(mono_width(l), 250.0f) << l;
    EXPECT_NE(l.find(' '), std::string::npos) << "a lone word: " << l;
    joined += (joined.empty() ? "" : " ") + l;
  }
  EXPECT_EQ(joined, text);
  // What fits stays on one line; a word wider than the room gets a line of its own.
  EXPECT_EQ(balanced_lines(words, mono_width, 720.0f), (std::vector<std::string>{text}));
  EXPECT_EQ(balanced_lines(split_after("a verylongword b", " "), mono_width, 60.0f),
            (std::vector<std::string>{"a", "verylongword", "b"}));
}

TEST(Format, BalancedLinesKeepTheBannersSeparatorsAtLineEnds) {
  const std::string dot = " \xC2\xB7 ";  // 4 bytes
  const std::vector<std::string> parts = split_after("one two" + dot + "three four" + dot + "five six seven", dot);
  // Greedily 200 pixels wide: "one two · three four ·" (24 bytes, too wide), so
  // "one two ·" / "three four ·" / "five six seven"; balanced keeps three lines.
  EXPECT_EQ(balanced_lines(parts, mono_width, 200.0f),
            (std::vector<std::string>{"one two \xC2\xB7", "three four \xC2\xB7", "five six seven"}));
}

}  // namespace
}  // namespace kvscope
