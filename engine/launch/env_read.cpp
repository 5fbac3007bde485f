#include "engine/launch/env_read.hpp"

#include <fmt/format.h>

#include <cctype>

#include "common/errors.hpp"

namespace holmes::launch::detail {

std::optional<std::string> get(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<std::pair<std::string, std::string>> first_of(const EnvMap& env,
                                                            std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto value = get(env, name)) return std::make_pair(std::string(name), *value);
  return std::nullopt;
}

long long parse_int(const std::string& name, const std::string& text, long long lo, long long hi,
                    const std::string& accepted) {
  // Whole-string decimal only: "3 ", "0x3", "3.0" and "+3" are all refused, because a
  // launcher never writes them and a silent partial parse would give two ranks one number.
  bool ok = !text.empty() && text.size() <= 18;
  size_t start = (ok && text[0] == '-') ? 1 : 0;
  if (start == text.size()) ok = false;
  for (size_t i = start; ok && i < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) ok = false;
  if (!ok)
    throw UserError(fmt::format("environment variable {}='{}' is not an integer; accepted: {}", name, text,
                                accepted));
  long long value = std::stoll(text);
  if (value < lo || value > hi)
    throw UserError(fmt::format("environment variable {}={} is out of range; accepted: {}", name, value,
                                accepted));
  return value;
}

std::optional<long long> get_int(const EnvMap& env, const std::string& name, long long lo, long long hi,
                                 const std::string& accepted) {
  auto text = get(env, name);
  if (!text) return std::nullopt;
  return parse_int(name, *text, lo, hi, accepted);
}


}  // namespace holmes::launch::detail
