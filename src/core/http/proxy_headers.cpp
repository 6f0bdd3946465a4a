#include "core/http/proxy_headers.h"

#include <boost/beast/core/string.hpp>

#include "core/text.h"

namespace cgn::http {

namespace {

using boost::beast::iequals;

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

constexpr std::string_view kHopByHop[] = {"connection",
                                          "keep-alive",
                                          "proxy-connection",
                                          "proxy-authorization",
                                          "proxy-authenticate",
                                          "te",
                                          "trailer",
                                          "transfer-encoding",
                                          "upgrade",
                                          "content-length",
                                          "host"};

}  // namespace

bool is_hop_by_hop(std::string_view name) {
  for (std::string_view h : kHopByHop) {
    if (iequals(name, h)) {
      return true;
    }
  }
  return false;
}

bool named_in_connection(const Fields& fields, std::string_view name) {
  for (auto it = fields.find(Field::connection); it != fields.end() && it->name() == Field::connection;
       ++it) {
    std::string_view list = it->value();
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (iequals(text::trim(list.substr(0, comma)), name)) {
        return true;
      }
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
  }
  return false;
}

bool is_client_header_allowed(std::string_view name) {
  for (std::string_view h : kClientHeaders) {
    if (iequals(name, h)) {
      return true;
    }
  }
  return false;
}

bool is_cognitora_header(std::string_view name) {
  return istarts_with(name, "x-cgn-") || iequals(name, "x-request-id") || iequals(name, "x-forwarded-for");
}

void copy_client_headers(const Fields& in, Fields& out) {
  for (const auto& f : in) {
    if (is_client_header_allowed(f.name_string()) && !named_in_connection(in, f.name_string())) {
      out.insert(f.name_string(), f.value());
    }
  }
}

void copy_forwarded_headers(const Fields& in, Fields& out) {
  for (const auto& f : in) {
    const std::string_view name = f.name_string();
    if ((is_client_header_allowed(name) || is_cognitora_header(name)) && !named_in_connection(in, name)) {
      out.insert(name, f.value());
    }
  }
}

void copy_response_headers(const Fields& in, Fields& out, bool drop_cognitora) {
  const bool has_connection = in.find(Field::connection) != in.end();
  for (const auto& f : in) {
    const std::string_view name = f.name_string();
    if (!is_hop_by_hop(name) && !(drop_cognitora && is_cognitora_header(name)) &&
        !(has_connection && named_in_connection(in, name))) {
      out.insert(name, f.value());
    }
  }
}

std::string_view peer_address(std::string_view remote_address) {
  const size_t colon = remote_address.rfind(':');
  if (colon == std::string_view::npos) {
    return remote_address;
  }
  const std::string_view port = remote_address.substr(colon + 1);
  const bool numeric = !port.empty() && port.find_first_not_of("0123456789") == std::string_view::npos;
  return numeric ? remote_address.substr(0, colon) : remote_address;
}

void set_forwarded_for(Fields& out, std::string_view remote_address) {
  const std::string_view addr = peer_address(remote_address);
  if (addr.empty()) {
    out.erase("X-Forwarded-For");
    return;
  }
  out.set("X-Forwarded-For", addr);
}

}  // namespace cgn::http
