#include "app/lessons/serve_presets.h"

#include <nlohmann/json.hpp>

#include "model/serving/requests.h"

namespace kvscope {

namespace {

struct Line {
  const char* id;
  const char* prompt;
  int max_new;
  int arrive;
};

constexpr const char* kSystem = "The teacher said: answer in one short sentence. ";

std::vector<Line> preset_lines(int index) {
  switch (index) {
    case 0:  // many short requests, arriving over the first steps, of different lengths
      return {{"ana", "Once upon a time", 10, 0}, {"ben", "The dog ran", 6, 0},    {"cai", "A little girl", 14, 0},
              {"dev", "The sun was", 8, 1},       {"eli", "One day, Tom", 12, 2},  {"fay", "The cat sat on", 5, 3},
              {"gus", "There was a big", 9, 4},   {"hal", "Lily wanted to", 11, 6}};
    case 1:  // the same system prompt before every question, the questions arriving one by one
      return {{"q1", "Why is the sky blue?", 8, 0},
              {"q2", "What do cats eat?", 8, 2},
              {"q3", "Where do birds sleep?", 8, 3},
              {"q4", "Who was the king?", 8, 4},
              {"q5", "How big is the sea?", 8, 5}};
    case 2:  // four requests whose futures do not fit the pool together
      return {{"w", "Once upon a time", 16, 0},
              {"x", "The little dog", 16, 0},
              {"y", "A big red ball", 16, 0},
              {"z", "The girl saw a", 16, 0}};
    default:  // mixed lengths: static batching waits for the longest
      return {{"s1", "Once upon a time", 3, 0}, {"s2", "The dog ran", 16, 0}, {"s3", "A little girl", 4, 0},
              {"s4", "The sun was", 12, 0},     {"s5", "One day, Tom", 2, 0}, {"s6", "The cat sat on", 8, 0}};
  }
}

}  // namespace

const std::vector<ServePresetInfo>& serve_presets() {
  static const std::vector<ServePresetInfo> presets = {
      {"A class asks at once", "Class",
       "Eight short requests arrive over the first steps; each joins the running batch as soon as it fits and "
       "leaves it when done (continuous batching)."},
      {"One system prompt for everyone", "Prefix",
       "Every question starts with the same system prompt: its full blocks are computed once, then shared by "
       "later requests (prefix caching)."},
      {"A pool too small", "Preempt",
       "Four requests fit the pool at first, not as they grow: the newest is preempted, loses its blocks and "
       "recomputes them later."},
      {"Static vs continuous", "Static",
       "The same six requests, three at a time: static batching holds a batch until its longest request ends; "
       "continuous batching refills each place at once."},
  };
  return presets;
}

std::string serve_preset_lines(int index) {
  std::string out;
  for (const Line& l : preset_lines(index)) {
    std::string prompt = l.prompt;
    if (index == 1) prompt = kSystem + prompt;
    nlohmann::json j = {{"id", l.id}, {"prompt", prompt}, {"max_new", l.max_new}, {"arrive", l.arrive}};
    out += j.dump() + "\n";
  }
  return out;
}

SchedulerConfig serve_preset_config(int index) {
  SchedulerConfig c;
  c.pool_blocks = 40;
  c.max_batch_tokens = 32;
  c.max_running = 8;
  if (index == 1) c.prefix_caching = true;
  if (index == 2) c.pool_blocks = 10;
  if (index == 3) {
    c.max_running = 3;
    c.policy = ServePolicy::kStatic;
  }
  return c;
}

std::vector<ServeRunSpec> serve_preset_runs(int index, const Model& model) {
  ServeRunSpec run;
  run.options.sched = serve_preset_config(index);
  run.options.kv.block = kServePresetBlock;
  // The view draws the selected request's attention rays at any step: every
  // request's rows are kept (a few MB on the embedded model; a large model's
  // later steps keep none once this is spent, and the view says so). One
  // budget per preset, shared by its runs (static vs continuous has two).
  constexpr int64_t kPresetAttentionBytes = int64_t{256} << 20;
  const int n_runs = index == 3 ? 2 : 1;
  run.options.attention_budget = kPresetAttentionBytes / n_runs;
  const std::string file = std::string("the \"") + serve_presets().at(static_cast<size_t>(index)).name + "\" preset";
  run.requests =
      parse_requests(serve_preset_lines(index), file, model, run.options.sched.pool_blocks, run.options.kv.block);
  std::vector<ServeRunSpec> runs = {run};
  if (index == 3) {
    run.options.sched.policy = ServePolicy::kContinuous;
    runs.push_back(run);
  }
  return runs;
}

}  // namespace kvscope
