/*
 * dlopen.h — opens a shared library at run time and looks up its entry
 * points by name, for cublaslt.h and nccl.h: what engine/cuda calls in
 * cuBLASLt and NCCL is never linked, so the binary runs with whichever
 * version a machine has.
 */
#ifndef TW_ENGINE_CUDA_DLOPEN_H
#define TW_ENGINE_CUDA_DLOPEN_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

/* One entry point: where its address goes, and its name. */
typedef struct {
	void **slot;
	const char *name;
} tw_dl_sym;

/* Opens the library at path (a file, or a bare soname for the dynamic
 * loader's search) and sets every syms[i].slot to its symbol's address.
 * 0 on success; otherwise -1 with the reason in err (the loader's, or the
 * first symbol missing), and nothing stays open. On success the library
 * stays mapped for the life of the process. */
static inline int tw_dl_open(const char *path, const tw_dl_sym *syms, size_t n, char *err, size_t errlen) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(err, errlen, "%s: no symbol %s", path, syms[i].name);
			dlclose(lib);
			return -1;
		}
	}
	return 0;
}

#endif
