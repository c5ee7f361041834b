/*
 * upgrade_gate.flink.metadata._fastsubtasks: the compiled loop of fast_reader.py's subtask reading.
 *
 * A port of `_V3SubtaskLayout.read_subtasks`'s loop body and of `_common_subtask`,
 * `fast_operator_handle`, `fast_keyed_handle` and `fast_stream_handle` (the layouts of
 * Flink's `MetadataV2V3SerializerBase`), line by line. It builds the same model objects
 * (model.py) by filling their slots directly, so a 1,000-subtask file costs no Python call per
 * handle (docs/performance.md, issue 34). Inline state is kept as a slice of the file's
 * memoryview, never copied.
 *
 * It never reports bad input itself: at the first entry it does not take (an index out of range,
 * truncation, a rarer handle tag, non-ASCII text, channel state, a size sum that would overflow) it
 * stops *before* that entry and returns how far it got; the Python loop then reads that entry, so
 * results and errors are always the definition's. tests/flink/test_metadata_fastpath.py reads every
 * input with this module, with the pure-Python fast reader and with the definitions alone, and
 * requires identical objects or errors. Every count is checked against the bytes left before use.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* Handle tags (MetadataV2V3SerializerBase), as upgrade_gate/flink/metadata/handles.py names them. */
enum { NULL_HANDLE = 0, BYTE_STREAM = 1, FILE_STREAM = 2, KEY_GROUPS = 3, PARTITIONABLE_OPERATOR = 4,
       RELATIVE_STREAM = 6, SAVEPOINT_KEY_GROUPS = 7, KEY_GROUPS_V2 = 12 };

/* One model class and the offsets of its slots, in the order configure() was given the names. */
#define MAX_FIELDS 10
typedef struct { PyTypeObject *type; Py_ssize_t off[MAX_FIELDS]; int n; } Layout;

static Layout L_SUBTASK, L_OPHANDLE, L_META, L_KG, L_KG_SP, L_RANGE, L_BYTES, L_REL, L_FILE;
static PyObject *EMPTY_RANGE, *MODES, *EMPTY_SUBTASK, *FINISHED_SUBTASK, *ZERO;
static int configured = 0;

static const uint8_t ZEROS[8] = {0};
static const uint8_t EMPTY_SUBTASK_BYTES[18] = {0};

static inline int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int64_t be64(const uint8_t *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

/* A new instance of `l`'s class with its slots set from `values` (references stolen, all non-NULL). */
static PyObject *build(const Layout *l, PyTypeObject *type, PyObject **values) {
    PyObject *o = type->tp_alloc(type, 0);
    if (o == NULL) {
        for (int i = 0; i < l->n; i++) Py_DECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < l->n; i++) {
        PyObject **slot = (PyObject **)((char *)o + l->off[i]);
        PyObject *old = *slot;
        *slot = values[i];
        Py_XDECREF(old);
    }
    return o;
}

static int layout_of(Layout *l, PyObject *type, PyObject *names) {
    if (!PyType_Check(type) || !PyTuple_Check(names) || PyTuple_GET_SIZE(names) > MAX_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "configure: expected (class, tuple of slot names)");
        return -1;
    }
    l->type = (PyTypeObject *)type;
    l->n = (int)PyTuple_GET_SIZE(names);
    for (int i = 0; i < l->n; i++) {
        PyObject *d = _PyType_Lookup(l->type, PyTuple_GET_ITEM(names, i));
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)
                || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "configure: %R is not an object slot of %R", PyTuple_GET_ITEM(names, i), type);
            return -1;
        }
        l->off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    Py_INCREF(type);
    return 0;
}

/* configure(subtask, op_handle, meta, key_groups, savepoint_key_groups, range, byte_stream, relative, file,
 *           empty_range, modes, empty_subtask, finished_subtask): each class given as (class, slot names). */
static PyObject *py_configure(PyObject *self, PyObject *args) {
    PyObject *spec[9];
    PyObject *empty_range, *modes, *empty_subtask, *finished_subtask;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO", &spec[0], &spec[1], &spec[2], &spec[3], &spec[4], &spec[5],
                          &spec[6], &spec[7], &spec[8], &empty_range, &modes, &empty_subtask, &finished_subtask))
        return NULL;
    Layout *ls[9] = {&L_SUBTASK, &L_OPHANDLE, &L_META, &L_KG, &L_KG_SP, &L_RANGE, &L_BYTES, &L_REL, &L_FILE};
    for (int i = 0; i < 9; i++) {
        if (!PyTuple_Check(spec[i]) || PyTuple_GET_SIZE(spec[i]) != 2) {
            PyErr_SetString(PyExc_TypeError, "configure: expected (class, tuple of slot names)");
            return NULL;
        }
        if (layout_of(ls[i], PyTuple_GET_ITEM(spec[i], 0), PyTuple_GET_ITEM(spec[i], 1)) < 0) return NULL;
    }
    if (L_SUBTASK.n != 10 || L_OPHANDLE.n != 2 || L_META.n != 2 || L_KG.n != 4 || L_KG_SP.n != 4 || L_RANGE.n != 2
            || L_BYTES.n != 2 || L_REL.n != 3 || L_FILE.n != 2 || !PyTuple_Check(modes) || PyTuple_GET_SIZE(modes) != 3) {
        PyErr_SetString(PyExc_TypeError, "configure: unexpected number of slots");
        return NULL;
    }
    Py_INCREF(empty_range); EMPTY_RANGE = empty_range;
    Py_INCREF(modes); MODES = modes;
    Py_INCREF(empty_subtask); EMPTY_SUBTASK = empty_subtask;
    Py_INCREF(finished_subtask); FINISHED_SUBTASK = finished_subtask;
    ZERO = PyLong_FromLong(0);
    if (ZERO == NULL) return NULL;
    configured = 1;
    Py_RETURN_NONE;
}

/* The reading state of one call. Functions return 1 (read, *out set), 0 (not taken) or -1 (error set). */
typedef struct {
    const uint8_t *d;
    Py_ssize_t end;
    PyObject *view;    /* memoryview over the file's bytes */
    PyObject *prefix;  /* str or None: the snapshot directory + "/" */
} Src;

/* `_ascii_utf_at`: a writeUTF string that is all there and ASCII. */
static int ascii_utf(const Src *s, Py_ssize_t pos, PyObject **out, Py_ssize_t *after) {
    if (s->end - pos < 2) return 0;
    Py_ssize_t n = (Py_ssize_t)((s->d[pos] << 8) | s->d[pos + 1]);
    Py_ssize_t stop = pos + 2 + n;
    if (stop > s->end) return 0;
    for (Py_ssize_t i = pos + 2; i < stop; i++) if (s->d[i] & 0x80) return 0;
    *out = PyUnicode_DecodeASCII((const char *)s->d + pos + 2, n, NULL);
    if (*out == NULL) return -1;
    *after = stop;
    return 1;
}

static PyObject *view_slice(const Src *s, Py_ssize_t start, Py_ssize_t stop) {
    PyObject *a = PyLong_FromSsize_t(start), *b = PyLong_FromSsize_t(stop);
    PyObject *sl = (a && b) ? PySlice_New(a, b, NULL) : NULL;
    Py_XDECREF(a); Py_XDECREF(b);
    if (sl == NULL) return NULL;
    PyObject *v = PyObject_GetItem(s->view, sl);
    Py_DECREF(sl);
    return v;
}

/* `fast_stream_handle`: tags 0, 1, 2 and 6. *size: the handle's state size. */
static int stream_handle(const Src *s, Py_ssize_t pos, PyObject **out, int64_t *size, Py_ssize_t *after) {
    if (pos >= s->end) return 0;
    int tag = s->d[pos++];
    if (tag == NULL_HANDLE) {
        Py_INCREF(Py_None); *out = Py_None; *size = 0; *after = pos;
        return 1;
    }
    if (tag == BYTE_STREAM) {
        if (s->end - pos < 2) return 0;
        Py_ssize_t stop = pos + 2 + ((s->d[pos] << 8) | s->d[pos + 1]);
        if (s->end - stop < 4) return 0;
        int32_t n = be32(s->d + stop);
        Py_ssize_t at = stop + 4;
        if (n < 0 || n > s->end - at) return 0;
        for (Py_ssize_t i = pos + 2; i < stop; i++) if (s->d[i] & 0x80) return 0;
        PyObject *v[2];
        v[0] = PyUnicode_DecodeASCII((const char *)s->d + pos + 2, stop - pos - 2, NULL);
        if (v[0] == NULL) return -1;
        v[1] = view_slice(s, at, at + n);
        if (v[1] == NULL) { Py_DECREF(v[0]); return -1; }
        if ((*out = build(&L_BYTES, L_BYTES.type, v)) == NULL) return -1;
        *size = n; *after = at + n;
        return 1;
    }
    if (tag == RELATIVE_STREAM) {
        if (s->prefix == Py_None) return 0;
        PyObject *rel;
        Py_ssize_t stop;
        int r = ascii_utf(s, pos, &rel, &stop);
        if (r <= 0) return r;
        if (s->end - stop < 8) { Py_DECREF(rel); return 0; }
        PyObject *v[3];
        v[0] = PyUnicode_Concat(s->prefix, rel);
        v[1] = rel;
        *size = be64(s->d + stop);
        v[2] = PyLong_FromLongLong(*size);
        if (v[0] == NULL || v[2] == NULL) { Py_XDECREF(v[0]); Py_DECREF(rel); Py_XDECREF(v[2]); return -1; }
        if ((*out = build(&L_REL, L_REL.type, v)) == NULL) return -1;
        *after = stop + 8;
        return 1;
    }
    if (tag == FILE_STREAM) {
        if (s->end - pos < 10) return 0;
        *size = be64(s->d + pos);
        PyObject *v[2];
        Py_ssize_t stop;
        int r = ascii_utf(s, pos + 8, &v[0], &stop);
        if (r <= 0) return r;
        if ((v[1] = PyLong_FromLongLong(*size)) == NULL) { Py_DECREF(v[0]); return -1; }
        if ((*out = build(&L_FILE, L_FILE.type, v)) == NULL) return -1;
        *after = stop;
        return 1;
    }
    return 0;
}

static PyObject *longs_tuple(const uint8_t *p, Py_ssize_t k) {
    PyObject *t = PyTuple_New(k);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *x = PyLong_FromLongLong(be64(p + 8 * i));
        if (x == NULL) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* `fast_keyed_handle` for tags 3, 7 and 12 (the caller has taken tag 0). */
static int keyed_handle(const Src *s, Py_ssize_t pos, PyObject **out, int64_t *size, Py_ssize_t *after) {
    if (pos >= s->end) return 0;
    int tag = s->d[pos++];
    PyTypeObject *type;
    if (tag == SAVEPOINT_KEY_GROUPS) type = L_KG_SP.type;
    else if (tag == KEY_GROUPS || tag == KEY_GROUPS_V2) type = L_KG.type;
    else return 0;
    if (s->end - pos < 8) return 0;
    int64_t start = be32(s->d + pos), num = be32(s->d + pos + 4);
    pos += 8;
    if (start < 0 || num < 0 || start + num - 1 > 0x7FFFFFFF || num * 8 > s->end - pos) return 0;
    PyObject *delegate, *handle_id = Py_None;
    Py_ssize_t stop;
    int r = stream_handle(s, pos + 8 * num, &delegate, size, &stop);
    if (r <= 0) return r;
    if (tag == KEY_GROUPS_V2) {
        r = ascii_utf(s, stop, &handle_id, &stop);
        if (r <= 0) { Py_DECREF(delegate); return r; }
    } else {
        Py_INCREF(Py_None);
    }
    PyObject *v[4];
    v[1] = longs_tuple(s->d + pos, (Py_ssize_t)num);
    if (num > 0) {
        PyObject *rv[2] = {PyLong_FromLongLong(start), PyLong_FromLongLong(start + num - 1)};
        if (rv[0] == NULL || rv[1] == NULL) { Py_XDECREF(rv[0]); Py_XDECREF(rv[1]); v[0] = NULL; }
        else v[0] = build(&L_RANGE, L_RANGE.type, rv);
    } else {
        Py_INCREF(EMPTY_RANGE); v[0] = EMPTY_RANGE;
    }
    v[2] = delegate; v[3] = handle_id;
    if (v[0] == NULL || v[1] == NULL) {
        Py_XDECREF(v[0]); Py_XDECREF(v[1]); Py_DECREF(delegate); Py_DECREF(handle_id);
        return -1;
    }
    if ((*out = build(&L_KG, type, v)) == NULL) return -1;
    *after = stop;
    return 1;
}

/* `fast_operator_handle` for tags 0 and 4 with ASCII state names; *out is None for tag 0. */
static int operator_handle(const Src *s, Py_ssize_t pos, PyObject **out, int64_t *size, Py_ssize_t *after) {
    if (pos >= s->end) return 0;
    int tag = s->d[pos++];
    if (tag == NULL_HANDLE) {
        Py_INCREF(Py_None); *out = Py_None; *size = 0; *after = pos;
        return 1;
    }
    if (tag != PARTITIONABLE_OPERATOR || s->end - pos < 4) return 0;
    int64_t n = be32(s->d + pos);
    pos += 4;
    if (n < 0 || n * 7 > s->end - pos) return 0;
    PyObject *states = PyDict_New();
    if (states == NULL) return -1;
    for (int64_t i = 0; i < n; i++) {
        if (s->end - pos < 2) goto not_taken;
        Py_ssize_t stop = pos + 2 + ((s->d[pos] << 8) | s->d[pos + 1]);
        if (s->end - stop < 5) goto not_taken;
        int mode = s->d[stop];
        if (mode > 2) goto not_taken;
        for (Py_ssize_t j = pos + 2; j < stop; j++) if (s->d[j] & 0x80) goto not_taken;
        int64_t k = be32(s->d + stop + 1);
        Py_ssize_t at = stop + 5;
        if (k < 0 || k * 8 > s->end - at) goto not_taken;
        PyObject *name = PyUnicode_DecodeASCII((const char *)s->d + pos + 2, stop - pos - 2, NULL);
        if (name == NULL) goto error;
        PyObject *v[2];
        v[0] = longs_tuple(s->d + at, (Py_ssize_t)k);
        v[1] = PyTuple_GET_ITEM(MODES, mode);
        Py_INCREF(v[1]);
        if (v[0] == NULL) { Py_DECREF(v[1]); Py_DECREF(name); goto error; }
        PyObject *meta = build(&L_META, L_META.type, v);
        if (meta == NULL) { Py_DECREF(name); goto error; }
        int failed = PyDict_SetItem(states, name, meta);
        Py_DECREF(name); Py_DECREF(meta);
        if (failed) goto error;
        pos = at + 8 * k;
    }
    PyObject *delegate;
    int r = stream_handle(s, pos, &delegate, size, after);
    if (r <= 0) { Py_DECREF(states); return r; }
    PyObject *v[2] = {states, delegate};
    if ((*out = build(&L_OPHANDLE, L_OPHANDLE.type, v)) == NULL) return -1;
    return 1;
not_taken:
    Py_DECREF(states);
    return 0;
error:
    Py_DECREF(states);
    return -1;
}

/* (handle,) or () for an operator handle read as None, with the size added to *total. */
static PyObject *one_or_none(PyObject *h, int64_t size, int64_t *total, int *overflow) {
    if (h == Py_None) { Py_DECREF(h); return PyTuple_New(0); }
    if (__builtin_add_overflow(*total, size, total)) *overflow = 1;
    PyObject *t = PyTuple_New(1);
    if (t == NULL) { Py_DECREF(h); return NULL; }
    PyTuple_SET_ITEM(t, 0, h);
    return t;
}

/* `_common_subtask`: managed and raw operator state, managed and raw keyed state, no channel state. */
static int common_subtask(const Src *s, Py_ssize_t pos, PyObject **out, Py_ssize_t *after) {
    PyObject *v[10] = {NULL};
    int64_t total = 0;
    int overflow = 0, r = 0;
    for (int f = 0; f < 2; f++) {  /* managed, raw operator state: an int flag, then a handle if set */
        if (s->end - pos >= 4 && memcmp(s->d + pos, ZEROS, 4) == 0) {
            v[f] = PyTuple_New(0);
            pos += 4;
        } else {
            PyObject *h;
            int64_t size;
            r = operator_handle(s, pos + 4, &h, &size, &pos);
            if (r <= 0) goto fail;
            v[f] = one_or_none(h, size, &total, &overflow);
        }
        if (v[f] == NULL) { r = -1; goto fail; }
    }
    for (int f = 2; f < 4; f++) {  /* managed, raw keyed state */
        if (pos < s->end && s->d[pos] == NULL_HANDLE) {
            v[f] = PyTuple_New(0);
            pos += 1;
        } else {
            PyObject *h;
            int64_t size;
            r = keyed_handle(s, pos, &h, &size, &pos);
            if (r <= 0) goto fail;
            v[f] = one_or_none(h, size, &total, &overflow);
        }
        if (v[f] == NULL) { r = -1; goto fail; }
    }
    if (s->end - pos < 8 || memcmp(s->d + pos, ZEROS, 8) != 0 || overflow) { r = 0; goto fail; }
    int has_state = PyTuple_GET_SIZE(v[0]) || PyTuple_GET_SIZE(v[1]) || PyTuple_GET_SIZE(v[2])
                    || PyTuple_GET_SIZE(v[3]);
    v[4] = PyTuple_New(0);
    v[5] = PyTuple_New(0);
    v[6] = Py_NewRef(Py_False);
    v[7] = Py_NewRef(ZERO);
    v[8] = PyLong_FromLongLong(total);
    v[9] = PyBool_FromLong(has_state);
    for (int f = 4; f < 10; f++) if (v[f] == NULL) { r = -1; goto fail; }
    if ((*out = build(&L_SUBTASK, L_SUBTASK.type, v)) == NULL) return -1;
    *after = pos + 8;
    return 1;
fail:
    for (int f = 0; f < 10; f++) Py_XDECREF(v[f]);
    return r;
}

/* read_subtasks(data, view, prefix, pos, end, parallelism, n, subtasks) -> (entries read, offset after them).
 * Reads up to `n` entries into the dict `subtasks` as `_V3SubtaskLayout.read_subtasks`'s loop does,
 * and stops before the first entry it does not take. */
static PyObject *py_read_subtasks(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *view, *prefix, *subtasks;
    Py_ssize_t pos, end, parallelism, n;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_fastsubtasks.configure was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*OOnnnnO!", &buf, &view, &prefix, &pos, &end, &parallelism, &n,
                          &PyDict_Type, &subtasks))
        return NULL;
    if (!PyMemoryView_Check(view) || (prefix != Py_None && !PyUnicode_Check(prefix)) || pos < 0 || end > buf.len
            || pos > end) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "read_subtasks: bad arguments");
        return NULL;
    }
    Src s = {(const uint8_t *)buf.buf, end, view, prefix};
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        if (end - pos < 4) break;
        int32_t raw = be32(s.d + pos);
        int64_t index = raw >= 0 ? raw : -(int64_t)raw - 1;
        if (index >= parallelism) break;
        PyObject *state;
        Py_ssize_t after;
        if (raw < 0) {
            state = Py_NewRef(FINISHED_SUBTASK);
            after = pos + 4;
        } else if (end - pos - 4 >= 18 && memcmp(s.d + pos + 4, EMPTY_SUBTASK_BYTES, 18) == 0) {
            state = Py_NewRef(EMPTY_SUBTASK);
            after = pos + 4 + 18;
        } else {
            int r = common_subtask(&s, pos + 4, &state, &after);
            if (r < 0) { PyBuffer_Release(&buf); return NULL; }
            if (r == 0) break;
        }
        PyObject *key = PyLong_FromLongLong(index);
        int failed = key == NULL || PyDict_SetItem(subtasks, key, state);
        Py_XDECREF(key);
        Py_DECREF(state);
        if (failed) { PyBuffer_Release(&buf); return NULL; }
        pos = after;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("nn", i, pos);
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS, "The model classes, their slot names and the shared constants."},
    {"read_subtasks", py_read_subtasks, METH_VARARGS, "Subtask entries of the common layouts, into a dict."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastsubtasks",
                                    "The compiled subtask loop of fast_reader.py.", -1, methods};

PyMODINIT_FUNC PyInit__fastsubtasks(void) { return PyModule_Create(&module); }
