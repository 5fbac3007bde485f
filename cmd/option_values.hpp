// Value checks for the options of every subcommand, so that a bad value reads the same
// everywhere: the value seen and what is accepted in plain numbers ("an integer >= 1",
// "a number in [0, 100]"), never CLI11's own range text (which prints the limits of a double
// as 309 digits). test/integration/messages.sh tries every numeric option listed by --help.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace holmes::cmd {

// "an integer >= 1", "an integer in [1, 1024]", "a number in [0, 100]"; `upper` empty = none.
std::string accepted_range(bool integer, const std::string& lower, const std::string& upper);
// The message of a rejected value: "'abc' is not an integer; accepted: an integer >= 1".
std::string rejected_value(const std::string& seen, bool integer, bool parsed, const std::string& accepted);

// A validator for an option of type T that accepts numbers in [lo, hi]; hi = the largest T
// means "no upper bound". It parses the text itself, so a non-number gets the same message.
template <typename T>
CLI::Validator in_range(T lo, T hi = std::numeric_limits<T>::max()) {
  static_assert(std::is_arithmetic_v<T>);
  constexpr bool kInteger = std::is_integral_v<T>;
  const std::string accepted = accepted_range(kInteger, fmt::format("{}", lo),
                                              hi == std::numeric_limits<T>::max() ? "" : fmt::format("{}", hi));
  CLI::Validator v(
      [lo, hi, accepted](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        // A negative number for an unsigned option is a number out of range, not a non-number.
        const bool negative_unsigned = std::is_unsigned_v<T> && text.size() > 1 && text[0] == '-';
        auto [p, ec] = std::from_chars(text.data() + (negative_unsigned ? 1 : 0), end, value);
        bool parsed = ec == std::errc() && p == end && !text.empty();
        if constexpr (!kInteger) parsed = parsed && std::isfinite(value);
        if (parsed && !negative_unsigned && value >= lo && value <= hi) return "";
        return rejected_value(text, kInteger, parsed, accepted);
      },
      "");
  return v;
}

// A validator for a text option that takes one of `accepted`.
CLI::Validator one_of(std::vector<std::string> accepted);

// Adds a numeric option checked by in_range; its metavariable in --help names the range
// ("INT >= 1", "FLOAT in [0, 100]") and its description ends with the default, the value
// `value` holds now, unless that is outside the range (a stand-in for "not given").
template <typename T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& value, const std::string& doc, T lo,
                        T hi = std::numeric_limits<T>::max()) {
  const bool bounded = hi != std::numeric_limits<T>::max();
  std::string type = std::is_integral_v<T> ? "INT" : "FLOAT";
  type += bounded ? fmt::format(" in [{}, {}]", lo, hi) : fmt::format(" >= {}", lo);
  const bool has_default = value >= lo && value <= hi;
  return app.add_option(name, value, has_default ? fmt::format("{} (default {})", doc, value) : doc)
      ->check(in_range<T>(lo, hi))
      ->type_name(type);
}

}  // namespace holmes::cmd
