// Small text helpers shared by every layer.
#pragma once

#include <string>

namespace holmes {

// A count for humans: "842.6k", "124.44M", "6.74G" (and plain below 10 000). The same
// format everywhere a count is printed (plan, log, bench), so one fact reads the same.
std::string human_count(double v);

// A count and its noun, singular for one: "1 rank", "2 ranks" (`plural` when it is not the
// noun + "s").
std::string count_of(long long n, const std::string& noun, const std::string& plural = "");

// `text` as a JSON string literal (quotes, escapes) for the JSON the project writes by hand.
std::string json_quote(const std::string& text);

}  // namespace holmes
