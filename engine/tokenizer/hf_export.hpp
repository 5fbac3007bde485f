// A byte-level BPE tokenizer as Hugging Face's tokenizer.json, for exports: model BPE with
// the vocabulary and merges spelled in the byte-level alphabet, the split pattern as a Split
// pre-tokenizer followed by ByteLevel, a ByteLevel decoder and the special tokens as added
// tokens. tiktoken vocabularies have no merges list: it is made from the ranks (every way to
// cut a token into two tokens, ordered by the token's rank, then the parts' ranks) with
// ignore_merges, which is how tiktoken applies ranks. A document token that begins documents
// (Llama 3's <|begin_of_text|>) becomes a TemplateProcessing post-processor.
#pragma once

#include <string>

#include "engine/tokenizer/bpe_tokenizer.hpp"

namespace holmes::tokenizer {

std::string hf_tokenizer_json(const BpeTokenizer& t);

}  // namespace holmes::tokenizer
