/*
 * hashing._javastrings: Java's String.hashCode of many strings, read straight from UTF-8 bytes.
 *
 * String.hashCode is s[0]*31^(n-1) + ... + s[n-1] over the string's UTF-16 code units (a
 * supplementary character counts as its surrogate pair). Key alignment gets its keys as Arrow string
 * arrays (UTF-8 bytes + offsets); this decodes each string's UTF-8 and folds the UTF-16 units it
 * stands for into the hash in one pass, with no intermediate arrays (docs/performance.md, "Key
 * groups"). Only the hash code is computed here: murmur, the key group and the operator index stay
 * in hashing/vectorized.py, one definition of each of Flink's rules.
 *
 * It decodes what Python's `bytes.decode("utf-8", errors="surrogatepass")` accepts (the NumPy path's
 * reading): well-formed UTF-8, plus a surrogate written as a 3-byte sequence (one unit, as Java holds
 * it). Anything else (a malformed sequence, offsets out of order or outside the data) raises
 * ValueError and the caller runs the NumPy path, which raises the product's own error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* 31^k mod 2^32 */
#define P1 31u
#define P2 961u
#define P3 29791u
#define P4 923521u

/* Hash of data[0, len) folded into h; returns -1 (with *bad set to the byte) on malformed UTF-8. */
static inline int fold_utf8(const uint8_t *p, size_t len, uint32_t *hp, size_t *bad) {
    uint32_t h = *hp;
    size_t i = 0;
    while (i < len) {
        /* ASCII runs four bytes at a time: the four products are independent, so they overlap */
        while (i + 4 <= len) {
            uint32_t w;
            memcpy(&w, p + i, 4);
            if (w & 0x80808080u) break;
            h = h * P4 + (uint32_t)p[i] * P3 + (uint32_t)p[i + 1] * P2 + (uint32_t)p[i + 2] * P1 + p[i + 3];
            i += 4;
        }
        if (i >= len) break;
        uint32_t b = p[i];
        if (b < 0x80) {
            h = h * P1 + b;
            i += 1;
        } else if (b >= 0xC2 && b <= 0xDF) {
            if (i + 1 >= len || (p[i + 1] & 0xC0) != 0x80) goto malformed;
            h = h * P1 + (((b & 0x1F) << 6) | (p[i + 1] & 0x3F));
            i += 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            if (i + 2 >= len || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80) goto malformed;
            if (b == 0xE0 && p[i + 1] < 0xA0) goto malformed;  /* overlong */
            /* 0xED 0xA0..0xBF is a surrogate: one UTF-16 unit, as surrogatepass decodes it */
            h = h * P1 + (((b & 0x0F) << 12) | ((uint32_t)(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
            i += 3;
        } else if (b >= 0xF0 && b <= 0xF4) {
            if (i + 3 >= len || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80
                || (p[i + 3] & 0xC0) != 0x80) goto malformed;
            if ((b == 0xF0 && p[i + 1] < 0x90) || (b == 0xF4 && p[i + 1] > 0x8F)) goto malformed;
            uint32_t cp = ((b & 0x07) << 18) | ((uint32_t)(p[i + 1] & 0x3F) << 12)
                          | ((uint32_t)(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
            cp -= 0x10000;  /* Character.highSurrogate / lowSurrogate */
            h = h * P1 + (0xD800u + (cp >> 10));
            h = h * P1 + (0xDC00u + (cp & 0x3FF));
            i += 4;
        } else {
            goto malformed;
        }
    }
    *hp = h;
    return 0;
malformed:
    *bad = i;
    return -1;
}

PyDoc_STRVAR(hash_codes_doc,
"hash_codes(data, offsets, out) -> None\n\n"
"out[i] = String.hashCode of the UTF-8 bytes data[offsets[i]:offsets[i + 1]] (as int32).\n"
"data: bytes-like; offsets: int32 or int64 buffer of len(out) + 1; out: writable int32 buffer.\n"
"ValueError on malformed UTF-8 or offsets out of order or outside data.");

static PyObject *hash_codes(PyObject *self, PyObject *args) {
    PyObject *data_obj, *offsets_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO:hash_codes", &data_obj, &offsets_obj, &out_obj)) return NULL;
    Py_buffer data, offsets, out;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(offsets_obj, &offsets, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) { PyBuffer_Release(&data); return NULL; }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&data); PyBuffer_Release(&offsets); return NULL;
    }
    PyObject *result = NULL;
    const Py_ssize_t n = out.len / 4;
    const int wide = offsets.itemsize == 8;
    if (out.itemsize != 4 || (offsets.itemsize != 4 && offsets.itemsize != 8)
        || offsets.len / offsets.itemsize != n + 1) {
        PyErr_SetString(PyExc_ValueError, "hash_codes: out must be int32 and offsets int32/int64 of len(out) + 1");
        goto done;
    }
    const uint8_t *bytes = (const uint8_t *)data.buf;
    const int32_t *off32 = (const int32_t *)offsets.buf;
    const int64_t *off64 = (const int64_t *)offsets.buf;
    int32_t *codes = (int32_t *)out.buf;
    const int64_t size = (int64_t)data.len;
    Py_ssize_t failed = -1;
    int64_t failed_at = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t start = wide ? off64[0] : off32[0];
    for (Py_ssize_t k = 0; k < n; k++) {
        const int64_t end = wide ? off64[k + 1] : off32[k + 1];
        if (start < 0 || end < start || end > size) { failed = k; failed_at = -1; break; }
        uint32_t h = 0;
        size_t bad = 0;
        if (fold_utf8(bytes + start, (size_t)(end - start), &h, &bad) < 0) {
            failed = k; failed_at = start + (int64_t)bad; break;
        }
        codes[k] = (int32_t)h;
        start = end;
    }
    Py_END_ALLOW_THREADS
    if (failed >= 0) {
        if (failed_at < 0)
            PyErr_Format(PyExc_ValueError, "hash_codes: offsets of string %zd out of order or outside the data", failed);
        else
            PyErr_Format(PyExc_ValueError, "hash_codes: string %zd is not UTF-8 at byte %lld", failed,
                         (long long)failed_at);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"hash_codes", hash_codes, METH_VARARGS, hash_codes_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hashing._javastrings",
    "Java's String.hashCode of many strings from UTF-8 bytes + offsets (hashing/_javastrings.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__javastrings(void) { return PyModule_Create(&module); }
