// The training and validation token streams of a job: the embedded synthetic source or
// token files (llm.c / raw uint16), with a held-out tail for validation when the job names
// no validation files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/data/batches.hpp"
#include "engine/data/token_file.hpp"

namespace holmes::data {

// Share of every training stream held out for validation when data.valid is empty.
inline constexpr double kValidTailFraction = 0.05;

class DataSet {
 public:
  // Opens or generates the data of `spec.data` for sequences of spec.train.seq_len.
  // Throws UserError naming the file or key on bad input.
  static std::unique_ptr<DataSet> open(const spec::JobSpec& spec);

  const BatchSampler& train() const { return *train_; }
  const BatchSampler* valid() const { return valid_ ? &*valid_ : nullptr; }
  int64_t train_tokens() const { return train_tokens_; }
  int64_t valid_tokens() const { return valid_tokens_; }
  // Exact entropy rate in nats/token when the source is synthetic; empty otherwise.
  std::optional<double> entropy_floor() const { return entropy_floor_; }
  // One or two lines for the log: where the tokens come from and how many.
  const std::string& description() const { return description_; }

  // The tokenizer the tokens were made with: its stamp, its name, and the folder holding its
  // files (a token file's <file>.tokenizer; "" for the synthetic data's byte tokenizer, which
  // needs none). nullopt for token files made elsewhere (llm.c, nanoGPT) that name none.
  struct Tokenizer {
    TokenizerStamp stamp;
    std::string name, folder;
  };
  const std::optional<Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  DataSet() = default;
  void split(const std::vector<TokenSpan>& streams, bool hold_out_tail, int seq_len,
             uint64_t seed);
  void find_tokenizer();

  std::vector<uint16_t> synthetic_;
  std::vector<TokenFile> files_;
  std::vector<TokenFile> valid_files_;
  std::optional<BatchSampler> train_, valid_;
  int64_t train_tokens_ = 0, valid_tokens_ = 0;
  std::optional<double> entropy_floor_;
  std::string description_;
  std::optional<Tokenizer> tokenizer_;
};

}  // namespace holmes::data
