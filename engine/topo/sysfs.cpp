#include "engine/topo/sysfs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <regex>

#include "common/errors.hpp"

namespace holmes::topo::sysfs {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::optional<std::string> read_line(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string line;
  if (!std::getline(in, line) && line.empty()) return std::nullopt;
  if (in.bad()) return std::nullopt;
  return trim(line);
}

std::string read_required(const fs::path& file, const char* expected) {
  auto text = read_line(file);
  if (!text)
    throw UserError(fmt::format("cannot read {}: the file is missing or unreadable; it should hold {}",
                                file.string(), expected));
  return *text;
}

long parse_int(const std::string& text, const fs::path& file, const char* expected) {
  long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw UserError(fmt::format("{}: expected {}, found '{}'", file.string(), expected, text));
  return value;
}

double parse_ib_rate(const std::string& text, const fs::path& file) {
  // The kernel writes "%s Gb/sec (%dX%s)" where the speed may have one decimal ("2.5").
  static const std::regex kRate(R"(^([0-9]+(\.[0-9]+)?) Gb/sec( \(.*\))?$)");
  std::smatch m;
  if (!std::regex_match(text, m, kRate))
    throw UserError(fmt::format("{}: expected a port rate such as '200 Gb/sec (4X HDR)', found '{}'",
                                file.string(), text));
  return std::stod(m[1].str());
}

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    bool da = std::isdigit(static_cast<unsigned char>(a[i]));
    bool db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      // Compare as numbers without overflow: strip leading zeros, then length, then text.
      auto strip = [](const std::string& s, size_t from, size_t to) {
        while (from + 1 < to && s[from] == '0') ++from;
        return s.substr(from, to - from);
      };
      std::string na = strip(a, i, ie), nb = strip(b, j, je);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return (a.size() - i) < (b.size() - j);
  return a < b;
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end(), natural_less);
  return names;
}

std::string pci_address_of(const fs::path& device_link) {
  static const std::regex kPci(R"(^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$)");
  std::error_code ec;
  fs::path target = fs::canonical(device_link, ec);
  if (ec) target = fs::read_symlink(device_link, ec);
  if (ec) return "";
  // A virtio or USB NIC hangs below its PCI function: take the nearest PCI-looking component.
  std::string found;
  for (const auto& part : target) {
    std::string s = part.string();
    if (std::regex_match(s, kPci)) found = s;
  }
  return found;
}

}  // namespace holmes::topo::sysfs
