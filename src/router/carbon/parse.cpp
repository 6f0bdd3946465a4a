#include "router/carbon/parse.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/json_bounds.h"

namespace cgn::router::carbon {

namespace {

using nlohmann::json;

constexpr size_t kMaxBody = size_t{1} << 20;  // a latest reading or a 0-hour forecast is tiny
constexpr size_t kMaxDepth = 16;
constexpr double kMaxIntensity = 1e5;  // gCO2/kWh; the dirtiest grids are near 1e3

Error<FetchError> bad_body(std::string_view what) {
  return fetch_error(FetchReason::kBadBody, std::string(what));
}

// The body as a JSON object, or nullopt.
std::optional<json> object_of(std::string_view body) {
  if (!json_within_bounds(body, kMaxBody, kMaxDepth)) {
    return std::nullopt;
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return std::nullopt;
  }
  return j;
}

bool plausible(double v) {
  return std::isfinite(v) && v >= 0 && v <= kMaxIntensity;
}

}  // namespace

FetchResult parse_electricitymaps_latest(std::string_view body, std::string_view zone) {
  auto j = object_of(body);
  if (!j) {
    return bad_body("Electricity Maps: the answer is not a JSON object");
  }
  auto z = j->find("zone");
  if (z != j->end() && (!z->is_string() || z->get_ref<const std::string&>() != zone)) {
    return bad_body("Electricity Maps: the answer is for another zone");
  }
  auto ci = j->find("carbonIntensity");
  if (ci == j->end() || !ci->is_number()) {
    return bad_body("Electricity Maps: no numeric 'carbonIntensity'");
  }
  Reading r;
  r.gco2_per_kwh = ci->get<double>();
  if (!plausible(r.gco2_per_kwh)) {
    return bad_body("Electricity Maps: 'carbonIntensity' out of range");
  }
  if (auto e = j->find("isEstimated"); e != j->end() && e->is_boolean()) {
    r.estimated = e->get<bool>();
  }
  return r;
}

Result<std::string, FetchError> parse_watttime_login(std::string_view body) {
  auto j = object_of(body);
  if (!j) {
    return bad_body("WattTime login: the answer is not a JSON object");
  }
  auto t = j->find("token");
  if (t == j->end() || !t->is_string() || t->get_ref<const std::string&>().empty() ||
      t->get_ref<const std::string&>().size() > 8192) {
    return bad_body("WattTime login: no 'token'");
  }
  return t->get<std::string>();
}

FetchResult parse_watttime_forecast(std::string_view body) {
  auto j = object_of(body);
  if (!j) {
    return bad_body("WattTime forecast: the answer is not a JSON object");
  }
  auto meta = j->find("meta");
  if (meta == j->end() || !meta->is_object()) {
    return bad_body("WattTime forecast: no 'meta'");
  }
  auto units = meta->find("units");
  if (units == meta->end() || !units->is_string()) {
    return bad_body("WattTime forecast: no 'meta.units'");
  }
  if (units->get_ref<const std::string&>() != "lbs_co2_per_mwh") {
    return fetch_error(FetchReason::kBadUnits, "WattTime forecast: units '" +
                                                   units->get<std::string>().substr(0, 64) +
                                                   "' are not lbs_co2_per_mwh (a percentile is not a rate)");
  }
  auto data = j->find("data");
  if (data == j->end() || !data->is_array() || data->empty() || !(*data)[0].is_object()) {
    return bad_body("WattTime forecast: no 'data' points");
  }
  auto v = (*data)[0].find("value");
  if (v == (*data)[0].end() || !v->is_number()) {
    return bad_body("WattTime forecast: no numeric 'value'");
  }
  Reading r;
  r.gco2_per_kwh = lbs_per_mwh_to_g_per_kwh(v->get<double>());
  if (!plausible(r.gco2_per_kwh)) {
    return bad_body("WattTime forecast: 'value' out of range");
  }
  return r;
}

}  // namespace cgn::router::carbon
