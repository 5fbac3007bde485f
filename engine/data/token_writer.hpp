// Writes a token file as it is produced (prepare-data streams gigabytes through it): llm.c's
// 16-bit format when every id of the vocabulary fits, else the 32-bit variant, with the
// tokenizer stamp (token_file.hpp). The file is written under a temporary name and renamed
// by commit(); destroying an uncommitted writer removes the temporary file, so a failed or
// interrupted run leaves nothing half-written under the final name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "engine/data/token_file.hpp"
#include "engine/data/token_output.hpp"

namespace holmes::data {

class TokenWriter final : public TokenOutput {
 public:
  // `id_count`: ids are < id_count (> 65536 selects 32-bit tokens). UserError naming `path`
  // when the temporary file cannot be created.
  TokenWriter(std::string path, uint32_t id_count, TokenizerStamp stamp);
  ~TokenWriter() override;
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  void begin_document() override {}  // llm.c files keep no document index
  void append(std::span<const uint32_t> tokens) override;
  // Writes the header's count, flushes and renames into place. UserError when that fails.
  void commit() override;

  int64_t count() const override { return count_; }
  int width_bytes() const override { return width_; }
  std::string described() const override;
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  int width_ = 2;
  int64_t count_ = 0;
  TokenizerStamp stamp_;
  std::vector<uint16_t> narrow_;
};

}  // namespace holmes::data
