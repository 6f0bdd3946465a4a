// The providers' response bodies -> typed values. Pure functions over outside bytes (each has a
// fuzz target: electricitymaps_fuzz.cpp, watttime_fuzz.cpp); no JSON leaves this file.
#pragma once

#include <string>
#include <string_view>

#include "router/carbon/provider.h"

namespace cgn::router::carbon {

// Electricity Maps v3 GET /v3/carbon-intensity/latest: {"zone","carbonIntensity" (gCO2eq/kWh),
// "datetime", "isEstimated"?, ...}. A zone other than `zone` is an error (kBadBody).
FetchResult parse_electricitymaps_latest(std::string_view body, std::string_view zone);

// WattTime GET /login: {"token": "<JWT>"}.
Result<std::string, FetchError> parse_watttime_login(std::string_view body);

// WattTime v3 GET /v3/forecast (horizon_hours=0): {"data":[{"point_time","value"},...],
// "meta":{"units":"lbs_co2_per_mwh",...}}. The first point, converted to gCO2/kWh. Units other
// than lbs_co2_per_mwh (a percentile signal index, anything else) are kBadUnits: never compared
// with a threshold in gCO2/kWh.
FetchResult parse_watttime_forecast(std::string_view body);

}  // namespace cgn::router::carbon
