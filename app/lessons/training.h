// Training made visible: the record of a model's own training run (the loss
// curve and the checkpoints kept along it, each an ordinary model folder with
// the same tokenizer), found next to the loaded model, validated, and laid out
// as a plot. Pure data and geometry: no GL, no ImGui; the Training tab
// (app/gui/panels/training.cpp) draws it and the Session loads the picked checkpoint.
//
// The record is tools/train/export_snapshots.py's training.json:
//   { "model": name, "total_steps": N, "batch_tokens": B, "note": "...",
//     "curve": [ {"step", "tokens", "train_loss" (null at step 0), "val_<slice>": nats/token, ...}, ... ],
//     "checkpoints": [ {"step", "tokens", "dir" (relative to training.json's folder),
//                       "val_loss": {<slice>: nats/token, ...}}, ... ] }   the final model listed last
// Where it is found, for a loaded model folder D:
//   D/../<basename D>-training/training.json   D is the run's final model (assets/models/kvscope-tiny)
//   D/../training.json                         D is one of its checkpoints (kvscope-tiny-training/step-00300)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/decoding/generator.h"

namespace kvscope {

// One row of the loss curve. Losses in nats/token; NaN where not measured.
struct TrainingPoint {
  int step = 0;
  int64_t tokens = 0;  // training tokens seen so far
  double train_loss = 0;
  std::vector<double> val;  // (slice) in TrainingRecord::slices order
};

struct TrainingCheckpoint {
  int step = 0;
  int64_t tokens = 0;
  std::string dir;          // as written in the record
  std::string path;         // resolved folder (canonical)
  std::vector<double> val;  // (slice) whole-slice validation loss; NaN where not given
};

struct TrainingRecord {
  std::string file;  // training.json it was read from
  std::string model;
  int total_steps = 0;
  int64_t batch_tokens = 0;
  std::vector<std::string> slices;              // validation slices, e.g. stories, facts, code
  std::vector<TrainingPoint> curve;             // steps increasing (a repeated step keeps its last row)
  std::vector<TrainingCheckpoint> checkpoints;  // steps increasing; the last is the final model
};

// Parses and checks a training.json text; `file` names it in errors and
// resolves the checkpoint folders. Throws kvscope::Error naming the file and
// the field and what was expected. A checkpoint folder must hold config.json.
TrainingRecord parse_training_record(const std::string& text, const std::string& file);

// The record for a loaded model folder (see above). Returns false when there
// is none (no file: an ordinary model); throws kvscope::Error when there is
// one but it cannot be read or is invalid.
bool find_training_record(const std::string& model_dir, TrainingRecord& out);

// Index of the checkpoint whose folder is `model_dir` (-1: none of them).
int checkpoint_index(const TrainingRecord& r, const std::string& model_dir);

// Mean of the slices that are measured (NaN when none is); slice >= 0: that one.
double validation_loss(const std::vector<double>& val, int slice);

// How spread out a step's attention is, for "diffuse at the start of training,
// structured at the end": the entropy (bits) of the newest position's row
// over the keys, per (layer, head), averaged; a uniform row over `keys`
// keys has log2(keys) bits, a beam with all the weight on one key has 0.
struct AttentionSpread {
  int keys = 0;
  double mean_bits = 0;     // mean over layers and heads
  double uniform_bits = 0;  // log2(keys)
  double mean_top = 0;      // mean over layers and heads of the largest weight
};
AttentionSpread attention_spread(const StepForward& r);

// --- the plot ---------------------------------------------------------------
struct PlotPoint {
  float x = 0, y = 0;
};
struct PlotRect {
  float x = 0, y = 0, w = 0, h = 0;  // screen pixels, y down
};

// The curve laid out in `r`: x from step 0 to the last step (curve or
// checkpoint), y from the lowest to the highest loss shown (with a margin),
// higher loss higher up. `slice`: -1 = mean over the slices, else that one.
// `reference` (e.g. ln(vocabulary), a uniform guess; NaN: none) is kept in range.
struct TrainingPlot {
  std::vector<PlotPoint> train, val;  // polylines (rows without the value skipped)
  std::vector<PlotPoint> marks;       // (checkpoint) at its step and its own validation loss
  double y_lo = 0, y_hi = 1;          // the loss at the bottom and at the top edge
  PlotRect rect;
  int step_hi = 1;  // the step at the right edge
};
TrainingPlot layout_training_plot(const TrainingRecord& r, int slice, PlotRect rect, double reference);

// The checkpoint whose mark is nearest to the pointer's x, if within
// `max_px` pixels; else -1.
int pick_checkpoint(const TrainingPlot& p, float mouse_x, float max_px);

}  // namespace kvscope
