/*
 * _qmemo_ledger: the node's ledger as a CPython extension (qmemo/node/ledger.py binds it).
 *
 * Three types:
 *   Ledger     the accounts at the tip and the pool (ledger.h); its methods act on a whole
 *              batch, block or timer tick: Python calls it once per request or block.
 *   AdmitBatch one POST /txs or /peer/txs body between its checks and its commit: the
 *              kernel's records, each record's outcome; `verify` runs on a verify thread
 *              with the GIL released.
 *   BlockBody  a block's transactions as one framed buffer and the kernel's records over
 *              it: built from the pool (`select`, `rebuild`) or decoded (`decode_body`).
 * Every offset is checked against its buffer on the way in; a record buffer never comes
 * from Python. Errors: FramingError(rc, index, detail) for a body whose framing is
 * broken, BlockRefused(code, position, a, b) for a body that breaks a rule, MemoryError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger.h"

static const char *const CODE_NAMES[C_COUNT] = {
	[C_NONE] = "",
#define X(id, name) [id] = name,
	QMEMO_LEDGER_CODES(X)
#undef X
};

static PyObject *FramingError, *BlockRefused;

/* An i128 as a Python int. */
static PyObject *int128(i128 v) {
	unsigned char bytes[16];
	u128 u = (u128) v;
	for (int i = 0; i < 16; i++) {
		bytes[i] = (unsigned char) (u >> (8 * i));
	}
	return _PyLong_FromByteArray(bytes, 16, 1, 1);
}

static PyObject *u128_long(u128 v) {
	unsigned char bytes[16];
	for (int i = 0; i < 16; i++) {
		bytes[i] = (unsigned char) (v >> (8 * i));
	}
	return _PyLong_FromByteArray(bytes, 16, 1, 0);
}

static int exact_bytes(PyObject *o, const char *what, Py_ssize_t length) {
	if (!PyBytes_CheckExact(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
		return 0;
	}
	if (length >= 0 && PyBytes_GET_SIZE(o) != length) {
		PyErr_Format(PyExc_ValueError, "%s must be %zd bytes", what, length);
		return 0;
	}
	return 1;
}

/* --- BlockBody ----------------------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	PyObject *body;          /* bytes */
	qmemo_admit_record *recs;
	Py_ssize_t n;
} BlockBodyObject;

static PyTypeObject BlockBodyType;

static block_view view_of(BlockBodyObject *self) {
	block_view v = {(const uint8_t *) PyBytes_AS_STRING(self->body), (size_t) PyBytes_GET_SIZE(self->body),
	                self->recs, (size_t) self->n};
	return v;
}

static void BlockBody_dealloc(BlockBodyObject *self) {
	Py_XDECREF(self->body);
	free(self->recs);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static BlockBodyObject *body_new(PyObject *body, qmemo_admit_record *recs, Py_ssize_t n) {
	BlockBodyObject *self = PyObject_New(BlockBodyObject, &BlockBodyType);
	if (!self) {
		free(recs);
		return NULL;
	}
	Py_INCREF(body);
	self->body = body;
	self->recs = recs;
	self->n = n;
	return self;
}

/* A body framed from pool entries, with their records rebased onto it. */
static BlockBodyObject *body_from_entries(const ledger *l, const uint32_t *at, size_t n) {
	size_t size = 0;
	for (size_t k = 0; k < n; k++) {
		size += FRAME_PREFIX + l->entries[at[k]].rec.record_length;
	}
	PyObject *body = PyBytes_FromStringAndSize(NULL, (Py_ssize_t) size);
	qmemo_admit_record *recs = malloc(n ? n * sizeof *recs : 1);
	if (!body || !recs) {
		Py_XDECREF(body);
		free(recs);
		return (BlockBodyObject *) PyErr_NoMemory();
	}
	uint8_t *out = (uint8_t *) PyBytes_AS_STRING(body);
	size_t offset = 0;
	for (size_t k = 0; k < n; k++) {
		const entry *e = &l->entries[at[k]];
		uint32_t length = e->rec.record_length;
		out[offset] = (uint8_t) length;
		out[offset + 1] = (uint8_t) (length >> 8);
		out[offset + 2] = (uint8_t) (length >> 16);
		out[offset + 3] = (uint8_t) (length >> 24);
		offset += FRAME_PREFIX;
		memcpy(out + offset, e->enc, length);
		recs[k] = e->rec;
		recs[k].record_offset = (uint32_t) offset;
		recs[k].public_key_offset += (uint32_t) offset;
		recs[k].signature_offset += (uint32_t) offset;
		recs[k].verdict = QMEMO_ADMIT_VALID;   /* in the pool: verified at admission */
		offset += length;
	}
	BlockBodyObject *result = body_new(body, recs, (Py_ssize_t) n);
	Py_DECREF(body);
	return result;
}

static PyObject *BlockBody_ids(BlockBodyObject *self, PyObject *unused) {
	(void) unused;
	PyObject *out = PyBytes_FromStringAndSize(NULL, self->n * ID_BYTES);
	if (!out) {
		return NULL;
	}
	uint8_t *p = (uint8_t *) PyBytes_AS_STRING(out);
	for (Py_ssize_t i = 0; i < self->n; i++) {
		memcpy(p + i * ID_BYTES, self->recs[i].id, ID_BYTES);
	}
	return out;
}

static PyObject *BlockBody_merkle_root(BlockBodyObject *self, PyObject *unused) {
	(void) unused;
	uint8_t root[ID_BYTES];
	uint8_t *ids = malloc(self->n ? (size_t) self->n * ID_BYTES : 1);
	if (!ids) {
		return PyErr_NoMemory();
	}
	for (Py_ssize_t i = 0; i < self->n; i++) {
		memcpy(ids + i * ID_BYTES, self->recs[i].id, ID_BYTES);
	}
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = qmemo_admit_merkle_root(ids, (size_t) self->n, root);
	Py_END_ALLOW_THREADS
	free(ids);
	if (rc != 0) {
		return PyErr_NoMemory();
	}
	return PyBytes_FromStringAndSize((const char *) root, ID_BYTES);
}

static PyObject *BlockBody_find(BlockBodyObject *self, PyObject *id) {
	if (!exact_bytes(id, "tx_id", ID_BYTES)) {
		return NULL;
	}
	const char *key = PyBytes_AS_STRING(id);
	for (Py_ssize_t i = 0; i < self->n; i++) {
		if (memcmp(self->recs[i].id, key, ID_BYTES) == 0) {
			return PyLong_FromSsize_t(i);
		}
	}
	return PyLong_FromLong(-1);
}

static int index_ok(Py_ssize_t i, Py_ssize_t n) {
	if (i < 0 || i >= n) {
		PyErr_SetString(PyExc_IndexError, "no such transaction");
		return 0;
	}
	return 1;
}

static PyObject *BlockBody_encoding(BlockBodyObject *self, PyObject *arg) {
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	if ((i == -1 && PyErr_Occurred()) || !index_ok(i, self->n)) {
		return NULL;
	}
	return PyBytes_FromStringAndSize(PyBytes_AS_STRING(self->body) + self->recs[i].record_offset,
	                                 self->recs[i].record_length);
}

static PyObject *BlockBody_id(BlockBodyObject *self, PyObject *arg) {
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	if ((i == -1 && PyErr_Occurred()) || !index_ok(i, self->n)) {
		return NULL;
	}
	return PyBytes_FromStringAndSize((const char *) self->recs[i].id, ID_BYTES);
}

static PyObject *BlockBody_spans(BlockBodyObject *self, PyObject *arg) {
	Py_ssize_t base = PyLong_AsSsize_t(arg);
	if (base == -1 && PyErr_Occurred()) {
		return NULL;
	}
	if (base < 0 || (self->n && (uint64_t) base + self->recs[self->n - 1].record_offset +
	                                    self->recs[self->n - 1].record_length > UINT32_MAX)) {
		PyErr_SetString(PyExc_ValueError, "spans past 4 GiB: a u32 offset cannot address them");
		return NULL;
	}
	PyObject *out = PyBytes_FromStringAndSize(NULL, self->n * 8);
	if (!out) {
		return NULL;
	}
	uint8_t *p = (uint8_t *) PyBytes_AS_STRING(out);
	for (Py_ssize_t i = 0; i < self->n; i++) {
		uint32_t values[2] = {(uint32_t) (base + self->recs[i].record_offset), self->recs[i].record_length};
		for (int k = 0; k < 2; k++) {
			for (int b = 0; b < 4; b++) {
				p[i * 8 + k * 4 + b] = (uint8_t) (values[k] >> (8 * b));
			}
		}
	}
	return out;
}

/* outgoing(index, count) -> positions (u32 each) of the transactions whose recipient is not
 * of shard `index` of `count` (qmemo.core.shards): a final block's cross-shard transfers. */
static PyObject *BlockBody_outgoing(BlockBodyObject *self, PyObject *args) {
	unsigned int index, count;
	if (!PyArg_ParseTuple(args, "II", &index, &count)) {
		return NULL;
	}
	if (count < 1 || index >= count) {
		PyErr_SetString(PyExc_ValueError, "a shard index is below the shard count, and the count at least 1");
		return NULL;
	}
	uint8_t *positions = malloc(self->n ? (size_t) self->n * 4 : 1);
	if (!positions) {
		return PyErr_NoMemory();
	}
	size_t n = 0;
	const uint8_t *body = (const uint8_t *) PyBytes_AS_STRING(self->body);
	for (Py_ssize_t i = 0; i < self->n; i++) {
		const uint8_t *to = body + self->recs[i].record_offset + RECIPIENT_AT;
		uint32_t prefix = (uint32_t) to[0] | (uint32_t) to[1] << 8 | (uint32_t) to[2] << 16 | (uint32_t) to[3] << 24;
		if (prefix % count != index) {
			for (int b = 0; b < 4; b++) {
				positions[n * 4 + (size_t) b] = (uint8_t) ((uint32_t) i >> (8 * b));
			}
			n++;
		}
	}
	PyObject *out = PyBytes_FromStringAndSize((const char *) positions, (Py_ssize_t) (n * 4));
	free(positions);
	return out;
}

static PyObject *BlockBody_records(BlockBodyObject *self, PyObject *unused) {
	(void) unused;
	return PyByteArray_FromStringAndSize((const char *) self->recs, self->n * (Py_ssize_t) sizeof(qmemo_admit_record));
}

/* The Ledger type is defined below; BlockBody.verify needs its struct. */
typedef struct {
	PyObject_HEAD
	ledger l;
	int ready;
} LedgerObject;

static PyTypeObject LedgerType;

/* verify(ledger, table, part, parts): the records of this body that neither verified at
 * admission nor are in the ledger's verified set, the part-th of `parts` slices, verified
 * with the GIL released; the valid ones join the set. (checked, valid, 0, ns, []): the
 * shape of AdmitBatch.verify. */
static PyObject *BlockBody_verify(BlockBodyObject *self, PyObject *args) {
	LedgerObject *owner;
	unsigned long long table;
	Py_ssize_t part, parts;
	if (!PyArg_ParseTuple(args, "O!Knn", &LedgerType, &owner, &table, &part, &parts)) {
		return NULL;
	}
	if (!table || parts < 1 || part < 0 || part >= parts) {
		PyErr_SetString(PyExc_ValueError, "verify needs a kernel table and 0 <= part < parts");
		return NULL;
	}
	Py_ssize_t size = (self->n + parts - 1) / parts, start = part * size, end = start + size;
	if (end > self->n) {
		end = self->n;
	}
	size_t checked = 0, valid = 0;
	uint64_t ns = 0;
	block_view v = view_of(self);
	uint8_t *mask = calloc(self->n ? (size_t) self->n : 1, 1);
	if (!mask) {
		return PyErr_NoMemory();
	}
	Py_BEGIN_ALLOW_THREADS
	ledger_verified_lock(&owner->l);
	for (Py_ssize_t i = start; i < end; i++) {
		qmemo_admit_record *rec = &self->recs[i];
		if (rec->status == QMEMO_ADMIT_DECODED && rec->verdict == QMEMO_ADMIT_NOT_CHECKED &&
		        !ledger_verified_held(&owner->l, rec->id)) {
			mask[i] = 1;
			checked++;
		}
	}
	ledger_verified_unlock(&owner->l);
	if (checked) {
		qmemo_admit_verify((const qmemo_admit_table *) (uintptr_t) table, v.body, v.body_length, self->recs,
		                   (size_t) self->n, mask);
		ledger_verified_lock(&owner->l);
		for (Py_ssize_t i = start; i < end; i++) {
			if (mask[i]) {
				ns += self->recs[i].verify_ns;
				if (self->recs[i].verdict == QMEMO_ADMIT_VALID) {
					valid++;
					ledger_remember_verified_held(&owner->l, self->recs[i].id);
				}
			}
		}
		ledger_verified_unlock(&owner->l);
	}
	Py_END_ALLOW_THREADS
	free(mask);
	/* AdmitBatch.verify's shape: no hits here (the ledger's set was asked first), no samples */
	return Py_BuildValue("nnnKN", (Py_ssize_t) checked, (Py_ssize_t) valid, (Py_ssize_t) 0, (unsigned long long) ns,
	                     PyList_New(0));
}

static PyObject *BlockBody_get_count(BlockBodyObject *self, void *closure) {
	(void) closure;
	return PyLong_FromSsize_t(self->n);
}

static PyObject *BlockBody_get_body(BlockBodyObject *self, void *closure) {
	(void) closure;
	Py_INCREF(self->body);
	return self->body;
}

static Py_ssize_t BlockBody_len(BlockBodyObject *self) { return self->n; }

static PyMethodDef BlockBody_methods[] = {
	{"ids", (PyCFunction) BlockBody_ids, METH_NOARGS, "The ids laid end to end (64 bytes each)."},
	{"merkle_root", (PyCFunction) BlockBody_merkle_root, METH_NOARGS, "The Merkle root of the ids."},
	{"find", (PyCFunction) BlockBody_find, METH_O, "The position of an id, or -1."},
	{"encoding", (PyCFunction) BlockBody_encoding, METH_O, "Transaction i's canonical encoding."},
	{"id", (PyCFunction) BlockBody_id, METH_O, "Transaction i's id."},
	{"spans", (PyCFunction) BlockBody_spans, METH_O,
	 "spans(base): (u32 offset, u32 length) per transaction, where each encoding lies, offsets\n"
	 "counted from `base` bytes before the body (a block's header length: into its encoding)."},
	{"records", (PyCFunction) BlockBody_records, METH_NOARGS, "The kernel's records (a bytearray)."},
	{"outgoing", (PyCFunction) BlockBody_outgoing, METH_VARARGS,
	 "outgoing(index, count) -> u32 positions of the transactions paying another shard's accounts."},
	{"verify", (PyCFunction) BlockBody_verify, METH_VARARGS,
	 "verify(ledger, table, part, parts) -> (checked, valid, 0, ns, []): signatures not known verified."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef BlockBody_getset[] = {
	{"count", (getter) BlockBody_get_count, NULL, "transactions", NULL},
	{"body", (getter) BlockBody_get_body, NULL, "the framed transactions", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods BlockBody_as_sequence = {.sq_length = (lenfunc) BlockBody_len};

static PyTypeObject BlockBodyType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "_qmemo_ledger.BlockBody",
	.tp_basicsize = sizeof(BlockBodyObject),
	.tp_dealloc = (destructor) BlockBody_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A block's transactions: one framed buffer and the records over it.",
	.tp_methods = BlockBody_methods,
	.tp_getset = BlockBody_getset,
	.tp_as_sequence = &BlockBody_as_sequence,
};

/* decode_body(table, chain_id, body, tx_count) -> BlockBody, or None if the body does not
 * hold exactly tx_count well-formed transactions (the caller asks Block.decode why). */
static PyObject *decode_body(PyObject *module, PyObject *args) {
	(void) module;
	unsigned long long table;
	unsigned long chain_id;
	PyObject *body;
	Py_ssize_t tx_count;
	if (!PyArg_ParseTuple(args, "KkO!n", &table, &chain_id, &PyBytes_Type, &body, &tx_count)) {
		return NULL;
	}
	const uint8_t *data = (const uint8_t *) PyBytes_AS_STRING(body);
	size_t length = (size_t) PyBytes_GET_SIZE(body), count = 0;
	uint64_t detail = 0;
	if (tx_count < 0 || qmemo_admit_count(data, length, (size_t) tx_count, &count, &detail) != QMEMO_ADMIT_OK ||
	        count != (size_t) tx_count) {
		Py_RETURN_NONE;
	}
	qmemo_admit_record *recs = calloc(count ? count : 1, sizeof *recs);
	if (!recs) {
		return PyErr_NoMemory();
	}
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = qmemo_admit_batch((qmemo_admit_table *) (uintptr_t) table, data, length, (uint32_t) chain_id, count, 0,
	                       recs, count, &count, &detail);
	Py_END_ALLOW_THREADS
	if (rc != QMEMO_ADMIT_OK) {
		free(recs);
		Py_RETURN_NONE;
	}
	for (size_t i = 0; i < count; i++) {
		if (recs[i].status != QMEMO_ADMIT_DECODED) {
			free(recs);
			Py_RETURN_NONE;
		}
		recs[i].verdict = QMEMO_ADMIT_NOT_CHECKED;   /* a wrong chain id is check_form's to find */
	}
	return (PyObject *) body_new(body, recs, (Py_ssize_t) count);
}

/* --- AdmitBatch ------------------------------------------------------------------------------ */

typedef struct {
	PyObject_HEAD
	LedgerObject *owner;
	PyObject *body;
	admit_batch b;
	int prechecked;
	int committed;
} AdmitBatchObject;

static PyTypeObject AdmitBatchType;

static void AdmitBatch_dealloc(AdmitBatchObject *self) {
	if (self->owner && self->owner->ready) {
		ledger_abandon(&self->owner->l, &self->b);
	}
	Py_XDECREF(self->owner);
	Py_XDECREF(self->body);
	free(self->b.recs);
	free(self->b.status);
	free(self->b.why);
	free(self->b.candidates);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

/* verify(table, part, parts) -> (checked, valid, hits, ns, samples): the part-th slice of
 * the candidates, with the GIL released; a candidate the verified set holds is a hit. */
static PyObject *AdmitBatch_verify(AdmitBatchObject *self, PyObject *args) {
	unsigned long long table;
	Py_ssize_t part, parts;
	if (!PyArg_ParseTuple(args, "Knn", &table, &part, &parts)) {
		return NULL;
	}
	if (!table || parts < 1 || part < 0 || part >= parts) {
		PyErr_SetString(PyExc_ValueError, "verify needs a kernel table and 0 <= part < parts");
		return NULL;
	}
	admit_batch *b = &self->b;
	size_t size = (b->ncand + (size_t) parts - 1) / (size_t) parts, start = (size_t) part * size, end = start + size;
	if (end > b->ncand) {
		end = b->ncand;
	}
	if (start > end) {
		start = end;
	}
	size_t checked = 0, valid = 0, hits = 0;
	uint64_t ns = 0;
	ledger *l = &self->owner->l;
	uint8_t *mask = calloc(b->n ? b->n : 1, 1);
	if (!mask) {
		return PyErr_NoMemory();
	}
	/* Up to 16 durations, evenly spread, for the latency percentiles (the totals are exact). */
	enum { SAMPLES = 16 };
	unsigned long long samples[SAMPLES];
	int nsamples = 0;
	Py_BEGIN_ALLOW_THREADS
	ledger_verified_lock(l);
	for (size_t k = start; k < end; k++) {
		qmemo_admit_record *rec = &b->recs[b->candidates[k]];
		if (ledger_verified_held(l, rec->id)) {
			rec->verdict = QMEMO_ADMIT_VALID;
			hits++;
		} else {
			mask[b->candidates[k]] = 1;
			checked++;
		}
	}
	ledger_verified_unlock(l);
	if (checked) {
		qmemo_admit_verify((const qmemo_admit_table *) (uintptr_t) table, b->body, b->body_length, b->recs, b->n,
		                   mask);
		size_t seen = 0, step = checked / SAMPLES + 1;
		ledger_verified_lock(l);
		for (size_t k = start; k < end; k++) {
			qmemo_admit_record *rec = &b->recs[b->candidates[k]];
			if (!mask[b->candidates[k]]) {
				continue;
			}
			ns += rec->verify_ns;
			if (seen++ % step == 0 && nsamples < SAMPLES) {
				samples[nsamples++] = rec->verify_ns;
			}
			if (rec->verdict == QMEMO_ADMIT_VALID) {
				valid++;
				ledger_remember_verified_held(l, rec->id);
			}
		}
		ledger_verified_unlock(l);
	}
	Py_END_ALLOW_THREADS
	free(mask);
	PyObject *list = PyList_New(nsamples);
	if (!list) {
		return NULL;
	}
	for (int k = 0; k < nsamples; k++) {
		PyList_SET_ITEM(list, k, PyLong_FromUnsignedLongLong(samples[k]));
	}
	return Py_BuildValue("nnnKN", (Py_ssize_t) checked, (Py_ssize_t) valid, (Py_ssize_t) hits,
	                     (unsigned long long) ns, list);
}

static PyObject *AdmitBatch_statuses(AdmitBatchObject *self, PyObject *unused) {
	(void) unused;
	return PyBytes_FromStringAndSize((const char *) self->b.status, (Py_ssize_t) self->b.n);
}

/* rejections() -> [(position, code, a, b)] in input order */
static PyObject *AdmitBatch_rejections(AdmitBatchObject *self, PyObject *unused) {
	(void) unused;
	PyObject *list = PyList_New(0);
	if (!list) {
		return NULL;
	}
	for (size_t i = 0; i < self->b.n; i++) {
		if (self->b.status[i] != S_REJECTED) {
			continue;
		}
		const refusal *why = &self->b.why[i];
		PyObject *a = int128(why->a), *bb = int128(why->b);
		PyObject *item = (a && bb) ? Py_BuildValue("nBNN", (Py_ssize_t) i, why->code, a, bb) : NULL;
		if (!item || PyList_Append(list, item) != 0) {
			Py_XDECREF(item);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(item);
	}
	return list;
}

static PyObject *AdmitBatch_tx_id(AdmitBatchObject *self, PyObject *arg) {
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	if ((i == -1 && PyErr_Occurred()) || !index_ok(i, (Py_ssize_t) self->b.n)) {
		return NULL;
	}
	if (self->b.recs[i].status != QMEMO_ADMIT_DECODED) {
		Py_RETURN_NONE;
	}
	return PyBytes_FromStringAndSize((const char *) self->b.recs[i].id, ID_BYTES);
}

static PyObject *AdmitBatch_encoding(AdmitBatchObject *self, PyObject *arg) {
	Py_ssize_t i = PyLong_AsSsize_t(arg);
	if ((i == -1 && PyErr_Occurred()) || !index_ok(i, (Py_ssize_t) self->b.n)) {
		return NULL;
	}
	return PyBytes_FromStringAndSize((const char *) self->b.body + self->b.recs[i].record_offset,
	                                 self->b.recs[i].record_length);
}

/* counts() -> (accepted, duplicate, {code name: rejected}) */
static PyObject *AdmitBatch_counts(AdmitBatchObject *self, PyObject *unused) {
	(void) unused;
	size_t accepted = 0, duplicate = 0, by_code[C_COUNT] = {0};
	for (size_t i = 0; i < self->b.n; i++) {
		switch (self->b.status[i]) {
		case S_ACCEPTED: accepted++; break;
		case S_DUPLICATE: duplicate++; break;
		case S_REJECTED: by_code[self->b.why[i].code]++; break;
		default: break;
		}
	}
	PyObject *rejected = PyDict_New();
	if (!rejected) {
		return NULL;
	}
	for (int c = 0; c < C_COUNT; c++) {
		if (!by_code[c]) {
			continue;
		}
		PyObject *key = PyUnicode_FromString(CODE_NAMES[c]);
		PyObject *old = key ? PyDict_GetItemWithError(rejected, key) : NULL;
		size_t before = old ? PyLong_AsSize_t(old) : 0;
		PyObject *value = key ? PyLong_FromSize_t(before + by_code[c]) : NULL;
		if (!value || PyDict_SetItem(rejected, key, value) != 0) {
			Py_XDECREF(key);
			Py_XDECREF(value);
			Py_DECREF(rejected);
			return NULL;
		}
		Py_DECREF(key);
		Py_DECREF(value);
	}
	return Py_BuildValue("nnN", (Py_ssize_t) accepted, (Py_ssize_t) duplicate, rejected);
}

/* The POST /txs answer (qmemo.net.wire.encode_tx_results's document, byte for byte):
 * {"results":[{"id":hex,"status":s}|{..., "code":c,"detail":d}],"accepted":A,"duplicate":D,"rejected":R}.
 * `details` maps each rejected position to its sentence, already JSON-encoded. */
static PyObject *AdmitBatch_answer_json(AdmitBatchObject *self, PyObject *details) {
	if (!PyDict_Check(details)) {
		PyErr_SetString(PyExc_TypeError, "details must be a dict");
		return NULL;
	}
	admit_batch *b = &self->b;
	size_t size = 64;
	for (size_t i = 0; i < b->n; i++) {
		size += 160;
		if (b->status[i] == S_REJECTED) {
			PyObject *key = PyLong_FromSize_t(i);
			PyObject *detail = key ? PyDict_GetItemWithError(details, key) : NULL;
			Py_XDECREF(key);
			if (!detail || !PyBytes_Check(detail)) {
				if (!PyErr_Occurred()) {
					PyErr_Format(PyExc_ValueError, "no JSON detail for rejected transaction %zu", i);
				}
				return NULL;
			}
			size += (size_t) PyBytes_GET_SIZE(detail) + 64;
		}
	}
	char *out = malloc(size), *p = out;
	if (!out) {
		return PyErr_NoMemory();
	}
	static const char hex[] = "0123456789abcdef";
	static const char *const status_name[] = {"rejected", "accepted", "duplicate", "rejected"};
	size_t counts[4] = {0};
	p += sprintf(p, "{\"results\":[");
	for (size_t i = 0; i < b->n; i++) {
		const qmemo_admit_record *rec = &b->recs[i];
		uint8_t s = b->status[i];
		counts[s]++;
		if (i) {
			*p++ = ',';
		}
		if (rec->status == QMEMO_ADMIT_DECODED) {
			p += sprintf(p, "{\"id\":\"");
			for (int k = 0; k < ID_BYTES; k++) {
				*p++ = hex[rec->id[k] >> 4];
				*p++ = hex[rec->id[k] & 15];
			}
			*p++ = '"';
		} else {
			p += sprintf(p, "{\"id\":null");
		}
		p += sprintf(p, ",\"status\":\"%s\"", status_name[s]);
		if (s == S_REJECTED) {
			PyObject *key = PyLong_FromSize_t(i);
			PyObject *detail = PyDict_GetItemWithError(details, key);
			Py_DECREF(key);
			p += sprintf(p, ",\"code\":\"%s\",\"detail\":", CODE_NAMES[b->why[i].code]);
			memcpy(p, PyBytes_AS_STRING(detail), (size_t) PyBytes_GET_SIZE(detail));
			p += PyBytes_GET_SIZE(detail);
		}
		*p++ = '}';
	}
	p += sprintf(p, "],\"accepted\":%zu,\"duplicate\":%zu,\"rejected\":%zu}", counts[S_ACCEPTED],
	             counts[S_DUPLICATE], counts[S_REJECTED] + counts[S_UNDECIDED]);
	PyObject *result = PyBytes_FromStringAndSize(out, p - out);
	free(out);
	return result;
}

static PyObject *AdmitBatch_get_count(AdmitBatchObject *self, void *closure) {
	(void) closure;
	return PyLong_FromSize_t(self->b.n);
}

static PyObject *AdmitBatch_get_candidates(AdmitBatchObject *self, void *closure) {
	(void) closure;
	return PyLong_FromSize_t(self->b.ncand);
}

static Py_ssize_t AdmitBatch_len(AdmitBatchObject *self) { return (Py_ssize_t) self->b.n; }

static PyMethodDef AdmitBatch_methods[] = {
	{"verify", (PyCFunction) AdmitBatch_verify, METH_VARARGS,
	 "verify(table, part, parts) -> (checked, valid, hits, ns, samples), the GIL released."},
	{"statuses", (PyCFunction) AdmitBatch_statuses, METH_NOARGS, "One status byte per transaction."},
	{"rejections", (PyCFunction) AdmitBatch_rejections, METH_NOARGS, "[(position, code, a, b)]"},
	{"tx_id", (PyCFunction) AdmitBatch_tx_id, METH_O, "Transaction i's id (None if it did not decode)."},
	{"encoding", (PyCFunction) AdmitBatch_encoding, METH_O, "Transaction i's bytes."},
	{"counts", (PyCFunction) AdmitBatch_counts, METH_NOARGS, "(accepted, duplicate, {code: rejected})"},
	{"answer_json", (PyCFunction) AdmitBatch_answer_json, METH_O, "The POST /txs answer."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef AdmitBatch_getset[] = {
	{"count", (getter) AdmitBatch_get_count, NULL, "transactions", NULL},
	{"candidates", (getter) AdmitBatch_get_candidates, NULL, "transactions sent to verification", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods AdmitBatch_as_sequence = {.sq_length = (lenfunc) AdmitBatch_len};

static PyTypeObject AdmitBatchType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "_qmemo_ledger.AdmitBatch",
	.tp_basicsize = sizeof(AdmitBatchObject),
	.tp_dealloc = (destructor) AdmitBatch_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One batch between its checks and its commit.",
	.tp_methods = AdmitBatch_methods,
	.tp_getset = AdmitBatch_getset,
	.tp_as_sequence = &AdmitBatch_as_sequence,
};

/* --- Ledger ------------------------------------------------------------------------------------- */

static int Ledger_init(LedgerObject *self, PyObject *args, PyObject *kwargs) {
	static char *names[] = {"chain_id", "min_fee", "max_txs", "max_bytes", "max_per_sender", "held_window",
	                        "held_max", "held_per_sender", "committed_memory", "evicted_memory",
	                        "verified_memory", "relay_max_txs", "relay_max_bytes", NULL};
	ledger_config c;
	unsigned long chain_id;
	unsigned long long min_fee, max_txs, max_bytes, held_window, relay_max_txs = 0, relay_max_bytes = 0;
	unsigned int max_per_sender, held_max, held_per_sender, committed, evicted, verified;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "kKKKIKIIIII|KK", names, &chain_id, &min_fee, &max_txs, &max_bytes,
	                                 &max_per_sender, &held_window, &held_max, &held_per_sender, &committed,
	                                 &evicted, &verified, &relay_max_txs, &relay_max_bytes)) {
		return -1;
	}
	if (self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "a Ledger is initialised once");
		return -1;
	}
	c.chain_id = (uint32_t) chain_id;
	c.min_fee = min_fee;
	c.max_txs = max_txs;
	c.max_bytes = max_bytes;
	c.relay_max_txs = relay_max_txs;     /* below max_*: max_* (ledger_init) */
	c.relay_max_bytes = relay_max_bytes;
	c.max_per_sender = max_per_sender;
	c.held_window = held_window;
	c.held_max = held_max;
	c.held_per_sender = held_per_sender;
	c.committed_memory = committed;
	c.evicted_memory = evicted;
	c.verified_memory = verified;
	if (ledger_init(&self->l, &c) != 0) {
		PyErr_NoMemory();
		return -1;
	}
	self->ready = 1;
	return 0;
}

static void Ledger_dealloc(LedgerObject *self) {
	if (self->ready) {
		ledger_free(&self->l);
	}
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static int ready(LedgerObject *self) {
	if (!self->ready) {
		PyErr_SetString(PyExc_RuntimeError, "the Ledger was not initialised");
		return 0;
	}
	return 1;
}

static PyObject *Ledger_set_scheme(LedgerObject *self, PyObject *args) {
	unsigned int scheme_id;
	int allowed;
	unsigned long long pk, smin, smax;
	if (!ready(self) || !PyArg_ParseTuple(args, "IpKKK", &scheme_id, &allowed, &pk, &smin, &smax)) {
		return NULL;
	}
	if (scheme_id > 255 || smin < 1 || smin > smax) {
		PyErr_SetString(PyExc_ValueError, "a scheme id is a byte, and 1 <= min_signature_bytes <= max");
		return NULL;
	}
	scheme_rule *rule = &self->l.schemes[scheme_id];
	rule->known = 1;
	rule->allowed = (uint8_t) allowed;
	rule->public_key_bytes = pk;
	rule->min_signature_bytes = smin;
	rule->max_signature_bytes = smax;
	Py_RETURN_NONE;
}

/* set_shard(index, count): this ledger's chain is shard `index` of `count` (qmemo.core.shards). */
static PyObject *Ledger_set_shard(LedgerObject *self, PyObject *args) {
	unsigned int index, count;
	if (!ready(self) || !PyArg_ParseTuple(args, "II", &index, &count)) {
		return NULL;
	}
	if (count < 1 || index >= count) {
		PyErr_SetString(PyExc_ValueError, "a shard index is below the shard count, and the count at least 1");
		return NULL;
	}
	self->l.shard_index = index;
	self->l.shard_count = count;
	Py_RETURN_NONE;
}

static PyObject *Ledger_set_account(LedgerObject *self, PyObject *args) {
	PyObject *addr;
	unsigned long long balance, nonce;
	if (!ready(self) || !PyArg_ParseTuple(args, "OKK", &addr, &balance, &nonce) ||
	        !exact_bytes(addr, "address", ADDR_BYTES)) {
		return NULL;
	}
	if (ledger_set_account(&self->l, (const uint8_t *) PyBytes_AS_STRING(addr), balance, nonce) != 0) {
		return PyErr_NoMemory();
	}
	Py_RETURN_NONE;
}

static PyObject *Ledger_account(LedgerObject *self, PyObject *addr) {
	if (!ready(self) || !exact_bytes(addr, "address", ADDR_BYTES)) {
		return NULL;
	}
	const account *a = ledger_account(&self->l, (const uint8_t *) PyBytes_AS_STRING(addr));
	if (!a) {
		Py_RETURN_NONE;
	}
	return Py_BuildValue("KK", (unsigned long long) a->balance, (unsigned long long) a->nonce);
}

/* accounts() -> bytes: every account as (address, u64 balance, u64 nonce), in no order. */
static PyObject *Ledger_accounts(LedgerObject *self, PyObject *unused) {
	(void) unused;
	if (!ready(self)) {
		return NULL;
	}
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t) self->l.naccounts * CHANGED_BYTES);
	if (!out) {
		return NULL;
	}
	uint8_t *p = (uint8_t *) PyBytes_AS_STRING(out);
	for (uint32_t k = 0; k < self->l.naccounts; k++, p += CHANGED_BYTES) {
		const account *a = &self->l.accounts[k];
		memcpy(p, a->addr, ADDR_BYTES);
		for (int b = 0; b < 8; b++) {
			p[ADDR_BYTES + b] = (uint8_t) (a->balance >> (8 * b));
			p[ADDR_BYTES + 8 + b] = (uint8_t) (a->nonce >> (8 * b));
		}
	}
	return out;
}

static PyObject *Ledger_pending_nonce(LedgerObject *self, PyObject *addr) {
	if (!ready(self) || !exact_bytes(addr, "address", ADDR_BYTES)) {
		return NULL;
	}
	return PyLong_FromUnsignedLongLong(ledger_pending_nonce(&self->l, (const uint8_t *) PyBytes_AS_STRING(addr)));
}

/* sender(address) -> (pending, pending_cost, held, held_cost) */
static PyObject *Ledger_sender(LedgerObject *self, PyObject *addr) {
	if (!ready(self) || !exact_bytes(addr, "address", ADDR_BYTES)) {
		return NULL;
	}
	const sender_q *q = ledger_sender(&self->l, (const uint8_t *) PyBytes_AS_STRING(addr));
	if (!q) {
		return Py_BuildValue("iiii", 0, 0, 0, 0);
	}
	return Py_BuildValue("ININ", q->npending, u128_long(q->pending_cost), q->nheld, u128_long(q->held_cost));
}

/* status(tx_id) -> (kind, reason): 0 unknown, 1 pending (or in flight), 2 held, 3 evicted (reason). */
static PyObject *Ledger_status(LedgerObject *self, PyObject *id) {
	if (!ready(self) || !exact_bytes(id, "tx_id", ID_BYTES)) {
		return NULL;
	}
	const uint8_t *key = (const uint8_t *) PyBytes_AS_STRING(id);
	uint32_t at = dmap_find(&self->l.entry_index, key);
	uint8_t reason = 0;
	if (at != DMAP_NONE) {
		return Py_BuildValue("ii", self->l.entries[at].state == E_PENDING ? 1 : 2, 0);
	}
	if (idring_get(&self->l.inflight, key, NULL)) {
		return Py_BuildValue("ii", 1, 0);
	}
	if (idring_get(&self->l.evicted, key, &reason)) {
		return Py_BuildValue("ii", 3, reason);
	}
	return Py_BuildValue("ii", 0, 0);
}

/* sizes() -> (pending, held, pending_bytes, accounts, verified, committed, evicted) */
static PyObject *Ledger_sizes(LedgerObject *self, PyObject *unused) {
	(void) unused;
	if (!ready(self)) {
		return NULL;
	}
	ledger *l = &self->l;
	pthread_mutex_lock(&l->verified_lock);
	uint32_t verified = idring_count(&l->verified);
	pthread_mutex_unlock(&l->verified_lock);
	return Py_BuildValue("IIKIIII", l->npending, l->nheld, (unsigned long long) l->pending_bytes, l->naccounts,
	                     verified, idring_count(&l->committed), idring_count(&l->evicted));
}

static PyObject *evictions_list(const evictions *e) {
	PyObject *list = PyList_New((Py_ssize_t) e->n);
	if (!list) {
		return NULL;
	}
	for (size_t k = 0; k < e->n; k++) {
		PyObject *item = Py_BuildValue("y#B", e->items[k].id, (Py_ssize_t) ID_BYTES, e->items[k].reason);
		if (!item) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t) k, item);
	}
	return list;
}

/* Frames of pool entries ([u32 length][encoding] each). */
static PyObject *entry_frames(const ledger *l, const uint32_t *at, size_t n) {
	size_t size = 0;
	for (size_t k = 0; k < n; k++) {
		size += FRAME_PREFIX + l->entries[at[k]].rec.record_length;
	}
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t) size);
	if (!out) {
		return NULL;
	}
	uint8_t *p = (uint8_t *) PyBytes_AS_STRING(out);
	for (size_t k = 0; k < n; k++) {
		const entry *e = &l->entries[at[k]];
		uint32_t length = e->rec.record_length;
		for (int b = 0; b < 4; b++) {
			*p++ = (uint8_t) (length >> (8 * b));
		}
		memcpy(p, e->enc, length);
		p += length;
	}
	return out;
}

/* admit(table, body, max_count, relayed=False) -> AdmitBatch: framed, decoded and hashed by
 * the kernel (the GIL released); nothing in the ledger changes. `relayed`: a peer's relay,
 * judged against the relay caps. FramingError(rc, index, detail) if the framing is broken. */
static PyObject *Ledger_admit(LedgerObject *self, PyObject *args) {
	unsigned long long table;
	PyObject *body;
	Py_ssize_t max_count;
	int relayed = 0;
	if (!ready(self) || !PyArg_ParseTuple(args, "KO!n|p", &table, &PyBytes_Type, &body, &max_count, &relayed)) {
		return NULL;
	}
	const uint8_t *data = (const uint8_t *) PyBytes_AS_STRING(body);
	size_t length = (size_t) PyBytes_GET_SIZE(body), count = 0;
	uint64_t detail = 0;
	size_t limit = max_count < 0 ? 0 : (size_t) max_count;
	int rc = qmemo_admit_count(data, length, limit, &count, &detail);
	AdmitBatchObject *batch = NULL;
	if (rc == QMEMO_ADMIT_OK) {
		batch = PyObject_New(AdmitBatchObject, &AdmitBatchType);
		if (!batch) {
			return NULL;
		}
		memset(&batch->b, 0, sizeof batch->b);
		batch->prechecked = 0;
		batch->committed = 0;
		Py_INCREF(self);
		batch->owner = self;
		Py_INCREF(body);
		batch->body = body;
		admit_batch *b = &batch->b;
		b->body = data;
		b->body_length = length;
		b->n = count;
		b->relayed = relayed;
		b->recs = calloc(count ? count : 1, sizeof *b->recs);
		b->status = calloc(count ? count : 1, 1);
		b->why = calloc(count ? count : 1, sizeof *b->why);
		b->candidates = calloc(count ? count : 1, sizeof *b->candidates);
		if (!b->recs || !b->status || !b->why || !b->candidates) {
			Py_DECREF(batch);
			return PyErr_NoMemory();
		}
		Py_BEGIN_ALLOW_THREADS
		rc = qmemo_admit_batch((qmemo_admit_table *) (uintptr_t) table, data, length, self->l.chain_id, count, 0,
		                       b->recs, count, &count, &detail);
		Py_END_ALLOW_THREADS
	}
	if (rc != QMEMO_ADMIT_OK) {
		Py_XDECREF(batch);
		PyObject *error = Py_BuildValue("inK", rc, (Py_ssize_t) count, (unsigned long long) detail);
		if (error) {
			PyErr_SetObject(FramingError, error);
			Py_DECREF(error);
		}
		return NULL;
	}
	return (PyObject *) batch;
}

/* precheck(batch): duplicates, form, nonce and balance; the survivors become candidates
 * (in flight until commit or abandon). Once per batch. */
static PyObject *Ledger_precheck(LedgerObject *self, PyObject *arg) {
	if (!ready(self) || !PyObject_TypeCheck(arg, &AdmitBatchType)) {
		PyErr_SetString(PyExc_TypeError, "precheck takes an AdmitBatch");
		return NULL;
	}
	AdmitBatchObject *batch = (AdmitBatchObject *) arg;
	if (batch->owner != self || batch->prechecked) {
		PyErr_SetString(PyExc_ValueError, "a batch is checked once, by the ledger that decoded it");
		return NULL;
	}
	batch->prechecked = 1;
	if (ledger_precheck(&self->l, &batch->b) != 0) {
		ledger_abandon(&self->l, &batch->b);
		return PyErr_NoMemory();
	}
	Py_RETURN_NONE;
}

/* commit(batch, now, relay) -> (journal_frames, journal_count, relay_frames, relay_count, evictions) */
static PyObject *Ledger_commit(LedgerObject *self, PyObject *args) {
	AdmitBatchObject *batch;
	double now;
	int relay;
	if (!ready(self) || !PyArg_ParseTuple(args, "O!dp", &AdmitBatchType, &batch, &now, &relay)) {
		return NULL;
	}
	if (batch->owner != self || !batch->prechecked || batch->committed) {
		PyErr_SetString(PyExc_ValueError, "a batch is committed once, after its checks, by the ledger that checked it");
		return NULL;
	}
	admit_batch *b = &batch->b;
	uint32_t *journal = malloc(b->n ? b->n * sizeof(uint32_t) : 1);
	uint32_t *relay_entries = NULL;
	size_t njournal = 0, nrelay = 0, relay_cap = 0;
	evictions ev = {0};
	if (!journal) {
		return PyErr_NoMemory();
	}
	int rc = ledger_commit(&self->l, b, now, relay, journal, &njournal, &relay_entries, &nrelay, &relay_cap, &ev);
	batch->committed = 1;
	PyObject *result = NULL;
	if (rc != 0) {
		PyErr_NoMemory();
		goto done;
	}
	/* the journal's frames, cut from the body: the body itself when all were accepted */
	PyObject *frames;
	if (njournal == b->n) {
		frames = batch->body;
		Py_INCREF(frames);
	} else {
		size_t size = 0;
		for (size_t k = 0; k < njournal; k++) {
			size += FRAME_PREFIX + b->recs[journal[k]].record_length;
		}
		frames = PyBytes_FromStringAndSize(NULL, (Py_ssize_t) size);
		if (!frames) {
			goto done;
		}
		uint8_t *p = (uint8_t *) PyBytes_AS_STRING(frames);
		for (size_t k = 0; k < njournal; k++) {
			const qmemo_admit_record *rec = &b->recs[journal[k]];
			memcpy(p, b->body + rec->record_offset - FRAME_PREFIX, FRAME_PREFIX + rec->record_length);
			p += FRAME_PREFIX + rec->record_length;
		}
	}
	PyObject *relayed = entry_frames(&self->l, relay_entries, nrelay);
	PyObject *evicted = evictions_list(&ev);
	if (relayed && evicted) {
		result = Py_BuildValue("NnNnN", frames, (Py_ssize_t) njournal, relayed, (Py_ssize_t) nrelay, evicted);
	} else {
		Py_DECREF(frames);
		Py_XDECREF(relayed);
		Py_XDECREF(evicted);
	}
done:
	free(journal);
	free(relay_entries);
	free(ev.items);
	return result;
}

static PyObject *Ledger_abandon(LedgerObject *self, PyObject *arg) {
	if (!ready(self) || !PyObject_TypeCheck(arg, &AdmitBatchType)) {
		PyErr_SetString(PyExc_TypeError, "abandon takes an AdmitBatch");
		return NULL;
	}
	AdmitBatchObject *batch = (AdmitBatchObject *) arg;
	if (batch->owner == self) {
		ledger_abandon(&self->l, &batch->b);
		batch->committed = 1;
	}
	Py_RETURN_NONE;
}

static PyObject *Ledger_select(LedgerObject *self, PyObject *arg) {
	Py_ssize_t max_count = PyLong_AsSsize_t(arg);
	if (!ready(self) || (max_count == -1 && PyErr_Occurred())) {
		return NULL;
	}
	size_t limit = max_count < 0 ? 0 : (size_t) max_count;
	if (limit > self->l.npending) {
		limit = self->l.npending;
	}
	uint32_t *at = malloc(limit ? limit * sizeof(uint32_t) : 1);
	if (!at) {
		return PyErr_NoMemory();
	}
	size_t n = ledger_select(&self->l, limit, at);
	PyObject *body = (PyObject *) body_from_entries(&self->l, at, n);
	free(at);
	return body;
}

/* rebuild(ids) -> BlockBody from the pending pool, or None if one is not pending here. */
static PyObject *Ledger_rebuild(LedgerObject *self, PyObject *ids) {
	if (!ready(self) || !exact_bytes(ids, "ids", -1)) {
		return NULL;
	}
	Py_ssize_t size = PyBytes_GET_SIZE(ids);
	if (size % ID_BYTES) {
		PyErr_SetString(PyExc_ValueError, "ids must be whole 64-byte ids");
		return NULL;
	}
	size_t n = (size_t) size / ID_BYTES;
	uint32_t *at = malloc(n ? n * sizeof(uint32_t) : 1);
	if (!at) {
		return PyErr_NoMemory();
	}
	const uint8_t *p = (const uint8_t *) PyBytes_AS_STRING(ids);
	for (size_t k = 0; k < n; k++) {
		if (!ledger_find_pending(&self->l, p + k * ID_BYTES, &at[k])) {
			free(at);
			Py_RETURN_NONE;
		}
	}
	PyObject *body = (PyObject *) body_from_entries(&self->l, at, n);
	free(at);
	return body;
}

/* apply(body, tx_count, merkle_root, max_block_txs, producer|None, table[, credits]) -> (changed, undo, fees);
 * BlockRefused(code, position, a, b) and nothing changed if a rule is broken. `credits`:
 * the cross-shard receipts the block credits, (address, u64 amount) each, already checked. */
static PyObject *Ledger_apply(LedgerObject *self, PyObject *args) {
	BlockBodyObject *body;
	unsigned long tx_count, max_block_txs;
	PyObject *root, *producer, *credits = NULL;
	unsigned long long table;
	if (!ready(self) || !PyArg_ParseTuple(args, "O!kOkOK|O", &BlockBodyType, &body, &tx_count, &root, &max_block_txs,
	                                      &producer, &table, &credits) ||
	        !exact_bytes(root, "merkle_root", ID_BYTES) ||
	        (producer != Py_None && !exact_bytes(producer, "producer", ADDR_BYTES)) ||
	        (credits && !exact_bytes(credits, "credits", -1))) {
		return NULL;
	}
	if (credits && PyBytes_GET_SIZE(credits) % CREDIT_BYTES) {
		PyErr_SetString(PyExc_ValueError, "credits are whole (address, u64 amount) records");
		return NULL;
	}
	block_view v = view_of(body);
	apply_result r;
	int rc = ledger_apply(&self->l, &v, (uint32_t) tx_count, (const uint8_t *) PyBytes_AS_STRING(root),
	                      (uint32_t) max_block_txs,
	                      producer == Py_None ? NULL : (const uint8_t *) PyBytes_AS_STRING(producer),
	                      (const qmemo_admit_table *) (uintptr_t) table,
	                      credits ? (const uint8_t *) PyBytes_AS_STRING(credits) : NULL,
	                      credits ? (size_t) PyBytes_GET_SIZE(credits) / CREDIT_BYTES : 0, &r);
	if (rc == -2) {
		PyErr_SetString(PyExc_OverflowError, "a balance past 2^64 after this block: the genesis caps the supply "
		                                     "below it, so this ledger is inconsistent (nothing was changed)");
		return NULL;
	}
	if (rc < 0) {
		return PyErr_NoMemory();
	}
	if (rc == 1) {
		PyObject *a = int128(r.why.a), *b = int128(r.why.b);
		PyObject *error = (a && b) ? Py_BuildValue("BnNN", r.code,
		                                           r.position == SIZE_MAX ? (Py_ssize_t) -1 : (Py_ssize_t) r.position,
		                                           a, b) : NULL;
		if (error) {
			PyErr_SetObject(BlockRefused, error);
			Py_DECREF(error);
		}
		return NULL;
	}
	PyObject *result = Py_BuildValue("y#y#N", r.changed, (Py_ssize_t) (r.nchanged * CHANGED_BYTES), r.undo,
	                                 (Py_ssize_t) (r.nundo * UNDO_BYTES), u128_long(r.fees));
	apply_result_free(&r);
	return result;
}

static PyObject *Ledger_undo(LedgerObject *self, PyObject *undo) {
	if (!ready(self) || !exact_bytes(undo, "undo", -1)) {
		return NULL;
	}
	if (PyBytes_GET_SIZE(undo) % UNDO_BYTES) {
		PyErr_SetString(PyExc_ValueError, "an undo record is whole entries");
		return NULL;
	}
	if (ledger_undo(&self->l, (const uint8_t *) PyBytes_AS_STRING(undo), (size_t) PyBytes_GET_SIZE(undo) / UNDO_BYTES)) {
		return PyErr_NoMemory();
	}
	Py_RETURN_NONE;
}

/* block_applied(body, now) -> (evictions, relay_frames, relay_count) */
static PyObject *Ledger_block_applied(LedgerObject *self, PyObject *args) {
	BlockBodyObject *body;
	double now;
	if (!ready(self) || !PyArg_ParseTuple(args, "O!d", &BlockBodyType, &body, &now)) {
		return NULL;
	}
	block_view v = view_of(body);
	evictions ev = {0};
	uint32_t *relay_entries = NULL;
	size_t nrelay = 0, relay_cap = 0;
	PyObject *result = NULL;
	if (ledger_block_applied(&self->l, &v, now, &ev, &relay_entries, &nrelay, &relay_cap) != 0) {
		PyErr_NoMemory();
	} else {
		PyObject *list = evictions_list(&ev), *frames = entry_frames(&self->l, relay_entries, nrelay);
		if (list && frames) {
			result = Py_BuildValue("NNn", list, frames, (Py_ssize_t) nrelay);
		} else {
			Py_XDECREF(list);
			Py_XDECREF(frames);
		}
	}
	free(ev.items);
	free(relay_entries);
	return result;
}

static PyObject *Ledger_blocks_undone(LedgerObject *self, PyObject *bodies) {
	if (!ready(self) || !PyList_Check(bodies)) {
		PyErr_SetString(PyExc_TypeError, "blocks_undone takes a list of BlockBody");
		return NULL;
	}
	Py_ssize_t n = PyList_GET_SIZE(bodies);
	block_view *views = malloc(n ? (size_t) n * sizeof *views : 1);
	if (!views) {
		return PyErr_NoMemory();
	}
	for (Py_ssize_t k = 0; k < n; k++) {
		PyObject *item = PyList_GET_ITEM(bodies, k);
		if (!PyObject_TypeCheck(item, &BlockBodyType)) {
			free(views);
			PyErr_SetString(PyExc_TypeError, "blocks_undone takes a list of BlockBody");
			return NULL;
		}
		views[k] = view_of((BlockBodyObject *) item);
	}
	evictions ev = {0};
	PyObject *result = NULL;
	if (ledger_blocks_undone(&self->l, views, (size_t) n, &ev) != 0) {
		PyErr_NoMemory();
	} else {
		result = evictions_list(&ev);
	}
	free(views);
	free(ev.items);
	return result;
}

static PyObject *Ledger_expire_held(LedgerObject *self, PyObject *arg) {
	double older_than = PyFloat_AsDouble(arg);
	if (!ready(self) || (older_than == -1.0 && PyErr_Occurred())) {
		return NULL;
	}
	evictions ev = {0};
	PyObject *result = NULL;
	if (ledger_expire_held(&self->l, older_than, &ev) != 0) {
		PyErr_NoMemory();
	} else {
		result = evictions_list(&ev);
	}
	free(ev.items);
	return result;
}

/* unsettled() -> (frames, count): the pending pool in arrival order, then each sender's held ones. */
static PyObject *Ledger_unsettled(LedgerObject *self, PyObject *unused) {
	(void) unused;
	if (!ready(self)) {
		return NULL;
	}
	ledger *l = &self->l;
	size_t total = (size_t) l->npending + l->nheld;
	uint32_t *at = malloc(total ? total * sizeof(uint32_t) : 1);
	if (!at) {
		return PyErr_NoMemory();
	}
	size_t n = ledger_select(l, l->npending, at);
	for (uint32_t s = 0; s < l->nsenders; s++) {
		for (uint32_t k = 0; k < l->senders[s].nheld; k++) {
			at[n++] = l->senders[s].held[k];
		}
	}
	PyObject *frames = entry_frames(l, at, n);
	free(at);
	return frames ? Py_BuildValue("Nn", frames, (Py_ssize_t) n) : NULL;
}

static PyObject *Ledger_encoding(LedgerObject *self, PyObject *id) {
	if (!ready(self) || !exact_bytes(id, "tx_id", ID_BYTES)) {
		return NULL;
	}
	uint32_t at = dmap_find(&self->l.entry_index, (const uint8_t *) PyBytes_AS_STRING(id));
	if (at == DMAP_NONE) {
		Py_RETURN_NONE;
	}
	const entry *e = &self->l.entries[at];
	return PyBytes_FromStringAndSize((const char *) e->enc, e->rec.record_length);
}

static PyObject *Ledger_is_verified(LedgerObject *self, PyObject *id) {
	if (!ready(self) || !exact_bytes(id, "tx_id", ID_BYTES)) {
		return NULL;
	}
	return PyBool_FromLong(ledger_verified(&self->l, (const uint8_t *) PyBytes_AS_STRING(id)));
}

static PyObject *Ledger_remember_verified(LedgerObject *self, PyObject *ids) {
	if (!ready(self) || !exact_bytes(ids, "ids", -1)) {
		return NULL;
	}
	if (PyBytes_GET_SIZE(ids) % ID_BYTES) {
		PyErr_SetString(PyExc_ValueError, "ids must be whole 64-byte ids");
		return NULL;
	}
	if (ledger_remember_verified(&self->l, (const uint8_t *) PyBytes_AS_STRING(ids),
	                             (size_t) PyBytes_GET_SIZE(ids) / ID_BYTES, ID_BYTES) != 0) {
		return PyErr_NoMemory();
	}
	Py_RETURN_NONE;
}

/* unverified(body) -> how many of its signatures neither verified nor are in the verified set */
static PyObject *Ledger_unverified(LedgerObject *self, PyObject *arg) {
	if (!ready(self) || !PyObject_TypeCheck(arg, &BlockBodyType)) {
		PyErr_SetString(PyExc_TypeError, "unverified takes a BlockBody");
		return NULL;
	}
	BlockBodyObject *body = (BlockBodyObject *) arg;
	Py_ssize_t missing = 0;
	for (Py_ssize_t i = 0; i < body->n; i++) {
		if (body->recs[i].verdict != QMEMO_ADMIT_VALID && !ledger_verified(&self->l, body->recs[i].id)) {
			missing++;
		}
	}
	return PyLong_FromSsize_t(missing);
}

static Py_ssize_t Ledger_len(LedgerObject *self) { return self->ready ? (Py_ssize_t) self->l.npending : 0; }

static PyMethodDef Ledger_methods[] = {
	{"set_scheme", (PyCFunction) Ledger_set_scheme, METH_VARARGS,
	 "set_scheme(id, allowed, public_key_bytes, min_signature_bytes, max_signature_bytes)"},
	{"set_shard", (PyCFunction) Ledger_set_shard, METH_VARARGS, "set_shard(index, count): a shard's chain"},
	{"set_account", (PyCFunction) Ledger_set_account, METH_VARARGS, "set_account(address, balance, nonce)"},
	{"account", (PyCFunction) Ledger_account, METH_O, "(balance, nonce), or None if absent."},
	{"accounts", (PyCFunction) Ledger_accounts, METH_NOARGS, "Every account, packed."},
	{"pending_nonce", (PyCFunction) Ledger_pending_nonce, METH_O, "The account's nonce plus its pending ones."},
	{"sender", (PyCFunction) Ledger_sender, METH_O, "(pending, pending_cost, held, held_cost)"},
	{"status", (PyCFunction) Ledger_status, METH_O, "(kind, reason)"},
	{"sizes", (PyCFunction) Ledger_sizes, METH_NOARGS,
	 "(pending, held, pending_bytes, accounts, verified, committed, evicted)"},
	{"admit", (PyCFunction) Ledger_admit, METH_VARARGS, "admit(table, body, max_count) -> AdmitBatch (decoded)"},
	{"precheck", (PyCFunction) Ledger_precheck, METH_O, "The batch's cheap checks; candidates in flight."},
	{"commit", (PyCFunction) Ledger_commit, METH_VARARGS,
	 "commit(batch, now, relay) -> (journal_frames, journal_count, relay_frames, relay_count, evictions)"},
	{"abandon", (PyCFunction) Ledger_abandon, METH_O, "Drop a batch that will not be committed."},
	{"select", (PyCFunction) Ledger_select, METH_O, "The first max_count pending, as a BlockBody."},
	{"rebuild", (PyCFunction) Ledger_rebuild, METH_O, "A BlockBody of these pending ids, or None."},
	{"apply", (PyCFunction) Ledger_apply, METH_VARARGS,
	 "apply(body, tx_count, merkle_root, max_block_txs, producer, table[, credits]) -> (changed, undo, fees)"},
	{"undo", (PyCFunction) Ledger_undo, METH_O, "Restore the accounts an apply changed."},
	{"block_applied", (PyCFunction) Ledger_block_applied, METH_VARARGS,
	 "block_applied(body, now) -> (evictions, relay_frames, relay_count)"},
	{"blocks_undone", (PyCFunction) Ledger_blocks_undone, METH_O, "blocks_undone([BlockBody]) -> evictions"},
	{"expire_held", (PyCFunction) Ledger_expire_held, METH_O, "expire_held(older_than) -> evictions"},
	{"unsettled", (PyCFunction) Ledger_unsettled, METH_NOARGS, "(frames, count) of every accepted, uncommitted"},
	{"encoding", (PyCFunction) Ledger_encoding, METH_O, "A pooled transaction's bytes, or None."},
	{"is_verified", (PyCFunction) Ledger_is_verified, METH_O, "Is this id in the verified set?"},
	{"remember_verified", (PyCFunction) Ledger_remember_verified, METH_O, "Add ids to the verified set."},
	{"unverified", (PyCFunction) Ledger_unverified, METH_O, "How many of a body's signatures are not known good."},
	{NULL, NULL, 0, NULL},
};

static PySequenceMethods Ledger_as_sequence = {.sq_length = (lenfunc) Ledger_len};

static PyTypeObject LedgerType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "_qmemo_ledger.Ledger",
	.tp_basicsize = sizeof(LedgerObject),
	.tp_dealloc = (destructor) Ledger_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The accounts at the tip and the pool of accepted transactions.",
	.tp_methods = Ledger_methods,
	.tp_init = (initproc) Ledger_init,
	.tp_new = PyType_GenericNew,
	.tp_as_sequence = &Ledger_as_sequence,
};

/* merkle_root(ids) -> root: qmemo_admit_merkle_root, for the producer and the tests. */
static PyObject *merkle_root(PyObject *module, PyObject *ids) {
	(void) module;
	if (!exact_bytes(ids, "ids", -1)) {
		return NULL;
	}
	if (PyBytes_GET_SIZE(ids) % ID_BYTES) {
		PyErr_SetString(PyExc_ValueError, "ids must be whole 64-byte ids");
		return NULL;
	}
	uint8_t root[ID_BYTES];
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = qmemo_admit_merkle_root((const uint8_t *) PyBytes_AS_STRING(ids), (size_t) PyBytes_GET_SIZE(ids) / ID_BYTES,
	                             root);
	Py_END_ALLOW_THREADS
	if (rc != 0) {
		return PyErr_NoMemory();
	}
	return PyBytes_FromStringAndSize((const char *) root, ID_BYTES);
}

static PyMethodDef module_methods[] = {
	{"decode_body", decode_body, METH_VARARGS, "decode_body(table, chain_id, body, tx_count) -> BlockBody | None"},
	{"merkle_root", merkle_root, METH_O, "The Merkle root of ids laid end to end."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT, "_qmemo_ledger", "The node's ledger in C (qmemo/node/ledger.py).", -1, module_methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__qmemo_ledger(void) {
	if (PyType_Ready(&LedgerType) < 0 || PyType_Ready(&AdmitBatchType) < 0 || PyType_Ready(&BlockBodyType) < 0) {
		return NULL;
	}
	PyObject *m = PyModule_Create(&module_def);
	if (!m) {
		return NULL;
	}
	FramingError = PyErr_NewException("_qmemo_ledger.FramingError", NULL, NULL);
	BlockRefused = PyErr_NewException("_qmemo_ledger.BlockRefused", NULL, NULL);
	PyObject *names = PyTuple_New(C_COUNT);
	if (!FramingError || !BlockRefused || !names) {
		Py_XDECREF(names);
		Py_DECREF(m);
		return NULL;
	}
	for (int c = 0; c < C_COUNT; c++) {
		PyTuple_SET_ITEM(names, c, PyUnicode_FromString(CODE_NAMES[c]));
	}
	Py_INCREF(&LedgerType);
	Py_INCREF(&AdmitBatchType);
	Py_INCREF(&BlockBodyType);
	if (PyModule_AddObject(m, "Ledger", (PyObject *) &LedgerType) || PyModule_AddObject(m, "AdmitBatch", (PyObject *) &AdmitBatchType) ||
	        PyModule_AddObject(m, "BlockBody", (PyObject *) &BlockBodyType) ||
	        PyModule_AddObject(m, "FramingError", FramingError) || PyModule_AddObject(m, "BlockRefused", BlockRefused) ||
	        PyModule_AddObject(m, "CODE_NAMES", names) ||
	        PyModule_AddIntConstant(m, "REORG", C_REORG) ||
	        PyModule_AddIntConstant(m, "HELD_NONCE_CONFLICT", C_HELD_NONCE_CONFLICT) ||
	        PyModule_AddIntConstant(m, "DECODE_CODES_END", C_TRAILING_BYTES + 1) ||
	        PyModule_AddIntConstant(m, "RECORD_SIZE", (long) sizeof(qmemo_admit_record))) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
