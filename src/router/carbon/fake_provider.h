// FakeCarbonServer: Electricity Maps v3 and WattTime v3 on loopback, speaking their real request
// and response shapes, with fault knobs, for the carbon tests and scripts/bench-carbon.sh
// (cgn-fake-carbon). One server answers both APIs:
//
//   GET /v3/carbon-intensity/latest?zone=Z   `auth-token` must match, else 401
//       {"zone":Z,"carbonIntensity":<g/kWh>,"datetime":..,"updatedAt":..,"isEstimated":false,..}
//   GET /login                               HTTP Basic must match, else 401; {"token":"<t>"}
//                                            valid token_ttl (30 minutes, as WattTime's)
//   GET /v3/forecast?region=R&signal_type=S&horizon_hours=0
//                                            `Authorization: Bearer <live token>`, else 401
//       {"data":[{"point_time":..,"value":<lbs/MWh>,..}],"meta":{"units":<units>,..}}
//   POST /fake/set?gco2=G                    control: both APIs now report G gCO2/kWh (WattTime
//                                            as G x 1000 / 453.59237 lbs/MWh)
//
// Knobs: fail the next N requests with a status (429 with Retry-After), answer slowly, answer
// garbage, change the WattTime units (a percentile), expire every token.
//
// Threads: the server runs on its own worker; every knob and counter is safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/http/server.h"

namespace cgn::router::carbon {

struct FakeCarbonOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string em_token = "em-test-token";
  std::string wt_user = "wt-user";
  std::string wt_password = "wt-password";
  Nanos token_ttl = 30 * 60 * kNanosPerSecond;
  double gco2_per_kwh = 300;
  const Clock* clock = &SteadyClock::instance();
};

class FakeCarbonServer {
 public:
  explicit FakeCarbonServer(FakeCarbonOptions options = {});
  ~FakeCarbonServer();
  FakeCarbonServer(const FakeCarbonServer&) = delete;
  FakeCarbonServer& operator=(const FakeCarbonServer&) = delete;

  http::HttpResult<uint16_t> start();
  void stop();
  std::string url() const;  // "http://127.0.0.1:PORT"

  void set_gco2(double g);
  // The next `count` provider requests (not /fake/*) get `status` (429: with Retry-After when > 0).
  void fail_next(unsigned status, int count, uint32_t retry_after_s = 0);
  void set_delay(std::chrono::milliseconds d);
  void set_garbage(bool on);          // bodies that are not JSON
  void set_units(std::string units);  // WattTime meta.units (default lbs_co2_per_mwh)
  void expire_tokens();               // every WattTime token issued so far is now expired

  uint64_t em_requests() const;
  uint64_t logins() const;
  uint64_t forecasts() const;
  uint64_t unauthorized() const;  // 401s sent
  // Arrival times (the options' clock) of every provider request, in order.
  std::vector<Nanos> arrivals() const;

  struct State;

 private:
  FakeCarbonOptions options_;
  std::shared_ptr<State> state_;
  std::unique_ptr<http::Server> server_;
  uint16_t port_ = 0;
};

}  // namespace cgn::router::carbon
