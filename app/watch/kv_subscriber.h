// The ZMQ side of `kvscope watch --vllm`: a SUB socket on the publisher's
// endpoint (messages [topic, seq as 8 big-endian bytes, msgpack payload]) and
// an optional DEALER on its replay ROUTER (ask [empty, start seq], answered
// by [empty, seq, payload] per buffered batch and [empty, -1, empty] at the
// end). Every wait is bounded: nothing here blocks longer than it is told.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

struct RawBatch {
  int64_t seq = 0;
  std::string payload;  // msgpack (model/watch/kv_events.h decodes it)
};

class KvSubscriber {
 public:
  // Connects (ZMQ connects lazily: nothing fails here for a missing server).
  // `replay_endpoint` may be empty. Throws Error for an endpoint ZMQ refuses.
  KvSubscriber(const std::string& endpoint, const std::string& replay_endpoint);
  ~KvSubscriber();
  KvSubscriber(const KvSubscriber&) = delete;
  KvSubscriber& operator=(const KvSubscriber&) = delete;

  // Waits at most `seconds` for a ZMTP handshake with the publisher; throws
  // Error saying what was seen: nothing listening (connection refused), or a
  // listener that does not speak ZMQ (an HTTP port, say).
  void wait_connected(double seconds);
  // The next batch within `timeout_ms`, or none. Throws Error for a message
  // that is not [topic, 8-byte seq, payload].
  std::optional<RawBatch> receive(int timeout_ms);
  // The replay socket's batches from `from` on, in order, until its end
  // marker or `timeout_ms` without a message (then `complete` is false).
  std::vector<RawBatch> replay(int64_t from, int timeout_ms, bool& complete);
  bool has_replay() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope
