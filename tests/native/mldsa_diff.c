/*
 * mldsa_diff.c - differential test: mldsa_vt's verdict against liboqs's, case by case.
 *
 * For each ML-DSA parameter set: liboqs makes keys and signatures from a fixed seed
 * (mldsa_pool.h), plus lenient signatures (z up to gamma1); every case takes one,
 * applies one mutation class (below) and asks
 *   - liboqs's portable verify (FIPS 204's verdict, pool_ref_verdict),
 *   - OQS_SIG_verify (liboqs's dispatch: the AVX2 code on an AVX2 CPU),
 *   - mldsa_vt uncached, and through a small cache that keeps evicting,
 * alternating mldsa_vt's ref and AVX2 implementations. mldsa_vt must give the portable
 * verify's verdict every time. OQS_SIG_verify may differ only where mldsa_vt.h says it
 * does: it accepts a signature whose z breaks FIPS 204's bound; such cases are counted
 * and printed per class, anything else is a failure. First, mldsa_arith.h checks
 * use_hint value by value. Any failure prints the whole case and makes the exit
 * status 1. Run by tests/integration/test_mldsa_vt_native.py.
 *
 * Usage: mldsa_diff CASES_ML_DSA_44 CASES_EACH_OTHER_SET [SEED [ARITH_STRIDE]]
 */
#include "mldsa_arith.h"
#include "mldsa_pool.h"

enum mutation {
	M_VALID,         /* the signature as liboqs made it */
	M_FLIP_CTILDE,   /* one bit of the commitment hash c~ */
	M_FLIP_Z,        /* one bit of the packed z */
	M_FLIP_HINT,     /* one bit of the hint (positions or counts) */
	M_FLIP_MANY,     /* 2 to 8 bits anywhere in the signature */
	M_TRUNCATE,      /* any shorter length, down to 0 */
	M_EXTEND,        /* 1 to 16 zero or random bytes appended */
	M_EMPTY_SIG,     /* zero-length signature */
	M_RANDOM_SIG,    /* random bytes of the right length */
	M_HINT_COUNT,    /* one row's hint count set to any byte */
	M_HINT_ORDER,    /* two hint positions of one row made equal or decreasing */
	M_HINT_PADDING,  /* an unused hint position made non-zero */
	M_Z_EDGE,        /* one z coefficient repacked at +-(gamma1 - beta) +- 1 or gamma1 */
	M_LENIENT,       /* a lenient signature: valid but for z's bound, which it may break */
	M_WRONG_KEY,     /* another key of the same set */
	M_FLIP_KEY,      /* one bit of the public key (rho or t1) */
	M_KEY_LENGTH,    /* public key shorter or longer than the set's */
	M_WRONG_MESSAGE, /* one bit of the message flipped, or a byte added to an empty one */
	M_COUNT
};

static const char *MUTATION_NAMES[M_COUNT] = {
	"valid", "flip-ctilde", "flip-z", "flip-hint", "flip-many", "truncate", "extend", "empty-sig", "random-sig",
	"hint-count", "hint-order", "hint-padding", "z-edge", "lenient", "wrong-key", "flip-key", "key-length",
	"wrong-message",
};

typedef struct {
	uint8_t pk[POOL_MAX_PK + 32];
	size_t pk_len;
	uint8_t msg[POOL_MAX_MSG + 1];
	size_t msg_len;
	uint8_t sig[POOL_MAX_SIG + 32];
	size_t sig_len;
} test_case;

/* Set z's coefficient `at` to `value` and pack z again (the ref code's own unpack/pack). */
static void repack_z(const pool *p, uint8_t *sig, size_t at, int32_t value) {
	static int32_t z[POOL_MAX_L * POOL_N] __attribute__((aligned(32))), h[POOL_MAX_K * POOL_N];
	uint8_t c[64];
	if (p->params->unpack_sig(c, z, h, sig) != 0) {
		return; /* a hint that does not unpack: z is left as it is */
	}
	z[at] = value;
	size_t poly = at / POOL_N;
	p->params->polyz_pack(sig + p->params->ctilde_bytes + poly * p->params->z_poly_bytes, z + poly * POOL_N);
}

static void mutate(pool_rng *r, const pool *p, enum mutation m, test_case *c) {
	const pool_params *pp = p->params;
	const pool_item *it = m == M_LENIENT ? &p->lenient[pool_below(r, p->nitems)] : &p->items[pool_below(r, p->nitems)];
	size_t other = (it->key + 1 + pool_below(r, p->nkeys - 1)) % p->nkeys;
	size_t z_at = pp->ctilde_bytes, hint_at = z_at + pp->l * pp->z_poly_bytes, counts_at = hint_at + pp->omega;
	memcpy(c->pk, p->pks + (m == M_WRONG_KEY ? other : it->key) * p->pk_len, p->pk_len);
	c->pk_len = p->pk_len;
	memcpy(c->msg, it->msg, it->msg_len);
	c->msg_len = it->msg_len;
	memcpy(c->sig, it->sig, it->sig_len);
	c->sig_len = it->sig_len;
	size_t extra = 1 + pool_below(r, 16);
	switch (m) {
	case M_VALID:
	case M_LENIENT:
	case M_WRONG_KEY:
		break;
	case M_FLIP_CTILDE:
		pool_flip_bit(r, c->sig, pp->ctilde_bytes);
		break;
	case M_FLIP_Z:
		pool_flip_bit(r, c->sig + z_at, hint_at - z_at);
		break;
	case M_FLIP_HINT:
		pool_flip_bit(r, c->sig + hint_at, c->sig_len - hint_at);
		break;
	case M_FLIP_MANY:
		for (size_t k = 2 + pool_below(r, 7); k > 0; k--) {
			pool_flip_bit(r, c->sig, c->sig_len);
		}
		break;
	case M_TRUNCATE:
		c->sig_len = pool_below(r, c->sig_len);
		break;
	case M_EXTEND:
		if (pool_next(r) & 1) {
			pool_bytes(r, c->sig + c->sig_len, extra);
		} else {
			memset(c->sig + c->sig_len, 0, extra);
		}
		c->sig_len += extra;
		break;
	case M_EMPTY_SIG:
		c->sig_len = 0;
		break;
	case M_RANDOM_SIG:
		pool_bytes(r, c->sig, c->sig_len);
		break;
	case M_HINT_COUNT:
		c->sig[counts_at + pool_below(r, pp->k)] = (uint8_t) pool_next(r);
		break;
	case M_HINT_ORDER: {
		/* Two neighbouring positions inside one row, made equal or swapped. */
		size_t used = c->sig[counts_at + pp->k - 1];
		if (used >= 2) {
			size_t j = 1 + pool_below(r, used - 1);
			c->sig[hint_at + j] = (pool_next(r) & 1) ? c->sig[hint_at + j - 1] : (uint8_t) (c->sig[hint_at + j - 1] - 1);
		}
		break;
	}
	case M_HINT_PADDING: {
		size_t used = c->sig[counts_at + pp->k - 1];
		if (used < pp->omega) {
			c->sig[hint_at + used + pool_below(r, pp->omega - used)] = (uint8_t) (1 + pool_below(r, 255));
		}
		break;
	}
	case M_Z_EDGE: {
		static const int32_t edges[] = {-1, 0, 1};
		int32_t bound = pp->gamma1 - pp->beta, value;
		value = (pool_next(r) & 3) == 0 ? pp->gamma1 - 1 : bound + edges[pool_below(r, 3)];
		repack_z(p, c->sig, pool_below(r, pp->l * POOL_N), (pool_next(r) & 1) ? value : -value);
		break;
	}
	case M_FLIP_KEY:
		pool_flip_bit(r, c->pk, p->pk_len);
		break;
	case M_KEY_LENGTH:
		if (pool_next(r) & 1) {
			c->pk_len = pool_below(r, p->pk_len);
		} else {
			pool_bytes(r, c->pk + p->pk_len, extra);
			c->pk_len += extra;
		}
		break;
	case M_WRONG_MESSAGE:
		if (c->msg_len == 0) {
			c->msg[0] = (uint8_t) pool_next(r);
			c->msg_len = 1;
		} else {
			pool_flip_bit(r, c->msg, c->msg_len);
		}
		break;
	case M_COUNT:
		break;
	}
}

/* Run `cases` cases for one parameter set; returns the number of failures. */
static size_t run_variant(const char *name, size_t cases, size_t nkeys, size_t nitems, uint64_t seed,
                          size_t *cases_run) {
	pool p;
	if (pool_make(&p, name, nkeys, nitems, seed) != 0) {
		pool_free(&p);
		return 1;
	}
	/* Fewer entries than keys (the minimum of 8): the cache both hits and evicts throughout. */
	qmv_cache *cache = qmv_cache_new(p.variant, nkeys / 2);
	int both_impls = qmv_select_implementation("avx2") == 0;
	size_t failures = 0, per_class[M_COUNT] = {0}, valid_per_class[M_COUNT] = {0}, oqs_differs[M_COUNT] = {0};
	static test_case c;
	pool_rng r;
	pool_seed(&r, seed ^ 0xD1FFu);
	for (size_t i = 0; i < cases; i++) {
		enum mutation m = (enum mutation) (i % M_COUNT);
		const char *impl = both_impls && (i / M_COUNT) % 2 ? "avx2" : "ref";
		qmv_select_implementation(impl);
		mutate(&r, &p, m, &c);
		int want = pool_ref_verdict(&p, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		int oqs = pool_oqs_verdict(&p, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		int plain = qmv_verify(p.variant, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		int cached = qmv_verify_cached(cache, p.variant, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		per_class[m]++;
		valid_per_class[m] += (size_t) want;
		/* OQS_SIG_verify may only differ by accepting what FIPS 204's z bound rejects. */
		int oqs_explained = oqs == want || (oqs && !want && pool_z_out_of_bound(&p, c.sig, c.sig_len) == 1);
		oqs_differs[m] += (size_t) (oqs != want);
		if (plain != want || cached != want || !oqs_explained) {
			failures++;
			fprintf(stderr, "DISAGREEMENT %s case %zu class %s impl %s: liboqs ref %d, OQS_SIG_verify %d%s, "
			        "uncached %d, cached %d\n", name, i, MUTATION_NAMES[m], impl, want, oqs,
			        oqs_explained ? "" : " (unexplained)", plain, cached);
			pool_print_hex("pk", c.pk, c.pk_len);
			pool_print_hex("msg", c.msg, c.msg_len);
			pool_print_hex("sig", c.sig, c.sig_len);
		}
	}
	uint64_t hits, misses;
	size_t size, capacity, oqs_total = 0;
	qmv_cache_stats(cache, &hits, &misses, &size, &capacity);
	for (int m = 0; m < M_COUNT; m++) {
		oqs_total += oqs_differs[m];
	}
	printf("%s: %zu cases, %zu disagreements; implementations %s; cache %" PRIu64 " hits, %" PRIu64
	       " misses, %zu/%zu entries; OQS_SIG_verify accepted %zu that FIPS 204 rejects (z bound); "
	       "%zu of %zu lenient signatures break the bound\n", name, cases, failures,
	       both_impls ? "ref+avx2" : "ref", hits, misses, size, capacity, oqs_total, p.lenient_out_of_bound, p.nitems);
	for (int m = 0; m < M_COUNT; m++) {
		printf("  %-14s %8zu cases %8zu valid %8zu oqs-differs\n", MUTATION_NAMES[m], per_class[m],
		       valid_per_class[m], oqs_differs[m]);
	}
	if (cases >= 4 * M_COUNT && (hits == 0 || misses == 0 || valid_per_class[M_VALID] != per_class[M_VALID])) {
		fprintf(stderr, "%s: the cache was not exercised or a valid signature failed\n", name);
		failures++;
	}
	*cases_run += cases;
	qmv_cache_free(cache);
	pool_free(&p);
	return failures;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: %s CASES_ML_DSA_44 CASES_EACH_OTHER_SET [SEED [ARITH_STRIDE]]\n", argv[0]);
		return 2;
	}
	size_t cases_44 = strtoull(argv[1], NULL, 10), cases_other = strtoull(argv[2], NULL, 10);
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 20261127u;
	unsigned stride = argc > 4 ? (unsigned) strtoul(argv[4], NULL, 10) : 1u;
	OQS_init();
	size_t total = 0, failures = mldsa_arith_check(stride ? stride : 1u);
	failures += run_variant("ML-DSA-44", cases_44, 32, 256, seed, &total);
	failures += run_variant("ML-DSA-65", cases_other, 16, 64, seed + 1, &total);
	failures += run_variant("ML-DSA-87", cases_other, 16, 64, seed + 2, &total);
	printf("mldsa_diff: %zu cases, %zu disagreements\n", total, failures);
	OQS_destroy();
	return failures == 0 ? 0 : 1;
}
