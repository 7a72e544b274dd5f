#include "app/watch/kv_subscriber.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <zmq.hpp>

#include "model/core/error.h"

namespace kvscope {
namespace {

int64_t read_seq(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<int64_t>(v);
}

// Every frame of one message (a message's frames arrive together).
std::vector<zmq::message_t> recv_all(zmq::socket_t& s) {
  std::vector<zmq::message_t> frames;
  do {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) break;
    frames.push_back(std::move(m));
  } while (frames.back().more());
  return frames;
}

// Interrupted by a signal (Ctrl-C, which ends the watch with its summary): nothing came.
bool poll_in(zmq::socket_t& s, int timeout_ms) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  try {
    return zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) > 0;
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;
    throw;
  }
}

}  // namespace

struct KvSubscriber::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sub{ctx, zmq::socket_type::sub};
  zmq::socket_t monitor{ctx, zmq::socket_type::pair};
  std::optional<zmq::socket_t> replay;
  std::string endpoint, replay_endpoint;
};

KvSubscriber::KvSubscriber(const std::string& endpoint, const std::string& replay_endpoint)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.endpoint = endpoint;
  m.replay_endpoint = replay_endpoint;
  static std::atomic<int> serial{0};
  const std::string mon = "inproc://kvscope-watch-monitor-" + std::to_string(serial++);
  try {
    m.sub.set(zmq::sockopt::linger, 0);
    // As vLLM's publisher queues (its hwm): a watcher busy printing drops
    // less (what it drops is a gap, asked of the replay socket).
    m.sub.set(zmq::sockopt::rcvhwm, 100000);
    m.sub.set(zmq::sockopt::subscribe, "");
    if (zmq_socket_monitor(m.sub.handle(), mon.c_str(), ZMQ_EVENT_ALL) != 0) throw zmq::error_t();
    m.monitor.connect(mon);
    m.monitor.set(zmq::sockopt::linger, 0);
    m.sub.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw UsageError("--vllm " + endpoint + ": " + e.what() + " (expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:5557)");
  }
  if (!replay_endpoint.empty()) {
    try {
      m.replay.emplace(m.ctx, zmq::socket_type::dealer);
      m.replay->set(zmq::sockopt::linger, 0);
      m.replay->connect(replay_endpoint);
    } catch (const zmq::error_t& e) {
      throw UsageError("--replay " + replay_endpoint + ": " + e.what() +
                       " (expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:5558)");
    }
  }
}

KvSubscriber::~KvSubscriber() {
  if (impl_) zmq_socket_monitor(impl_->sub.handle(), nullptr, 0);
}

bool KvSubscriber::has_replay() const {
  return impl_->replay.has_value();
}

void KvSubscriber::wait_connected(double seconds) {
  Impl& m = *impl_;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool tcp_connected = false, handshake_failed = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !poll_in(m.monitor, static_cast<int>(left.count()))) break;
    const std::vector<zmq::message_t> ev = recv_all(m.monitor);
    if (ev.empty() || ev[0].size() < 2) continue;
    uint16_t id = 0;
    std::memcpy(&id, ev[0].data(), 2);  // the monitor's frames are in host order
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) return;
    if (id == ZMQ_EVENT_CONNECTED) tcp_connected = true;
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
      handshake_failed = true;
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%g s", seconds);
  if (tcp_connected || handshake_failed)
    throw Error("--vllm " + m.endpoint +
                ": something is listening there but it did not answer as a ZMQ publisher "
                "within " +
                waited +
                " (an HTTP port? vLLM publishes KV events on the endpoint of "
                "--kv-events-config, e.g. tcp://*:5557)");
  throw Error("--vllm " + m.endpoint + ": nothing is listening there (no connection within " + waited +
              "): is the server started with --kv-events-config '{\"enable_kv_cache_events\":true,"
              "\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\"}', and is the port right?");
}

std::optional<RawBatch> KvSubscriber::receive(int timeout_ms) {
  Impl& m = *impl_;
  if (!poll_in(m.sub, timeout_ms)) return std::nullopt;
  std::vector<zmq::message_t> f = recv_all(m.sub);
  if (f.size() != 3 || f[1].size() != 8)
    throw Error("--vllm " + m.endpoint + ": a message of " + std::to_string(f.size()) + " frames" +
                (f.size() > 1 ? " (the second " + std::to_string(f[1].size()) + " bytes)" : std::string()) +
                ", expected 3: topic, an 8-byte sequence number, the msgpack payload (a vLLM/SGLang KV events "
                "publisher?)");
  return RawBatch{read_seq(f[1]), f[2].to_string()};
}

std::vector<RawBatch> KvSubscriber::replay(int64_t from, int timeout_ms, bool& complete) {
  Impl& m = *impl_;
  std::vector<RawBatch> out;
  complete = false;
  if (!m.replay) return out;
  unsigned char seq[8];
  for (int i = 0; i < 8; ++i) seq[i] = static_cast<unsigned char>((static_cast<uint64_t>(from) >> (56 - 8 * i)) & 0xff);
  // What an earlier replay left unread (it timed out) would end this one early.
  while (poll_in(*m.replay, 0)) recv_all(*m.replay);
  m.replay->send(zmq::message_t(), zmq::send_flags::sndmore);
  m.replay->send(zmq::buffer(seq, 8), zmq::send_flags::none);
  while (poll_in(*m.replay, timeout_ms)) {
    std::vector<zmq::message_t> f = recv_all(*m.replay);
    // [empty delimiter, seq, payload]; the end: seq -1 and an empty payload.
    if (f.size() != 3 || f[1].size() != 8)
      throw Error("--replay " + m.replay_endpoint + ": a reply of " + std::to_string(f.size()) +
                  " frames, expected 3 (empty, an 8-byte sequence number, the payload)");
    const int64_t s = read_seq(f[1]);
    if (s < 0) {
      complete = true;
      break;
    }
    out.push_back(RawBatch{s, f[2].to_string()});
  }
  return out;
}

}  // namespace kvscope
