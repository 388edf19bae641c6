//go:build cuda || cudaemu

// The driver API, loaded when first used: cuInit dlopens libcuda.so.1 and fills pdq_cu_fn with
// its functions; every other driver function is a trampoline (trampolines_*.S) that jumps
// through its pdq_cu_fn entry. Until the driver is loaded, and when it cannot be, the entries
// point at not_initialized, which returns CUDA_ERROR_NOT_INITIALIZED as the driver itself does
// before cuInit. cuInit always returns CUDA_SUCCESS: what really happened is kept for
// pdq_cuda_status, so that a process without a driver carries on with the CPU.

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NOT_FOUND = 500,
};

static const char *const names[] = {
#define S(i, n) [i] = #n,
#include "symbols.h"
#undef S
};

enum { NSYM = sizeof names / sizeof names[0] };

static int not_initialized(void) { return CUDA_ERROR_NOT_INITIALIZED; }
static int not_exported(void) { return CUDA_ERROR_NOT_FOUND; }

__attribute__((visibility("hidden"))) void *pdq_cu_fn[NSYM] = {[0 ... NSYM - 1] = (void *)not_initialized};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned init_flags;
static int state = PDQ_CUDA_UNTRIED;
static int init_result;
static char reason[512];

static void load(void) {
	const char *path = getenv("PDQ_LIBCUDA");
	if (path == NULL || *path == 0) {
		path = "libcuda.so.1";
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(reason, sizeof reason, "%s", e ? e : path);
		state = PDQ_CUDA_NO_DRIVER;
		return;
	}
	int (*real_init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	if (real_init == NULL) {
		snprintf(reason, sizeof reason, "%s has no cuInit", path);
		state = PDQ_CUDA_NO_DRIVER;
		return;
	}
	init_result = real_init(init_flags);
	if (init_result != CUDA_SUCCESS) {
		snprintf(reason, sizeof reason, "cuInit: CUresult %d", init_result);
		state = PDQ_CUDA_INIT_FAILED;
		return;
	}
	for (int i = 0; i < NSYM; i++) {
		void *f = dlsym(h, names[i]);
		pdq_cu_fn[i] = f ? f : (void *)not_exported;
	}
	state = PDQ_CUDA_READY;
}

// cuInit loads the driver once and initializes it. It reports success whatever happened (see
// the top of this file); pdq_cuda_status tells.
int cuInit(unsigned flags) {
	init_flags = flags;
	pthread_once(&once, load);
	return CUDA_SUCCESS;
}

int pdq_cuda_status(int *result, char *buf, int n) {
	pthread_once(&once, load);
	*result = init_result;
	snprintf(buf, (size_t)n, "%s", reason);
	return state;
}

int pdq_cuda_symbols(void) { return NSYM; }
