/* bench_inspect.c - `inspect`: correctness before speed. For every scheme (default:
 * all), --iterations times with a fresh key pair and message: sign, then check
 *   sizes                    0 < signature length <= the declared maximum
 *   round_trip               the signature verifies
 *   preparsed_round_trip     it verifies through a pre-parsed key (where offered)
 *   flipped_message_bit      the signature is rejected for the message with one bit flipped
 *   wrong_public_key         it is rejected under another key pair's public key
 *   flipped_signature_bit    the signature with one bit flipped is rejected
 *   truncated_signature      every proper prefix of the signature (lengths 0 .. len-1)
 *                            is rejected
 * Bit positions come from the --seed stream.
 *
 * A wrong outcome of the first five is a surprise: listed, and the exit code is 1.
 * The last two modify the signature itself. Accepting a modified signature of the
 * same message is a forgery only for a scheme that claims strong unforgeability
 * (suf_cma, as liboqs declares it): for those it is a surprise too; for the others it
 * is malleability, which the scheme does not exclude, and is reported as a note.
 *
 * Test hook: --corrupt-signature flips one signature bit right after signing, so the
 * round trip must fail; the integration tests use it to prove a failure is reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { SIZES, ROUND_TRIP, PREPARSED, FLIP_MSG, WRONG_KEY, FLIP_SIG, TRUNCATED, N_CHECKS };

static const struct {
	const char *name;
	qb_verdict expect;
	bool mutates_signature; /* acceptance is malleability unless the scheme is SUF-CMA */
} CHECKS[N_CHECKS] = {
	[SIZES] = {"sizes", QB_VALID, false},
	[ROUND_TRIP] = {"round_trip", QB_VALID, false},
	[PREPARSED] = {"preparsed_round_trip", QB_VALID, false},
	[FLIP_MSG] = {"flipped_message_bit", QB_INVALID, false},
	[WRONG_KEY] = {"wrong_public_key", QB_INVALID, false},
	[FLIP_SIG] = {"flipped_signature_bit", QB_INVALID, true},
	[TRUNCATED] = {"truncated_signature", QB_INVALID, true},
};

/* Findings kept per scheme for the JSON (all are counted). */
#define MAX_KEPT 16

typedef struct {
	unsigned runs[N_CHECKS], surprises[N_CHECKS], notes[N_CHECKS];
	unsigned n_surprises, n_notes;
	char surprise_text[MAX_KEPT][160], note_text[MAX_KEPT][160];
} tally;

static void flip_bit(uint8_t *buf, size_t len, uint64_t *rng) {
	uint64_t r = qb_rng_next(rng);
	buf[(r >> 3) % len] ^= (uint8_t) (1u << (r & 7));
}

static const char *verdict_word(qb_verdict v) {
	return v == QB_VALID ? "accepted" : v == QB_INVALID ? "rejected" : "error";
}

/* Record one check's outcome; `detail` says what exactly was accepted or rejected. */
static void record(tally *t, const qb_scheme *s, int check, unsigned iter, qb_verdict got, const char *detail) {
	t->runs[check]++;
	if (got == CHECKS[check].expect) {
		return;
	}
	bool note = CHECKS[check].mutates_signature && !s->suf_cma && got == QB_VALID;
	unsigned *count = note ? &t->n_notes : &t->n_surprises;
	char(*text)[160] = note ? t->note_text : t->surprise_text;
	(note ? t->notes : t->surprises)[check]++;
	if (*count < MAX_KEPT) {
		snprintf(text[*count], sizeof text[0], "%s: %s (iteration %u): %s%s, expected %s", s->id, CHECKS[check].name,
		         iter, verdict_word(got), detail, verdict_word(CHECKS[check].expect));
		fprintf(stderr, "%s %s\n", note ? "NOTE" : "SURPRISE", text[*count]);
	}
	(*count)++;
}

/* Every proper prefix must be rejected; returns the first accepted length + 1, or 0. */
static size_t accepted_prefix(const qb_scheme *s, const uint8_t *pk, const uint8_t *msg, size_t msg_len,
                              const uint8_t *sig, size_t len) {
	for (size_t cut = len; cut-- > 0;) {
		if (s->verify(s, pk, msg, msg_len, sig, cut) != QB_INVALID) {
			return cut + 1;
		}
	}
	return 0;
}

/* One iteration's checks. Returns -1 when a library call failed outright. */
static int inspect_once(const qb_opts *o, const qb_scheme *s, qb_workload *w, const qb_keypair *other, unsigned iter,
                        tally *t) {
	uint8_t *msg = w->msgs;
	uint8_t *sig = w->sigs;
	uint8_t *tmp_sig = w->sigs + s->sig_max_bytes; /* ring slot 1 as scratch */
	uint8_t *tmp_msg = w->msgs + w->msg_bytes;
	size_t len = s->sig_max_bytes;
	char detail[64] = "";
	if (qb_op_keypair(w, iter) != 0) {
		return -1;
	}
	qb_rng_fill(&w->rng, msg, w->msg_bytes);
	if (s->sign(s, &w->kp, msg, w->msg_bytes, sig, &len) != 0) {
		fprintf(stderr, "error: %s signing failed\n", s->id);
		return -1;
	}
	bool size_ok = len > 0 && len <= s->sig_max_bytes;
	snprintf(detail, sizeof detail, " (length %zu)", len);
	record(t, s, SIZES, iter, size_ok ? QB_VALID : QB_INVALID, detail);
	if (!size_ok) {
		return 0; /* the other checks would read out of bounds */
	}
	if (o->corrupt_signature) {
		flip_bit(sig, len, &w->rng);
	}
	record(t, s, ROUND_TRIP, iter, s->verify(s, w->kp.pk, msg, w->msg_bytes, sig, len), "");
	if (s->pk_load != NULL) {
		void *loaded = s->pk_load(s, w->kp.pk);
		record(t, s, PREPARSED, iter, loaded ? s->verify_loaded(s, loaded, msg, w->msg_bytes, sig, len) : QB_ERROR,
		       "");
		if (loaded != NULL) {
			s->pk_free(loaded);
		}
	}
	memcpy(tmp_msg, msg, w->msg_bytes);
	flip_bit(tmp_msg, w->msg_bytes, &w->rng);
	record(t, s, FLIP_MSG, iter, s->verify(s, w->kp.pk, tmp_msg, w->msg_bytes, sig, len), "");
	record(t, s, WRONG_KEY, iter, s->verify(s, other->pk, msg, w->msg_bytes, sig, len), "");
	memcpy(tmp_sig, sig, len);
	flip_bit(tmp_sig, len, &w->rng);
	record(t, s, FLIP_SIG, iter, s->verify(s, w->kp.pk, msg, w->msg_bytes, tmp_sig, len), "");
	size_t cut = accepted_prefix(s, w->kp.pk, msg, w->msg_bytes, sig, len);
	snprintf(detail, sizeof detail, " (first %zu of %zu bytes)", cut ? cut - 1 : 0, len);
	record(t, s, TRUNCATED, iter, cut ? s->verify(s, w->kp.pk, msg, w->msg_bytes, sig, cut - 1) : QB_INVALID, detail);
	return 0;
}

static void texts_json(qb_json *j, const char *key, char (*text)[160], unsigned n) {
	qb_json_array(j, key);
	for (unsigned i = 0; i < n && i < MAX_KEPT; i++) {
		qb_json_str(j, NULL, text[i]);
	}
	qb_json_end(j);
}

static void tally_report(qb_json *j, const qb_scheme *s, const qb_opts *o, tally *t) {
	printf("%-30s %6llu", s->id, (unsigned long long) o->iterations);
	qb_json_object(j, NULL);
	qb_scheme_json(j, s);
	qb_json_uint(j, "iterations", o->iterations);
	qb_json_object(j, "checks");
	for (int c = 0; c < N_CHECKS; c++) {
		const char *word = t->runs[c] == 0 ? "n/a" : t->surprises[c] ? "FAIL" : t->notes[c] ? "note" : "ok";
		printf(" %*s", (int) strlen(CHECKS[c].name), word);
		qb_json_object(j, CHECKS[c].name);
		qb_json_uint(j, "runs", t->runs[c]);
		qb_json_uint(j, "surprises", t->surprises[c]);
		qb_json_uint(j, "notes", t->notes[c]);
		qb_json_str(j, "expected", verdict_word(CHECKS[c].expect));
		qb_json_end(j);
	}
	printf("\n");
	qb_json_end(j);
	texts_json(j, "surprises", t->surprise_text, t->n_surprises);
	texts_json(j, "notes", t->note_text, t->n_notes);
	qb_json_bool(j, "ok", t->n_surprises == 0);
	qb_json_end(j);
}

int bench_inspect(const qb_opts *o, qb_json *j) {
	const qb_scheme *schemes[QB_MAX_LIST];
	int n = qb_opts_schemes(o, schemes, QB_MAX_LIST);
	if (n < 0) {
		return QB_EXIT_USAGE;
	}
	if (o->msg_bytes == 0) {
		fprintf(stderr, "error: inspect flips message bits: --msg-bytes must be at least 1\n");
		return QB_EXIT_USAGE;
	}
	unsigned surprises = 0, notes = 0;
	int ret = QB_EXIT_OK;
	tally *t = malloc(sizeof *t);
	if (t == NULL) {
		return QB_EXIT_FAIL;
	}
	printf("%-30s %6s", "Scheme", "iters");
	for (int c = 0; c < N_CHECKS; c++) {
		printf(" %s", CHECKS[c].name);
	}
	printf("\n");
	qb_json_object(j, "results");
	qb_json_bool(j, "corrupt_signature_hook", o->corrupt_signature);
	qb_json_array(j, "schemes");
	for (int i = 0; i < n && ret == QB_EXIT_OK; i++) {
		const qb_scheme *s = schemes[i];
		qb_workload w;
		qb_keypair other = {0};
		memset(t, 0, sizeof *t);
		/* Ring of 2: slot 0 holds the message and signature, slot 1 is scratch. */
		if (qb_workload_init(&w, s, o->msg_bytes, 2, o->seed + (uint64_t) i) != 0) {
			ret = QB_EXIT_FAIL;
			break;
		}
		if (qb_keypair_alloc(s, &other) != 0 || s->keypair(s, &other) != 0) {
			fprintf(stderr, "error: %s key generation failed\n", s->id);
			ret = QB_EXIT_FAIL;
		}
		for (unsigned it = 0; ret == QB_EXIT_OK && it < o->iterations; it++) {
			if (inspect_once(o, s, &w, &other, it, t) != 0) {
				ret = QB_EXIT_FAIL;
			}
		}
		qb_keypair_free(s, &other);
		qb_workload_free(&w);
		if (ret == QB_EXIT_OK) {
			tally_report(j, s, o, t);
			surprises += t->n_surprises;
			notes += t->n_notes;
		}
	}
	free(t);
	qb_json_end(j);
	qb_json_uint(j, "surprises", surprises);
	qb_json_uint(j, "notes", notes);
	qb_json_bool(j, "ok", surprises == 0 && ret == QB_EXIT_OK);
	qb_json_end(j);
	if (ret != QB_EXIT_OK) {
		return ret;
	}
	if (notes > 0) {
		printf("inspect: %u note(s): a modified signature verified for a scheme that does not claim strong "
		       "unforgeability (malleability; see stderr and the JSON)\n",
		       notes);
	}
	if (surprises > 0) {
		printf("inspect: %u surprise(s): see stderr and the JSON\n", surprises);
		return QB_EXIT_FAIL;
	}
	printf("inspect: no surprises\n");
	return QB_EXIT_OK;
}
