#include "engine/train/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "common/errors.hpp"

namespace holmes::train {

namespace {

double status_field_mb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = key;
  while (std::getline(f, line))
    if (line.compare(0, k.size(), k) == 0) return std::stod(line.substr(k.size())) / 1024.0;  // "... kB"
  return 0;
}

}  // namespace

double rss_mb() { return status_field_mb("VmRSS:"); }
double peak_rss_mb() { return status_field_mb("VmHWM:"); }

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
  if (path.empty()) return;
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) throw UserError(fmt::format("{}: cannot write the metrics file (log.metrics / job.output_dir)", path));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const std::vector<std::pair<std::string, double>>& fields,
                          const std::vector<std::pair<std::string, std::vector<double>>>& arrays,
                          const std::vector<std::pair<std::string, std::vector<Object>>>& lists) {
  if (!file_) return;
  // JSON has no NaN/Inf: write null so readers still parse the line.
  auto value = [](double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string("null"); };
  auto members = [&](const Object& o) {
    std::string out;
    for (size_t i = 0; i < o.size(); ++i) out += fmt::format("{}\"{}\": {}", i ? ", " : "", o[i].first, value(o[i].second));
    return out;
  };
  std::string line = "{" + members(fields);
  for (const auto& [key, values] : arrays) {
    line += fmt::format("{}\"{}\": [", line.size() > 1 ? ", " : "", key);
    // Four digits: these are shares and rates; 256 ranks stay under 2 KB per row.
    for (size_t i = 0; i < values.size(); ++i)
      line += (i ? ", " : "") + (std::isfinite(values[i]) ? fmt::format("{:.4g}", values[i]) : std::string("null"));
    line += "]";
  }
  for (const auto& [key, objects] : lists) {
    line += fmt::format("{}\"{}\": [", line.size() > 1 ? ", " : "", key);
    for (size_t i = 0; i < objects.size(); ++i) line += (i ? ", {" : "{") + members(objects[i]) + "}";
    line += "]";
  }
  line += "}\n";
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

int64_t set_aside_rows(const std::string& path, int64_t last_kept, const std::string& side, const std::string& mark,
                       int64_t value) {
  if (path.empty()) return 0;
  std::ifstream in(path);
  if (!in) return 0;
  std::string kept, gone, line;
  int64_t moved = 0;
  while (std::getline(in, line)) {
    long long s = 0;
    if (std::sscanf(line.c_str(), "{\"step\": %lld", &s) == 1 && s <= last_kept) {
      kept += line + "\n";
    } else if (line.size() > 1 && line[0] == '{') {
      if (!side.empty()) gone += fmt::format("{{\"{}\": {}, {}\n", mark, value, line.substr(1));
      ++moved;
    }
  }
  in.close();
  if (moved == 0) return 0;
  if (!side.empty()) {
    std::ofstream aside(side, std::ios::app);
    aside << gone;
    aside.close();
    if (!aside) throw std::runtime_error(fmt::format("{}: cannot write the metrics rows set aside", side));
  }
  std::ofstream out(path + ".tmp", std::ios::trunc);
  out << kept;
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    throw std::runtime_error(fmt::format("{}: cannot rewrite the metrics file", path));
  return moved;
}

int64_t last_row_step(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t last = 0;
  while (std::getline(in, line)) {
    long long s = 0;
    if (std::sscanf(line.c_str(), "{\"step\": %lld", &s) == 1) last = std::max<int64_t>(last, s);
  }
  return last;
}

}  // namespace holmes::train
