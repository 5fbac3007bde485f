// The closed choices of a job spec, as enums: parsed once when the spec is loaded (schema.cpp)
// so nothing outside engine/spec compares spec strings. Each enum has one name table, used
// for parsing, for --print-config, for the accepted values in messages and for to_string.
#pragma once

#include <fmt/format.h>

#include <array>
#include <ostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace holmes::spec {

enum class Device { kAuto, kCpu, kCuda };                 // job.device
enum class DataSource { kSynthetic, kFiles };             // data.source
enum class DataFormat { kAuto, kLlmc, kRawUint16, kMegatron };  // data.format
enum class LrSchedule { kCosine, kLinear, kConstant };    // train.lr_schedule
enum class Precision { kAuto, kBf16, kFp32, kFp8 };      // train.precision
enum class Placement { kHolmes, kNaive, kMegatron };      // parallel.placement
enum class PartitionKind { kAuto, kUniform, kList };      // parallel.partition
enum class Schedule { kAuto, k1f1b, kZbH1, kInterleaved };  // parallel.schedule
enum class Recompute { kAuto, kNone, kSelective, kFull }; // train.recompute
enum class CrossIsland { kAuto, kNcclSocket, kGloo };     // parallel.cross_island
enum class NcclMode { kOff, kAuto, kOn };                 // parallel.nccl
enum class OuterMode { kSync, kDiloco };                  // parallel.outer
enum class OuterDtype { kFp32, kBf16, kInt8 };            // parallel.outer_dtype
enum class LogLevel { kInfo, kDebug, kWarn, kError };     // log.level
enum class ResumeMode { kNone, kAuto, kPath };            // checkpoint.resume

// Names of an enum's values, in the order the schema lists them (the first is the default
// unless the field says otherwise).
template <class E>
struct ChoiceNames;

#define HOLMES_CHOICES(E, ...)                                                   \
  template <>                                                                    \
  struct ChoiceNames<E> {                                                        \
    static constexpr std::pair<E, std::string_view> kNames[] = {__VA_ARGS__};    \
  };

HOLMES_CHOICES(Device, {Device::kAuto, "auto"}, {Device::kCpu, "cpu"}, {Device::kCuda, "cuda"})
HOLMES_CHOICES(DataSource, {DataSource::kSynthetic, "synthetic"}, {DataSource::kFiles, "files"})
HOLMES_CHOICES(DataFormat, {DataFormat::kAuto, "auto"}, {DataFormat::kLlmc, "llmc"},
               {DataFormat::kRawUint16, "raw-uint16"}, {DataFormat::kMegatron, "megatron"})
HOLMES_CHOICES(LrSchedule, {LrSchedule::kCosine, "cosine"}, {LrSchedule::kLinear, "linear"},
               {LrSchedule::kConstant, "constant"})
HOLMES_CHOICES(Precision, {Precision::kAuto, "auto"}, {Precision::kBf16, "bf16"}, {Precision::kFp32, "fp32"},
               {Precision::kFp8, "fp8"})
HOLMES_CHOICES(Placement, {Placement::kHolmes, "holmes"}, {Placement::kNaive, "naive"},
               {Placement::kMegatron, "megatron"})
HOLMES_CHOICES(PartitionKind, {PartitionKind::kAuto, "auto"}, {PartitionKind::kUniform, "uniform"},
               {PartitionKind::kList, "list"})
HOLMES_CHOICES(Schedule, {Schedule::k1f1b, "1f1b"}, {Schedule::kAuto, "auto"}, {Schedule::kZbH1, "zb-h1"},
               {Schedule::kInterleaved, "interleaved"})
HOLMES_CHOICES(Recompute, {Recompute::kAuto, "auto"}, {Recompute::kNone, "none"},
               {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"})
HOLMES_CHOICES(CrossIsland, {CrossIsland::kAuto, "auto"}, {CrossIsland::kNcclSocket, "nccl-socket"},
               {CrossIsland::kGloo, "gloo"})
HOLMES_CHOICES(NcclMode, {NcclMode::kAuto, "auto"}, {NcclMode::kOff, "off"}, {NcclMode::kOn, "on"})
HOLMES_CHOICES(OuterMode, {OuterMode::kSync, "sync"}, {OuterMode::kDiloco, "diloco"})
HOLMES_CHOICES(OuterDtype, {OuterDtype::kFp32, "fp32"}, {OuterDtype::kBf16, "bf16"}, {OuterDtype::kInt8, "int8"})
HOLMES_CHOICES(LogLevel, {LogLevel::kInfo, "info"}, {LogLevel::kDebug, "debug"}, {LogLevel::kWarn, "warn"},
               {LogLevel::kError, "error"})
HOLMES_CHOICES(ResumeMode, {ResumeMode::kNone, "none"}, {ResumeMode::kAuto, "auto"})  // kPath: a folder
#undef HOLMES_CHOICES

template <class E>
concept Choice = requires { ChoiceNames<E>::kNames; };

// The name of `e` ("cuda"); "?" for a value outside the table (a programming error).
template <Choice E>
constexpr std::string_view name_of(E e) {
  for (const auto& [value, name] : ChoiceNames<E>::kNames)
    if (value == e) return name;
  return "?";
}
template <Choice E>
std::string to_string(E e) {
  return std::string(name_of(e));
}

// The value named `text`, or nullopt.
template <Choice E>
std::optional<E> parse_choice(std::string_view text) {
  for (const auto& [value, name] : ChoiceNames<E>::kNames)
    if (name == text) return value;
  return std::nullopt;
}

template <Choice E>
std::ostream& operator<<(std::ostream& out, E e) {
  return out << name_of(e);
}

// Every name, in table order ("auto", "cpu", "cuda").
template <Choice E>
std::vector<std::string> choice_names() {
  std::vector<std::string> out;
  for (const auto& [value, name] : ChoiceNames<E>::kNames) out.emplace_back(name);
  return out;
}

}  // namespace holmes::spec

// fmt prints a choice by its name: fmt::format("{}", spec.parallel.placement) == "holmes".
template <holmes::spec::Choice E>
struct fmt::formatter<E, char> : fmt::formatter<std::string_view, char> {
  template <class Context>
  auto format(E e, Context& ctx) const {
    return fmt::formatter<std::string_view, char>::format(holmes::spec::name_of(e), ctx);
  }
};
