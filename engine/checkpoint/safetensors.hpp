// The safetensors format Hugging Face checkpoints use: u64 little-endian header length N, N
// bytes of JSON {"__metadata__": {...}, "<name>": {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]}, ...} (offsets relative to the end of the header), then the
// raw little-endian tensors. Written as F32 (export, header padded to a multiple of 8 bytes);
// read as F32, BF16 or F16 (published models are mostly bf16), widened to fp32, one tensor at
// a time so a rank reads only what its shard needs. A folder holds model.safetensors or
// shards listed by model.safetensors.index.json ({"weight_map": {"<name>": "<file>"}}).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace holmes::checkpoint {

// One tensor in HF naming and layout, row-major, fp32.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// The JSON header (without the 8-byte length), padded with spaces to a multiple of 8 bytes.
std::string safetensors_header(const std::vector<HfTensor>& tensors);
// The whole file: length, header, data. write_safetensors streams the same bytes.
std::string safetensors_bytes(const std::vector<HfTensor>& tensors);
void write_safetensors(std::ostream& out, const std::vector<HfTensor>& tensors);

inline constexpr const char* kSafetensorsFile = "model.safetensors";
inline constexpr const char* kSafetensorsIndexFile = "model.safetensors.index.json";

// The tensors of one safetensors file or of an HF folder, read on demand. UserError naming the
// file and what is wrong for a damaged file (a header that is not JSON, offsets outside the
// data or overlapping, a dtype other than F32, BF16, F16, a size that does not match the
// shape) or a folder without model.safetensors / its index.
class SafetensorsReader {
 public:
  // `path`: a .safetensors file, or a folder holding model.safetensors or the index.
  explicit SafetensorsReader(const std::string& path);
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> names() const;
  const std::vector<int64_t>& shape(const std::string& name) const;
  // The tensor widened to fp32; UserError when it is missing.
  std::vector<float> read(const std::string& name) const;
  const std::string& source() const { return source_; }  // what was opened, for messages
  size_t files() const { return files_.size(); }

 private:
  struct Entry {
    size_t file = 0;
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // absolute byte offsets in the file
  };
  void add_file(const std::string& path);
  std::string source_;
  std::vector<std::string> files_;
  std::map<std::string, Entry> entries_;
};

}  // namespace holmes::checkpoint
