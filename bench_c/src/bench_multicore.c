/* bench_multicore.c - `multicore`: verification (or, with --op sign, signing)
 * throughput at 1..N threads, each thread looping on the same workload.
 *
 * Method: every thread warms up on its own, then waits at a start barrier; when all
 * have arrived the main thread opens it and reads the clock, so thread creation and
 * warm-up are never timed. (The barrier is a mutex and condition variable rather than
 * a pthread_barrier_t so that a failed pthread_create can still release the threads
 * already waiting and leave through the one cleanup path.) The main thread sleeps for --duration and raises a stop
 * flag; each thread records when its last operation ended. Throughput is all
 * operations over (last end - release). Speedup is relative to the 1-thread row of
 * the same run, efficiency is speedup / threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "sysinfo.h"
#include "timing.h"

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t arrived;
	bool open;
} start_barrier;

static void barrier_arrive_and_wait(start_barrier *b) {
	pthread_mutex_lock(&b->mu);
	b->arrived++;
	pthread_cond_broadcast(&b->cv);
	while (!b->open) {
		pthread_cond_wait(&b->cv, &b->mu);
	}
	pthread_mutex_unlock(&b->mu);
}

/* Wait until `n` threads have arrived, then release them all at once. */
static void barrier_release(start_barrier *b, size_t n) {
	pthread_mutex_lock(&b->mu);
	while (b->arrived < n) {
		pthread_cond_wait(&b->cv, &b->mu);
	}
	b->open = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

typedef struct {
	start_barrier *barrier;
	atomic_bool *stop;
	qb_op_fn op;
	void *ctx;
	double warmup_s;
	uint64_t first_index;
	uint64_t ops;
	double end_s;
	int failed;
} worker;

static void *worker_main(void *arg) {
	worker *w = arg;
	uint64_t i = w->first_index;
	double t0 = qb_now_s();
	do {
		if (w->op(w->ctx, i++) != 0) {
			w->failed = 1;
			atomic_store(w->stop, true);
			break;
		}
	} while (qb_now_s() - t0 < w->warmup_s);
	/* Everyone reaches the barrier, failed or not, so the others are released. */
	barrier_arrive_and_wait(w->barrier);
	while (!w->failed && !atomic_load_explicit(w->stop, memory_order_relaxed)) {
		if (w->op(w->ctx, i++) != 0) {
			w->failed = 1;
			atomic_store(w->stop, true);
			break;
		}
		w->ops++;
	}
	w->end_s = qb_now_s();
	return NULL;
}

typedef struct {
	uint64_t threads, ops;
	double elapsed_s, ops_per_s;
	uint64_t *thread_ops;
} mc_row;

/* One row: `threads` workers over the shared workload. 0 on success. */
static int run_row(const qb_opts *o, qb_workload *wl, bool sign, uint64_t threads, mc_row *row) {
	int ret = -1;
	size_t created = 0;
	atomic_bool stop = false;
	start_barrier barrier = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	worker *ws = calloc(threads, sizeof *ws);
	pthread_t *tids = calloc(threads, sizeof *tids);
	qb_sign_ctx *sctx = calloc(threads, sizeof *sctx);
	uint8_t *bufs = malloc(threads * wl->s->sig_max_bytes);
	qb_verify_set vs = qb_workload_valid_set(wl);
	row->thread_ops = calloc(threads, sizeof *row->thread_ops);
	if (ws == NULL || tids == NULL || sctx == NULL || bufs == NULL || row->thread_ops == NULL) {
		fprintf(stderr, "error: out of memory for %llu threads\n", (unsigned long long) threads);
		goto cleanup;
	}
	for (size_t t = 0; t < threads; t++) {
		sctx[t].w = wl;
		sctx[t].out = bufs + t * wl->s->sig_max_bytes; /* private output buffer */
		ws[t] = (worker) {
			.barrier = &barrier,
			.stop = &stop,
			.op = sign ? qb_op_sign : qb_op_verify,
			.ctx = sign ? (void *) &sctx[t] : (void *) &vs,
			.warmup_s = o->warmup_s,
			/* Threads start at different ring positions: different inputs at once. */
			.first_index = t * (wl->ring / threads + 1),
		};
		if (pthread_create(&tids[t], NULL, worker_main, &ws[t]) != 0) {
			fprintf(stderr, "error: pthread_create failed at thread %zu\n", t);
			atomic_store(&stop, true); /* the threads already started end at once */
			break;
		}
		created++;
	}
	barrier_release(&barrier, created);
	double t0 = qb_now_s();
	if (created == threads) {
		qb_sleep_s(o->duration_s);
	}
	atomic_store(&stop, true);
	double last_end = t0;
	int failed = created < threads;
	row->threads = threads;
	row->ops = 0;
	for (size_t t = 0; t < created; t++) {
		int rc = pthread_join(tids[t], NULL);
		if (rc != 0) {
			/* An unjoined thread's counters may still be changing: the row is void. */
			fprintf(stderr, "error: pthread_join failed at thread %zu: %s\n", t, strerror(rc));
			failed = 1;
			continue;
		}
		failed |= ws[t].failed;
		row->ops += ws[t].ops;
		row->thread_ops[t] = ws[t].ops;
		if (ws[t].end_s > last_end) {
			last_end = ws[t].end_s;
		}
	}
	row->elapsed_s = last_end - t0;
	row->ops_per_s = (double) row->ops / row->elapsed_s;
	ret = failed ? -1 : 0;
cleanup:
	free(ws);
	free(tids);
	free(sctx);
	free(bufs);
	return ret;
}

int bench_multicore(const qb_opts *o, qb_json *j) {
	const qb_scheme *schemes[1];
	uint64_t counts[QB_MAX_LIST + 1];
	bool sign = strcmp(o->op, "sign") == 0;
	if (!sign && strcmp(o->op, "verify") != 0) {
		fprintf(stderr, "error: --op must be verify or sign\n");
		return QB_EXIT_USAGE;
	}
	if (qb_opts_schemes(o, schemes, 1) < 0) {
		return QB_EXIT_USAGE;
	}
	int n = qb_parse_counts(o->threads, counts + 1, QB_MAX_LIST);
	if (n < 0) {
		return QB_EXIT_USAGE;
	}
	/* The 1-thread row is the baseline of speedup: measure it first, always. */
	uint64_t *list = counts + 1;
	if (list[0] != 1) {
		counts[0] = 1;
		list = counts;
		n++;
	}
	const qb_scheme *s = schemes[0];
	qb_workload wl;
	if (qb_workload_init(&wl, s, o->msg_bytes, o->ring, o->seed) != 0) {
		return QB_EXIT_FAIL;
	}
	int ret = QB_EXIT_FAIL;
	mc_row row = {0};
	double base = 0;
	if (qb_workload_sign(&wl, QB_SIGN_RING_BUDGET_S) != 0) {
		goto cleanup;
	}
	printf("%s %s, %.1f s per row, %ld cores online\n", s->id, sign ? "signing" : "verification", o->duration_s,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("%8s %14s %14s %10s %11s\n", "Threads", "ops/s", "ops/s/thread", "Speedup", "Efficiency");
	qb_json_object(j, "results");
	qb_scheme_json(j, s);
	qb_json_str(j, "op", sign ? "sign" : "verify");
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_int(j, "cores_online", sysconf(_SC_NPROCESSORS_ONLN));
	qb_json_array(j, "rows");
	for (int r = 0; r < n; r++) {
		if (run_row(o, &wl, sign, list[r], &row) != 0) {
			goto cleanup;
		}
		if (r == 0) {
			base = row.ops_per_s;
		}
		double speedup = row.ops_per_s / base;
		printf("%8llu %14.1f %14.1f %9.2fx %10.1f%%\n", (unsigned long long) row.threads, row.ops_per_s,
		       row.ops_per_s / (double) row.threads, speedup, 100.0 * speedup / (double) row.threads);
		fflush(stdout);
		qb_json_object(j, NULL);
		qb_json_uint(j, "threads", row.threads);
		qb_json_uint(j, "ops", row.ops);
		qb_json_num(j, "elapsed_s", row.elapsed_s);
		qb_json_num(j, "ops_per_s", row.ops_per_s);
		qb_json_num(j, "per_thread_ops_per_s", row.ops_per_s / (double) row.threads);
		qb_json_num(j, "speedup", speedup);
		qb_json_num(j, "efficiency", speedup / (double) row.threads);
		qb_json_array(j, "thread_ops");
		for (uint64_t t = 0; t < row.threads; t++) {
			qb_json_uint(j, NULL, row.thread_ops[t]);
		}
		qb_json_end(j);
		qb_loadavg_json(j, "loadavg_after");
		qb_json_end(j);
		free(row.thread_ops);
		row.thread_ops = NULL;
	}
	qb_json_end(j);
	qb_json_end(j);
	ret = QB_EXIT_OK;
cleanup:
	free(row.thread_ops);
	qb_workload_free(&wl);
	return ret;
}
