// Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py), the token format
// Megatron-LM, NeMo and OLMo exchange: PREFIX.bin holds the token ids of every sequence one
// after another (no header), PREFIX.idx says where they are. The index, little-endian:
//   9 bytes   "MMIDIDX\0\0"
//   uint64    version, 1
//   uint8     dtype code of the ids: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
//             7 float32, 8 uint16
//   uint64    S, the number of sequences
//   uint64    D, the number of document indices (documents + 1)
//   int32[S]  the length of each sequence, in ids
//   int64[S]  the byte offset of each sequence in the .bin
//   int64[D]  document indices: 0, then the index of the sequence after each document's last
//   (int8[S]  sequence modes, multimodal datasets only: ignored here)
// A document is the sequences [doc[d], doc[d+1]); prepare-data writes one sequence per
// document, the document token first (as in its llm.c files). Reading checks every count
// against the file sizes and requires the sequences to tile the .bin in order (what
// Megatron's builder and its merges write), so the ids are one contiguous run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/token_span.hpp"
#include "engine/data/token_output.hpp"

namespace holmes::data {

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;  // 34

// The id type of dtype code `code`; nullopt for the float codes (6, 7) and unknown codes.
std::optional<TokenType> indexed_token_type(int code);
// "uint16 (code 8)", "float32 (code 7)", "unknown code 9".
std::string indexed_dtype_name(int code);

// The .bin and .idx of the dataset a path names: PREFIX, PREFIX.bin or PREFIX.idx (both files
// must exist); nullopt when it names none.
struct IndexedFiles {
  std::string bin, idx;
};
std::optional<IndexedFiles> indexed_dataset_files(const std::string& path);
// The prefix an --out names for the Megatron format: PREFIX.idx or PREFIX.bin -> PREFIX,
// anything else is the prefix itself.
std::string indexed_prefix(const std::string& out);

// A parsed index over memory the caller keeps mapped.
struct IndexedIndex {
  TokenType type = TokenType::kUint16;
  int dtype_code = 8;
  uint64_t sequences = 0, document_indices = 0;
  // The arrays start at unaligned offsets (the header is 34 bytes): read element by element.
  const unsigned char* lengths = nullptr;    // int32 [sequences]
  const unsigned char* pointers = nullptr;   // int64 [sequences], bytes
  const unsigned char* documents = nullptr;  // int64 [document_indices]
  uint64_t tokens = 0;                       // sum of lengths
  int32_t length(uint64_t i) const { return load<int32_t>(lengths, i); }
  int64_t pointer(uint64_t i) const { return load<int64_t>(pointers, i); }
  int64_t document(uint64_t i) const { return load<int64_t>(documents, i); }
  // Token offset in the .bin where document d (0 <= d < documents()) starts.
  int64_t document_start(uint64_t d) const;
  uint64_t documents_count() const { return document_indices == 0 ? 0 : document_indices - 1; }

 private:
  template <class T>
  static T load(const unsigned char* base, uint64_t i) {
    T v;
    std::memcpy(&v, base + i * sizeof(T), sizeof(T));
    return v;
  }
};
// Checks and parses `idx` (`size` bytes, the file `idx_path`) against a .bin of `bin_bytes`.
// UserError naming the file and the first problem: header, version, dtype (a float dtype is
// refused: ids are integers), counts against the size, lengths, pointers not tiling the .bin,
// document indices not rising from 0 to S.
IndexedIndex parse_indexed_index(const std::string& idx_path, const unsigned char* bytes, size_t size,
                                 uint64_t bin_bytes);

// prepare-data's Megatron output: the .bin streamed as tokens come, the sequence lengths
// spilled to a temporary file, the .idx assembled by commit(); every file under a temporary
// name until then (a failed run leaves nothing under the final names). One sequence per
// document; ids as uint16 when the vocabulary fits (id_count <= 65536), else int32 (what
// Megatron's preprocessing picks).
class IndexedWriter final : public TokenOutput {
 public:
  IndexedWriter(const std::string& prefix, uint32_t id_count);
  ~IndexedWriter() override;

  void begin_document() override;
  void append(std::span<const uint32_t> tokens) override;
  void commit() override;
  int64_t count() const override { return count_; }
  int width_bytes() const override { return width_; }
  std::string described() const override;

 private:
  void end_sequence();

  std::string prefix_, bin_tmp_, idx_tmp_, len_tmp_;
  std::FILE *bin_ = nullptr, *lengths_ = nullptr;
  int width_ = 2;
  int64_t count_ = 0, sequence_start_ = 0;
  uint64_t sequences_ = 0;
  bool open_sequence_ = false;
  std::vector<uint16_t> narrow_;
  std::vector<int32_t> wide_;
};

}  // namespace holmes::data
