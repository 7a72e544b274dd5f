// A JSON number as the C++ number type that holds it, for the readers of the
// settings file and saved views (app/session/settings.cpp, choices.cpp) and
// the KV layout's JSON form (model/kv/kv_layout_json.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace kvscope {

// A JSON number as T only when T holds it: json's own get<int>() casts a
// double such as 1e12 unchecked (undefined behaviour), and an integer past
// T's range wraps. Integral T takes integers and whole-valued doubles in
// range; floating T takes finite values in range.
template <class T>
bool number_as(const nlohmann::json& v, T& out) {
  if constexpr (std::is_same_v<T, bool> || !std::is_arithmetic_v<T>) {
    return false;
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      const uint64_t x = v.get<uint64_t>();
      if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      out = static_cast<T>(x);
      return true;
    }
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        if (x < 0 || static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      } else if constexpr (sizeof(T) < sizeof(int64_t)) {
        if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) return false;
      }
      out = static_cast<T>(x);
      return true;
    }
    if (!v.is_number_float()) return false;
    const double x = v.get<double>();
    // 2^63 bounds every integral T's range check without overflowing it.
    if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) >= 9.2e18) return false;
    if (x < static_cast<double>(std::numeric_limits<T>::min()) ||
        x > static_cast<double>(std::numeric_limits<T>::max()))
      return false;
    out = static_cast<T>(x);
    return true;
  } else {
    if (!v.is_number()) return false;
    const double x = v.get<double>();
    if (!std::isfinite(x) || std::fabs(x) > static_cast<double>(std::numeric_limits<T>::max())) return false;
    out = static_cast<T>(x);
    return true;
  }
}

}  // namespace kvscope
