/* workload.c - see workload.h. */
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

_Thread_local volatile uint64_t qb_sink;

uint64_t qb_rng_next(uint64_t *state) {
	/* splitmix64 (Steele, Lea, Flood 2014): constants from the reference. */
	uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

void qb_rng_fill(uint64_t *state, uint8_t *out, size_t len) {
	for (size_t i = 0; i < len; i += 8) {
		uint64_t r = qb_rng_next(state);
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(out + i, &r, n);
	}
}

void qb_workload_free(qb_workload *w) {
	if (w->s != NULL) {
		qb_keypair_free(w->s, &w->kp);
	}
	free(w->msgs);
	free(w->sigs);
	free(w->sig_lens);
	memset(w, 0, sizeof *w);
}

int qb_workload_init(qb_workload *w, const qb_scheme *s, size_t msg_bytes, size_t ring, uint64_t seed) {
	memset(w, 0, sizeof *w);
	w->s = s;
	w->msg_bytes = msg_bytes;
	w->ring = ring > 0 ? ring : 1;
	w->rng = seed;
	/* +1: a zero-length message is legal; malloc(0) may return NULL. */
	w->msgs = malloc(w->ring * msg_bytes + 1);
	w->sigs = malloc(w->ring * s->sig_max_bytes);
	w->sig_lens = calloc(w->ring, sizeof *w->sig_lens);
	if (w->msgs == NULL || w->sigs == NULL || w->sig_lens == NULL || qb_keypair_alloc(s, &w->kp) != 0) {
		fprintf(stderr, "error: out of memory for the %s workload\n", s->id);
		qb_workload_free(w);
		return -1;
	}
	qb_rng_fill(&w->rng, w->msgs, w->ring * msg_bytes);
	if (s->keypair(s, &w->kp) != 0) {
		fprintf(stderr, "error: %s key generation failed\n", s->id);
		qb_workload_free(w);
		return -1;
	}
	return 0;
}

int qb_workload_sign(qb_workload *w, double budget_s) {
	qb_sign_ctx ctx = {.w = w};
	double t0 = qb_now_s();
	for (size_t i = 0; i < w->ring; i++) {
		if (qb_op_sign(&ctx, i) != 0) {
			return -1;
		}
		if (qb_now_s() - t0 > budget_s) {
			break;
		}
	}
	return 0;
}

qb_verify_set qb_workload_valid_set(const qb_workload *w) {
	qb_verify_set v = {
		.s = w->s,
		.pk = w->kp.pk,
		.msgs = w->msgs,
		.msg_bytes = w->msg_bytes,
		.sigs = w->sigs,
		.sig_stride = w->s->sig_max_bytes,
		.sig_lens = w->sig_lens,
		.count = w->filled,
		.expect = QB_VALID,
	};
	return v;
}

int qb_op_keypair(void *workload, uint64_t i) {
	qb_workload *w = workload;
	if (w->s->keypair(w->s, &w->kp) != 0) {
		fprintf(stderr, "error: %s key generation failed at operation %llu\n", w->s->id, (unsigned long long) i);
		return -1;
	}
	qb_sink += w->kp.pk[0];
	return 0;
}

int qb_op_sign(void *sign_ctx, uint64_t i) {
	qb_sign_ctx *c = sign_ctx;
	qb_workload *w = c->w;
	size_t slot = (size_t) (i % w->ring);
	uint8_t *out = c->out != NULL ? c->out : w->sigs + slot * w->s->sig_max_bytes;
	size_t len = w->s->sig_max_bytes;
	if (w->s->sign(w->s, &w->kp, qb_workload_msg(w, slot), w->msg_bytes, out, &len) != 0 || len == 0 ||
	    len > w->s->sig_max_bytes) {
		fprintf(stderr, "error: %s signing failed at operation %llu (length %zu)\n", w->s->id,
		        (unsigned long long) i, len);
		return -1;
	}
	if (c->out == NULL) {
		w->sig_lens[slot] = len;
		if (slot + 1 > w->filled) {
			w->filled = slot + 1;
		}
	}
	c->len_sum += len;
	c->count++;
	qb_sink += out[0];
	return 0;
}

static const char *verdict_name(qb_verdict v) {
	return v == QB_VALID ? "valid" : v == QB_INVALID ? "invalid" : "error";
}

int qb_op_verify(void *verify_set, uint64_t i) {
	const qb_verify_set *v = verify_set;
	size_t k = (size_t) (i % v->count);
	const uint8_t *msg = v->msgs + k * v->msg_bytes;
	const uint8_t *sig = v->sigs + k * v->sig_stride;
	qb_verdict got = v->loaded_pk != NULL
	                     ? v->s->verify_loaded(v->s, v->loaded_pk, msg, v->msg_bytes, sig, v->sig_lens[k])
	                     : v->s->verify(v->s, v->pk, msg, v->msg_bytes, sig, v->sig_lens[k]);
	if (got != v->expect) {
		fprintf(stderr, "error: %s verification %llu returned %s, expected %s: aborting\n", v->s->id,
		        (unsigned long long) i, verdict_name(got), verdict_name(v->expect));
		return -1;
	}
	qb_sink += (uint64_t) got;
	return 0;
}
