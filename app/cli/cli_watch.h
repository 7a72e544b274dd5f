// `kvscope watch`: attach to a running vLLM / SGLang (KV cache events over
// ZMQ, Prometheus /metrics) or llama-server (/slots, /metrics) and report
// its KV block pool live. Desktop only: the page's build leaves it out
// (browsers cannot open ZMQ sockets) and says so.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kvscope {

struct WatchArgs {
  std::string vllm, replay, metrics, llama_server;  // endpoints / URLs ("" = not given)
  bool json = false;
  long long batches = 0;       // --batches: stop after this many batches (0 = no limit)
  long long scrapes = 0;       // --scrapes: stop after this many scrapes (0 = no limit)
  double seconds = 0;          // --seconds: stop after this long (0 = no limit)
  double connect_timeout = 5;  // --connect-timeout: seconds for the first contact
  double interval = 1;         // --interval: seconds between scrapes
  double replay_timeout = 2;   // seconds without a reply that end a replay
};

struct WatchCommand {
  CLI::App* cmd = nullptr;
  WatchArgs args;
  bool tree = false;  // --tree
};
void add_watch_command(CLI::App& app, WatchCommand& c);
int run_watch_command(const WatchCommand& c);

}  // namespace kvscope
