// Blocking HTTP for polling sources (dcgm-exporter, Redfish) over the project's client
// (core/http/client.h): each BlockingHttp owns an io_context and a pooled HttpClient and runs one
// exchange to completion per call, bounded by its timeout. Owned by one source; one thread at a
// time.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/http/client.h"
#include "core/result.h"
#include "power/source.h"

namespace cgn::power {

struct HttpTarget {
  http::Upstream upstream;
  std::string path;  // the URL's path ("/metrics"), "" when it has none
};

// "http://host:port/path" or "https://…" (ports default to 80 / 443; IPv6 in brackets).
Result<HttpTarget, SourceError> parse_http_url(std::string_view url);

class BlockingHttp {
 public:
  // `ca_file`: a PEM CA bundle that https:// upstreams' certificates must chain to; "": the
  // system CAs.
  explicit BlockingHttp(std::chrono::milliseconds timeout, std::string ca_file = {});
  ~BlockingHttp();
  BlockingHttp(const BlockingHttp&) = delete;
  BlockingHttp& operator=(const BlockingHttp&) = delete;

  // One exchange. Transport failures are kUnavailable; the status is the caller's to judge.
  Result<http::Response, SourceError> send(const http::Upstream& up, http::Request req);

 private:
  boost::asio::io_context ctx_;
  std::unique_ptr<http::HttpClient> client_;
  std::chrono::milliseconds timeout_;
};

}  // namespace cgn::power
