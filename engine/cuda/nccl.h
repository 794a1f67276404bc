/*
 * nccl.h — the part of NCCL that engine/cuda calls, declared here so that
 * nothing links against NCCL: the library is opened at run time (dlopen)
 * and its entry points are looked up by name (tw_nccl_open).
 *
 * The types and numbers are those of NCCL's nccl.h, stable since 2.10 (the
 * first with bf16, the oldest accepted). Enum parameters are int, as the C
 * ABI passes them; opaque handles are void *.
 */
#ifndef TW_ENGINE_CUDA_NCCL_H
#define TW_ENGINE_CUDA_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "dlopen.h"

typedef int tw_nccl_result;  /* ncclResult_t; 0 is ncclSuccess */
typedef void *tw_nccl_comm;  /* ncclComm_t */
typedef struct { char internal[128]; } tw_nccl_id; /* ncclUniqueId (NCCL_UNIQUE_ID_BYTES) */

enum {
	TW_NCCL_SUCCESS = 0,
	TW_NCCL_UINT8 = 1,    /* ncclDataType_t */
	TW_NCCL_FLOAT32 = 7,
	TW_NCCL_BFLOAT16 = 9,
	TW_NCCL_SUM = 0,      /* ncclRedOp_t */
	TW_NCCL_MIN_VERSION = 21000 /* 2.10.0, as ncclGetVersion encodes it */
};

/* The entry points, looked up in the opened library. */
typedef struct {
	tw_nccl_result (*GetVersion)(int *);
	tw_nccl_result (*GetUniqueId)(tw_nccl_id *);
	tw_nccl_result (*CommInitRank)(tw_nccl_comm *, int nranks, tw_nccl_id id, int rank);
	tw_nccl_result (*CommDestroy)(tw_nccl_comm);
	tw_nccl_result (*CommAbort)(tw_nccl_comm);
	tw_nccl_result (*CommGetAsyncError)(tw_nccl_comm, tw_nccl_result *);
	const char *(*GetErrorString)(tw_nccl_result);
	tw_nccl_result (*AllReduce)(const void *send, void *recv, size_t count, int type, int op, tw_nccl_comm,
	                            void *stream);
	tw_nccl_result (*ReduceScatter)(const void *send, void *recv, size_t recvcount, int type, int op, tw_nccl_comm,
	                                void *stream);
	tw_nccl_result (*AllGather)(const void *send, void *recv, size_t sendcount, int type, tw_nccl_comm, void *stream);
	tw_nccl_result (*Broadcast)(const void *send, void *recv, size_t count, int type, int root, tw_nccl_comm,
	                            void *stream);
} tw_nccl_api;

/* Opens the library at path (a file, or a bare soname for the dynamic
 * loader's search) and fills api. 0 on success; otherwise -1 with the reason
 * in err. The library stays mapped for the life of the process. */
static inline int tw_nccl_open(const char *path, tw_nccl_api *api, char *err, size_t errlen) {
	const tw_dl_sym syms[] = {
		{(void **)&api->GetVersion, "ncclGetVersion"},
		{(void **)&api->GetUniqueId, "ncclGetUniqueId"},
		{(void **)&api->CommInitRank, "ncclCommInitRank"},
		{(void **)&api->CommDestroy, "ncclCommDestroy"},
		{(void **)&api->CommAbort, "ncclCommAbort"},
		{(void **)&api->CommGetAsyncError, "ncclCommGetAsyncError"},
		{(void **)&api->GetErrorString, "ncclGetErrorString"},
		{(void **)&api->AllReduce, "ncclAllReduce"},
		{(void **)&api->ReduceScatter, "ncclReduceScatter"},
		{(void **)&api->AllGather, "ncclAllGather"},
		{(void **)&api->Broadcast, "ncclBroadcast"},
	};
	return tw_dl_open(path, syms, sizeof syms / sizeof syms[0], err, errlen);
}

/* cgo cannot call through function pointers: these do. */
static inline tw_nccl_result tw_nccl_version(const tw_nccl_api *a, int *v) { return a->GetVersion(v); }
static inline tw_nccl_result tw_nccl_unique_id(const tw_nccl_api *a, tw_nccl_id *id) { return a->GetUniqueId(id); }
static inline tw_nccl_result tw_nccl_init(const tw_nccl_api *a, tw_nccl_comm *c, int n, const tw_nccl_id *id, int r) {
	return a->CommInitRank(c, n, *id, r);
}
static inline tw_nccl_result tw_nccl_destroy(const tw_nccl_api *a, tw_nccl_comm c) { return a->CommDestroy(c); }
static inline tw_nccl_result tw_nccl_abort(const tw_nccl_api *a, tw_nccl_comm c) { return a->CommAbort(c); }
static inline tw_nccl_result tw_nccl_async_error(const tw_nccl_api *a, tw_nccl_comm c, tw_nccl_result *e) {
	return a->CommGetAsyncError(c, e);
}
static inline const char *tw_nccl_error_string(const tw_nccl_api *a, tw_nccl_result r) { return a->GetErrorString(r); }
static inline tw_nccl_result tw_nccl_allreduce(const tw_nccl_api *a, uintptr_t send, uintptr_t recv, size_t n, int t,
                                               tw_nccl_comm c, void *s) {
	return a->AllReduce((const void *)send, (void *)recv, n, t, TW_NCCL_SUM, c, s);
}
static inline tw_nccl_result tw_nccl_reduce_scatter(const tw_nccl_api *a, uintptr_t send, uintptr_t recv, size_t n,
                                                    int t, tw_nccl_comm c, void *s) {
	return a->ReduceScatter((const void *)send, (void *)recv, n, t, TW_NCCL_SUM, c, s);
}
static inline tw_nccl_result tw_nccl_allgather(const tw_nccl_api *a, uintptr_t send, uintptr_t recv, size_t n,
                                               tw_nccl_comm c, void *s) {
	return a->AllGather((const void *)send, (void *)recv, n, TW_NCCL_UINT8, c, s);
}
static inline tw_nccl_result tw_nccl_broadcast(const tw_nccl_api *a, uintptr_t buf, size_t n, int root, tw_nccl_comm c,
                                               void *s) {
	return a->Broadcast((const void *)buf, (void *)buf, n, TW_NCCL_UINT8, root, c, s);
}

#endif
