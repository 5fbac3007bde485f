// The interface prepare-data writes its tokens through (token_writer.hpp: llm.c's file;
// indexed_dataset.hpp: Megatron's indexed dataset).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace holmes::data {

// Where prepare-data's tokens go: llm.c's file (TokenWriter) or Megatron's indexed dataset
// (indexed_dataset.hpp: IndexedWriter). Documents arrive in order, each as
// begin_document() and then its tokens in any number of append() calls.
class TokenOutput {
 public:
  virtual ~TokenOutput() = default;
  virtual void begin_document() = 0;
  virtual void append(std::span<const uint32_t> tokens) = 0;
  // Puts the output in place under its final name(s). UserError when that fails.
  virtual void commit() = 0;
  virtual int64_t count() const = 0;   // tokens appended
  virtual int width_bytes() const = 0;  // bytes per stored id
  // What was written, for the summary: "X.bin (llm.c, 16-bit ids)".
  virtual std::string described() const = 0;
};

}  // namespace holmes::data
