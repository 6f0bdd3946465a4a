// The carbon-provider seam: one small interface per grid-intensity source (static, Electricity
// Maps v3, WattTime v3), each in its own file and registered by its config name (registry.h).
// A provider turns one poll into a Reading in gCO2/kWh, or a FetchError saying why not.
//
// Threads: fetch() runs on the poller's io_context thread with the poller's HttpClient; a
// provider is owned by its Poller and touched only from that thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/http/client.h"
#include "core/result.h"

namespace cgn::router::carbon {

// Grams per pound; WattTime's lbs CO2/MWh -> gCO2/kWh is value x 453.59237 / 1000 (the constant
// of the Green Software Foundation's Carbon Aware SDK, WattTimeDataSource).
inline constexpr double kGramsPerPound = 453.59237;
inline constexpr double lbs_per_mwh_to_g_per_kwh(double lbs_per_mwh) {
  return lbs_per_mwh * kGramsPerPound / 1000.0;
}

struct Reading {
  double gco2_per_kwh = 0;
  bool estimated = false;  // Electricity Maps isEstimated
};

// Why a poll failed: the label of cgn_router_carbon_poll_failures_total{reason}.
enum class FetchReason {
  kUnauthorized,  // 401/403: bad key or expired login
  kRateLimited,   // 429
  kHttpStatus,    // any other non-200
  kTransport,     // connect, timeout, reset
  kBadBody,       // not the documented JSON shape
  kBadUnits,      // a signal that is not a rate (a percentile) or units we do not know
};
std::string_view reason_label(FetchReason r);

struct FetchError {
  FetchReason reason = FetchReason::kTransport;
  uint32_t retry_after_s = 0;  // a 429's Retry-After (0: none)
};
using FetchResult = Result<Reading, FetchError>;

inline Error<FetchError> fetch_error(FetchReason r, std::string message, uint32_t retry_after_s = 0) {
  return Error<FetchError>{FetchError{r, retry_after_s}, std::move(message)};
}

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const = 0;  // the config name: the metric's provider label
  virtual const std::string& zone() const = 0;
  // One reading. Per-request timeouts are the caller's (`t`).
  virtual boost::asio::awaitable<FetchResult> fetch(http::HttpClient& client, http::ClientTimeouts t,
                                                    Nanos now) = 0;
};

// Maps a provider's HTTP answer to an error (401/403, 429 with Retry-After, other), or Ok for 200.
Status<FetchError> check_status(const http::Response& res, std::string_view what);
// A transport failure as a FetchError.
Error<FetchError> transport_error(http::HttpError e, std::string_view what);

}  // namespace cgn::router::carbon
