// Reading a Prometheus text page (a /metrics body) in tests: one reader for every test.
//
// A series is named exactly as the page prints it: "name" or "name{labels}" with the labels in the
// page's own order. A series that is not on the page never reads as 0: metric() gives NaN, which
// fails EXPECT_EQ, EXPECT_GE, EXPECT_GT, EXPECT_LT and any == / >= / < comparison in a wait_until
// condition. A negative check on a counter that is created by its first increment uses
// count_or_zero(), which accepts a missing series only when the page declares its family.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cgn::testing {

// The value of `series`, or nullopt when no sample line of the page has exactly that name and labels.
std::optional<double> sample(std::string_view page, std::string_view series);

// The value of `series`; NaN when it is absent.
double metric(std::string_view page, std::string_view series);

// The value of `series`; 0 when it is absent but the page has a "# TYPE" line for its family (the
// name without labels and without a _total, _count, _sum or _bucket suffix, or with it); NaN when
// the family is unknown too (a misspelt name).
double count_or_zero(std::string_view page, std::string_view series);

// The value of the first sample line of family `name`, whatever its labels; nullopt when none.
std::optional<double> first_sample(std::string_view page, std::string_view name);

// Whether the page has a "# TYPE <family> " line.
bool declares_family(std::string_view page, std::string_view family);

}  // namespace cgn::testing
