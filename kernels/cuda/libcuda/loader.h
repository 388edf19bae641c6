// The lazy driver loader's interface to Go (loader.c).

enum {
	PDQ_CUDA_UNTRIED = 0,
	PDQ_CUDA_NO_DRIVER = 1,  // libcuda.so.1 could not be loaded
	PDQ_CUDA_INIT_FAILED = 2, // it loaded, cuInit failed (no device, driver too old, ...)
	PDQ_CUDA_READY = 3,
};

// pdq_cuda_status loads the driver if cuInit has not yet, and returns its state, the result of
// the real cuInit and (in buf) the reason it is not ready.
int pdq_cuda_status(int *result, char *buf, int n);

// pdq_cuda_symbols returns the number of driver functions with a trampoline.
int pdq_cuda_symbols(void);
