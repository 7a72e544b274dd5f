// What servers expose over HTTP, parsed: Prometheus text (vLLM's and
// llama-server's /metrics) and llama-server's /slots JSON. Only what is
// present is filled: servers differ by version and by their flags.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

// One line of the Prometheus text exposition format: name{labels} value.
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
// Every sample of `text` (comments and blank lines skipped; a timestamp after
// the value ignored). Throws Error naming the line of one it cannot read.
std::vector<PromSample> parse_prometheus(const std::string& text);

// A histogram's sum and count (mean = sum / count).
struct PromHistogram {
  double sum = 0, count = 0;
};

// vLLM's V1 metrics (summed over engines / label sets; the usage averaged).
struct VllmMetrics {
  std::optional<double> running, waiting;             // requests
  std::optional<double> kv_usage;                     // 0..1 of the GPU KV pool
  std::optional<double> prefix_queries, prefix_hits;  // tokens, counters
  std::optional<double> preemptions;                  // counter
  std::optional<double> num_gpu_blocks, block_size;   // vllm:cache_config_info's labels
  std::optional<PromHistogram> ttft, itl;             // seconds
};
VllmMetrics vllm_metrics(const std::vector<PromSample>& samples);

// llama-server's /metrics (llamacpp: prefix).
struct LlamaMetrics {
  std::optional<double> processing, deferred;             // requests
  std::optional<double> prompt_tokens, predicted_tokens;  // counters
  std::optional<double> kv_usage;                         // 0..1 (some versions)
  std::optional<double> kv_tokens;                        // (some versions)
};
LlamaMetrics llama_metrics(const std::vector<PromSample>& samples);

// One of llama-server's slots (GET /slots), as far as the build reports it.
struct LlamaSlot {
  int id = 0;
  int n_ctx = 0;                                 // 0: not given
  bool processing = false;                       // is_processing, or (older builds) state != 0
  std::optional<long long> id_task;              // -1 or absent when idle
  std::optional<long long> n_decoded, n_remain;  // next_token (an object or a one-element array)
  std::optional<long long> n_prompt_tokens;      // newer builds
};
// Throws Error naming the field ("slots[1].n_ctx: expected an integer").
std::vector<LlamaSlot> parse_llama_slots(const std::string& json_text);

}  // namespace kvscope
