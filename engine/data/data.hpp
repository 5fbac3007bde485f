// The training and validation sequences of a job: the embedded synthetic source or token
// files (llm.c, raw uint16, Megatron indexed datasets), one source or a weighted mixture of
// sources (mixture.hpp), with a held-out tail of every source for validation when the job
// names no validation files, and document masking as data.document_mask asks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/data/batches.hpp"
#include "engine/data/mixture.hpp"
#include "engine/data/token_file.hpp"

namespace holmes::data {

// Share of every training stream held out for validation when data.valid is empty.
inline constexpr double kValidTailFraction = 0.05;

class DataSet {
 public:
  // Opens or generates the data of `spec.data` for sequences of spec.train.seq_len.
  // Throws UserError naming the file or key on bad input.
  static std::unique_ptr<DataSet> open(const spec::JobSpec& spec);
  ~DataSet();

  const SequenceStream& train() const { return *train_; }
  // The validation sources (unshuffled; the held-out tails of the training sources, or
  // data.valid's), each with its name and weight; empty when there is no validation data.
  const std::vector<SequenceStream::Source>& valid_sources() const { return valid_; }
  int64_t train_tokens() const { return train_tokens_; }
  int64_t valid_tokens() const { return valid_tokens_; }
  // Exact entropy rate in nats/token when the source is synthetic; empty otherwise.
  std::optional<double> entropy_floor() const { return entropy_floor_; }
  // One or more lines for the log: where the tokens come from and how many.
  const std::string& description() const { return description_; }

  // The tokenizer the tokens were made with: its stamp, its name, and the folder holding its
  // files (a token file's <file>.tokenizer; "" for the synthetic data's byte tokenizer, which
  // needs none). nullopt for token files made elsewhere (llm.c, nanoGPT) that name none.
  struct Tokenizer {
    TokenizerStamp stamp;
    std::string name, folder;
    int64_t document_token = -1;  // -1: not recorded
  };
  const std::optional<Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  DataSet() = default;
  struct Opened;  // one source's files
  void find_tokenizer();
  int64_t document_token(const spec::JobSpec& spec) const;
  void open_files(const spec::JobSpec& spec);
  void build(const spec::JobSpec& spec);

  std::vector<uint16_t> synthetic_;
  std::vector<std::unique_ptr<Opened>> train_files_, valid_files_;
  std::optional<SequenceStream> train_;
  std::vector<SequenceStream::Source> valid_;
  int64_t train_tokens_ = 0, valid_tokens_ = 0;
  std::optional<double> entropy_floor_;
  std::string description_;
  std::optional<Tokenizer> tokenizer_;
  std::FILE* trace_ = nullptr;  // HOLMES_TEST_DATA_TRACE
};

}  // namespace holmes::data
