// q4_0_bench: times ggml's Q4_0 quantizer on the float32 weights written by scripts/peer/dump, for
// scripts/peer-bench.sh. Our own driver around ggml's public quantize_q4_0 (which, without an
// importance matrix, runs quantize_row_q4_0_ref over the rows); ggml itself is not part of this
// repository: build it with scripts/peer/build-ggml.sh.
//
//   q4_0_bench [-t THREADS] FILE.f32 [FILE.f32.idx]
//   q4_0_bench [-t THREADS] -e OUT FILE.f32|FILE.bf16 [IDX]
//
// FILE.f32 is read whole into memory with read(2) (timed apart as read_wall); the output buffer
// is allocated and touched before the clock starts. The timed part is the quantization alone:
// the tensors are cut into chunks of whole rows of at least 32*512 weights (llama.cpp's
// llama-quantize does the same), which THREADS threads take from a shared counter. Wall time from
// clock_gettime(CLOCK_MONOTONIC), CPU time (user+sys of the process) from getrusage. After the
// clock stops, every tensor is dequantized with ggml's dequantize_row_q4_0 for its SQNR (the mean
// over tensors, as pdq's summary gives it) and the output is hashed (FNV-1a 64), so that the work
// cannot be skipped and two runs can be compared.
//
// With -e the run is end to end, as llama-quantize converts a file: each thread reads its chunk of
// rows from the input file (pread), converts BF16 input (a FILE.bf16, as a BF16 GGUF holds it) to
// float32 with ggml's ggml_bf16_to_fp32_row, quantizes it and writes the Q4_0 blocks at their
// place in OUT (pwrite); the timed part is all of that, from opening the input to the last write
// (OUT is not synced). The output is then read back for its hash (the same bytes as the in-memory
// mode's for the same values); the SQNR is not computed.
//
// Prints one line of key=value pairs.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ggml-quants.h"
#include "ggml.h"

#define MIN_CHUNK (32 * 512)

struct tensor {
	int64_t rows, cols;
	int64_t off; // first weight in the input
};

struct chunk {
	int64_t row0; // first weight of the chunk in the input
	int64_t nrow, cols;
};

static const float *input;
static uint8_t *output;
static struct chunk *chunks;
static int64_t nchunks;
static atomic_llong next_chunk;

static void die(const char *what) {
	fprintf(stderr, "q4_0_bench: %s: %s\n", what, errno ? strerror(errno) : "bad input");
	exit(1);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu(void) {
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// q4_0_bytes is the size of n weights in Q4_0: 18 bytes per block of 32.
static int64_t q4_0_bytes(int64_t n) { return n / QK4_0 * (int64_t)sizeof(block_q4_0); }

// End-to-end mode (-e): the input and output files, and whether the input is BF16.
static int in_fd = -1, out_fd = -1, in_bf16;

// e2e_worker reads, converts, quantizes and writes the chunks it takes.
static void *e2e_worker(void *arg) {
	(void)arg;
	size_t cap = 0;
	char *raw = NULL;
	float *f32 = NULL;
	uint8_t *q = NULL;
	for (;;) {
		int64_t i = atomic_fetch_add(&next_chunk, 1);
		if (i >= nchunks) {
			break;
		}
		const struct chunk *c = &chunks[i];
		int64_t n = c->nrow * c->cols, esz = in_bf16 ? 2 : 4;
		if ((size_t)n > cap) {
			cap = (size_t)n;
			raw = realloc(raw, cap * (size_t)esz);
			f32 = in_bf16 ? realloc(f32, cap * sizeof *f32) : (float *)raw;
			q = realloc(q, (size_t)q4_0_bytes(n));
			if (!raw || !f32 || !q) {
				die("realloc");
			}
		}
		for (int64_t got = 0; got < n * esz;) {
			ssize_t k = pread(in_fd, raw + got, (size_t)(n * esz - got), (off_t)(c->row0 * esz + got));
			if (k <= 0) {
				die("read");
			}
			got += k;
		}
		if (in_bf16) {
			ggml_bf16_to_fp32_row((const ggml_bf16_t *)raw, f32, n);
		}
		quantize_q4_0(f32, q, c->nrow, c->cols, NULL);
		if (pwrite(out_fd, q, (size_t)q4_0_bytes(n), (off_t)q4_0_bytes(c->row0)) != q4_0_bytes(n)) {
			die("write");
		}
	}
	free(raw);
	if (in_bf16) {
		free(f32);
	}
	free(q);
	return NULL;
}

static void *worker(void *arg) {
	(void)arg;
	for (;;) {
		int64_t i = atomic_fetch_add(&next_chunk, 1);
		if (i >= nchunks) {
			return NULL;
		}
		const struct chunk *c = &chunks[i];
		quantize_q4_0(input + c->row0, output + q4_0_bytes(c->row0), c->nrow, c->cols, NULL);
	}
}

// read_index parses "rows cols name" lines into *ts and returns their number.
static int64_t read_index(const char *path, struct tensor **ts) {
	FILE *f = fopen(path, "r");
	if (!f) {
		die(path);
	}
	int64_t n = 0, cap = 0, off = 0;
	long long rows, cols;
	char name[1024];
	*ts = NULL;
	while (fscanf(f, "%lld %lld %1023s", &rows, &cols, name) == 3) {
		if (rows <= 0 || cols <= 0 || cols % QK4_0 != 0) {
			fprintf(stderr, "q4_0_bench: %s: %s: %lldx%lld is not a matrix of whole Q4_0 blocks\n", path, name, rows, cols);
			exit(1);
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			*ts = realloc(*ts, (size_t)cap * sizeof **ts);
			if (!*ts) {
				die("realloc");
			}
		}
		(*ts)[n++] = (struct tensor){rows, cols, off};
		off += rows * cols;
	}
	if (!feof(f) || n == 0) {
		errno = 0;
		die(path);
	}
	fclose(f);
	return n;
}

// read_all reads n float32 values from path into a new buffer.
static float *read_all(const char *path, int64_t n) {
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		die(path);
	}
	if (st.st_size != n * (int64_t)sizeof(float)) {
		fprintf(stderr, "q4_0_bench: %s: %lld bytes, the index says %lld\n", path, (long long)st.st_size, (long long)(n * 4));
		exit(1);
	}
	char *buf = malloc((size_t)st.st_size);
	if (!buf) {
		die("malloc");
	}
	for (int64_t got = 0; got < st.st_size;) {
		ssize_t k = read(fd, buf + got, (size_t)(st.st_size - got));
		if (k <= 0) {
			die(path);
		}
		got += k;
	}
	close(fd);
	return (float *)buf;
}

// plan cuts every tensor into chunks of whole rows.
static void plan(const struct tensor *ts, int64_t nt) {
	int64_t cap = 0;
	for (int64_t i = 0; i < nt; i++) {
		cap += (ts[i].rows * ts[i].cols + MIN_CHUNK - 1) / MIN_CHUNK + 1;
	}
	chunks = malloc((size_t)cap * sizeof *chunks);
	if (!chunks) {
		die("malloc");
	}
	for (int64_t i = 0; i < nt; i++) {
		int64_t per = ts[i].cols >= MIN_CHUNK ? 1 : (MIN_CHUNK + ts[i].cols - 1) / ts[i].cols;
		for (int64_t r = 0; r < ts[i].rows; r += per) {
			int64_t nrow = ts[i].rows - r < per ? ts[i].rows - r : per;
			chunks[nchunks++] = (struct chunk){ts[i].off + r * ts[i].cols, nrow, ts[i].cols};
		}
	}
}

// sqnr_mean dequantizes every tensor and returns the mean over tensors of 10*log10(Σx²/Σ(x-x̂)²).
static double sqnr_mean(const struct tensor *ts, int64_t nt) {
	double sum = 0;
	float *row = NULL;
	int64_t rowcap = 0;
	for (int64_t i = 0; i < nt; i++) {
		if (ts[i].cols > rowcap) {
			rowcap = ts[i].cols;
			row = realloc(row, (size_t)rowcap * sizeof *row);
			if (!row) {
				die("realloc");
			}
		}
		double sx = 0, se = 0;
		for (int64_t r = 0; r < ts[i].rows; r++) {
			int64_t at = ts[i].off + r * ts[i].cols;
			dequantize_row_q4_0((const block_q4_0 *)(output + q4_0_bytes(at)), row, ts[i].cols);
			for (int64_t j = 0; j < ts[i].cols; j++) {
				double x = input[at + j], e = x - row[j];
				sx += x * x;
				se += e * e;
			}
		}
		sum += 10 * log10(sx / se);
	}
	free(row);
	return sum / (double)nt;
}

static uint64_t fnv1a(const uint8_t *p, int64_t n) {
	uint64_t h = 14695981039346656037ULL;
	for (int64_t i = 0; i < n; i++) {
		h = (h ^ p[i]) * 1099511628211ULL;
	}
	return h;
}

static void usage(void) {
	fprintf(stderr, "usage: q4_0_bench [-t THREADS] [-e OUT] FILE.f32|FILE.bf16 [IDX]\n");
	exit(2);
}

static int ends_with(const char *s, const char *suffix) {
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

// run_threads runs fn on THREADS threads and returns the wall and CPU seconds they took.
static void run_threads(int threads, void *(*fn)(void *), double *wall, double *cpus) {
	pthread_t *tid = malloc((size_t)threads * sizeof *tid);
	double c0 = cpu(), t0 = now();
	for (int i = 0; i < threads; i++) {
		if ((errno = pthread_create(&tid[i], NULL, fn, NULL)) != 0) {
			die("pthread_create");
		}
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
	}
	*wall = now() - t0;
	*cpus = cpu() - c0;
	free(tid);
}

int main(int argc, char **argv) {
	int threads = 1, opt;
	const char *e2e = NULL;
	while ((opt = getopt(argc, argv, "t:e:")) != -1) {
		if (opt == 't' && (threads = atoi(optarg)) >= 1) {
			continue;
		}
		if (opt == 'e') {
			e2e = optarg;
			continue;
		}
		usage();
	}
	if (optind != argc - 1 && optind != argc - 2) {
		usage();
	}
	const char *data = argv[optind];
	char idx[4096];
	snprintf(idx, sizeof idx, "%s.idx", data);
	struct tensor *ts;
	int64_t nt = read_index(optind + 1 < argc ? argv[optind + 1] : idx, &ts);
	int64_t n = ts[nt - 1].off + ts[nt - 1].rows * ts[nt - 1].cols;
	plan(ts, nt);

	if (e2e) {
		in_bf16 = ends_with(data, ".bf16");
		double wall, cpus, t0 = now(), c0 = cpu();
		if ((in_fd = open(data, O_RDONLY)) < 0 || (out_fd = open(e2e, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0) {
			die(e2e);
		}
		run_threads(threads, e2e_worker, &wall, &cpus);
		close(in_fd);
		wall = now() - t0; // opening included
		cpus = cpu() - c0;
		output = malloc((size_t)q4_0_bytes(n));
		if (!output || pread(out_fd, output, (size_t)q4_0_bytes(n), 0) != q4_0_bytes(n)) {
			die(e2e);
		}
		close(out_fd);
		printf("tool=ggml-q4_0-e2e input=%s threads=%d tensors=%lld weights=%lld wall=%.3f cpu=%.3f "
		       "wall_ns_per_weight=%.3f cpu_ns_per_weight=%.3f fnv=%016llx\n",
		       in_bf16 ? "bf16" : "f32", threads, (long long)nt, (long long)n, wall, cpus, 1e9 * wall / (double)n,
		       1e9 * cpus / (double)n, (unsigned long long)fnv1a(output, q4_0_bytes(n)));
		return 0;
	}

	double t0 = now();
	input = read_all(data, n);
	double read_wall = now() - t0;
	output = malloc((size_t)q4_0_bytes(n));
	if (!output) {
		die("malloc");
	}
	memset(output, 0, (size_t)q4_0_bytes(n));
	double wall, cpus;
	run_threads(threads, worker, &wall, &cpus);

	printf("tool=ggml-q4_0 threads=%d tensors=%lld weights=%lld read_wall=%.3f wall=%.3f cpu=%.3f "
	       "wall_ns_per_weight=%.3f cpu_ns_per_weight=%.3f sqnr_mean=%.3f fnv=%016llx\n",
	       threads, (long long)nt, (long long)n, read_wall, wall, cpus, 1e9 * wall / (double)n, 1e9 * cpus / (double)n,
	       sqnr_mean(ts, nt), (unsigned long long)fnv1a(output, q4_0_bytes(n)));
	return 0;
}
