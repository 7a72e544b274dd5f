// GET over HTTP(S) with bounded waits, for the servers' /metrics and /slots.
#pragma once

#include <string>

namespace kvscope {

struct HttpUrl {
  std::string base;  // scheme://host:port
  std::string path;  // "/metrics" ("/" when the URL has none)
};
// Throws UsageError naming `flag` unless `url` is http:// or https://HOST[:PORT][/PATH].
HttpUrl parse_http_url(const std::string& url, const std::string& flag);

struct HttpResponse {
  int status = 0;
  std::string body;
};
// Throws Error when no response came within `timeout_s` (connection
// refused, no route, timed out), naming the URL and what happened.
HttpResponse http_get(const HttpUrl& url, double timeout_s);

}  // namespace kvscope
