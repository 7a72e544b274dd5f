#include "app/session/json_commands.h"

#include <cctype>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "app/platform/user_files.h"
#include "app/session/fitting.h"
#include "app/session/session.h"
#include "app/session/text_scale.h"
#include "model/chat/chat_template.h"
#include "model/core/error.h"
#include "model/core/json_quote.h"
#include "model/decoding/setting_ranges.h"
#include "model/kv/kv_cache.h"
#include "model/kv/kv_layout_json.h"

namespace kvscope {

using nlohmann::json;

namespace {

constexpr int64_t kStepsMax = 1 << 24;

// One command's fields, read with the command's name for the messages.
class Fields {
 public:
  Fields(const json& c, std::string cmd) : c_(c), cmd_(std::move(cmd)) {}

  bool has(const char* key) const { return c_.contains(key); }

  std::string text(const char* key, const std::string& expected = "some text") const {
    const json& v = get(key, expected);
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) bad(key, expected, v);
    return v.get<std::string>();
  }

  // A whole number in [lo, hi] (5 and 5.0 alike; 1.5, "5", true or null are refused).
  int integer(const char* key, int64_t lo, int64_t hi) const {
    const std::string expected = "a whole number in " + std::to_string(lo) + ".." + std::to_string(hi);
    const json& v = get(key, expected);
    double x = std::numeric_limits<double>::quiet_NaN();
    if (v.is_number_unsigned())
      x = static_cast<double>(v.get<uint64_t>());
    else if (v.is_number_integer())
      x = static_cast<double>(v.get<int64_t>());
    else if (v.is_number_float())
      x = v.get<double>();
    if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi) && x == std::floor(x))) bad(key, expected, v);
    return static_cast<int>(x);
  }
  int integer_or(const char* key, int64_t lo, int64_t hi, int otherwise) const {
    return has(key) ? integer(key, lo, hi) : otherwise;
  }

  double real(const char* key, double lo, double hi) const {
    char expected[96];
    std::snprintf(expected, sizeof expected, "a number in %g..%g", lo, hi);
    const json& v = get(key, expected);
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi)) bad(key, expected, v);
    return v.get<double>();
  }

  [[noreturn]] void bad(const char* key, const std::string& expected, const json& v) const {
    std::string got = json_quote(v, 40);
    if (v.is_null()) got += " (NaN and Infinity reach JSON as null)";
    throw UsageError(cmd_ + ": \"" + key + "\" must be " + expected + ", got " + got);
  }
  [[noreturn]] void refuse(const std::string& why) const { throw UsageError(cmd_ + ": " + why); }

 private:
  const json& get(const char* key, const std::string& expected) const {
    const auto it = c_.find(key);
    if (it == c_.end()) throw UsageError(cmd_ + ": \"" + key + "\" is missing (expected " + expected + ")");
    return *it;
  }

  const json& c_;
  std::string cmd_;
};

Commands cache_command(const Fields& f, const Session& s) {  // {"mode": "kv_cache" | "no_cache"}, or toggle
  if (!f.has("mode")) return {cmd::ToggleCache{}};
  const std::string m = f.text("mode", "kv_cache or no_cache");
  if (m != "kv_cache" && m != "no_cache") f.bad("mode", "kv_cache or no_cache", m);
  return m == to_string(s.engine.mode) ? Commands{} : Commands{cmd::ToggleCache{}};
}

// {"layer": -1 (mean) .. layers-1, "head": -1 (mean) .. heads-1}, either left as it is when not given.
Commands head_command(const Fields& f, const Session& s) {
  if (!s.engine.model) f.refuse("no model is loaded yet");
  const Config& c = s.engine.model->config;
  return {cmd::SelectHead{f.integer_or("layer", -1, c.n_layer - 1, s.ui.layer),
                          f.integer_or("head", -1, c.n_head - 1, s.ui.head)}};
}

Commands camera_command(const Fields& f) {
  const char* expected = "front, top, side or follow";
  const std::string name = f.text("preset", expected);
  CameraPreset p;
  if (!parse_camera(name, p)) f.bad("preset", expected, name);
  return {cmd::SetCamera{p}};
}

// {"mode": "sample"|"beam"|"speculative", "beams", "k"}: restarts the generation with it. The
// strategy of that mode keeps what the Decoding panel holds of it (the draft model it offers).
Commands decoding_command(const Fields& f, const Session& s) {
  const char* expected = "sample, beam or speculative";
  const std::string m = f.text("mode", expected);
  std::optional<Strategy> d = strategy_of_key(m);
  if (!d) f.bad("mode", expected, m);
  if (d->index() == s.ui.strategy.index()) d = s.ui.strategy;
  // A field of another strategy is refused rather than passed over.
  if (f.has("beams") && !is_beam(*d)) f.refuse("\"beams\" applies to mode beam only");
  if (f.has("k") && !is_speculative(*d)) f.refuse("\"k\" applies to mode speculative only");
  if (auto* b = std::get_if<strategy::Beam>(&*d))
    b->beams = f.integer_or("beams", setting::kBeams.lo, setting::kBeams.hi, b->beams);
  if (auto* p = std::get_if<strategy::Speculative>(&*d)) {
    p->k = f.integer_or("k", setting::kSpeculate.lo, setting::kSpeculate.hi, p->k);
    if (p->draft_dir.empty()) p->draft_dir = s.ui.draft_dir;
  }
  return {cmd::SetStrategy{*d}};
}

// The layout checks name the CLI's flags (--kv-window ...); here they name
// this command's fields ("window" ...).
std::string as_layout_fields(std::string message) {
  const std::string flag = "--kv-";
  for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at)) {
    size_t end = at + flag.size();
    // --kv-snap-window names the field "snap_window".
    while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) ||
                                    (message[end] == '-' && end + 1 < message.size() &&
                                     std::islower(static_cast<unsigned char>(message[end + 1])))))
      ++end;
    std::string field = message.substr(at + flag.size(), end - at - flag.size());
    std::replace(field.begin(), field.end(), '-', '_');
    const std::string name = "\"" + field + "\"";
    message.replace(at, end - at, name);
    at += name.size();
  }
  return message;
}

// The fields of the KV layout's JSON form (kv_layout_json.h) it gives, onto the
// Cache panel's layout, from the next generation; checked against the loaded
// model as the CLI's flags are.
Commands kv_layout_command(const Fields& f, Session& s) {
  KVLayout k = s.ui.kv_layout;
  if (f.has("dtype")) {
    const char* expected = "f32, f16, q8_0 or q4_0";
    const std::string name = f.text("dtype", expected);
    if (!parse_kv_dtype(name, &k.dtype)) f.bad("dtype", expected, name);
  }
  if (f.has("evict")) {
    const char* expected = "none, tova, h2o or snapkv";
    const std::string name = f.text("evict", expected);
    if (!parse_kv_evict(name, &k.evict)) f.bad("evict", expected, name);
  }
  k.window = f.integer_or("window", 0, kStepsMax, k.window);
  k.sinks = f.integer_or("sinks", 0, kStepsMax, k.sinks);
  k.block = f.integer_or("block", 0, kStepsMax, k.block);
  k.budget = f.integer_or("budget", 0, kStepsMax, k.budget);
  k.snap_window = f.integer_or("snap_window", 0, kStepsMax, k.snap_window);
  k.snap_pool = f.integer_or("snap_pool", 0, kStepsMax, k.snap_pool);
  if (f.has("snap_pooling")) {
    const char* expected = "max or avg";
    const std::string name = f.text("snap_pooling", expected);
    if (!parse_kv_pooling(name, &k.snap_pooling)) f.bad("snap_pooling", expected, name);
  }
  // One eviction rule at a time, as in the Cache panel: choosing one turns the other off, and a rule
  // turned off takes its budget along. Only fields the call did not give change; a call that gives
  // both is refused by on_model.
  if (f.has("window") && k.window > 0 && !f.has("evict")) {
    k.evict = KVEvict::kNone;
    if (!f.has("budget")) k.budget = 0;
  }
  if (f.has("evict") && k.evict == KVEvict::kNone && !f.has("budget")) k.budget = 0;
  if (f.has("evict") && k.evict != KVEvict::kNone) {
    if (!f.has("window")) k.window = 0;
    if (!f.has("window") && !f.has("sinks")) k.sinks = 0;
    if (!f.has("budget") && k.budget == 0) k.budget = kEvictBudgetStart;  // as the panel starts a rule
  }
  try {  // the CLI's checks, naming the value (those that need no model while none is loaded)
    if (s.engine.model)
      (void)k.on_model(s.engine.model->config);
    else
      k.check_without_model();
  } catch (const Error& e) {
    f.refuse(as_layout_fields(e.what()));
  }
  s.ui.kv_layout = k;
  return {};
}

Commands checkpoint_command(const Fields& f, const Session& s) {
  if (!s.engine.training) f.refuse("this model has no training record (training.json) beside it");
  const int n = static_cast<int>(s.engine.training->checkpoints.size());
  if (n == 0) f.refuse("the training record (training.json) lists no checkpoints");
  return {cmd::LoadCheckpoint{f.integer("index", 0, n - 1)}};
}

// The chat view's commands: {"cmd": "chat_open", "open": true|false},
// chat_send {"text"}, chat_system {"text", "" = the template's own},
// chat_format {"format": "model"|"chatml"|"llama3"|"zephyr"|"mistral"},
// chat_reset, chat_drop. False when `name` is none of them.
bool chat_json_command(const std::string& name, const json& c, const Fields& f, Commands& out) {
  if (name == "chat_open") {
    if (f.has("open") && !c.at("open").is_boolean()) f.bad("open", "true or false", c.at("open"));
    out = {cmd::ChatOpen{!f.has("open") || c.at("open").get<bool>()}};
  } else if (name == "chat_send") {
    out = {cmd::ChatSend{f.text("text", "the message")}};
  } else if (name == "chat_system") {
    if (!f.has("text") || !c.at("text").is_string())
      f.bad("text", "the system prompt (\"\" = the template's own)", f.has("text") ? c.at("text") : json());
    out = {cmd::ChatSystem{c.at("text").get<std::string>()}};
  } else if (name == "chat_format") {
    const std::string expected = std::string("model or ") + chat_format_names();
    const std::string v = f.text("format", expected);
    const std::optional<ChatFormat> fmt = chat_format_of(v);
    if (v != "model" && !fmt) f.bad("format", expected, v);
    out = {cmd::ChatSetFormat{fmt ? static_cast<int>(*fmt) + 1 : 0}};
  } else if (name == "chat_reset") {
    out = {cmd::ChatReset{}};
  } else if (name == "chat_drop") {
    out = {cmd::ChatDrop{}};
  } else {
    return false;
  }
  return true;
}

// The commands that take no field (or, for a few, one string).
bool plain_command(const std::string& name, const Fields& f, const Session& s, Commands& out) {
  if (name == "reset")
    out = {cmd::Reset{}};
  else if (name == "play")
    out = s.ui.playing ? Commands{} : Commands{cmd::PlayPause{}};
  else if (name == "pause")
    out = s.ui.playing ? Commands{cmd::PlayPause{}} : Commands{};
  else if (name == "play_pause")
    out = {cmd::PlayPause{}};
  else if (name == "step")
    out = {cmd::Step{}};
  else if (name == "load_model")
    out = {cmd::LoadModel{f.text("dir", "a model folder")}};
  else if (name == "save_view")
    out = {cmd::SaveView{kBrowserViewFile}};  // a download
  else if (name == "open_view")
    out = {cmd::LoadView{""}};  // the file picker
  else if (name == "load_view")
    out = {cmd::LoadView{f.text("path", "a saved view's file")}};
  else if (name == "screenshot")
    out = {cmd::Screenshot{}};
  else if (name == "presentation")
    out = {cmd::Presentation{}};
  else if (name == "palette")
    out = {cmd::Palette{}};
  else if (name == "fit")
    out = {cmd::Fit{}};
  else if (name == "dismiss_errors")
    out = {cmd::DismissErrors{}};
  else if (name == "toggle_panels")
    out = {cmd::TogglePanels{}};
  else
    return false;
  return true;
}

// Every command and the fields it takes: a field it does not take (a typo
// such as "beam" for "beams") is refused rather than passed over.
struct CommandFields {
  const char* name;
  std::vector<const char*> fields;
};
const std::vector<CommandFields> kCommands = {
    {"prompt", {"text"}},
    {"reset", {}},
    {"play", {}},
    {"pause", {}},
    {"play_pause", {}},
    {"step", {}},
    {"cache", {"mode"}},
    {"max_new", {"n"}},
    {"scrub", {"steps"}},
    {"scrub_to", {"step"}},
    {"head", {"layer", "head"}},
    {"camera", {"preset"}},
    {"text_scale", {"scale"}},
    {"decoding", {"mode", "beams", "k"}},
    {"kv_layout", {std::begin(kKVLayoutFields), std::end(kKVLayoutFields)}},  // the layout's JSON form
    {"load_checkpoint", {"index"}},
    {"tab", {"name"}},
    {"load_model", {"dir"}},
    {"save_view", {}},
    {"open_view", {}},
    {"load_view", {"path"}},
    {"screenshot", {}},
    {"presentation", {}},
    {"palette", {}},
    {"fit", {}},
    {"dismiss_errors", {}},
    {"toggle_panels", {}},
    {"chat_open", {"open"}},
    {"chat_send", {"text"}},
    {"chat_system", {"text"}},
    {"chat_format", {"format"}},
    {"chat_reset", {}},
    {"chat_drop", {}}};

// Throws unless `c` is an object naming a known command with only its own fields.
void check_shape(const json& c) {
  if (!c.is_object() || !c.contains("cmd") || !c.at("cmd").is_string()) {
    throw UsageError("command: expected an object naming its command, such as {\"cmd\": \"step\"}, got " +
                     json_quote(c, 40));
  }
  const std::string name = c.at("cmd").get<std::string>();
  std::string names;
  for (const CommandFields& k : kCommands) {
    names += (names.empty() ? "" : &k == &kCommands.back() ? " or " : ", ") + std::string(k.name);
    if (name != k.name) continue;
    std::string takes;
    for (const char* f : k.fields) takes += (takes.empty() ? "\"" : ", \"") + std::string(f) + "\"";
    for (const auto& item : c.items())
      if (item.key() != "cmd" && std::find(k.fields.begin(), k.fields.end(), item.key()) == k.fields.end())
        throw UsageError(name + ": takes no field " + json_quote(item.key(), 40) + " (" +
                         (takes.empty() ? "it takes none" : "it takes " + takes) + ")");
    return;
  }
  throw UsageError("command: unknown cmd " + json_quote(name, 40) + " (expected " + names + ")");
}

}  // namespace

Commands commands_from_json(const json& c, Session& s) {
  check_shape(c);
  const std::string name = c.at("cmd").get<std::string>();
  const Fields f(c, name);
  Commands out;
  if (plain_command(name, f, s, out) || chat_json_command(name, c, f, out)) return out;
  if (name == "prompt") return {cmd::Start{f.text("text")}};
  if (name == "cache") return cache_command(f, s);
  if (name == "max_new") {  // as the Generate panel's field: the UI's value, then the command
    const int64_t hi = s.engine.model ? std::min<int64_t>(setting::kMaxNew.hi, s.engine.model->config.n_positions)
                                      : setting::kMaxNew.hi;  // as the panel's slider: at most the context
    s.ui.max_new = f.integer("n", setting::kMaxNew.lo, hi);
    return {cmd::SetMaxNew{s.ui.max_new}};
  }
  if (name == "scrub") return {cmd::Scrub{f.integer("steps", -kStepsMax, kStepsMax)}};
  if (name == "scrub_to") return {cmd::ScrubTo{f.integer("step", 0, kStepsMax)}};
  if (name == "head") return head_command(f, s);
  if (name == "camera") return camera_command(f);
  if (name == "text_scale") return {cmd::TextScale{static_cast<float>(f.real("scale", kMinTextScale, kMaxTextScale))}};
  if (name == "decoding") return decoding_command(f, s);
  if (name == "kv_layout") return kv_layout_command(f, s);
  if (name == "load_checkpoint") return checkpoint_command(f, s);
  if (name == "tab") {  // {"name": "training"}: the teaching tabs open on it
    const std::string tab = f.text("name", "training");
    if (tab != "training") f.bad("name", "training", tab);
    s.ui.teach_open = true;
    s.ui.bottom_tab = kTrainingTab;
    s.ui.select_tab = true;
    return {};
  }
  throw UsageError("command: \"" + name + "\" has no reader");  // (kCommands lists one that is not read above)
}

std::vector<std::string> cli_args_from_json(const json& args) {
  const char* expected = "an array of strings, such as [\"generate\", \"--prompt\", \"Hi\"]";
  if (!args.is_array()) {
    throw UsageError(std::string("kvscope.cli: expected ") + expected + ", got " + json_quote(args, 40));
  }
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    const json& a = args[i];
    if (!a.is_string())
      throw UsageError("kvscope.cli: element " + std::to_string(i) + " is " + json_quote(a, 40) +
                       ", not a string (expected " + expected + ")");
    if (a.get_ref<const std::string&>().find('\0') != std::string::npos)
      throw UsageError("kvscope.cli: element " + std::to_string(i) +
                       " holds a NUL character, which ends a command-line word (" + json_quote(a, 40) + ")");
    words.push_back(a.get<std::string>());
  }
  return words;
}

json parse_page_json(const char* text, const std::string& what) {
  if (!text || !*text) throw UsageError(what + ": nothing was given (undefined?)");
  try {
    return parse_json_bounded(text, kJsonMaxDepth, what);
  } catch (const json::out_of_range& e) {
    throw UsageError(what + ": a number beyond a double (" + e.what() + ")");
  } catch (const json::exception& e) {
    const std::string m = e.what();
    if (m.find("surrogate") != std::string::npos)
      throw UsageError(what + ": a string holds a lone UTF-16 surrogate (half of a character), which is not text (" +
                       m + ")");
    throw UsageError(what + ": not JSON (" + m + ")");
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // nested too deep
    throw UsageError(e.what());
  }
}

}  // namespace kvscope
