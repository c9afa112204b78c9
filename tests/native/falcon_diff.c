/*
 * falcon_diff.c - differential test: falcon_vt's verdict against liboqs's, case by case.
 *
 * For each Falcon variant: liboqs makes keys and valid signatures from a fixed seed
 * (falcon_pool.h); every case takes one, applies one mutation class (below), and asks
 * liboqs (OQS_SIG_verify behind the caller's length checks, the rule of falcon_vt.h)
 * and falcon_vt, uncached and through a small cache that keeps evicting, alternating
 * the clean and AVX2 implementations. Any disagreement prints the whole case and makes
 * the exit status 1. First, falcon_arith.h checks the verifier's own arithmetic value by
 * value (a failure there also makes the exit status 1). Run by
 * tests/integration/test_falcon_vt_native.py.
 *
 * Usage: falcon_diff CASES_FALCON_512 CASES_EACH_OTHER_VARIANT [SEED]
 */
#include "falcon_arith.h"
#include "falcon_pool.h"

enum mutation {
	M_VALID,          /* the signature as liboqs made it */
	M_FLIP_HEADER,    /* one bit of the header byte */
	M_FLIP_NONCE,     /* one bit of the 40-byte nonce */
	M_FLIP_BODY,      /* one bit of the compressed s2 */
	M_FLIP_MANY,      /* 2 to 8 bits anywhere in the signature */
	M_TRUNCATE,       /* any shorter length, down to 0 */
	M_EXTEND_ZEROS,   /* 1 to 16 zero bytes appended */
	M_EXTEND_RANDOM,  /* 1 to 16 random bytes appended */
	M_PAD_TO_PADDED,  /* zeros up to the padded length (liboqs accepts this in both kinds) */
	M_STRIP_PADDING,  /* trailing zero bytes removed (liboqs accepts the shorter encoding) */
	M_WRONG_HEADER,   /* another header byte */
	M_CHANGED_NONCE,  /* a fresh random nonce */
	M_RANDOM_BODY,    /* right header and nonce, random s2 of the same length */
	M_WRONG_KEY,      /* another key of the same variant */
	M_FLIP_KEY,       /* one bit of the public key (header byte or coefficients) */
	M_KEY_LENGTH,     /* public key shorter or longer than the variant's */
	M_EMPTY_SIG,      /* zero-length signature */
	M_WRONG_MESSAGE,  /* one bit of the message flipped, or a byte added to an empty one */
	M_OVERLONG,       /* longer than the maximum signature length */
	M_COUNT
};

static const char *MUTATION_NAMES[M_COUNT] = {
	"valid", "flip-header", "flip-nonce", "flip-body", "flip-many", "truncate", "extend-zeros",
	"extend-random", "pad-to-padded", "strip-padding", "wrong-header", "changed-nonce", "random-body",
	"wrong-key", "flip-key", "key-length", "empty-sig", "wrong-message", "overlong",
};

typedef struct {
	uint8_t pk[POOL_MAX_PK + 32];
	size_t pk_len;
	uint8_t msg[POOL_MAX_MSG + 1];
	size_t msg_len;
	uint8_t sig[2 * POOL_MAX_SIG];
	size_t sig_len;
} test_case;

static void mutate(pool_rng *r, const pool *p, const pool_item *it, enum mutation m, test_case *c) {
	size_t other = (it->key + 1 + pool_below(r, p->nkeys - 1)) % p->nkeys;
	size_t padded_len = qfv_variant(p->oqs->method_name) == QFV_FALCON_1024 ||
	                    qfv_variant(p->oqs->method_name) == QFV_FALCON_PADDED_1024 ? 1280 : 666;
	memcpy(c->pk, p->pks + (m == M_WRONG_KEY ? other : it->key) * p->pk_len, p->pk_len);
	c->pk_len = p->pk_len;
	memcpy(c->msg, it->msg, it->msg_len);
	c->msg_len = it->msg_len;
	memcpy(c->sig, it->sig, it->sig_len);
	c->sig_len = it->sig_len;
	size_t extra = 1 + pool_below(r, 16);
	switch (m) {
	case M_VALID:
	case M_WRONG_KEY:
		break;
	case M_FLIP_HEADER:
		pool_flip_bit(r, c->sig, 1);
		break;
	case M_FLIP_NONCE:
		pool_flip_bit(r, c->sig + 1, 40);
		break;
	case M_FLIP_BODY:
		pool_flip_bit(r, c->sig + 41, c->sig_len - 41);
		break;
	case M_FLIP_MANY:
		for (size_t k = 2 + pool_below(r, 7); k > 0; k--) {
			pool_flip_bit(r, c->sig, c->sig_len);
		}
		break;
	case M_TRUNCATE:
		c->sig_len = pool_below(r, c->sig_len);
		break;
	case M_EXTEND_ZEROS:
		memset(c->sig + c->sig_len, 0, extra);
		c->sig_len += extra;
		break;
	case M_EXTEND_RANDOM:
		pool_bytes(r, c->sig + c->sig_len, extra);
		c->sig_len += extra;
		break;
	case M_PAD_TO_PADDED:
		if (c->sig_len < padded_len) {
			memset(c->sig + c->sig_len, 0, padded_len - c->sig_len);
			c->sig_len = padded_len;
		}
		break;
	case M_STRIP_PADDING:
		while (c->sig_len > 41 && c->sig[c->sig_len - 1] == 0) {
			c->sig_len--;
		}
		break;
	case M_WRONG_HEADER: {
		uint8_t h = c->sig[0];
		while (h == c->sig[0]) {
			h = (uint8_t) pool_next(r);
		}
		c->sig[0] = h;
		break;
	}
	case M_CHANGED_NONCE:
		pool_bytes(r, c->sig + 1, 40);
		break;
	case M_RANDOM_BODY:
		pool_bytes(r, c->sig + 41, c->sig_len - 41);
		break;
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
	case M_EMPTY_SIG:
		c->sig_len = 0;
		break;
	case M_WRONG_MESSAGE:
		if (c->msg_len == 0) {
			c->msg[0] = (uint8_t) pool_next(r);
			c->msg_len = 1;
		} else {
			pool_flip_bit(r, c->msg, c->msg_len);
		}
		break;
	case M_OVERLONG:
		memset(c->sig + c->sig_len, 0, p->oqs->length_signature + extra - c->sig_len);
		c->sig_len = p->oqs->length_signature + extra;
		break;
	case M_COUNT:
		break;
	}
}

/*
 * The same cases again through qfv_verify_items, BATCH at a time: sorted by message
 * length, so that runs of equal lengths are hashed four at a time, and every other batch
 * with the exact-length rule of qMEMO's padded schemes (the liboqs verdict and the
 * signature's exact maximum length). BATCH is odd: groups of four do not line up with it.
 */
#define BATCH 61

typedef struct {
	test_case cases[BATCH];
	int want[BATCH];
	size_t count, batches, disagreements;
} batch;

static void run_batch(batch *b, const pool *p, qfv_cache *cache) {
	size_t order[BATCH];
	qfv_item items[BATCH];
	uint8_t ok[BATCH];
	int fixed = b->batches++ % 2 == 1 && strstr(p->oqs->method_name, "padded") != NULL;
	for (size_t i = 0; i < b->count; i++) { /* insertion sort by message length, stable */
		size_t j = i;
		for (; j > 0 && b->cases[order[j - 1]].msg_len > b->cases[i].msg_len; j--) {
			order[j] = order[j - 1];
		}
		order[j] = i;
	}
	for (size_t k = 0; k < b->count; k++) {
		const test_case *c = &b->cases[order[k]];
		items[k] = (qfv_item){c->pk, c->pk_len, c->msg, c->msg_len, c->sig, c->sig_len};
	}
	qfv_verify_items(cache, p->variant, items, b->count, fixed, ok);
	for (size_t k = 0; k < b->count; k++) {
		const test_case *c = &b->cases[order[k]];
		int want = b->want[order[k]] && (!fixed || c->sig_len == p->oqs->length_signature);
		if (ok[k] != want) {
			b->disagreements++;
			fprintf(stderr, "DISAGREEMENT %s batch %zu item %zu (fixed length %d): want %d, qfv_verify_items %d\n",
			        p->oqs->method_name, b->batches, k, fixed, want, ok[k]);
			pool_print_hex("pk", c->pk, c->pk_len);
			pool_print_hex("msg", c->msg, c->msg_len);
			pool_print_hex("sig", c->sig, c->sig_len);
		}
	}
	b->count = 0;
}

/* Run `cases` cases for one variant; returns the number of disagreements. */
static size_t run_variant(const char *name, size_t cases, size_t nkeys, size_t nitems, uint64_t seed,
                          size_t *cases_run) {
	pool p;
	if (pool_make(&p, name, nkeys, nitems, seed) != 0) {
		pool_free(&p);
		return 1;
	}
	/* Fewer entries than keys: the cache both hits and evicts throughout. */
	qfv_cache *cache = qfv_cache_new(nkeys / 2);
	int both_impls = qfv_select_implementation("avx2") == 0;
	size_t disagreements = 0, per_class[M_COUNT] = {0}, valid_per_class[M_COUNT] = {0};
	static test_case c;
	static batch b;
	b.count = b.batches = b.disagreements = 0;
	pool_rng r;
	pool_seed(&r, seed ^ 0xD1FFu);
	for (size_t i = 0; i < cases; i++) {
		const pool_item *it = &p.items[pool_below(&r, p.nitems)];
		enum mutation m = (enum mutation) (i % M_COUNT);
		const char *impl = both_impls && (i / M_COUNT) % 2 ? "avx2" : "clean";
		qfv_select_implementation(impl);
		mutate(&r, &p, it, m, &c);
		int want = pool_liboqs_verdict(p.oqs, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		int plain = qfv_verify(p.variant, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		int cached = qfv_verify_cached(cache, p.variant, c.pk, c.pk_len, c.msg, c.msg_len, c.sig, c.sig_len);
		per_class[m]++;
		valid_per_class[m] += (size_t) want;
		if (plain != want || cached != want) {
			disagreements++;
			fprintf(stderr, "DISAGREEMENT %s case %zu class %s impl %s: liboqs %d, uncached %d, cached %d\n", name, i,
			        MUTATION_NAMES[m], impl, want, plain, cached);
			pool_print_hex("pk", c.pk, c.pk_len);
			pool_print_hex("msg", c.msg, c.msg_len);
			pool_print_hex("sig", c.sig, c.sig_len);
		}
		b.cases[b.count] = c;
		b.want[b.count++] = want;
		if (b.count == BATCH || i + 1 == cases) {
			run_batch(&b, &p, cache);
		}
	}
	disagreements += b.disagreements;
	uint64_t hits, misses;
	size_t size, capacity;
	qfv_cache_stats(cache, &hits, &misses, &size, &capacity);
	printf("%s: %zu cases, %zu disagreements (%zu of them batched, in %zu batches); implementations %s; cache %" PRIu64
	       " hits, %" PRIu64 " misses, %zu/%zu entries\n", name, cases, disagreements, b.disagreements, b.batches,
	       both_impls ? "clean+avx2" : "clean", hits, misses, size, capacity);
	for (int m = 0; m < M_COUNT; m++) {
		printf("  %-14s %8zu cases %8zu valid\n", MUTATION_NAMES[m], per_class[m], valid_per_class[m]);
	}
	if (cases >= 4 * M_COUNT && (hits == 0 || misses == 0 || valid_per_class[M_VALID] != per_class[M_VALID])) {
		fprintf(stderr, "%s: the cache was not exercised or a valid signature failed\n", name);
		disagreements++;
	}
	*cases_run += cases;
	qfv_cache_free(cache);
	pool_free(&p);
	return disagreements;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: %s CASES_FALCON_512 CASES_EACH_OTHER_VARIANT [SEED]\n", argv[0]);
		return 2;
	}
	size_t cases_512 = strtoull(argv[1], NULL, 10), cases_other = strtoull(argv[2], NULL, 10);
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 20261123u;
	OQS_init();
	size_t total = 0, disagreements = falcon_arith_check(seed);
	disagreements += run_variant("Falcon-512", cases_512, 32, 640, seed, &total);
	disagreements += run_variant("Falcon-padded-512", cases_other, 8, 160, seed + 1, &total);
	disagreements += run_variant("Falcon-1024", cases_other, 8, 160, seed + 2, &total);
	disagreements += run_variant("Falcon-padded-1024", cases_other, 8, 160, seed + 3, &total);
	printf("falcon_diff: %zu cases, %zu disagreements\n", total, disagreements);
	OQS_destroy();
	return disagreements == 0 ? 0 : 1;
}
