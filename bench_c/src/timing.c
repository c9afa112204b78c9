/* timing.c - CLOCK_MONOTONIC, the tick counter and its measured rate. */
#include "timing.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

double qb_now_s(void) {
	struct timespec ts;
	/* CLOCK_MONOTONIC cannot fail with a valid pointer on Linux; check anyway so a
	 * broken clock shows up as an absurd result rather than as garbage. */
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		abort();
	}
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

bool qb_ticks_available(void) {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

uint64_t qb_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
	return (uint64_t) __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

const char *qb_ticks_source(void) {
#if defined(__x86_64__) || defined(__i386__)
	return "rdtsc";
#elif defined(__aarch64__)
	return "cntvct_el0";
#else
	return "none";
#endif
}

void qb_sleep_s(double seconds) {
	struct timespec req, rem;
	req.tv_sec = (time_t) seconds;
	req.tv_nsec = (long) ((seconds - (double) req.tv_sec) * 1e9);
	while (nanosleep(&req, &rem) != 0 && errno == EINTR) {
		req = rem;
	}
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

double qb_ticks_hz(void) {
	static double cached = -1.0;
	if (cached >= 0.0) {
		return cached;
	}
	if (!qb_ticks_available()) {
		cached = 0.0;
		return cached;
	}
	/* Five 20 ms windows and their median: a window in which the process is descheduled
	 * between the two clock reads would skew a single estimate; the median of five
	 * ignores up to two such windows. 20 ms keeps the error of the ~30 ns clock reads
	 * below 1e-5 and the whole calibration at 0.1 s. */
	enum { WINDOWS = 5 };
	double est[WINDOWS];
	for (int w = 0; w < WINDOWS; w++) {
		double t0 = qb_now_s();
		uint64_t c0 = qb_ticks();
		qb_sleep_s(0.020);
		uint64_t c1 = qb_ticks();
		double t1 = qb_now_s();
		est[w] = (double) (c1 - c0) / (t1 - t0);
	}
	qsort(est, WINDOWS, sizeof est[0], cmp_double);
	cached = est[WINDOWS / 2];
	return cached;
}
