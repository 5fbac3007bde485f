// From a user's --tokenizer SPEC to a Tokenizer. SPEC is one of
//   bytes                         the 257-id byte tokenizer (the synthetic data's)
//   NAME:PATH                     a built-in tiktoken encoding (builtin.hpp) and its rank file
//                                 (gpt2: also a folder with encoder.json + vocab.bpe)
//   PATH                          a file or folder, recognised by its content:
//       tokenizer.json            Hugging Face, byte-level BPE model
//       vocab.json | encoder.json with merges.txt | vocab.bpe beside it (GPT-2's files)
//       NAME.tiktoken             a rank file named after a built-in encoding
//       *.model                   SentencePiece (Llama 2, Mistral), or a tiktoken rank file
//                                 of 128000 ranks (Llama 3's tokenizer.model)
//       a folder holding one of these (tokenizer.json first)
// Every problem is a UserError naming the file, what is wrong and what is accepted.
#pragma once

#include <memory>
#include <string>

#include "engine/tokenizer/bpe_tokenizer.hpp"
#include "engine/tokenizer/builtin.hpp"
#include "engine/tokenizer/tokenizer.hpp"

namespace holmes::tokenizer {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

// The loaders behind it (each throws UserError naming its file).
BpeSpec read_tiktoken_file(const std::string& path, const BuiltinEncoding& encoding);
// GPT-2's vocab.json / encoder.json and merges.txt / vocab.bpe with Hugging Face's rules
// (merges by their order).
BpeSpec read_gpt2_files(const std::string& vocab_path, const std::string& merges_path);
// The same files as tiktoken's gpt2 encoding reads them (ranks = ids, merges checked).
BpeSpec read_gpt2_as_tiktoken(const std::string& vocab_path, const std::string& merges_path);
BpeSpec read_hf_tokenizer_json(const std::string& path);
std::unique_ptr<Tokenizer> make_bytes_tokenizer();
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

// "bytes" tokenizer facts (the synthetic data and prepare-data's default).
inline constexpr uint32_t kBytesIdCount = 257;
inline constexpr uint32_t kBytesDocumentToken = 256;

}  // namespace holmes::tokenizer
