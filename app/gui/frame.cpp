#include "app/gui/frame.h"

#include <algorithm>

#include "app/gui/panels/lesson_panels.h"
#include "model/core/overloaded.h"
#include "render/scene/scene_beams.h"
#include "render/scene/scene_spec.h"

namespace kvscope {

namespace {

// The chat view: the conversation as the cache holds it, at its newest record.
void chat_frame_spec(const EngineState& engine, FrameSpec& f) {
  const ChatState& c = engine.chat;
  f.seq = &c.seq;
  f.timeline = nullptr;
  f.view.hide_newest = false;
  f.hud = f.presentation = false;
  f.step = c.seq.n_records - 1;
  f.n_steps = c.seq.n_records;
  f.live = true;
  f.chat.tags = &c.tags;
  if (const ChatTurn* t = c.turn()) {
    f.chat.turn = t->start.turn;
    f.chat.reused = t->start.reused;
    f.chat.context = t->start.context;
  }
  f.message.clear();
  if (!c.seq.current)
    f.message = !c.template_error.empty()
                    ? "this model has no chat template kvscope can use: choose a built-in format in the chat column"
                    : "type a message: every turn the model re-reads the whole conversation, and the KV cache keeps "
                      "what it has read";
}

}  // namespace

FrameSpec frame_spec(const Session& s, float anim, int hover_pos) {
  const EngineState& engine = s.engine;
  const UiState& ui = s.ui;
  FrameSpec f;
  f.seq = &engine.seq;
  f.model = engine.model.get();
  f.view.layer = ui.layer;
  f.view.head = ui.head;
  f.view.min_weight = ui.min_weight;
  f.view.rays = ui.rays;
  f.view.palette = palette_for(ui.colour_blind);
  f.view.hide_newest = prediction_hidden(engine, ui);
  f.anim = anim;
  f.labels = ui.labels;
  f.legend = ui.legend;
  f.hud = ui.hud;
  f.presentation = ui.presentation;
  f.step = shown_step(engine, ui);
  f.n_steps = engine.timeline_size();
  f.live = ui.view_step < 0;
  f.hover_pos = hover_pos;
  f.timeline = &engine.tree.timeline();
  f.decode_count = static_cast<size_t>(std::max(0, f.step + 1));
  // A speculative iteration held at one stage (Decoding panel).
  if (std::holds_alternative<SpecTimeline>(*f.timeline) && ui.spec_stage != SpecStage::kAnimate)
    f.anim = spec_stage_anim(static_cast<int>(ui.spec_stage));
  // (while the error panel is up it says what went wrong; the hint is back once it is dismissed)
  if (engine.timeline_size() == 0 && ui.errors.empty())
    f.message = engine.loading_model ? "loading the model\xE2\x80\xA6"
                : !engine.model      ? "no model: open a model folder (GPT-2, Llama, Mistral, Qwen2) in the Model panel"
                                     : "paused before the first step: \xE2\x86\x92 or Space runs the prefill";
  f.weights_note = checkpoint_note(engine);
  const ServeRequestView& served = ui.memo.serve_request.view;
  if (ui.serving.open && ui.serving.view_w > 0 && served.seq.current) {  // the Serving view's selected request
    f.seq = &served.seq;
    f.timeline = nullptr;
    f.view.hide_newest = false;
    f.hud = f.presentation = false;
    f.legend = f.legend && !ui.serving.folded;  // (folded: the picture needs the room more than the key)
    f.step = served.record;
    f.message.clear();
    f.banner = served.banner;
    f.banner_sub = served.banner_sub;
  }
  if (ui.chat.open) chat_frame_spec(engine, f);
  return f;
}

namespace {

HudInfo hud_info(const FrameSpec& f) {
  HudInfo hud;
  hud.model_name = f.model ? f.model->name : "";
  hud.step = f.step;
  hud.n_steps = f.n_steps;
  hud.record = f.seq->current.get();
  hud.hidden = f.view.hide_newest;
  hud.live = f.live;
  hud.palette = f.view.palette;
  if (hud.record && f.model)
    for (const Candidate& c : hud.record->top)
      hud.top_pieces.push_back(visible_piece(f.model->tokenizer.display_piece(c.token)));
  return hud;
}

// The legend gets a band of its own under the view, so it never covers the
// stacks whatever the camera frames (the follow camera fills the view with
// the newest tokens): its entries in rows, its text as large as keeps the
// band within 30 % of the height and its widest entry within the view's
// width (a tall, narrow view). Full entries while they need shrinking to
// no less than 80 %, else the terse ones (without their notes) down to 45 %:
// at a large text scale a shorter legend reads better than a smaller one.
// Where even those run past the view's edge, no legend. Sets ov.band,
// ov.legend_scale, ov.legend_terse and (off) ov.legend.
void place_legend(const Scene& scene, const OverlayFonts& fonts, float view_w, float avail_h, OverlayOptions& ov) {
  bool fits_width = false;
  for (const bool terse : {false, true}) {
    ov.legend_terse = terse;
    for (int pct = 100; pct >= (terse ? 45 : 80); pct -= 5) {
      ov.legend_scale = static_cast<float>(pct) / 100.0f;
      ov.band = legend_band(scene, fonts, ov, view_w);
      fits_width = legend_fits_width(scene, fonts, ov, view_w);
      if (ov.band <= 0.3f * avail_h && fits_width) return;
    }
  }
  if (!fits_width) {
    ov.legend = false;
    ov.band = legend_band(scene, fonts, ov, view_w);  // 0
  }
}

// The message while there is no step, below the middle (the error panel,
// panel_errors, sits above it), wrapped at 90 % of the view's width: in the
// banner's font where it fits in the view's lower part, else smaller, down to
// the small font's size; never past the view's bottom edge (the legend's
// band is under it).
void draw_message(ImDrawList* dl, const std::string& message, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts) {
  const float wrap = size.x * 0.9f, room = size.y * 0.36f;
  const float smallest = std::min(fonts.banner->FontSize, fonts.small->FontSize);
  float fs = fonts.banner->FontSize;
  ImVec2 ts = fonts.banner->CalcTextSizeA(fs, wrap, wrap, message.c_str());
  for (; ts.y > room && fs > smallest; ts = fonts.banner->CalcTextSizeA(fs, wrap, wrap, message.c_str()))
    fs = std::max(smallest, fs * 0.9f);
  const float y = std::max(origin.y, std::min(origin.y + size.y * 0.62f, origin.y + size.y - ts.y));
  dl->AddText(fonts.banner, fs, ImVec2(origin.x + std::max(0.0f, (size.x - ts.x) * 0.5f), y),
              IM_COL32(200, 210, 230, 255), message.c_str(), nullptr, wrap);
}

}  // namespace

// The banner gets a band of its own above the view, so the camera frames the
// scene below it and no tag or label sits under it: its text as large as
// keeps the band within 30 % of the height (and not under half size). Sets
// ov.top and ov.banner_scale.
void place_banner(const Scene& scene, const OverlayFonts& fonts, float view_w, float avail_h, OverlayOptions& ov) {
  for (int pct = 100; pct >= 50; pct -= 5) {
    ov.banner_scale = static_cast<float>(pct) / 100.0f;
    ov.top = banner_band(scene, fonts, view_w, ov.banner_scale);
    if (ov.top <= 0.3f * avail_h) return;
  }
}

// The scene of the shown step, from the same pure builders `kvscope render` uses.
Scene frame_scene(const FrameSpec& f) {
  const StrategyTimeline none;
  Scene s =
      std::visit(overloaded{
                     [&](std::monostate) { return build_scene(*f.seq, f.view, f.anim); },
                     [&](const BeamTimeline& beams) {
                       if (!f.model) return build_scene(*f.seq, f.view, f.anim);  // (its depth is the model's)
                       return build_beam_scene(beams, f.decode_count, f.model->config.n_layer, f.anim, f.view);
                     },
                     [&](const SpecTimeline& its) { return build_spec_scene(its, f.decode_count, f.anim, f.view); },
                 },
                 f.timeline ? *f.timeline : none);
  if (f.chat.tags) add_chat_marks(s, f.chat);
  if (!f.banner.empty()) {
    s.banner = f.banner;
    s.banner_sub = f.banner_sub;
  } else if (!f.weights_note.empty() && !s.banner.empty()) {
    s.banner_sub += (s.banner_sub.empty() ? "" : " \xC2\xB7 ") + f.weights_note;
  }
  return s;
}

ComposedFrame compose_frame(const FrameSpec& f, const OverlayFonts& fonts, float view_w, float avail_h) {
  ComposedFrame fr;
  fr.scene = frame_scene(f);
  OverlayOptions& ov = fr.overlay;
  ov.labels = f.labels;
  ov.legend = f.legend && !f.presentation;
  ov.hud = f.hud && !f.presentation;
  ov.hover_pos = f.hover_pos;
  ov.model_name = f.model ? f.model->name : "";
  ov.record = f.seq->current.get();
  ov.text_scale = fonts.scale;
  if (f.presentation) {  // the HUD's card and strip beside and under the scene, never over it
    const HudGeometry g = presentation_hud_geometry(ImVec2(view_w, avail_h), fonts, hud_info(f));
    fr.right = std::min(g.card_w, view_w * 0.35f);
    ov.band = g.strip_h;
  } else if (ov.legend) {
    place_legend(fr.scene, fonts, view_w, avail_h, ov);
  }
  if (ov.banner) place_banner(fr.scene, fonts, view_w - fr.right, avail_h, ov);
  return fr;
}

void draw_frame_text(ImDrawList* dl, const ComposedFrame& fr, const FrameSpec& f, const Camera& camera, ImVec2 origin,
                     ImVec2 size, const OverlayFonts& fonts) {
  draw_overlay(dl, fr.scene, camera, origin, size, fonts, fr.overlay);
  if (f.presentation)  // its card in the right column from the top of the banner's band
    draw_presentation_hud(dl, ImVec2(origin.x, origin.y - fr.overlay.top),
                          ImVec2(size.x + fr.right, fr.overlay.top + size.y + fr.overlay.band), fonts, hud_info(f));
  if (!f.message.empty()) draw_message(dl, f.message, origin, size, fonts);
}

}  // namespace kvscope
