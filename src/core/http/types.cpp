#include "core/http/types.h"

#include <utility>

namespace cgn::http {

const char* to_string(HttpError e) {
  switch (e) {
    case HttpError::connect_failed:
      return "connect_failed";
    case HttpError::timeout:
      return "timeout";
    case HttpError::closed:
      return "closed";
    case HttpError::too_large:
      return "too_large";
    case HttpError::protocol:
      return "protocol";
    case HttpError::cancelled:
      return "cancelled";
    case HttpError::tls:
      return "tls";
    case HttpError::bind_failed:
      return "bind_failed";
    case HttpError::invalid_state:
      return "invalid_state";
  }
  return "unknown";
}

std::string_view path_of(std::string_view target) {
  const size_t q = target.find_first_of("?#");
  return q == std::string_view::npos ? target : target.substr(0, q);
}

Response make_response(unsigned status, std::string body, std::string_view content_type) {
  Response res{static_cast<beast_http::status>(status), 11};
  if (!content_type.empty()) {
    res.set(Field::content_type, content_type);
  }
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response make_error_response(const ApiError& error) {
  return make_response(static_cast<unsigned>(error.status), error.body(), "application/json");
}

}  // namespace cgn::http
