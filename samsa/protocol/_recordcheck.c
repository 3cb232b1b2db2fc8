/*
 * samsa.protocol._recordcheck: walk the records section of a RecordBatch v2 and check every
 * length, varint and count against the bytes present. The produce path runs this once per batch,
 * so it is C; samsa/protocol/recordcheck.py holds the pure-Python reference of the same checks
 * (same results, same messages) used by the tests and as a fallback.
 *
 * check(payload, count, want_keyless) -> list[int] | None
 *   payload: the (decompressed) records section; count: the batch header's recordsCount.
 *   Raises ValueError(message) on the first problem found. On success returns the indexes of
 *   records without a key (key length -1) when want_keyless is true, else None.
 *
 * Varints follow Kafka's reader: a varint is at most 5 bytes (value kept to its low 32 bits),
 * a varlong at most 10; a longer or truncated one is an error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { V_OK = 0, V_TRUNCATED = -1, V_TOO_LONG = -2 };

static int read_varint(const uint8_t **pp, const uint8_t *end, int32_t *out)
{
    const uint8_t *p = *pp;
    uint32_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end)
            return V_TRUNCATED;
        uint8_t b = *p++;
        v |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *out = (int32_t)((v >> 1) ^ (0u - (v & 1u)));
            return V_OK;
        }
    }
    return V_TOO_LONG;
}

static int skip_varlong(const uint8_t **pp, const uint8_t *end)
{
    const uint8_t *p = *pp;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return V_TRUNCATED;
        if (!(*p++ & 0x80)) {
            *pp = p;
            return V_OK;
        }
    }
    return V_TOO_LONG;
}

static PyObject *varint_error(Py_ssize_t i, const char *field, int rc)
{
    PyErr_Format(PyExc_ValueError, "record %zd: %s varint %s", i, field,
                 rc == V_TRUNCATED ? "truncated" : "too long");
    return NULL;
}

#define VARINT(field, dst, lim)                                  \
    do {                                                         \
        int rc_ = read_varint(&p, (lim), &(dst));                \
        if (rc_ != V_OK) {                                       \
            Py_XDECREF(keyless);                                 \
            return varint_error(i, (field), rc_);                \
        }                                                        \
    } while (0)

#define FAIL(...)                                                \
    do {                                                         \
        Py_XDECREF(keyless);                                     \
        PyErr_Format(PyExc_ValueError, __VA_ARGS__);             \
        return NULL;                                             \
    } while (0)

static PyObject *walk(const uint8_t *buf, Py_ssize_t n, long long count, int want_keyless)
{
    const uint8_t *p = buf, *end = buf + n;
    PyObject *keyless = NULL;
    if (want_keyless && !(keyless = PyList_New(0)))
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t len, ts_rc, delta, klen, vlen, nh;
        if (p >= end)
            FAIL("batch declares %lld records but holds %zd", count, i);
        VARINT("length", len, end);
        if (len < 0 || (Py_ssize_t)len > end - p)
            FAIL("record %zd: length %d outside the %zd bytes left", i, (int)len, (Py_ssize_t)(end - p));
        const uint8_t *rend = p + len;
        if (p >= rend)
            FAIL("record %zd: truncated before its attributes", i);
        p++; /* record attributes: unused in v2 */
        ts_rc = skip_varlong(&p, rend);
        if (ts_rc != V_OK) {
            Py_XDECREF(keyless);
            return varint_error(i, "timestamp delta", ts_rc);
        }
        VARINT("offset delta", delta, rend);
        if ((Py_ssize_t)delta != i)
            FAIL("record %zd: offset delta %d, expected %zd", i, (int)delta, i);
        VARINT("key length", klen, rend);
        if (klen < -1 || (Py_ssize_t)klen > rend - p)
            FAIL("record %zd: key length %d out of range", i, (int)klen);
        if (klen > 0)
            p += klen;
        else if (klen < 0 && keyless) {
            PyObject *ix = PyLong_FromSsize_t(i);
            if (!ix || PyList_Append(keyless, ix) < 0) {
                Py_XDECREF(ix);
                Py_DECREF(keyless);
                return NULL;
            }
            Py_DECREF(ix);
        }
        VARINT("value length", vlen, rend);
        if (vlen < -1 || (Py_ssize_t)vlen > rend - p)
            FAIL("record %zd: value length %d out of range", i, (int)vlen);
        if (vlen > 0)
            p += vlen;
        VARINT("header count", nh, rend);
        if (nh < 0 || (Py_ssize_t)nh > rend - p)
            FAIL("record %zd: header count %d out of range", i, (int)nh);
        for (int32_t h = 0; h < nh; h++) {
            int32_t hk, hv;
            VARINT("header key length", hk, rend);
            if (hk < 0 || (Py_ssize_t)hk > rend - p)
                FAIL("record %zd: header key length %d out of range", i, (int)hk);
            p += hk;
            VARINT("header value length", hv, rend);
            if (hv < -1 || (Py_ssize_t)hv > rend - p)
                FAIL("record %zd: header value length %d out of range", i, (int)hv);
            if (hv > 0)
                p += hv;
        }
        if (p != rend)
            FAIL("record %zd: %zd bytes left over after its headers", i, (Py_ssize_t)(rend - p));
    }
    if (p != end)
        FAIL("%zd bytes after the last of %lld records", (Py_ssize_t)(end - p), count);
    if (keyless)
        return keyless;
    Py_RETURN_NONE;
}

static PyObject *check(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long count;
    int want_keyless;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Lp", &view, &count, &want_keyless))
        return NULL;
    PyObject *r;
    if (count <= 0) {
        PyErr_Format(PyExc_ValueError, "invalid record count %lld", count);
        r = NULL;
    } else {
        r = walk((const uint8_t *)view.buf, view.len, count, want_keyless);
    }
    PyBuffer_Release(&view);
    return r;
}

static PyMethodDef methods[] = {
    {"check", check, METH_VARARGS,
     "check(payload, count, want_keyless) -> list[int] | None: validate a batch's records section; "
     "ValueError on the first malformed length, varint or count."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recordcheck",
    "Compiled validator of RecordBatch v2 records (see samsa/protocol/recordcheck.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__recordcheck(void) { return PyModule_Create(&module); }
