#include "router/retry_budget.h"

#include <boost/beast/core/string.hpp>

namespace cgn::router {

std::string_view reason_label(AttemptFailure f) {
  switch (f) {
    case AttemptFailure::kConnect:
      return "connect";
    case AttemptFailure::kTimeout:
      return "timeout";
    case AttemptFailure::kClosed:
      return "closed";
    case AttemptFailure::kStatus429:
      return "status_429";
    case AttemptFailure::kStatus5xx:
      return "status_5xx";
  }
  return "closed";
}

AttemptFailure failure_of(http::HttpError e) {
  switch (e) {
    case http::HttpError::connect_failed:
    case http::HttpError::tls:
      return AttemptFailure::kConnect;
    case http::HttpError::timeout:
      return AttemptFailure::kTimeout;
    default:
      return AttemptFailure::kClosed;
  }
}

AttemptFailure failure_of_answer(unsigned status, const http::Fields& headers) {
  if (status >= 500) {
    const auto it = headers.find(http::kFailureHeader);
    if (it != headers.end() && boost::beast::iequals(it->value(), http::kFailureEngineClosed)) {
      return AttemptFailure::kClosed;
    }
    return AttemptFailure::kStatus5xx;
  }
  return AttemptFailure::kStatus429;
}

bool RetryBudget::allows_retry_after(AttemptFailure f) {
  if (f != AttemptFailure::kClosed) {
    return true;
  }
  if (closed_once_) {
    return false;
  }
  closed_once_ = true;
  return true;
}

}  // namespace cgn::router
