/* rows.c - see rows.h. */
#include "rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const qb_scheme *s;
	qb_measurement keygen, sign, verify, verify_preparsed;
	bool has_preparsed;
	double sig_mean_bytes;
	uint64_t signatures;
} row;

static void row_free(row *r) {
	qb_measurement_free(&r->keygen);
	qb_measurement_free(&r->sign);
	qb_measurement_free(&r->verify);
	qb_measurement_free(&r->verify_preparsed);
}

/* Key generation, then signing (which fills the workload's ring), then verifying the
 * signatures just made: each operation timed by the same plan. */
static int row_measure(const qb_opts *o, const qb_scheme *s, bool preparsed, row *r) {
	int ret = -1;
	void *loaded = NULL;
	qb_workload w;
	memset(r, 0, sizeof *r);
	r->s = s;
	if (qb_workload_init(&w, s, o->msg_bytes, o->ring, o->seed) != 0) {
		return -1;
	}
	qb_plan plan = qb_opts_plan(o);
	qb_sign_ctx sc = {.w = &w};
	if (qb_measure(qb_op_keypair, &w, &plan, &r->keygen) != 0 || qb_measure(qb_op_sign, &sc, &plan, &r->sign) != 0) {
		goto cleanup;
	}
	r->signatures = sc.count;
	r->sig_mean_bytes = (double) sc.len_sum / (double) sc.count;
	qb_verify_set vs = qb_workload_valid_set(&w);
	if (qb_measure(qb_op_verify, &vs, &plan, &r->verify) != 0) {
		goto cleanup;
	}
	if (preparsed && s->pk_load != NULL) {
		loaded = s->pk_load(s, w.kp.pk);
		if (loaded == NULL) {
			fprintf(stderr, "error: %s could not load its own public key\n", s->id);
			goto cleanup;
		}
		vs.loaded_pk = loaded;
		if (qb_measure(qb_op_verify, &vs, &plan, &r->verify_preparsed) != 0) {
			goto cleanup;
		}
		r->has_preparsed = true;
	}
	ret = 0;
cleanup:
	if (loaded != NULL) {
		s->pk_free(loaded);
	}
	qb_workload_free(&w);
	return ret;
}

static void row_json(qb_json *j, const row *r) {
	qb_json_object(j, NULL);
	qb_scheme_json(j, r->s);
	qb_json_num(j, "signature_bytes_mean", r->sig_mean_bytes);
	qb_json_uint(j, "signatures_measured", r->signatures);
	qb_json_num(j, "keygen_per_s", r->keygen.ops_per_s);
	qb_json_num(j, "sign_per_s", r->sign.ops_per_s);
	qb_json_num(j, "verify_per_s", r->verify.ops_per_s);
	if (r->has_preparsed) {
		qb_json_num(j, "verify_preparsed_per_s", r->verify_preparsed.ops_per_s);
	}
	qb_measurement_json(j, "keygen", &r->keygen);
	qb_measurement_json(j, "sign", &r->sign);
	qb_measurement_json(j, "verify", &r->verify);
	if (r->has_preparsed) {
		qb_measurement_json(j, "verify_preparsed", &r->verify_preparsed);
	}
	qb_json_end(j);
}

static void print_header(bool preparsed) {
	printf("%-30s %-26s %4s %6s %6s %7s %8s %11s %11s %11s", "Scheme", "Implementation", "NIST", "PK B", "SK B",
	       "Sig max", "Sig mean", "Keygen/s", "Sign/s", "Verify/s");
	if (preparsed) {
		printf(" %13s", "Verify/s (pp)");
	}
	printf("\n");
}

static void print_row(const row *r, bool preparsed) {
	char level[16] = "-";
	if (r->s->nist_level > 0) {
		snprintf(level, sizeof level, "L%d", r->s->nist_level);
	}
	printf("%-30s %-26s %4s %6zu %6zu %7zu %8.1f %11.1f %11.1f %11.1f", r->s->id, r->s->implementation, level,
	       r->s->pk_bytes, r->s->sk_bytes, r->s->sig_max_bytes, r->sig_mean_bytes, r->keygen.ops_per_s,
	       r->sign.ops_per_s, r->verify.ops_per_s);
	if (preparsed) {
		if (r->has_preparsed) {
			printf(" %13.1f", r->verify_preparsed.ops_per_s);
		} else {
			printf(" %13s", "n/a");
		}
	}
	printf("\n");
	fflush(stdout);
}

static void ratios_json(qb_json *j, const row *rows, size_t n) {
	qb_json_array(j, "ratios");
	for (size_t i = 1; i < n; i++) {
		qb_json_object(j, NULL);
		qb_json_str(j, "scheme", rows[i].s->id);
		qb_json_str(j, "relative_to", rows[0].s->id);
		qb_json_num(j, "keygen", rows[i].keygen.ops_per_s / rows[0].keygen.ops_per_s);
		qb_json_num(j, "sign", rows[i].sign.ops_per_s / rows[0].sign.ops_per_s);
		qb_json_num(j, "verify", rows[i].verify.ops_per_s / rows[0].verify.ops_per_s);
		qb_json_end(j);
	}
	qb_json_end(j);
	for (size_t i = 1; i < n; i++) {
		printf("%s / %s throughput: keygen %.3fx, sign %.3fx, verify %.3fx\n", rows[i].s->id, rows[0].s->id,
		       rows[i].keygen.ops_per_s / rows[0].keygen.ops_per_s, rows[i].sign.ops_per_s / rows[0].sign.ops_per_s,
		       rows[i].verify.ops_per_s / rows[0].verify.ops_per_s);
	}
}

int qb_rows_bench(const qb_opts *o, qb_json *j, const qb_rows_options *ro) {
	const qb_scheme *schemes[QB_MAX_LIST];
	int n = qb_opts_schemes(o, schemes, QB_MAX_LIST);
	if (n < 0) {
		return QB_EXIT_USAGE;
	}
	row *rows = calloc((size_t) n, sizeof *rows);
	if (rows == NULL) {
		return QB_EXIT_FAIL;
	}
	int ret = QB_EXIT_OK;
	size_t done = 0;
	print_header(ro->preparsed);
	qb_json_object(j, "results");
	qb_json_array(j, "rows");
	for (; done < (size_t) n; done++) {
		if (row_measure(o, schemes[done], ro->preparsed, &rows[done]) != 0) {
			row_free(&rows[done]);
			ret = QB_EXIT_FAIL;
			break;
		}
		print_row(&rows[done], ro->preparsed);
		row_json(j, &rows[done]);
	}
	qb_json_end(j);
	if (ret == QB_EXIT_OK && ro->ratios) {
		ratios_json(j, rows, done);
	}
	qb_json_end(j);
	for (size_t i = 0; i < done; i++) {
		row_free(&rows[i]);
	}
	free(rows);
	return ret;
}
