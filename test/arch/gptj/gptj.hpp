// A test-only third architecture, "gptj": GPT-J's parallel block (Wang and Komatsuzaki 2021)
// built from the ops the other two use. One pre-LayerNorm feeds attention and the MLP side by
// side, and the block adds both to its input:
//   h = LN(x);  out = x + proj(attention(rope(q, k), v)) + fc_out(gelu(fc_in(h)))
// q/k/v and the output projection have no biases, the MLP (4C, GELU) has them; rotary
// positions (model.rope_theta) on every channel of q and k; final LayerNorm; LM head untied
// unless model.tie_embeddings. The two row-parallel outputs are added before one
// tensor-parallel sum, so a block sums once forward and once backward (GPT-2 and Llama: twice
// each). No Hugging Face map.
//
// It lives here, not in model/, and reaches the program by the registry's extension point
// (model::register_architecture): docs/extending.md's walk-through of adding an architecture
// is these files.
#pragma once

#include <memory>

#include "model/architecture.hpp"

namespace holmes::test::gptj {

std::unique_ptr<model::Architecture> make_architecture();

// A single-rank gptj of the given size (tp = 1, one stage, untied head, rope_theta 10000),
// finalized. The architecture must be registered.
model::GptConfig config(int layers, int hidden, int heads, int vocab, int max_seq_len);

}  // namespace holmes::test::gptj
