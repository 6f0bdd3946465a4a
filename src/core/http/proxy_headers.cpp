#include "core/http/proxy_headers.h"

namespace cgn::http {

namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
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
      if (iequals(trim(list.substr(0, comma)), name)) {
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

void set_forwarded_for(Fields& out, std::string_view remote_address) {
  std::string_view addr = remote_address;
  if (const size_t colon = addr.rfind(':'); colon != std::string_view::npos) {
    addr = addr.substr(0, colon);
  }
  if (addr.empty()) {
    out.erase("X-Forwarded-For");
    return;
  }
  out.set("X-Forwarded-For", addr);
}

}  // namespace cgn::http
