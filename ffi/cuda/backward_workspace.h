// Size of the CUDA backward's workspace result, shared by the handler (which
// checks the buffer it is given) and the nanobind module (which the Python
// lowering asks before it declares the result).
#ifndef JAX_GRIDSAMPLE_FFI_CUDA_BACKWARD_WORKSPACE_H_
#define JAX_GRIDSAMPLE_FFI_CUDA_BACKWARD_WORKSPACE_H_

#include <cstdint>

namespace gs_cuda {

// Bytes of temporary device memory one backward call needs: 0 for float32 /
// float64 with atomics or without grad_input; a float32 accumulator for half
// types; records, sort buffers and segment offsets for the deterministic
// variant. `points` is per batch element, `plane` = D*H*W, `storage_bytes` the
// dtype's width (2, 4 or 8). Returns -1 for arguments out of range or when
// cub's size query fails (it needs a CUDA device).
int64_t BackwardWorkspaceBytes(int k, int64_t n, int64_t c, int64_t plane, int64_t points,
                               int64_t interpolation, int storage_bytes, bool input_mask,
                               bool deterministic);

}  // namespace gs_cuda

#endif  // JAX_GRIDSAMPLE_FFI_CUDA_BACKWARD_WORKSPACE_H_
