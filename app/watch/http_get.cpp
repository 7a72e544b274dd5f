#include "app/watch/http_get.h"

#include <httplib.h>

#include "model/core/error.h"

namespace kvscope {

HttpUrl parse_http_url(const std::string& url, const std::string& flag) {
  const bool http = url.rfind("http://", 0) == 0, https = url.rfind("https://", 0) == 0;
  const size_t host_at = http ? 7 : 8;
  if ((!http && !https) || url.size() <= host_at || url[host_at] == '/' || url[host_at] == ':')
    throw UsageError(flag + ": \"" + url + "\" is not an http:// or https:// URL with a host (e.g. " +
                     "http://127.0.0.1:8000)");
  const size_t slash = url.find('/', host_at);
  HttpUrl u;
  u.base = url.substr(0, slash);
  u.path = slash == std::string::npos ? "/" : url.substr(slash);
  return u;
}

HttpResponse http_get(const HttpUrl& url, double timeout_s) {
  httplib::Client client(url.base);
  const auto sec = static_cast<time_t>(timeout_s);
  const auto usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  auto res = client.Get(url.path);
  if (!res) {
    const httplib::Error e = res.error();
    std::string why = httplib::to_string(e);
    if (e == httplib::Error::Connection) why = "nothing is listening there (connection refused or timed out)";
    if (e == httplib::Error::Read) why = "no complete answer within the timeout";
    throw Error(url.base + url.path + ": " + why);
  }
  return HttpResponse{res->status, res->body};
}

}  // namespace kvscope
