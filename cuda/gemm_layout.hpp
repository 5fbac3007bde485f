// How a row-major GemmShape is handed to column-major cuBLASLt. Kept apart from gemm.cpp
// so the mapping (the easiest part to get subtly wrong) is unit-tested on machines without
// a GPU against a host column-major GEMM.
//
// A row-major [r,c] matrix is the same memory as a column-major [c,r] matrix, its transpose.
// So C = op(A) op(B) (row-major) is computed as C^T = op(B)^T op(A)^T (column-major):
// our B goes into cuBLASLt's "A" slot, our A into its "B" slot, and the result is
// column-major [n,m] with leading dimension n, which is row-major [m,n].
#pragma once

#include <cstdint>

#include "cuda/gemm.hpp"

namespace holmes::cuda {

// One column-major operand as cuBLASLt sees it: the stored matrix is [rows, cols] with
// leading dimension ld (>= rows; = rows when packed), op() transposes it when `transposed`.
struct LtOperand {
  int rows = 0, cols = 0;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;  // elements between batch matrices
  bool transposed = false;
};

// lt_a holds our B, lt_b our A, lt_c our C; the column-major problem is
// D[n,m] = op(lt_a)[n,k] * op(lt_b)[k,m].
struct LtProblem {
  LtOperand lt_a, lt_b, lt_c;
  int m = 0, n = 0, k = 0;  // column-major sizes: m = our n, n = our m
};

LtProblem to_column_major(const GemmShape& s);

}  // namespace holmes::cuda
