/*
 * _qmemo_rows: the admission kernel's records (qmemo_admit.h) as Python transactions,
 * one C call per batch. A CPython extension, not a ctypes library: it makes Python
 * objects, which is its whole job.
 *
 * Why: building each `Transaction` in Python from a record (a tuple unpacked from the
 * records buffer, five slices, thirteen slot setters) cost 3.8 us per transaction on
 * the node's event loop (qmemo bench node, "transactions from records") - more than
 * the kernel's framing, decoding and three BLAKE3-512 digests together. Here the same
 * objects are made in C: the slots are filled through the offsets of the class's own
 * slot descriptors, with the values `Transaction.decode` gives the same bytes
 * (tests/unit/test_admit_kernel.py checks every slot against it, on every vector).
 *
 * transactions(cls, body, records, count, keys, key_memory, seen) -> list of `count`:
 *   - an int, the record's status, for a record that did not decode;
 *   - the id (bytes) of a record whose id is in any container of the tuple `seen`
 *     (a duplicate: no object is made for it);
 *   - else a new `cls` with every slot set. Its public key is the one object `keys`
 *     (dict: sender -> key) holds for its sender, added if missing; `keys` is emptied
 *     first when it already holds `key_memory` senders.
 * Every offset a record gives is checked against the body (ValueError: the records
 * do not belong to this body), so a wrong buffer can never read outside it.
 *
 * Never touches node state beyond the containers it is handed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "qmemo_admit.h"

#include <stddef.h>
#include <string.h>

/* The layout of a transaction's encoding (qmemo.core.transaction): version u8, chain_id
 * u32, scheme_id u8, nonce u64, then the 32-byte recipient. */
#define RECIPIENT_AT (1 + 4 + 1 + 8)

/* Transaction.__slots__, in order; each is filled below. */
static const char *const SLOT_NAMES[] = {
	"chain_id", "scheme_id", "public_key", "nonce", "recipient", "amount", "fee",
	"payload", "signature", "encoded", "signing_digest", "id", "sender",
};
enum { CHAIN_ID, SCHEME_ID, PUBLIC_KEY, NONCE, RECIPIENT, AMOUNT, FEE, PAYLOAD, SIGNATURE, ENCODED,
       SIGNING_DIGEST, ID, SENDER, SLOT_COUNT };

/* The byte offset of each slot in an instance of `cls`, from its member descriptors;
 * -1 (TypeError set) unless `cls` is a class whose instances hold exactly these object
 * slots and nothing more: a descriptor of another class, or an offset outside `cls`'s
 * instances, would make the writes below land outside the object. */
static int slot_offsets(PyTypeObject *cls, Py_ssize_t offsets[SLOT_COUNT])
{
	if (cls->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + SLOT_COUNT * sizeof(PyObject *)) ||
	    cls->tp_itemsize != 0) {
		PyErr_Format(PyExc_TypeError, "%s does not hold exactly the %d transaction slots", cls->tp_name, SLOT_COUNT);
		return -1;
	}
	for (int i = 0; i < SLOT_COUNT; i++) {
		PyObject *descr = PyObject_GetAttrString((PyObject *)cls, SLOT_NAMES[i]);   /* the descriptor itself */
		if (descr == NULL) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError, "%s has no slot %s", cls->tp_name, SLOT_NAMES[i]);
			return -1;
		}
		int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) && PyType_IsSubtype(cls, PyDescr_TYPE(descr));
		PyMemberDef *member = ok ? ((PyMemberDescrObject *)descr)->d_member : NULL;
		Py_DECREF(descr);   /* the class keeps it alive */
		if (!ok || member->type != T_OBJECT_EX || (member->flags & READONLY) ||
		    member->offset < (Py_ssize_t)sizeof(PyObject) ||
		    member->offset > cls->tp_basicsize - (Py_ssize_t)sizeof(PyObject *)) {
			PyErr_Format(PyExc_TypeError, "%s.%s is not a writable object slot of its own", cls->tp_name,
			             SLOT_NAMES[i]);
			return -1;
		}
		offsets[i] = member->offset;
	}
	return 0;
}

/* 1 if [offset, offset + length) lies within a body of `size` bytes. */
static int within(size_t offset, size_t length, size_t size)
{
	return offset <= size && length <= size - offset;
}

/* 1 if `id` is in one of `seen`'s containers, 0 if in none, -1 on an error. */
static int is_seen(PyObject *seen, PyObject *id)
{
	Py_ssize_t n = PyTuple_GET_SIZE(seen);
	for (Py_ssize_t i = 0; i < n; i++) {
		int found = PySequence_Contains(PyTuple_GET_ITEM(seen, i), id);
		if (found != 0)
			return found;
	}
	return 0;
}

/* The public key object of `sender`: the one in `keys`, else a new slice put there. */
static PyObject *shared_key(PyObject *keys, Py_ssize_t key_memory, PyObject *sender, const char *body,
                            const qmemo_admit_record *r)
{
	PyObject *key = PyDict_GetItemWithError(keys, sender);   /* borrowed */
	if (key != NULL) {
		Py_INCREF(key);
		return key;
	}
	if (PyErr_Occurred())
		return NULL;
	if (PyDict_GET_SIZE(keys) >= key_memory)
		PyDict_Clear(keys);
	key = PyBytes_FromStringAndSize(body + r->public_key_offset, r->public_key_length);
	if (key == NULL || PyDict_SetItem(keys, sender, key) < 0) {
		Py_XDECREF(key);
		return NULL;
	}
	return key;
}

/* A new `cls` for decoded record `r`, its id already made (stolen, also on failure). */
static PyObject *transaction(PyTypeObject *cls, const Py_ssize_t offsets[SLOT_COUNT], const char *body,
                             size_t size, const qmemo_admit_record *r, PyObject *id, PyObject *keys,
                             Py_ssize_t key_memory)
{
	size_t payload_at = (size_t)r->public_key_offset + r->public_key_length;
	if (!within(r->record_offset, r->record_length, size) || r->record_length < RECIPIENT_AT + QMEMO_ADDRESS_BYTES ||
	    !within(r->public_key_offset, r->public_key_length, size) || !within(payload_at, r->payload_length, size) ||
	    !within(r->signature_offset, r->signature_length, size)) {
		Py_DECREF(id);
		PyErr_SetString(PyExc_ValueError, "a record's offsets run past the body: the records are not this body's");
		return NULL;
	}
	PyObject *values[SLOT_COUNT] = {NULL};
	values[ID] = id;
	values[SENDER] = PyBytes_FromStringAndSize((const char *)r->sender, QMEMO_ADDRESS_BYTES);
	values[CHAIN_ID] = PyLong_FromUnsignedLong(r->chain_id);
	values[SCHEME_ID] = PyLong_FromUnsignedLong(r->scheme_id);
	values[NONCE] = PyLong_FromUnsignedLongLong(r->nonce);
	values[AMOUNT] = PyLong_FromUnsignedLongLong(r->amount);
	values[FEE] = PyLong_FromUnsignedLongLong(r->fee);
	values[RECIPIENT] = PyBytes_FromStringAndSize(body + r->record_offset + RECIPIENT_AT, QMEMO_ADDRESS_BYTES);
	values[PAYLOAD] = PyBytes_FromStringAndSize(body + payload_at, r->payload_length);
	values[SIGNATURE] = PyBytes_FromStringAndSize(body + r->signature_offset, r->signature_length);
	values[ENCODED] = PyBytes_FromStringAndSize(body + r->record_offset, r->record_length);
	values[SIGNING_DIGEST] = PyBytes_FromStringAndSize((const char *)r->signing_digest, QMEMO_DIGEST_BYTES);
	for (int i = 0; i < SLOT_COUNT; i++)
		if (i != PUBLIC_KEY && values[i] == NULL)
			goto fail;     /* out of memory: no further call with the error set */
	values[PUBLIC_KEY] = shared_key(keys, key_memory, values[SENDER], body, r);
	if (values[PUBLIC_KEY] == NULL)
		goto fail;
	PyObject *tx = cls->tp_alloc(cls, 0);
	if (tx == NULL)
		goto fail;
	for (int i = 0; i < SLOT_COUNT; i++)
		*(PyObject **)((char *)tx + offsets[i]) = values[i];     /* the new object takes each reference */
	return tx;
fail:
	for (int i = 0; i < SLOT_COUNT; i++)
		Py_XDECREF(values[i]);
	return NULL;
}

static PyObject *transactions(PyObject *module, PyObject *args)
{
	(void)module;
	PyTypeObject *cls;
	Py_buffer body, records;
	Py_ssize_t count, key_memory;
	PyObject *keys, *seen, *out = NULL;
	if (!PyArg_ParseTuple(args, "O!y*y*nO!nO!", &PyType_Type, &cls, &body, &records, &count, &PyDict_Type, &keys,
	                      &key_memory, &PyTuple_Type, &seen))
		return NULL;
	Py_ssize_t offsets[SLOT_COUNT];
	if (slot_offsets(cls, offsets) < 0)
		goto done;
	if (count < 0 || (size_t)records.len / sizeof(qmemo_admit_record) < (size_t)count || key_memory < 1) {
		PyErr_SetString(PyExc_ValueError, "count exceeds the records buffer, or key_memory < 1");
		goto done;
	}
	out = PyList_New(count);
	if (out == NULL)
		goto done;
	/* Untracked while its items are NULL: `seen`'s __contains__ and a collection during an
	 * allocation run Python code, which must not find a half-built list (gc.get_objects). */
	PyObject_GC_UnTrack(out);
	const char *data = body.buf;
	for (Py_ssize_t i = 0; i < count; i++) {
		qmemo_admit_record r;
		memcpy(&r, (const char *)records.buf + (size_t)i * sizeof r, sizeof r);  /* a bytearray need not be aligned */
		PyObject *item;
		if (r.status != QMEMO_ADMIT_DECODED) {
			item = PyLong_FromLong(r.status);
		} else {
			PyObject *id = PyBytes_FromStringAndSize((const char *)r.id, QMEMO_DIGEST_BYTES);
			int found = id == NULL ? -1 : is_seen(seen, id);
			if (found != 0)
				item = found > 0 ? id : (Py_XDECREF(id), NULL);
			else
				item = transaction(cls, offsets, data, (size_t)body.len, &r, id, keys, key_memory);
		}
		if (item == NULL) {
			Py_CLEAR(out);
			goto done;
		}
		PyList_SET_ITEM(out, i, item);
	}
	PyObject_GC_Track(out);
done:
	PyBuffer_Release(&body);
	PyBuffer_Release(&records);
	return out;
}

static PyMethodDef methods[] = {
	{"transactions", transactions, METH_VARARGS,
	 "transactions(cls, body, records, count, keys, key_memory, seen) -> list: per record, a new cls, "
	 "its id (a duplicate: in one of seen) or its status (did not decode)."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_qmemo_rows",
	"The admission kernel's records as transactions, one call per batch (qmemo_rows.c).", -1, methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__qmemo_rows(void)
{
	return PyModule_Create(&module);
}
