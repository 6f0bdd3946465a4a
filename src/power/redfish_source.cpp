#include "power/redfish_source.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json_bounds.h"
#include "power/http_fetch.h"

namespace cgn::power {

namespace {

using nlohmann::json;

constexpr size_t kMaxJsonBytes = size_t{1} << 20;
constexpr size_t kMaxJsonDepth = 64;
constexpr double kMaxWatts = 1e7;

Result<json, SourceError> parse_json(std::string_view text) {
  if (!json_within_bounds(text, kMaxJsonBytes, kMaxJsonDepth)) {
    return make_error(SourceError::kBadData, "Redfish answer is over 1 MiB or nested too deep");
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(SourceError::kBadData, "Redfish answer is not a JSON object");
  }
  return j;
}

// A finite, non-negative number at j[key], at most `max`.
std::optional<double> number_at(const json& j, std::string_view key, double max) {
  if (!j.is_object()) {
    return std::nullopt;
  }
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) {
    return std::nullopt;
  }
  double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || v > max) {
    return std::nullopt;
  }
  return v;
}

const json& member(const json& j, std::string_view key) {
  static const json kNull;
  if (!j.is_object()) {
    return kNull;
  }
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

}  // namespace

Result<PowerSample, SourceError> parse_redfish_power(std::string_view text, const PowerSample& proto) {
  auto j = parse_json(text);
  if (!j.ok()) {
    return j.error();
  }
  const json& controls = member(j.value(), "PowerControl");
  if (!controls.is_array() || controls.empty()) {
    return make_error(SourceError::kBadData, "Power resource has no PowerControl");
  }
  const json& pc = controls.front();
  PowerSample s = proto;
  s.watts = number_at(pc, "PowerConsumedWatts", kMaxWatts);
  if (!s.watts) {
    return make_error(SourceError::kBadData, "PowerControl[0] has no PowerConsumedWatts");
  }
  s.power_limit_watts = number_at(member(pc, "PowerLimit"), "LimitInWatts", kMaxWatts);
  return s;
}

Result<PowerSample, SourceError> parse_redfish_environment(std::string_view text, const PowerSample& proto) {
  auto j = parse_json(text);
  if (!j.ok()) {
    return j.error();
  }
  PowerSample s = proto;
  s.watts = number_at(member(j.value(), "PowerWatts"), "Reading", kMaxWatts);
  if (auto joules = number_at(member(j.value(), "EnergyJoules"), "Reading", 1.8e13)) {
    s.counter_uj = static_cast<uint64_t>(std::llround(*joules * 1e6));
  } else if (auto kwh = number_at(member(j.value(), "EnergykWh"), "Reading", 5e6)) {
    s.counter_uj = static_cast<uint64_t>(std::llround(*kwh * kJoulesPerKwh * 1e6));
  }
  s.power_limit_watts = number_at(member(j.value(), "PowerLimitWatts"), "SetPoint", kMaxWatts);
  if (!s.watts && !s.counter_uj) {
    return make_error(SourceError::kBadData,
                      "EnvironmentMetrics has neither PowerWatts nor an energy reading");
  }
  return s;
}

namespace {

std::string base64(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

class RedfishSource final : public Source {
 public:
  RedfishSource(const config::PowerSourceConfig& cfg, HttpTarget bmc)
      : Source(cfg.name, cfg.kind),
        bmc_(std::move(bmc)),
        chassis_(cfg.device.empty() ? "1" : cfg.device),
        environment_(cfg.redfish_schema == "environment"),
        session_auth_(cfg.auth == "session"),
        username_(cfg.username),
        password_(cfg.password),
        http_(std::chrono::milliseconds(cfg.timeout_ms), cfg.ca_file) {}

  ~RedfishSource() override { logout(); }

  SourceResult read() override {
    std::string path = fmt::format("{}/redfish/v1/Chassis/{}/{}", prefix(), chassis_,
                                   environment_ ? "EnvironmentMetrics" : "Power");
    auto got = get(path);
    if (got.ok() && got.value().result_int() == 401 && session_auth_) {
      token_.clear();  // the BMC dropped the session: log in again, once
      got = get(path);
    }
    if (!got.ok()) {
      return got.error();
    }
    unsigned status = got.value().result_int();
    if (status != 200) {
      return make_error(status == 404 ? SourceError::kUnsupported : SourceError::kUnavailable,
                        fmt::format("GET {} answered {}", path, status));
    }
    auto s = environment_ ? parse_redfish_environment(got.value().body(), sample(chassis_))
                          : parse_redfish_power(got.value().body(), sample(chassis_));
    if (!s.ok()) {
      return s.error();
    }
    return std::vector<PowerSample>{std::move(s.value())};
  }

 private:
  std::string prefix() const { return bmc_.path == "/" ? "" : bmc_.path; }

  Result<http::Response, SourceError> get(const std::string& path) {
    if (session_auth_ && token_.empty()) {
      if (auto st = login(); !st.ok()) {
        return st.error();
      }
    }
    http::Request req{http::Verb::get, path, 11};
    req.set(http::Field::accept, "application/json");
    authorise(req);
    return http_.send(bmc_.upstream, std::move(req));
  }

  void authorise(http::Request& req) const {
    if (session_auth_) {
      req.set("X-Auth-Token", token_);
    } else if (!username_.empty()) {
      req.set(http::Field::authorization,
              "Basic " + base64(fmt::format("{}:{}", username_, password_.reveal())));
    }
  }

  Status<SourceError> login() {
    http::Request req{http::Verb::post, prefix() + "/redfish/v1/SessionService/Sessions", 11};
    req.set(http::Field::content_type, "application/json");
    req.body() = json{{"UserName", username_}, {"Password", std::string(password_.reveal())}}.dump();
    req.prepare_payload();
    auto got = http_.send(bmc_.upstream, std::move(req));
    if (!got.ok()) {
      return got.error();
    }
    const http::Response& res = got.value();
    auto token = res["X-Auth-Token"];
    if ((res.result_int() != 201 && res.result_int() != 200) || token.empty()) {
      return make_error(SourceError::kUnavailable,
                        fmt::format("Redfish login as \"{}\" answered {}", username_, res.result_int()));
    }
    token_ = std::string(token);
    session_ = std::string(res[http::Field::location]);
    return Ok{};
  }

  void logout() {
    if (token_.empty() || session_.empty()) {
      return;
    }
    std::string path = session_;
    if (auto scheme = path.find("://"); scheme != std::string::npos) {
      auto slash = path.find('/', scheme + 3);
      path = slash == std::string::npos ? "/" : path.substr(slash);
    }
    http::Request req{http::Verb::delete_, path, 11};
    authorise(req);
    (void)http_.send(bmc_.upstream, std::move(req));
    token_.clear();
  }

  HttpTarget bmc_;
  std::string chassis_;
  bool environment_;
  bool session_auth_;
  std::string username_;
  config::Secret password_;
  BlockingHttp http_;
  std::string token_;    // the session's X-Auth-Token; empty: not logged in
  std::string session_;  // its Location, DELETEd at the end
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_redfish_source(const config::PowerSourceConfig& cfg) {
  auto bmc = parse_http_url(cfg.url);
  if (!bmc.ok()) {
    return bmc.error();
  }
  if (cfg.auth == "session" && cfg.username.empty()) {
    return make_error(SourceError::kConfig, "auth = \"session\" needs username and password_env");
  }
  if (!cfg.ca_file.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(cfg.ca_file, ec)) {
      return make_error(SourceError::kConfig, fmt::format("ca_file {} is not a file", cfg.ca_file));
    }
    if (!bmc->upstream.tls) {
      return make_error(SourceError::kConfig, "ca_file needs an https:// url");
    }
  }
  return std::unique_ptr<Source>(std::make_unique<RedfishSource>(cfg, std::move(bmc.value())));
}

}  // namespace cgn::power
