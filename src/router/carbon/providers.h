// The three providers, each behind Provider (provider.h), and the registry that builds one from
// [router.carbon] by its `provider` name.
//
//   static           the configured static_gco2_per_kwh, always (tests, demos, a fixed grid)
//   electricitymaps  GET {url}/v3/carbon-intensity/latest?zone=Z with header `auth-token`
//   watttime         GET {url}/login (HTTP Basic) -> a token valid 30 minutes, then
//                    GET {url}/v3/forecast?region=R&signal_type=S&horizon_hours=0 with
//                    `Authorization: Bearer`; the token is renewed 1 minute before it expires
//                    and once on a 401
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "router/carbon/provider.h"

namespace cgn::router::carbon {

inline constexpr std::string_view kElectricityMapsUrl = "https://api.electricitymap.org";
inline constexpr std::string_view kWattTimeUrl = "https://api.watttime.org";
// WattTime login tokens live 30 minutes; renewed this long before.
inline constexpr Nanos kWattTimeTokenLife = 30 * 60 * kNanosPerSecond;
inline constexpr Nanos kWattTimeRenewEarly = 60 * kNanosPerSecond;

enum class CarbonError { kConfig };

// The names the registry knows, in registration order ("off" is not a provider).
std::vector<std::string_view> provider_names();

// The provider `cfg.provider` names. kConfig for "off", an unknown name or an unusable URL.
Result<std::unique_ptr<Provider>, CarbonError> make_provider(const config::CarbonConfig& cfg);

// "user:password" as HTTP Basic credentials ("Basic dXNlcjpwYXNz").
std::string basic_auth(std::string_view user, std::string_view password);

}  // namespace cgn::router::carbon
