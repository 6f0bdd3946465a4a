#include "router/carbon/fake_provider.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "router/carbon/providers.h"
#include "router/coro_warnings.h"

namespace cgn::router::carbon {

namespace asio = boost::asio;

struct FakeCarbonServer::State {
  FakeCarbonOptions options;
  mutable std::mutex mu;
  double gco2 = 300;
  unsigned fail_status = 0;
  int fail_count = 0;
  uint32_t retry_after_s = 0;
  std::chrono::milliseconds delay{0};
  bool garbage = false;
  std::string units = "lbs_co2_per_mwh";
  std::map<std::string, Nanos> tokens;  // token -> expiry
  uint64_t token_seq = 0;
  std::vector<Nanos> arrivals;
  std::atomic<uint64_t> em_requests{0}, logins{0}, forecasts{0}, unauthorized{0};
};

namespace {

using nlohmann::json;

// The value of `key` in the request's query string ("" when absent).
std::string query_param(std::string_view target, std::string_view key) {
  auto q = target.find('?');
  if (q == std::string_view::npos) {
    return "";
  }
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    if (auto eq = pair.find('='); eq != std::string_view::npos && pair.substr(0, eq) == key) {
      return std::string(pair.substr(eq + 1));
    }
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
  }
  return "";
}

http::Response json_response(unsigned status, std::string body) {
  http::Response res{static_cast<boost::beast::http::status>(status), 11};
  res.set(http::Field::content_type, "application/json");
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

http::Response unauthorized(FakeCarbonServer::State& st) {
  st.unauthorized.fetch_add(1);
  return json_response(401, R"({"message":"unauthorized"})");
}

// The fault knobs, before any route: the delay, then a forced status. nullopt: answer normally.
asio::awaitable<std::optional<http::Response>> faults(FakeCarbonServer::State& st) {
  std::chrono::milliseconds delay{0};
  std::optional<http::Response> forced;
  {
    std::lock_guard lock(st.mu);
    st.arrivals.push_back(st.options.clock->now());
    delay = st.delay;
    if (st.fail_count > 0) {
      --st.fail_count;
      forced = json_response(st.fail_status, R"({"message":"forced failure"})");
      if (st.fail_status == 429 && st.retry_after_s > 0) {
        forced->set(http::Field::retry_after, std::to_string(st.retry_after_s));
      }
    }
  }
  if (delay.count() > 0) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    t.expires_after(delay);
    (void)co_await t.async_wait(asio::as_tuple(asio::use_awaitable));  // cancelled: answer anyway
  }
  co_return forced;
}

std::string em_body(const FakeCarbonServer::State& st, const std::string& zone) {
  if (st.garbage) {
    return "<html>gateway error</html>";
  }
  return json{{"zone", zone},
              {"carbonIntensity", st.gco2},
              {"datetime", "2026-12-02T02:00:00.000Z"},
              {"updatedAt", "2026-12-02T02:05:00.000Z"},
              {"createdAt", "2026-11-29T02:00:00.000Z"},
              {"emissionFactorType", "lifecycle"},
              {"isEstimated", false},
              {"estimationMethod", nullptr}}
      .dump();
}

std::string wt_body(const FakeCarbonServer::State& st, const std::string& region, const std::string& signal) {
  if (st.garbage) {
    return R"({"data":[{"value":)";
  }
  const double lbs = st.gco2 * 1000.0 / kGramsPerPound;
  return json{
      {"data", json::array({json{
                   {"point_time", "2026-12-02T02:00:00+00:00"}, {"value", lbs}, {"version", "2026-03-01"}}})},
      {"meta",
       {{"region", region},
        {"signal_type", signal},
        {"model", {{"date", "2026-03-01"}}},
        {"units", st.units},
        {"generated_at", "2026-12-02T02:00:00+00:00"}}}}
      .dump();
}

// A new token, valid token_ttl from now.
http::Response login_response(FakeCarbonServer::State& st) {
  std::string token;
  {
    std::lock_guard lock(st.mu);
    token = "fake-jwt-" + std::to_string(++st.token_seq);
    st.tokens[token] = st.options.clock->now() + st.options.token_ttl;
  }
  return json_response(200, json{{"token", token}}.dump());
}

http::Response set_gco2(FakeCarbonServer::State& st, double g) {
  {
    std::lock_guard lock(st.mu);
    st.gco2 = g;
  }
  return json_response(200, json{{"gco2", g}}.dump());
}

}  // namespace

namespace {

using StatePtr = std::shared_ptr<FakeCarbonServer::State>;

asio::awaitable<void> em_latest(StatePtr st, http::Exchange& ex) {
  st->em_requests.fetch_add(1);
  auto forced = co_await faults(*st);
  if (forced) {
    (void)co_await ex.respond(std::move(*forced));
    co_return;
  }
  const http::Request& req = ex.request();
  auto tok = req.find("auth-token");
  if (tok == req.end() || tok->value() != st->options.em_token) {
    (void)co_await ex.respond(unauthorized(*st));
    co_return;
  }
  std::string body;
  {
    std::lock_guard lock(st->mu);
    body = em_body(*st, query_param(req.target(), "zone"));
  }
  (void)co_await ex.respond(json_response(200, std::move(body)));
}

asio::awaitable<void> wt_login(StatePtr st, http::Exchange& ex) {
  st->logins.fetch_add(1);
  auto forced = co_await faults(*st);
  if (forced) {
    (void)co_await ex.respond(std::move(*forced));
    co_return;
  }
  auto auth = ex.request().find(http::Field::authorization);
  if (auth == ex.request().end() ||
      auth->value() != basic_auth(st->options.wt_user, st->options.wt_password)) {
    (void)co_await ex.respond(unauthorized(*st));
    co_return;
  }
  http::Response res = login_response(*st);
  (void)co_await ex.respond(std::move(res));
}

asio::awaitable<void> wt_forecast(StatePtr st, http::Exchange& ex) {
  st->forecasts.fetch_add(1);
  auto forced = co_await faults(*st);
  if (forced) {
    (void)co_await ex.respond(std::move(*forced));
    co_return;
  }
  const http::Request& req = ex.request();
  auto auth = req.find(http::Field::authorization);
  std::string body;
  bool ok = false;
  {
    std::lock_guard lock(st->mu);
    if (auth != req.end() && auth->value().starts_with("Bearer ")) {
      auto it = st->tokens.find(std::string(auth->value().substr(7)));
      ok = it != st->tokens.end() && st->options.clock->now() < it->second;
    }
    if (ok) {
      body = wt_body(*st, query_param(req.target(), "region"), query_param(req.target(), "signal_type"));
    }
  }
  // Built before the co_await: GCC 12 miscompiles a conditional expression in its operand.
  http::Response res = ok ? json_response(200, std::move(body)) : unauthorized(*st);
  (void)co_await ex.respond(std::move(res));
}

asio::awaitable<void> control_set(StatePtr st, http::Exchange& ex) {
  const std::string v = query_param(ex.request().target(), "gco2");
  char* end = nullptr;
  const double g = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size()) {
    (void)co_await ex.respond(json_response(400, R"({"message":"gco2 must be a number"})"));
    co_return;
  }
  http::Response res = set_gco2(*st, g);
  (void)co_await ex.respond(std::move(res));
}

}  // namespace

FakeCarbonServer::FakeCarbonServer(FakeCarbonOptions options)
    : options_(std::move(options)), state_(std::make_shared<State>()) {
  state_->options = options_;
  state_->gco2 = options_.gco2_per_kwh;
}

FakeCarbonServer::~FakeCarbonServer() {
  stop();
}

http::HttpResult<uint16_t> FakeCarbonServer::start() {
  http::RouteTable rt;
  StatePtr st = state_;
  rt.get("/v3/carbon-intensity/latest", [st](http::Exchange& ex) { return em_latest(st, ex); });
  rt.get("/login", [st](http::Exchange& ex) { return wt_login(st, ex); });
  rt.get("/v3/forecast", [st](http::Exchange& ex) { return wt_forecast(st, ex); });
  rt.post("/fake/set", [st](http::Exchange& ex) { return control_set(st, ex); });
  http::ServerConfig sc;
  sc.host = options_.host;
  sc.port = options_.port;
  server_ = std::make_unique<http::Server>(sc, std::move(rt));
  auto port = server_->start();
  if (port) {
    port_ = *port;
  }
  return port;
}

void FakeCarbonServer::stop() {
  if (server_) {
    server_->stop(std::chrono::milliseconds(0));
    server_.reset();
  }
}

std::string FakeCarbonServer::url() const {
  return "http://" + options_.host + ":" + std::to_string(port_);
}

void FakeCarbonServer::set_gco2(double g) {
  std::lock_guard lock(state_->mu);
  state_->gco2 = g;
}

void FakeCarbonServer::fail_next(unsigned status, int count, uint32_t retry_after_s) {
  std::lock_guard lock(state_->mu);
  state_->fail_status = status;
  state_->fail_count = count;
  state_->retry_after_s = retry_after_s;
}

void FakeCarbonServer::set_delay(std::chrono::milliseconds d) {
  std::lock_guard lock(state_->mu);
  state_->delay = d;
}

void FakeCarbonServer::set_garbage(bool on) {
  std::lock_guard lock(state_->mu);
  state_->garbage = on;
}

void FakeCarbonServer::set_units(std::string units) {
  std::lock_guard lock(state_->mu);
  state_->units = std::move(units);
}

void FakeCarbonServer::expire_tokens() {
  std::lock_guard lock(state_->mu);
  for (auto& [token, expiry] : state_->tokens) {
    expiry = 0;
  }
}

uint64_t FakeCarbonServer::em_requests() const {
  return state_->em_requests.load();
}
uint64_t FakeCarbonServer::logins() const {
  return state_->logins.load();
}
uint64_t FakeCarbonServer::forecasts() const {
  return state_->forecasts.load();
}
uint64_t FakeCarbonServer::unauthorized() const {
  return state_->unauthorized.load();
}

std::vector<Nanos> FakeCarbonServer::arrivals() const {
  std::lock_guard lock(state_->mu);
  return state_->arrivals;
}

}  // namespace cgn::router::carbon
