#include "engine/checkpoint/model_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/errors.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "model/architecture.hpp"

namespace holmes::checkpoint {

namespace {
constexpr char kModelMagic[8] = {'H', 'O', 'L', 'M', 'E', 'S', 'W', '1'};
// The versions: 1 (read still) had no checksum; 2: header word 7 holds the CRC32C of the
// parameter bytes; 3: after the 8-word header, the options block (Options). Files of 1-3 do
// not name their architecture: it is the one whose Architecture::legacy_file_version says so
// (2: gpt2, whose files have no options block; 3: llama). 4, the architectures added since:
// the 8-word header, the architecture's name (kNameBytes, NUL-padded), the options block.
constexpr int32_t kPlainVersion = 2;
constexpr int32_t kOptionsVersion = 3;
constexpr int32_t kNamedVersion = 4;
constexpr size_t kNameBytes = 16;

// The configuration options (model::ConfigOption) beyond the 8-word header's sizes.
struct Options {
  int32_t kv_heads = 0, ffn_hidden = 0, tie_embeddings = 0, reserved = 0;
  double rope_theta = 0;
  float norm_eps = 0;
  int32_t reserved2 = 0;
};
static_assert(sizeof(Options) == 32);

// The version a file of `c`'s architecture is written in.
int32_t file_version(const model::GptConfig& c) {
  const int legacy = c.architecture().legacy_file_version();
  return legacy != 0 ? legacy : kNamedVersion;
}

// Bytes between the 8-word header and the parameter count.
size_t extra_bytes(int32_t version) {
  if (version == kNamedVersion) return kNameBytes + sizeof(Options);
  return version == kOptionsVersion ? sizeof(Options) : 0;
}

// The architecture of a file of `version` (1-3) that does not name it.
const model::Architecture* legacy_architecture(int32_t version) {
  for (const model::Architecture* a : model::architectures())
    if (a->legacy_file_version() == (version == 1 ? kPlainVersion : version)) return a;
  return nullptr;
}

}  // namespace

void save_model_weights(const std::string& path, const model::Gpt& gpt) {
  save_model_weights(path, gpt.config(), gpt.params(), gpt.num_params());
}

void save_model_weights(const std::string& path, const model::GptConfig& c, const float* params, size_t count) {
  if (c.tp_size != 1 || !c.has_embedding || !c.has_head)
    throw std::logic_error("save_model_weights: only a whole single-rank model can be written");
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  // Write beside, fsync, then rename: a reader never sees a half-written file, and an error
  // (a full disk: ENOSPC) names the file and the reason.
  DurableFile out(path);
  const int64_t n = static_cast<int64_t>(count);
  const uint32_t crc = crc32c(params, count * sizeof(float));
  const int32_t version = file_version(c);
  std::array<int32_t, 8> h = {version, c.layers, c.hidden, c.heads, c.vocab, c.padded_vocab, c.max_seq_len,
                              static_cast<int32_t>(crc)};
  out.write(kModelMagic, sizeof(kModelMagic));
  out.write(h.data(), sizeof(h));
  if (version == kNamedVersion) {
    if (c.arch.size() >= kNameBytes)
      throw std::logic_error(fmt::format("save_model_weights: architecture name '{}' is longer than {} bytes", c.arch,
                                         kNameBytes - 1));
    char name[kNameBytes] = {};
    c.arch.copy(name, c.arch.size());
    out.write(name, sizeof(name));
  }
  if (version != kPlainVersion) {
    const Options o{c.kv_heads, c.ffn_hidden, c.tie_embeddings ? 1 : 0, 0, c.rope_theta, c.norm_eps, 0};
    out.write(&o, sizeof(o));
  }
  out.write(&n, sizeof(n));
  out.write(params, count * sizeof(float));
  out.commit();
  fsync_dir(parent.empty() ? "." : parent.string());
}

uint64_t model_weights_bytes(const model::GptConfig& c, size_t count) {
  return sizeof(kModelMagic) + 8 * sizeof(int32_t) + extra_bytes(file_version(c)) + sizeof(int64_t) +
         count * sizeof(float);
}

ModelWeights load_model_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open the model weights: {}", path, std::strerror(errno)));
  char magic[8] = {};
  std::array<int32_t, 8> h{};
  int64_t n = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(h.data()), sizeof(h));
  if (!in || std::memcmp(magic, kModelMagic, sizeof(kModelMagic)) != 0)
    throw UserError(fmt::format("{}: not a holmes-train weights file (expected the 'HOLMESW1' header written at the "
                                "end of training in <output_dir>/final/model.bin)", path));
  if (h[0] < 1 || h[0] > kNamedVersion)
    throw UserError(fmt::format("{}: weights file version {} is not supported (accepted: 1 to {})", path, h[0],
                                kNamedVersion));
  ModelWeights w;
  if (h[0] == kNamedVersion) {
    char name[kNameBytes + 1] = {};
    in.read(name, kNameBytes);
    w.config.arch = name;
    if (in && model::find_architecture(w.config.arch) == nullptr)
      throw UserError(fmt::format("{}: the weights are of model.arch '{}', which this build does not have (it has {})",
                                  path, w.config.arch, fmt::join(model::architecture_names(), ", ")));
  } else if (const model::Architecture* a = legacy_architecture(h[0])) {
    w.config.arch = a->name();
  } else {
    throw UserError(fmt::format("{}: weights file version {} names no architecture this build has", path, h[0]));
  }
  Options o;
  if (h[0] != 1 && h[0] != kPlainVersion) in.read(reinterpret_cast<char*>(&o), sizeof(o));
  in.read(reinterpret_cast<char*>(&n), sizeof(n));
  if (!in) throw UserError(fmt::format("{}: truncated weights file: the header is incomplete", path));
  if (h[0] != 1 && h[0] != kPlainVersion) {
    w.config.kv_heads = o.kv_heads;
    w.config.ffn_hidden = o.ffn_hidden;
    w.config.tie_embeddings = o.tie_embeddings != 0;
    w.config.rope_theta = o.rope_theta;
    w.config.norm_eps = o.norm_eps;
  }
  w.config.layers = h[1];
  w.config.hidden = h[2];
  w.config.heads = h[3];
  w.config.vocab = h[4];
  w.config.padded_vocab = h[5];
  w.config.max_seq_len = h[6];
  w.config.finalize();
  if (n <= 0 || n > (int64_t{1} << 36))
    throw UserError(fmt::format("{}: implausible parameter count {} in the header", path, n));
  w.params.resize(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(w.params.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!in)
    throw UserError(fmt::format("{}: truncated weights file: the header announces {} parameters", path, n));
  if (in.peek() != std::char_traits<char>::eof())
    throw UserError(fmt::format("{}: the weights file has bytes after the {} parameters its header announces (not the "
                                "file holmes-train wrote)", path, n));
  const uint32_t crc = crc32c(w.params.data(), w.params.size() * sizeof(float));
  if (h[0] == 1)
    fmt::print(stderr, "holmes-train: warning: {} is a version 1 weights file, which has no checksum: its integrity "
                       "cannot be checked\n", path);
  else if (crc != static_cast<uint32_t>(h[7]))
    throw UserError(fmt::format("{}: corrupted weights: CRC32C of the parameters is {:08x}, the header says {:08x}", path,
                                crc, static_cast<uint32_t>(h[7])));
  return w;
}

}  // namespace holmes::checkpoint
