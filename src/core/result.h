// Errors as values: Result<T, E> holds either a T or an Error<E>, where E is a
// module's own error enum. Nothing in Cognitora throws across an Asio handler
// or coroutine boundary; edges (HTTP handlers, mains) turn errors into
// OpenAI-style errors or exit codes.
#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace cgn {

// An error: a module-specific code plus a human-readable message that names
// the problem (file, line, key, field...). Messages never contain secrets.
template <class E>
struct Error {
  E code{};
  std::string message;
};

template <class E>
Error<E> make_error(E code, std::string message) {
  return Error<E>{code, std::move(message)};
}

template <class T, class E>
class [[nodiscard]] Result {
 public:
  using value_type = T;
  using error_type = Error<E>;

  // NOLINTNEXTLINE(google-explicit-constructor): implicit by design, like std::expected.
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  Result(Error<E> error) : v_(std::in_place_index<1>, std::move(error)) {}

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error<E>& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error<E>> v_;
};

// Result<void, E>: success carries nothing.
struct Ok {};

template <class E>
using Status = Result<Ok, E>;

}  // namespace cgn
