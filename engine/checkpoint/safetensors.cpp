#include "engine/checkpoint/safetensors.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "common/errors.hpp"

namespace holmes::checkpoint {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; the tensors are written and read as they lie in memory");

namespace {

std::string json_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

int dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

// IEEE half -> float (normals, subnormals, infinities, NaN).
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0 && man == 0) {
    bits = sign;
  } else if (exp == 0) {  // subnormal: normalise
    int e = -1;
    uint32_t m = man;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    bits = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

std::string safetensors_header(const std::vector<HfTensor>& tensors) {
  std::string json = R"({"__metadata__": {"format": "pt"})";
  uint64_t offset = 0;
  for (const HfTensor& t : tensors) {
    const uint64_t bytes = t.data.size() * sizeof(float);
    json += fmt::format(R"(, "{}": {{"dtype": "F32", "shape": {}, "data_offsets": [{}, {}]}})", t.name,
                        json_shape(t.shape), offset, offset + bytes);
    offset += bytes;
  }
  json += "}";
  // 8 + header length a multiple of 8 keeps every tensor 8-byte aligned in a mapped file.
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

void write_safetensors(std::ostream& out, const std::vector<HfTensor>& tensors) {
  const std::string header = safetensors_header(tensors);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const HfTensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
}

std::string safetensors_bytes(const std::vector<HfTensor>& tensors) {
  std::ostringstream s(std::ios::binary);
  write_safetensors(s, tensors);
  return std::move(s).str();
}

SafetensorsReader::SafetensorsReader(const std::string& path) : source_(path) {
  const fs::path p(path);
  if (fs::is_regular_file(p)) {
    add_file(path);
    return;
  }
  if (fs::is_regular_file(p / kSafetensorsFile)) {
    add_file((p / kSafetensorsFile).string());
    return;
  }
  const fs::path index = p / kSafetensorsIndexFile;
  if (!fs::is_regular_file(index))
    throw UserError(fmt::format("{}: holds neither {} nor {} (a Hugging Face checkpoint folder has one of them)", path,
                                kSafetensorsFile, kSafetensorsIndexFile));
  YAML::Node root;
  try {
    root = YAML::LoadFile(index.string());
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", index.string(), e.what()));
  }
  const YAML::Node map = root["weight_map"];
  if (!map || !map.IsMap())
    throw UserError(fmt::format("{}: no \"weight_map\" object naming the file of every tensor", index.string()));
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& kv : map) by_file[kv.second.as<std::string>()].push_back(kv.first.as<std::string>());
  for (const auto& [file, names] : by_file) {
    if (fs::path(file).has_parent_path())
      throw UserError(fmt::format("{}: weight_map names '{}'; shards must lie beside the index", index.string(), file));
    add_file((p / file).string());
    for (const std::string& n : names)
      if (!has(n) || files_[entries_.at(n).file] != (p / file).string())
        throw UserError(fmt::format("{}: weight_map puts '{}' in {}, which does not hold it", index.string(), n, file));
  }
}

void SafetensorsReader::add_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  const uint64_t size = fs::file_size(path);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), sizeof(n));
  if (!in || n > size - 8 || n > (uint64_t{1} << 30))
    throw UserError(fmt::format("{}: not a safetensors file (header length {} in a file of {} bytes)", path, n, size));
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  YAML::Node root;
  try {
    root = YAML::Load(header);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: safetensors header is not valid JSON: {}", path, e.what()));
  }
  if (!root.IsMap()) throw UserError(fmt::format("{}: safetensors header is not a JSON object", path));
  const uint64_t data_begin = 8 + n, data_bytes = size - data_begin;
  const size_t file = files_.size();
  files_.push_back(path);
  for (const auto& kv : root) {
    const std::string name = kv.first.as<std::string>();
    if (name == "__metadata__") continue;
    Entry e;
    e.file = file;
    try {
      e.dtype = kv.second["dtype"].as<std::string>();
      for (const auto& d : kv.second["shape"]) e.shape.push_back(d.as<int64_t>());
      e.begin = kv.second["data_offsets"][0].as<uint64_t>();
      e.end = kv.second["data_offsets"][1].as<uint64_t>();
    } catch (const YAML::Exception&) {
      throw UserError(fmt::format("{}: tensor '{}' lacks dtype, shape or data_offsets", path, name));
    }
    uint64_t count = 1;
    for (int64_t d : e.shape) count *= static_cast<uint64_t>(d);
    if (e.begin > e.end || e.end > data_bytes)
      throw UserError(fmt::format("{}: tensor '{}' has data_offsets [{}, {}] outside the {} bytes of data", path, name,
                                  e.begin, e.end, data_bytes));
    if (dtype_bytes(e.dtype) != 0 && count * dtype_bytes(e.dtype) != e.end - e.begin)
      throw UserError(fmt::format("{}: tensor '{}' of shape {} in {} needs {} bytes, its offsets span {}", path, name,
                                  json_shape(e.shape), e.dtype, count * dtype_bytes(e.dtype), e.end - e.begin));
    e.begin += data_begin;
    e.end += data_begin;
    if (!entries_.emplace(name, e).second)
      throw UserError(fmt::format("{}: tensor '{}' appears in more than one file of {}", path, name, source_));
  }
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [n, e] : entries_) out.push_back(n);
  return out;
}

const std::vector<int64_t>& SafetensorsReader::shape(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw UserError(fmt::format("{}: has no tensor '{}'", source_, name));
  return it->second.shape;
}

std::vector<float> SafetensorsReader::read(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw UserError(fmt::format("{}: has no tensor '{}'", source_, name));
  const Entry& e = it->second;
  const int bytes = dtype_bytes(e.dtype);
  if (bytes == 0)
    throw UserError(fmt::format("{}: tensor '{}' is {}; accepted dtypes: F32, BF16, F16", files_[e.file], name,
                                e.dtype));
  std::vector<char> raw(e.end - e.begin);
  std::ifstream in(files_[e.file], std::ios::binary);
  in.seekg(static_cast<std::streamoff>(e.begin));
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (!in) throw UserError(fmt::format("{}: reading tensor '{}' failed (truncated file?)", files_[e.file], name));
  std::vector<float> out(raw.size() / bytes);
  if (e.dtype == "F32") {
    std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    out[i] = e.dtype == "BF16" ? std::bit_cast<float>(uint32_t{h} << 16) : half_to_float(h);
  }
  return out;
}

}  // namespace holmes::checkpoint
