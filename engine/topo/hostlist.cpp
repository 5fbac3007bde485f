#include "engine/topo/hostlist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "common/errors.hpp"

namespace holmes::topo {

namespace {

[[noreturn]] void bad(const std::string& expr, const std::string& why) {
  throw UserError(fmt::format("hostlist '{}': {}; accepted: names like 'node[01-04,07],gpu-a[1-2]'", expr, why));
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "01-04,07" -> {"01","02","03","04","07"}
std::vector<std::string> expand_bracket(const std::string& body, const std::string& expr) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = item.find('-');
    std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi)) bad(expr, fmt::format("'{}' in brackets is not a number or range lo-hi", item));
    if (lo.size() > 18 || hi.size() > 18) bad(expr, fmt::format("'{}' has too many digits", item));
    long long a = std::stoll(lo), b = std::stoll(hi);
    if (a > b) bad(expr, fmt::format("range '{}' runs backwards", item));
    if (static_cast<unsigned long long>(b - a) >= kMaxHostlistHosts)
      bad(expr, fmt::format("range '{}' has more than {} names", item, kMaxHostlistHosts));
    size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    for (long long v = a; v <= b; ++v) out.push_back(fmt::format("{:0{}d}", v, width));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One expression without top-level separators: "a[1-2]b[3-4]-ib".
void expand_one(const std::string& term, const std::string& expr, std::vector<std::string>& out) {
  std::vector<std::string> partial{""};
  size_t i = 0;
  while (i < term.size()) {
    if (term[i] == ']') bad(expr, "']' without '['");
    if (term[i] != '[') {
      size_t next = term.find_first_of("[]", i);
      std::string text = term.substr(i, next == std::string::npos ? std::string::npos : next - i);
      for (auto& p : partial) p += text;
      i = next == std::string::npos ? term.size() : next;
      continue;
    }
    size_t close = term.find(']', i);
    if (close == std::string::npos) bad(expr, "'[' without ']'");
    std::string body = term.substr(i + 1, close - i - 1);
    if (body.find('[') != std::string::npos) bad(expr, "brackets inside brackets");
    auto values = expand_bracket(body, expr);
    if (partial.size() * values.size() > kMaxHostlistHosts)
      bad(expr, fmt::format("it expands to more than {} names", kMaxHostlistHosts));
    std::vector<std::string> grown;
    grown.reserve(partial.size() * values.size());
    for (const auto& p : partial)
      for (const auto& v : values) grown.push_back(p + v);
    partial = std::move(grown);
    i = close + 1;
  }
  out.insert(out.end(), partial.begin(), partial.end());
  if (out.size() > kMaxHostlistHosts) bad(expr, fmt::format("it expands to more than {} names", kMaxHostlistHosts));
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expr) {
  std::vector<std::string> out;
  std::string term;
  int depth = 0;
  bool any = false;
  auto flush = [&](bool separator) {
    if (term.empty()) {
      if (separator && depth == 0 && any) bad(expr, "empty name between separators");
      return;
    }
    expand_one(term, expr, out);
    term.clear();
    any = true;
  };
  for (size_t i = 0; i <= expr.size(); ++i) {
    char c = i < expr.size() ? expr[i] : '\0';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) bad(expr, "']' without '['");
    if (depth > 1) bad(expr, "brackets inside brackets");
    bool space = std::isspace(static_cast<unsigned char>(c));
    if (c == '\0' || (depth == 0 && (c == ',' || space))) {
      if (c == '\0' && depth != 0) bad(expr, "'[' without ']'");
      flush(c == ',');
      continue;
    }
    if (depth == 1 && space) bad(expr, "white space inside brackets");
    term += c;
  }
  if (out.empty()) bad(expr, "no host names in it");
  return out;
}

std::string compress_hostlist(const std::vector<std::string>& names) {
  // Group key: prefix + digit width (0 = numbers written without leading zeros).
  struct Group {
    std::string prefix;
    size_t width = 0;
    std::vector<long long> values;
  };
  std::vector<Group> groups;
  std::vector<std::string> plain;  // names that do not end in a (short enough) number
  std::vector<std::pair<int, size_t>> order;  // (0 = group / 1 = plain, index) in first-seen order
  std::map<std::pair<std::string, size_t>, size_t> index;
  for (const auto& name : names) {
    size_t d = name.size();
    while (d > 0 && std::isdigit(static_cast<unsigned char>(name[d - 1]))) --d;
    std::string digits = name.substr(d);
    if (digits.empty() || digits.size() > 18) {
      if (std::find(plain.begin(), plain.end(), name) == plain.end()) {
        order.emplace_back(1, plain.size());
        plain.push_back(name);
      }
      continue;
    }
    size_t width = digits.size() > 1 && digits[0] == '0' ? digits.size() : 0;
    auto key = std::make_pair(name.substr(0, d), width);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) {
      groups.push_back({key.first, width, {}});
      order.emplace_back(0, it->second);
    }
    groups[it->second].values.push_back(std::stoll(digits));
  }
  std::vector<std::string> parts;
  for (auto [is_plain, i] : order) {
    if (is_plain) {
      parts.push_back(plain[i]);
      continue;
    }
    auto& g = groups[i];
    std::sort(g.values.begin(), g.values.end());
    g.values.erase(std::unique(g.values.begin(), g.values.end()), g.values.end());
    std::vector<std::string> ranges;
    for (size_t a = 0; a < g.values.size();) {
      size_t b = a;
      while (b + 1 < g.values.size() && g.values[b + 1] == g.values[b] + 1) ++b;
      std::string lo = fmt::format("{:0{}d}", g.values[a], g.width);
      ranges.push_back(a == b ? lo : fmt::format("{}-{:0{}d}", lo, g.values[b], g.width));
      a = b + 1;
    }
    if (g.values.size() == 1) parts.push_back(g.prefix + ranges[0]);
    else parts.push_back(fmt::format("{}[{}]", g.prefix, fmt::join(ranges, ",")));
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace holmes::topo
