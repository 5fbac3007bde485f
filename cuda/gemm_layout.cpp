#include "cuda/gemm_layout.hpp"

namespace holmes::cuda {

LtProblem to_column_major(const GemmShape& s) {
  LtProblem p;
  p.m = s.n;
  p.n = s.m;
  p.k = s.k;
  // Our B: stored row-major [k,n] (seen as column-major [n,k] = B^T, used as is) or, with
  // trans_b, row-major [n,k] (seen as column-major [k,n] = B_stored^T, transposed back).
  p.lt_a.rows = s.trans_b ? s.k : s.n;
  p.lt_a.cols = s.trans_b ? s.n : s.k;
  p.lt_a.transposed = s.trans_b;
  p.lt_a.batch_stride = s.stride_b;
  // Our A: stored row-major [m,k] (column-major [k,m] = A^T) or, with trans_a, [k,m].
  p.lt_b.rows = s.trans_a ? s.m : s.k;
  p.lt_b.cols = s.trans_a ? s.k : s.m;
  p.lt_b.transposed = s.trans_a;
  p.lt_b.batch_stride = s.stride_a;
  // C: row-major [m,n] = column-major [n,m].
  p.lt_c.rows = s.n;
  p.lt_c.cols = s.m;
  p.lt_c.batch_stride = s.stride_c;
  // A row-major row stride is the column-major leading dimension of the same memory.
  p.lt_a.ld = effective_ldb(s);
  p.lt_b.ld = effective_lda(s);
  p.lt_c.ld = effective_ldc(s);
  return p;
}

}  // namespace holmes::cuda
