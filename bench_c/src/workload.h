/* workload.h - what the benchmarks feed the schemes, and the operations they time.
 *
 * A workload is one key pair and a ring of distinct messages (msg_bytes each, 256 by
 * default: MEMO's transaction body) with their signatures. Verifying a ring rather
 * than one signature over and over keeps branch predictors and caches from learning
 * a single input; 64 messages keep the ring in L2 for every lattice scheme.
 *
 * Messages (and every "random" choice a benchmark makes: bit positions, garbage) come
 * from a seeded splitmix64 stream, so --seed reproduces them. Keys and signing
 * randomness come from the library's own generator, as in production.
 *
 * The qb_op_* functions have the qb_op_fn shape that measure.h times. Each checks its
 * library's return code and returns nonzero on any failure, which aborts the run; a
 * verification returning anything but the expected verdict is such a failure.
 */
#ifndef QB_WORKLOAD_H
#define QB_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "schemes.h"

/* Default ring size; see above for why 64. */
#define QB_RING_DEFAULT 64

/* Time allowed for signing a ring before a verify benchmark: 64 Falcon or ML-DSA
 * signatures take milliseconds; SPHINCS+-128s gets the ring it can sign in this time
 * (at least one signature). */
#define QB_SIGN_RING_BUDGET_S 2.0

/* splitmix64: a tiny, well-mixed generator for reproducible benchmark inputs. */
uint64_t qb_rng_next(uint64_t *state);
void qb_rng_fill(uint64_t *state, uint8_t *out, size_t len);

/* Results flow into this so no call can be optimized away (belt and braces: the
 * calls are into shared libraries, which the compiler cannot see through anyway).
 * Thread-local, so threads never share (or race on) its cache line. */
extern _Thread_local volatile uint64_t qb_sink;

typedef struct {
	const qb_scheme *s;
	qb_keypair kp;
	size_t msg_bytes;
	size_t ring;   /* capacity */
	size_t filled; /* slots holding a signature of their message */
	uint8_t *msgs; /* ring * msg_bytes */
	uint8_t *sigs; /* ring * s->sig_max_bytes */
	size_t *sig_lens;
	uint64_t rng;
} qb_workload;

/* Allocate, fill the messages from `seed` and generate a key pair. 0 on success;
 * on failure the workload is freed. */
int qb_workload_init(qb_workload *w, const qb_scheme *s, size_t msg_bytes, size_t ring, uint64_t seed);
/* Sign ring slots until all are signed or `budget_s` has passed (at least one is
 * always signed: slow signers like SPHINCS+-128s get a shorter ring). 0 on success. */
int qb_workload_sign(qb_workload *w, double budget_s);
void qb_workload_free(qb_workload *w);

static inline const uint8_t *qb_workload_msg(const qb_workload *w, size_t i) {
	return w->msgs + (i % w->ring) * w->msg_bytes;
}

/* A set of (message, signature) pairs to verify against one key, with the verdict
 * every one of them must get. */
typedef struct {
	const qb_scheme *s;
	const uint8_t *pk;
	const void *loaded_pk; /* non-NULL: verify through s->verify_loaded */
	const uint8_t *msgs;
	size_t msg_bytes;
	const uint8_t *sigs;
	size_t sig_stride;
	const size_t *sig_lens;
	size_t count;
	qb_verdict expect;
} qb_verify_set;

/* The workload's signed slots, all expected to verify. */
qb_verify_set qb_workload_valid_set(const qb_workload *w);

/* Context of qb_op_sign: sign message i into the ring (out == NULL; fills it and
 * counts lengths) or into a private buffer (out != NULL: threads sharing a workload). */
typedef struct {
	qb_workload *w;
	uint8_t *out;
	uint64_t len_sum;
	uint64_t count;
} qb_sign_ctx;

int qb_op_keypair(void *workload, uint64_t i);
int qb_op_sign(void *sign_ctx, uint64_t i);
int qb_op_verify(void *verify_set, uint64_t i);

#endif
