/*
 * gloo.h — the C face of shim.cc, the part of Gloo (C++) that engine/gloo
 * calls through cgo. Every call that can fail returns 0 on success and
 * otherwise -1 with a message in err (errlen bytes, NUL-terminated): a C++
 * exception never crosses into Go.
 *
 * The store through which ranks exchange their addresses is the Go side's
 * engine.Store, reached through the tw_gloo_store_* functions that
 * store.go exports, identified by an opaque handle.
 */
#ifndef TW_ENGINE_GLOO_GLOO_H
#define TW_ENGINE_GLOO_GLOO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tw_gloo tw_gloo; /* a connected context and its tag counter */

enum { TW_GLOO_F32 = 0, TW_GLOO_BF16 = 1 };

/* Connects rank of size through the store: a TCP device bound to iface
 * (when not empty) or to the interface of hostname, then a full mesh.
 * timeout_ms bounds the rendezvous and every later collective. NULL on
 * failure. */
tw_gloo *tw_gloo_connect(int rank, int size, const char *hostname, const char *iface, uintptr_t store,
                         int64_t timeout_ms, char *err, size_t errlen);
void tw_gloo_free(tw_gloo *g);

/* buf [n] of dtype: summed across ranks in place. */
int tw_gloo_allreduce(tw_gloo *g, void *buf, size_t n, int dtype, char *err, size_t errlen);
/* in [size·n] of dtype summed across ranks; out [n] receives this rank's block. */
int tw_gloo_reduce_scatter(tw_gloo *g, void *out, const void *in, size_t n, int dtype, char *err, size_t errlen);
/* in [nbytes] of every rank, in rank order, into out [size·nbytes]. */
int tw_gloo_allgather(tw_gloo *g, void *out, const void *in, size_t nbytes, char *err, size_t errlen);
/* buf [nbytes] of root into every rank's buf. */
int tw_gloo_broadcast(tw_gloo *g, void *buf, size_t nbytes, int root, char *err, size_t errlen);
int tw_gloo_barrier(tw_gloo *g, char *err, size_t errlen);

/* Exported by store.go. get and wait return 0, or -1 with err filled;
 * get's value is malloc'ed (the caller frees it). */
int tw_gloo_store_set(uintptr_t store, char *key, size_t keylen, char *val, size_t vallen, char *err, size_t errlen);
int tw_gloo_store_get(uintptr_t store, char *key, size_t keylen, char **val, size_t *vallen, char *err, size_t errlen);
int tw_gloo_store_wait(uintptr_t store, char *keys, size_t keyslen, int64_t timeout_ms, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
