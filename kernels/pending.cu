// pending.cu — stand-ins for the launchers of op families whose kernel file
// does not exist yet, so that the library links while families are written.
// Each returns cudaErrorNotSupported, and tw_pending() names the families
// still missing, so tests can say what they skip and why. CMake defines
// TW_HAVE_<FAMILY> for every kernels/<family>.cu.
#include "common.cuh"
#include "kernels.h"

#define PENDING return cudaErrorNotSupported

// tw_pending returns the families without a kernel file, comma-separated
// ("" when every family of kernels.h exists).
extern "C" const char *tw_pending(void) {
	return ""
#ifndef TW_HAVE_EMBEDDING
	       "embedding,"
#endif
#ifndef TW_HAVE_RMSNORM
	       "rmsnorm,"
#endif
#ifndef TW_HAVE_ROPE
	       "rope,"
#endif
#ifndef TW_HAVE_ATTENTION
	       "attention,"
#endif
#ifndef TW_HAVE_SWIGLU
	       "swiglu,"
#endif
#ifndef TW_HAVE_LOGSOFTMAX
	       "logsoftmax,"
#endif
#ifndef TW_HAVE_REDUCE
	       "reduce,"
#endif
#ifndef TW_HAVE_ADAMW
	       "adamw,"
#endif
#ifndef TW_HAVE_SAMPLE
	       "sample,"
#endif
#ifndef TW_HAVE_GEMM
	       "gemm,"
#endif
	    ;
}

#ifndef TW_HAVE_EMBEDDING
extern "C" cudaError_t tw_embedding(void *, tw_dtype, const void *, tw_dtype, const int32_t *, int64_t, int64_t, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_embedding_backward(void *, tw_dtype, const void *, tw_dtype, const int32_t *, int64_t, int64_t, int64_t, cudaStream_t) { PENDING; }
#endif

#ifndef TW_HAVE_RMSNORM
extern "C" cudaError_t tw_rmsnorm(void *, float *, const void *, const void *, tw_dtype, tw_dtype, int64_t, int64_t, float, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_add_rmsnorm(void *, void *, float *, const void *, const void *, const void *, tw_dtype, tw_dtype, int64_t, int64_t, float, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_rmsnorm_backward(void *, void *, const void *, const void *, const void *, const float *, tw_dtype, tw_dtype, int64_t, int64_t, void *, cudaStream_t) { PENDING; }
extern "C" size_t tw_rmsnorm_backward_workspace(int64_t, int64_t) { return 0; }
#endif

#ifndef TW_HAVE_ROPE
extern "C" cudaError_t tw_rope(void *, tw_dtype, const int32_t *, const float *, int64_t, int64_t, int64_t, float, cudaStream_t) { PENDING; }
#endif

#ifndef TW_HAVE_ATTENTION
extern "C" cudaError_t tw_attention(void *, float *, const void *, const void *, const void *, const int32_t *, int64_t, tw_dtype, int64_t, int64_t, int64_t, int64_t, int64_t, float, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_attention_backward(void *, void *, void *, const void *, const void *, const float *, const void *, const void *, const void *, const int32_t *, int64_t, tw_dtype, int64_t, int64_t, int64_t, int64_t, int64_t, float, void *, cudaStream_t) { PENDING; }
extern "C" size_t tw_attention_backward_workspace(int64_t, int64_t, int64_t, int64_t, int64_t) { return 0; }
#endif

#ifndef TW_HAVE_SWIGLU
extern "C" cudaError_t tw_swiglu(void *, const void *, const void *, tw_dtype, int64_t, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_swiglu_backward(void *, void *, const void *, const void *, const void *, tw_dtype, int64_t, cudaStream_t) { PENDING; }
#endif

#ifndef TW_HAVE_LOGSOFTMAX
extern "C" cudaError_t tw_logsoftmax_gather(float *, float *, const void *, tw_dtype, const int32_t *, int64_t, int64_t, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_logsoftmax_gather_backward(void *, const float *, const void *, const float *, const int32_t *, tw_dtype, int64_t, int64_t, cudaStream_t) { PENDING; }
#endif

#ifndef TW_HAVE_REDUCE
extern "C" cudaError_t tw_segment_sum(float *, const float *, const float *, const int32_t *, int64_t, int64_t, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_segment_sum_backward(float *, const float *, const float *, const int32_t *, int64_t, cudaStream_t) { PENDING; }
extern "C" cudaError_t tw_sum_squares(float *, const void *, tw_dtype, int64_t, void *, cudaStream_t) { PENDING; }
extern "C" size_t tw_sum_squares_workspace(int64_t) { return 0; }
#endif

#ifndef TW_HAVE_ADAMW
extern "C" cudaError_t tw_adamw(void *, tw_dtype, const void *, tw_dtype, float *, float *, float *, int64_t, float, float, float, float, float, float, float, float, cudaStream_t) { PENDING; }
#endif

#ifndef TW_HAVE_SAMPLE
extern "C" cudaError_t tw_sample(int32_t *, const void *, tw_dtype, const float *, int64_t, int64_t, float, float, void *, cudaStream_t) { PENDING; }
extern "C" size_t tw_sample_workspace(int64_t, int64_t) { return 0; }
#endif

#ifndef TW_HAVE_GEMM
extern "C" cudaError_t tw_gemm(void *, tw_dtype, const void *, const void *, tw_dtype, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, cudaStream_t) { PENDING; }
#endif
