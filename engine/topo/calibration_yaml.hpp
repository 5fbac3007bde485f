// The pieces of a calibration file's reader that calibration.cpp and calibration_tables.cpp
// share. Internal to engine/topo.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/topo/calibration.hpp"
#include "engine/topo/yaml_read.hpp"

namespace holmes::topo {

// device: {kind: cpu|cuda, name, driver, cuda, cublaslt, cudnn, nccl, date}.
void parse_device_record(const YAML::Node& n, const yaml_read::Ctx& ctx, DeviceRecord& d);
// [[x, y], ...] with both > 0, sorted by x; `want` says so in errors.
std::vector<std::pair<double, double>> parse_points(const YAML::Node& n, const yaml_read::Ctx& ctx, const char* want);
// tables: and collectives: of a calibration file (calibration_tables.hpp), into `c`.
void parse_tables(const YAML::Node& tables, const YAML::Node& collectives, const std::string& source, Calibration& c);
// Their text, read back by parse_tables to equal tables ("" when there are none).
std::string format_tables(const Calibration& c);

}  // namespace holmes::topo
