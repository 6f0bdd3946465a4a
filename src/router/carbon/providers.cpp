#include "router/carbon/providers.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <functional>

#include "cluster/state_store.h"
#include "router/carbon/parse.h"
#include "router/coro_warnings.h"

namespace cgn::router::carbon {

namespace asio = boost::asio;

std::string basic_auth(std::string_view user, std::string_view password) {
  const std::string plain = std::string(user) + ":" + std::string(password);
  std::string out(4 * ((plain.size() + 2) / 3) + 1, '\0');  // EVP_EncodeBlock adds a NUL
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(plain.data()), static_cast<int>(plain.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return "Basic " + out;
}

namespace {

// Where a provider's requests go: the parsed base URL.
struct Base {
  http::Upstream up;
  std::string path;  // prefix, never ending in '/'
};

Result<Base, CarbonError> parse_base(const std::string& url, std::string_view fallback) {
  auto ep = cluster::parse_node_url(url.empty() ? fallback : url);
  if (!ep) {
    return make_error(CarbonError::kConfig, "[router.carbon] url: " + ep.error().message);
  }
  return Base{http::Upstream{ep->host, ep->port, ep->tls}, ep->base_path};
}

http::Request get_request(const Base& b, const std::string& target) {
  http::Request req{http::Verb::get, b.path + target, 11};
  req.set(http::Field::accept, "application/json");
  return req;
}

// Zone and region go into a query string: letters, digits, '_' and '-' only.
std::string query_safe(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') {
      out.push_back(c);
    }
  }
  return out;
}

class StaticProvider final : public Provider {
 public:
  explicit StaticProvider(const config::CarbonConfig& c) : zone_(c.zone), value_(c.static_gco2_per_kwh) {}
  std::string_view name() const override { return "static"; }
  const std::string& zone() const override { return zone_; }
  asio::awaitable<FetchResult> fetch(http::HttpClient&, http::ClientTimeouts, Nanos) override {
    co_return Reading{value_, false};
  }

 private:
  std::string zone_;
  double value_;
};

class ElectricityMapsProvider final : public Provider {
 public:
  ElectricityMapsProvider(const config::CarbonConfig& c, Base base)
      : zone_(c.zone), token_(c.token.reveal()), base_(std::move(base)) {}
  std::string_view name() const override { return "electricitymaps"; }
  const std::string& zone() const override { return zone_; }

  asio::awaitable<FetchResult> fetch(http::HttpClient& client, http::ClientTimeouts t, Nanos) override {
    http::Request req = get_request(base_, "/v3/carbon-intensity/latest?zone=" + query_safe(zone_));
    req.set("auth-token", token_);
    auto res = co_await client.send(base_.up, std::move(req), t);
    if (!res) {
      co_return transport_error(res.error().code, "Electricity Maps");
    }
    if (auto st = check_status(*res, "Electricity Maps"); !st) {
      co_return st.error();
    }
    co_return parse_electricitymaps_latest(res->body(), zone_);
  }

 private:
  std::string zone_;
  std::string token_;
  Base base_;
};

class WattTimeProvider final : public Provider {
 public:
  WattTimeProvider(const config::CarbonConfig& c, Base base)
      : zone_(c.zone),
        signal_(c.signal_type),
        basic_(basic_auth(c.username, c.password.reveal())),
        base_(std::move(base)) {}
  std::string_view name() const override { return "watttime"; }
  const std::string& zone() const override { return zone_; }

  asio::awaitable<FetchResult> fetch(http::HttpClient& client, http::ClientTimeouts t, Nanos now) override {
    if (token_.empty() || now >= token_expires_ - kWattTimeRenewEarly) {
      auto st = co_await login(client, t, now);
      if (!st) {
        co_return st.error();
      }
    }
    auto res = co_await forecast(client, t);
    if (res && res->result_int() == 401) {
      // Revoked or expired early: log in again, once.
      auto st = co_await login(client, t, now);
      if (!st) {
        co_return st.error();
      }
      res = co_await forecast(client, t);
    }
    if (!res) {
      co_return transport_error(res.error().code, "WattTime forecast");
    }
    auto ok = check_status(*res, "WattTime forecast");
    if (!ok) {
      co_return ok.error();
    }
    co_return parse_watttime_forecast(res->body());
  }

 private:
  asio::awaitable<http::HttpResult<http::Response>> forecast(http::HttpClient& client,
                                                             http::ClientTimeouts t) {
    http::Request req = get_request(base_, "/v3/forecast?region=" + query_safe(zone_) +
                                               "&signal_type=" + query_safe(signal_) + "&horizon_hours=0");
    req.set(http::Field::authorization, "Bearer " + token_);
    auto res = co_await client.send(base_.up, std::move(req), t);
    co_return res;
  }

  asio::awaitable<Status<FetchError>> login(http::HttpClient& client, http::ClientTimeouts t, Nanos now) {
    token_.clear();
    http::Request req = get_request(base_, "/login");
    req.set(http::Field::authorization, basic_);
    auto res = co_await client.send(base_.up, std::move(req), t);
    if (!res) {
      co_return transport_error(res.error().code, "WattTime login");
    }
    if (auto st = check_status(*res, "WattTime login"); !st) {
      co_return st.error();
    }
    auto token = parse_watttime_login(res->body());
    if (!token) {
      co_return token.error();
    }
    token_ = std::move(*token);
    token_expires_ = now + kWattTimeTokenLife;
    co_return Ok{};
  }

  std::string zone_;
  std::string signal_;
  std::string basic_;  // never logged
  Base base_;
  std::string token_;  // never logged
  Nanos token_expires_ = 0;
};

using Factory = std::function<Result<std::unique_ptr<Provider>, CarbonError>(const config::CarbonConfig&)>;

struct Registered {
  std::string_view name;
  Factory make;
};

const std::vector<Registered>& registry() {
  static const std::vector<Registered> r = {
      {"static",
       [](const config::CarbonConfig& c) -> Result<std::unique_ptr<Provider>, CarbonError> {
         return std::unique_ptr<Provider>(std::make_unique<StaticProvider>(c));
       }},
      {"electricitymaps",
       [](const config::CarbonConfig& c) -> Result<std::unique_ptr<Provider>, CarbonError> {
         auto base = parse_base(c.url, kElectricityMapsUrl);
         if (!base) {
           return base.error();
         }
         return std::unique_ptr<Provider>(std::make_unique<ElectricityMapsProvider>(c, std::move(*base)));
       }},
      {"watttime",
       [](const config::CarbonConfig& c) -> Result<std::unique_ptr<Provider>, CarbonError> {
         auto base = parse_base(c.url, kWattTimeUrl);
         if (!base) {
           return base.error();
         }
         return std::unique_ptr<Provider>(std::make_unique<WattTimeProvider>(c, std::move(*base)));
       }},
  };
  return r;
}

}  // namespace

std::vector<std::string_view> provider_names() {
  std::vector<std::string_view> out;
  for (const auto& r : registry()) {
    out.push_back(r.name);
  }
  return out;
}

Result<std::unique_ptr<Provider>, CarbonError> make_provider(const config::CarbonConfig& cfg) {
  for (const auto& r : registry()) {
    if (r.name == cfg.provider) {
      return r.make(cfg);
    }
  }
  return make_error(CarbonError::kConfig,
                    "[router.carbon] provider: no provider named \"" + cfg.provider + "\"");
}

}  // namespace cgn::router::carbon
