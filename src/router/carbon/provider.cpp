#include "router/carbon/provider.h"

#include <algorithm>
#include <charconv>

namespace cgn::router::carbon {

std::string_view reason_label(FetchReason r) {
  switch (r) {
    case FetchReason::kUnauthorized:
      return "unauthorized";
    case FetchReason::kRateLimited:
      return "rate_limited";
    case FetchReason::kHttpStatus:
      return "http_status";
    case FetchReason::kTransport:
      return "transport";
    case FetchReason::kBadBody:
      return "bad_body";
    case FetchReason::kBadUnits:
      return "bad_units";
  }
  return "transport";
}

Status<FetchError> check_status(const http::Response& res, std::string_view what) {
  const unsigned code = res.result_int();
  if (code == 200) {
    return Ok{};
  }
  const std::string msg = std::string(what) + " answered HTTP " + std::to_string(code);
  if (code == 401 || code == 403) {
    return fetch_error(FetchReason::kUnauthorized, msg);
  }
  if (code == 429) {
    uint32_t after = 0;
    if (auto it = res.find(http::Field::retry_after); it != res.end()) {
      std::string_view v = it->value();
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), after);
      if (ec != std::errc{} || p != v.data() + v.size()) {
        after = 0;  // an HTTP date or garbage: our own backoff applies
      }
    }
    return fetch_error(FetchReason::kRateLimited, msg, std::min<uint32_t>(after, 86'400));
  }
  return fetch_error(FetchReason::kHttpStatus, msg);
}

Error<FetchError> transport_error(http::HttpError e, std::string_view what) {
  return fetch_error(FetchReason::kTransport, std::string(what) + ": " + std::string(http::to_string(e)));
}

}  // namespace cgn::router::carbon
