// kind = "redfish": the chassis's power from its BMC (`url`, the BMC's base; `device`, the chassis
// id, default "1"). `redfish_schema` picks the resource:
//   power        GET /redfish/v1/Chassis/<id>/Power (legacy, deprecated since Power v1_7_0 but what
//                HPE iLO and Lenovo XCC document): PowerControl[0].PowerConsumedWatts (W),
//                PowerControl[0].PowerLimit.LimitInWatts (W). No counter.
//   environment  GET /redfish/v1/Chassis/<id>/EnvironmentMetrics: PowerWatts.Reading (W), the
//                counter from EnergyJoules.Reading (J) or else EnergykWh.Reading (kWh),
//                PowerLimitWatts.SetPoint (W).
// `auth`: basic sends the credentials on every request; session logs in once
// (POST /redfish/v1/SessionService/Sessions, 201 with X-Auth-Token and Location), reuses that one
// session (BMCs cap them), logs in again after a 401 and retries once, and DELETEs it at the end.
// The password is never logged.
#pragma once

#include <memory>
#include <string_view>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

// The resources' JSON into a sample (a copy of `proto` with the readings); kBadData when the JSON
// does not parse, is over 1 MiB or 64 levels deep, or holds no reading.
Result<PowerSample, SourceError> parse_redfish_power(std::string_view json, const PowerSample& proto);
Result<PowerSample, SourceError> parse_redfish_environment(std::string_view json, const PowerSample& proto);

Result<std::unique_ptr<Source>, SourceError> make_redfish_source(const config::PowerSourceConfig& cfg);

}  // namespace cgn::power
