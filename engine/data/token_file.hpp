// Token files on disk: llm.c's format (a 256 x int32 header: magic 20240520, version 1,
// token count; then uint16 tokens), llm.c's 32-bit variant for vocabularies over 65536 ids
// (magic 20240801, version 7, count; then uint32 tokens: what llm.c writes for Llama 3), raw
// uint16 arrays as nanoGPT writes them, and Megatron's indexed datasets (indexed_dataset.hpp:
// PREFIX.bin + PREFIX.idx, ids of any integer dtype, document boundaries in the index). Files
// are memory-mapped read-only; every problem with one is a UserError naming the file.
//
// holmes-train's prepare-data also stamps its tokenizer into the header's unused ints, which
// llm.c ignores: [3] = kTokenizerStampTag, [4], [5] = the tokenizer's hash (low, high 32
// bits), [6] = its id count. The tokenizer's files are in the sidecar folder <file>.tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <optional>
#include <vector>

#include "engine/data/indexed_dataset.hpp"
#include "engine/data/token_span.hpp"
#include "engine/spec/choices.hpp"

namespace holmes::data {

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;  // uint16 tokens
inline constexpr int32_t kLlmc32Magic = 20240801;
inline constexpr int32_t kLlmc32Version = 7;  // uint32 tokens
inline constexpr int32_t kTokenizerStampTag = 0x6b6f7468;  // "htok"
inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);
inline constexpr uint16_t kEndOfText = 256;  // byte-level tokenizer: 0..255 bytes, 256 = EOT

using TokenFormat = spec::DataFormat;  // data.format: auto | llmc | raw-uint16 | megatron

// A format named as data.format names it (for flags such as eval's --format); anything else is
// a UserError naming `key` and the accepted names.
TokenFormat parse_token_format(const std::string& text, const std::string& key = "data.format");
// The name parse_token_format reads ("llmc"), for the log.
const char* token_format_name(TokenFormat format);

// The tokenizer a token file was made with (its header stamp).
struct TokenizerStamp {
  uint64_t hash = 0;
  uint32_t ids = 0;
};

// A read-only memory-mapped token file. Move-only; unmaps on destruction.
class TokenFile {
 public:
  // Opens, maps and checks `path`: header (llmc), size, and every token < vocab_size. A
  // 16-bit file for vocab_size > 65536 is refused (its ids cannot be the vocabulary's). A
  // Megatron dataset is named by its prefix, its .bin or its .idx; format auto takes any path
  // with both files for one (indexed_dataset_files), else detects llmc or raw-uint16.
  static TokenFile open(const std::string& path, TokenFormat format, int vocab_size);

  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  TokenSpan tokens() const { return tokens_; }
  // The tokenizer stamp of a file prepare-data wrote; nullopt for others.
  const std::optional<TokenizerStamp>& tokenizer() const { return stamp_; }
  // The data file's path (a Megatron dataset's .bin); its tokenizer is in path() + ".tokenizer".
  const std::string& path() const { return path_; }
  TokenFormat format() const { return format_; }
  // A Megatron dataset's index (its document boundaries); nullptr for the other formats.
  const IndexedIndex* index() const { return index_ ? &*index_ : nullptr; }

 private:
  TokenFile() = default;
  void unmap();
  static TokenFile open_indexed(const IndexedFiles& files, int vocab_size);

  std::string path_;
  TokenFormat format_ = TokenFormat::kAuto;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  void* idx_map_ = nullptr;
  size_t idx_bytes_ = 0;
  std::optional<IndexedIndex> index_;
  TokenSpan tokens_;
  std::optional<TokenizerStamp> stamp_;
};

// Checks that every token is < vocab_size; throws a UserError naming `what` (a file) and
// the first bad position otherwise.
void check_token_range(TokenSpan tokens, int vocab_size, const std::string& what);

// Writes `tokens` in llm.c's format (header + uint16). Throws UserError if it cannot write.
void write_llmc_tokens(const std::string& path, std::span<const uint16_t> tokens);

}  // namespace holmes::data
