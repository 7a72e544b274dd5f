#include "app/lessons/training.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"

namespace kvscope {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Reader {
  const std::string& file;

  [[noreturn]] void fail(const std::string& field, const std::string& expected, const json* got = nullptr) const {
    std::string msg = file + ": " + field + ": expected " + expected;
    if (got) msg += ", got " + json_quote(*got, 80);
    throw Error(msg);
  }
  const json& member(const json& obj, const char* key, const std::string& where) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where + key, "a value (missing)");
    return *it;
  }
  int64_t count(const json& obj, const char* key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 50))
      fail(where + key, "a whole number >= 0", &v);
    return v.get<int64_t>();
  }
  // A loss in nats/token; null (not measured) reads as NaN.
  double loss(const json& v, const std::string& field) const {
    if (v.is_null()) return kNaN;
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > 1e4)
      fail(field, "a loss in nats/token (a finite number >= 0) or null", &v);
    return v.get<double>();
  }
};

std::string canonical_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(dir), ec);
  if (ec) p = fs::absolute(fs::path(dir), ec);
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

TrainingCheckpoint read_checkpoint(const Reader& rd, const json& c, const std::string& where, const std::string& base) {
  if (!c.is_object()) rd.fail(where, "an object {step, tokens, dir, val_loss}", &c);
  TrainingCheckpoint ck;
  ck.step = static_cast<int>(std::min<int64_t>(rd.count(c, "step", where + "."), 1 << 30));
  ck.tokens = rd.count(c, "tokens", where + ".");
  const json& d = rd.member(c, "dir", where + ".");
  if (!d.is_string() || d.get<std::string>().empty() || fs::path(d.get<std::string>()).is_absolute())
    rd.fail(where + ".dir", "a folder relative to the record's folder", &d);
  ck.dir = d.get<std::string>();
  ck.path = canonical_dir((fs::path(base) / ck.dir).string());
  return ck;
}

// Checkpoint validation losses, by slice name; the slice list comes from the first checkpoint.
void read_checkpoint_losses(const Reader& rd, const json& list, TrainingRecord& r) {
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "checkpoints[" + std::to_string(i) + "].val_loss";
    const json& v = rd.member(list[i], "val_loss", "checkpoints[" + std::to_string(i) + "].");
    if (!v.is_object() || v.empty()) rd.fail(where, "an object {slice: loss}", &v);
    if (i == 0)
      for (const auto& kv : v.items()) r.slices.push_back(kv.key());
    auto& ck = r.checkpoints[i];
    for (const std::string& s : r.slices) {
      const auto it = v.find(s);
      ck.val.push_back(it == v.end() ? kNaN : rd.loss(*it, where + "." + s));
    }
  }
}

void read_curve(const Reader& rd, const json& list, TrainingRecord& r) {
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "curve[" + std::to_string(i) + "]";
    const json& row = list[i];
    if (!row.is_object()) rd.fail(where, "an object {step, tokens, train_loss, val_<slice>...}", &row);
    TrainingPoint p;
    p.step = static_cast<int>(std::min<int64_t>(rd.count(row, "step", where + "."), 1 << 30));
    p.tokens = rd.count(row, "tokens", where + ".");
    const auto tl = row.find("train_loss");
    p.train_loss = tl == row.end() ? kNaN : rd.loss(*tl, where + ".train_loss");
    for (const std::string& s : r.slices) {
      const auto it = row.find("val_" + s);
      p.val.push_back(it == row.end() ? kNaN : rd.loss(*it, where + ".val_" + s));
    }
    if (!r.curve.empty() && p.step < r.curve.back().step)
      rd.fail(where + ".step", "steps in increasing order (after " + std::to_string(r.curve.back().step) + ")",
              &row["step"]);
    if (!r.curve.empty() && p.step == r.curve.back().step)
      r.curve.back() = p;  // a resumed run logs its restart step again
    else
      r.curve.push_back(p);
  }
}

}  // namespace

TrainingRecord parse_training_record(const std::string& text, const std::string& file) {
  const Reader rd{file};
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(file + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) rd.fail("top level", "an object {model, total_steps, curve, checkpoints}", &j);
  TrainingRecord r;
  r.file = file;
  if (const auto m = j.find("model"); m != j.end() && m->is_string()) r.model = m->get<std::string>();
  const json& ckl = rd.member(j, "checkpoints", "");
  if (!ckl.is_array() || ckl.empty() || ckl.size() > 64) rd.fail("checkpoints", "a list of 1 to 64 checkpoints", &ckl);
  const std::string base = fs::path(file).parent_path().string();
  for (size_t i = 0; i < ckl.size(); ++i) {
    r.checkpoints.push_back(read_checkpoint(rd, ckl[i], "checkpoints[" + std::to_string(i) + "]", base));
    if (i > 0 && r.checkpoints[i].step <= r.checkpoints[i - 1].step)
      rd.fail("checkpoints[" + std::to_string(i) + "].step",
              "a step after the previous checkpoint's " + std::to_string(r.checkpoints[i - 1].step), &ckl[i]["step"]);
  }
  read_checkpoint_losses(rd, ckl, r);
  const json& curve = rd.member(j, "curve", "");
  if (!curve.is_array() || curve.empty() || curve.size() > 100000)
    rd.fail("curve", "a list of 1 to 100000 rows", &curve);
  read_curve(rd, curve, r);
  const int last = std::max(r.curve.back().step, r.checkpoints.back().step);
  r.total_steps =
      j.contains("total_steps") ? static_cast<int>(std::min<int64_t>(rd.count(j, "total_steps", ""), 1 << 30)) : last;
  if (r.total_steps < r.checkpoints.back().step)
    rd.fail("total_steps", "at least the last checkpoint's step " + std::to_string(r.checkpoints.back().step),
            &j["total_steps"]);
  r.batch_tokens = j.contains("batch_tokens") ? rd.count(j, "batch_tokens", "") : 0;
  for (size_t i = 0; i < r.checkpoints.size(); ++i) {  // the folders last: everything else is checked without disk
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(r.checkpoints[i].path) / "config.json", ec))
      rd.fail("checkpoints[" + std::to_string(i) + "].dir",
              "a model folder with a config.json (" + r.checkpoints[i].path + ")", &ckl[i]["dir"]);
  }
  return r;
}

int checkpoint_index(const TrainingRecord& r, const std::string& model_dir) {
  const std::string d = canonical_dir(model_dir);
  for (size_t i = 0; i < r.checkpoints.size(); ++i)
    if (r.checkpoints[i].path == d) return static_cast<int>(i);
  return -1;
}

bool find_training_record(const std::string& model_dir, TrainingRecord& out) {
  const fs::path d(canonical_dir(model_dir));
  const fs::path own = d.parent_path() / (d.filename().string() + "-training") / "training.json";
  const fs::path beside = d.parent_path() / "training.json";
  std::error_code ec;
  for (const fs::path& f : {own, beside}) {
    if (!fs::exists(f, ec)) continue;
    const std::string file = f.string();
    TrainingRecord r = parse_training_record(read_regular_file(file, "a training record (training.json)"), file);
    // (a training.json beside an unrelated folder belongs to other models)
    if (f == beside && checkpoint_index(r, d.string()) < 0) continue;
    out = std::move(r);
    return true;
  }
  return false;
}

AttentionSpread attention_spread(const StepForward& r) {
  AttentionSpread s;
  s.keys = r.seq_len;
  s.uniform_bits = r.seq_len > 0 ? std::log2(static_cast<double>(r.seq_len)) : 0;
  if (r.n_layer <= 0 || r.n_head <= 0 || r.n_rows <= 0 || r.seq_len <= 0 ||
      r.attn.size() != static_cast<size_t>(r.n_layer) * r.n_head * r.n_rows * r.seq_len)
    return s;
  for (int l = 0; l < r.n_layer; ++l)
    for (int h = 0; h < r.n_head; ++h) {
      double bits = 0, top = 0;
      for (int k = 0; k < r.seq_len; ++k) {
        const double w = r.attention(l, h, r.n_rows - 1, k);
        if (w > 0) bits -= w * std::log2(w);
        top = std::max(top, w);
      }
      s.mean_bits += bits;
      s.mean_top += top;
    }
  const double n = static_cast<double>(r.n_layer) * r.n_head;
  s.mean_bits /= n;
  s.mean_top /= n;
  return s;
}

double validation_loss(const std::vector<double>& val, int slice) {
  if (slice >= 0) return static_cast<size_t>(slice) < val.size() ? val[static_cast<size_t>(slice)] : kNaN;
  double sum = 0;
  int n = 0;
  for (double v : val)
    if (std::isfinite(v)) {
      sum += v;
      ++n;
    }
  return n > 0 ? sum / n : kNaN;
}

TrainingPlot layout_training_plot(const TrainingRecord& r, int slice, PlotRect rect, double reference) {
  TrainingPlot p;
  int step_hi = 1;
  double hi = std::isfinite(reference) ? reference : 0;
  for (const TrainingPoint& c : r.curve) {
    step_hi = std::max(step_hi, c.step);
    for (double v : {c.train_loss, validation_loss(c.val, slice)})
      if (std::isfinite(v)) hi = std::max(hi, v);
  }
  for (const TrainingCheckpoint& c : r.checkpoints) {
    step_hi = std::max(step_hi, c.step);
    const double v = validation_loss(c.val, slice);
    if (std::isfinite(v)) hi = std::max(hi, v);
  }
  p.step_hi = step_hi;
  p.rect = rect;
  p.y_lo = 0;  // loss from zero: how far training came is the height it fell
  p.y_hi = hi > 0 ? hi * 1.08 : 1.0;
  auto at = [&](int step, double v) {
    return PlotPoint{rect.x + rect.w * static_cast<float>(step) / static_cast<float>(step_hi),
                     rect.y + rect.h * static_cast<float>((p.y_hi - v) / (p.y_hi - p.y_lo))};
  };
  for (const TrainingPoint& c : r.curve) {
    if (std::isfinite(c.train_loss)) p.train.push_back(at(c.step, c.train_loss));
    const double v = validation_loss(c.val, slice);
    if (std::isfinite(v)) p.val.push_back(at(c.step, v));
  }
  for (const TrainingCheckpoint& c : r.checkpoints) {
    const double v = validation_loss(c.val, slice);
    p.marks.push_back(at(c.step, std::isfinite(v) ? v : p.y_lo));
  }
  return p;
}

int pick_checkpoint(const TrainingPlot& p, float mouse_x, float max_px) {
  int best = -1;
  float best_d = max_px;
  for (size_t i = 0; i < p.marks.size(); ++i) {
    const float d = std::fabs(p.marks[i].x - mouse_x);
    if (d <= best_d) {
      best = static_cast<int>(i);
      best_d = d;
    }
  }
  return best;
}

}  // namespace kvscope
