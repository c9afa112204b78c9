/* bench_pool.c - `pool`: a fixed pool of worker threads fed by a task queue against
 * a sequential loop, on the same workload: blocks of N verification tasks (default
 * 4,000, a MEMO block) arriving all at once, as a node receives a block.
 *
 * Each mode verifies --trials blocks after one untimed warm-up block. Per block we
 * record the block time (arrival to last completion); per task, its latency (arrival
 * to completion: queueing included) and its service time (start to completion). Both
 * modes take the same two clock reads per task, so the comparison is fair. The queue
 * is a mutex-protected ring with condition variables: the simple design a node would
 * start from, whose locking cost is part of what we measure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "stats.h"
#include "timing.h"

typedef struct {
	double arrival, start, end;
} task_times;

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t work;      /* tasks queued or shutdown */
	pthread_cond_t done;      /* a block finished */
	size_t *queue;            /* ring of task positions in the current block */
	size_t cap, head, count;
	uint64_t first;           /* operation index of the block's first task */
	size_t completed, expected;
	bool shutdown;
	int failed;
	task_times *times;
	qb_verify_set *vs;
} pool;

static void *pool_worker(void *arg) {
	pool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->count == 0 && !p->shutdown) {
			pthread_cond_wait(&p->work, &p->mu);
		}
		if (p->count == 0) { /* shutdown and drained */
			break;
		}
		size_t k = p->queue[p->head];
		uint64_t op_index = p->first + k;
		p->head = (p->head + 1) % p->cap;
		p->count--;
		pthread_mutex_unlock(&p->mu);

		task_times *t = &p->times[k];
		t->start = qb_now_s();
		int rc = qb_op_verify(p->vs, op_index);
		t->end = qb_now_s();

		pthread_mutex_lock(&p->mu);
		p->failed |= rc != 0;
		if (++p->completed == p->expected) {
			pthread_cond_signal(&p->done);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Verify one block of n tasks (indices first..first+n-1) through the pool. */
static int pool_block(pool *p, uint64_t first, size_t n) {
	pthread_mutex_lock(&p->mu);
	p->completed = 0;
	p->expected = n;
	p->first = first;
	double arrival = qb_now_s();
	for (size_t k = 0; k < n; k++) {
		p->times[k].arrival = arrival;
		p->queue[(p->head + p->count) % p->cap] = k;
		p->count++;
	}
	pthread_cond_broadcast(&p->work);
	while (p->completed < n) {
		pthread_cond_wait(&p->done, &p->mu);
	}
	int failed = p->failed;
	pthread_mutex_unlock(&p->mu);
	return failed ? -1 : 0;
}

static int sequential_block(qb_verify_set *vs, task_times *times, uint64_t first, size_t n) {
	double arrival = qb_now_s();
	for (size_t k = 0; k < n; k++) {
		times[k].arrival = arrival;
		times[k].start = qb_now_s();
		if (qb_op_verify(vs, first + k) != 0) {
			return -1;
		}
		times[k].end = qb_now_s();
	}
	return 0;
}

typedef struct {
	double *block_ms, *latency_us, *service_us;
} mode_samples;

/* Append one block's figures to the samples. */
static void record_block(mode_samples *m, const task_times *t, size_t n, uint64_t block) {
	double arrival = t[0].arrival, last = t[0].end;
	for (size_t k = 0; k < n; k++) {
		m->latency_us[block * n + k] = (t[k].end - t[k].arrival) * 1e6;
		m->service_us[block * n + k] = (t[k].end - t[k].start) * 1e6;
		if (t[k].end > last) {
			last = t[k].end;
		}
	}
	m->block_ms[block] = (last - arrival) * 1e3;
}

/* Summaries of one mode as JSON and a printed line; returns the median block time. */
static double report_mode(qb_json *j, const char *name, const mode_samples *m, uint64_t blocks, size_t n,
                          uint64_t workers) {
	qb_summary block, lat, svc;
	if (qb_summarize(m->block_ms, blocks, &block) != 0 || qb_summarize(m->latency_us, blocks * n, &lat) != 0 ||
	    qb_summarize(m->service_us, blocks * n, &svc) != 0) {
		return -1;
	}
	double ops = (double) n / (block.median / 1e3);
	printf("%-12s %7llu %12.1f %12.2f %12.1f %12.1f %12.1f %12.2f\n", name, (unsigned long long) workers, ops,
	       block.median, lat.median, lat.p95, lat.p99, svc.median);
	qb_json_object(j, name);
	qb_json_uint(j, "workers", workers);
	qb_json_num(j, "ops_per_s", ops);
	qb_json_num(j, "block_ms_median", block.median);
	qb_summary_json(j, "block_ms", &block);
	qb_summary_json(j, "latency_us", &lat);
	qb_summary_json(j, "service_us", &svc);
	qb_json_end(j);
	return block.median;
}

int bench_pool(const qb_opts *o, qb_json *j) {
	const qb_scheme *schemes[1];
	uint64_t workers_list[1];
	if (qb_opts_schemes(o, schemes, 1) < 0 || qb_parse_counts(o->threads, workers_list, 1) < 0) {
		fprintf(stderr, "error: pool takes one scheme and one worker count (--threads W)\n");
		return QB_EXIT_USAGE;
	}
	const qb_scheme *s = schemes[0];
	const uint64_t workers = workers_list[0], blocks = o->trials;
	const size_t n = (size_t) o->iterations;
	/* One untimed block first; at most 256 tasks is enough to warm both modes. */
	const size_t warm_n = n < 256 ? n : 256;
	int ret = QB_EXIT_FAIL;
	size_t started = 0;
	qb_workload wl = {0};
	pool p = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
	mode_samples seq = {0}, par = {0};
	pthread_t *tids = calloc(workers, sizeof *tids);
	p.queue = malloc(n * sizeof *p.queue);
	p.times = malloc(n * sizeof *p.times);
	p.cap = n;
	mode_samples *modes[] = {&seq, &par};
	for (int k = 0; k < 2; k++) {
		modes[k]->block_ms = malloc(blocks * sizeof(double));
		modes[k]->latency_us = malloc(blocks * n * sizeof(double));
		modes[k]->service_us = malloc(blocks * n * sizeof(double));
	}
	qb_verify_set vs;
	if (tids == NULL || p.queue == NULL || p.times == NULL || seq.block_ms == NULL || seq.latency_us == NULL ||
	    seq.service_us == NULL || par.block_ms == NULL || par.latency_us == NULL || par.service_us == NULL) {
		fprintf(stderr, "error: out of memory for %zu tasks x %llu blocks\n", n, (unsigned long long) blocks);
		goto cleanup;
	}
	if (qb_workload_init(&wl, s, o->msg_bytes, o->ring, o->seed) != 0 || qb_workload_sign(&wl, QB_SIGN_RING_BUDGET_S) != 0) {
		goto cleanup;
	}
	vs = qb_workload_valid_set(&wl);
	p.vs = &vs;
	for (; started < workers; started++) {
		if (pthread_create(&tids[started], NULL, pool_worker, &p) != 0) {
			fprintf(stderr, "error: pthread_create failed\n");
			goto cleanup;
		}
	}
	if (sequential_block(&vs, p.times, 0, warm_n) != 0 || pool_block(&p, 0, warm_n) != 0) {
		goto cleanup;
	}
	/* Alternate the modes block by block so a change in the machine's load (our cores
	 * are shared) affects both alike. */
	for (uint64_t b = 0; b < blocks; b++) {
		if (sequential_block(&vs, p.times, b * n, n) != 0) {
			goto cleanup;
		}
		record_block(&seq, p.times, n, b);
		if (pool_block(&p, b * n, n) != 0) {
			goto cleanup;
		}
		record_block(&par, p.times, n, b);
	}
	printf("%s: %llu blocks of %zu verification tasks (%zu-byte messages)\n", s->id, (unsigned long long) blocks, n,
	       o->msg_bytes);
	printf("%-12s %7s %12s %12s %12s %12s %12s %12s\n", "Mode", "Workers", "ops/s", "Block ms", "Lat P50 us",
	       "Lat P95 us", "Lat P99 us", "Service us");
	qb_json_object(j, "results");
	qb_scheme_json(j, s);
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_uint(j, "tasks_per_block", n);
	qb_json_uint(j, "blocks", blocks);
	double seq_ms = report_mode(j, "sequential", &seq, blocks, n, 1);
	double par_ms = report_mode(j, "pool", &par, blocks, n, workers);
	if (seq_ms < 0 || par_ms < 0) {
		goto cleanup;
	}
	qb_json_num(j, "speedup", seq_ms / par_ms);
	qb_json_end(j);
	printf("pool speedup (median block time): %.2fx\n", seq_ms / par_ms);
	ret = QB_EXIT_OK;
cleanup:
	pthread_mutex_lock(&p.mu);
	p.shutdown = true;
	pthread_cond_broadcast(&p.work);
	pthread_mutex_unlock(&p.mu);
	bool joined = true;
	for (size_t t = 0; t < started; t++) {
		int rc = pthread_join(tids[t], NULL);
		if (rc != 0) {
			fprintf(stderr, "error: pthread_join failed at worker %zu: %s\n", t, strerror(rc));
			joined = false;
			ret = QB_EXIT_FAIL;
		}
	}
	if (!joined) {
		/* A worker that may still run could touch the queue, the times or the
		 * workload: leak them (the process exits next) rather than free them under it. */
		return ret;
	}
	free(tids);
	free(p.queue);
	free(p.times);
	for (int k = 0; k < 2; k++) {
		free(modes[k]->block_ms);
		free(modes[k]->latency_us);
		free(modes[k]->service_us);
	}
	qb_workload_free(&wl);
	return ret;
}
