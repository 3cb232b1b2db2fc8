/*
 * samsa.net._tlsrecord: open TLS 1.3 application-data records with one C call per batch.
 *
 * OpenSSL's SSL_read decrypts one record per call and costs ~2 us per record on this host, most
 * of it outside the cipher; clients such as librdkafka send a produce stream as hundreds of
 * ~2 KiB records per MB. After the handshake (done by Python's ssl module) the TLS listener's
 * transport (samsa/net/tls_transport.py) hands the client-to-server direction to this reader:
 * the same AEAD (OpenSSL's EVP, the library Python's ssl uses), the traffic key derived from the
 * handshake's client application traffic secret, RFC 8446 section 5 record processing.
 *
 * Reader(cipher, key, iv): cipher is "aes-128-gcm", "aes-256-gcm" or "chacha20-poly1305".
 * reader.rekey(key, iv): after a KeyUpdate (sequence number back to 0).
 * reader.open(src, dst) -> (consumed, produced, kind, length)
 *   Opens the complete records at the start of src, writing their content to dst back to back,
 *   and stops at the first of: an incomplete record, a record whose plaintext would not fit in
 *   the rest of dst, a record that is not application data. consumed: bytes of src used;
 *   produced: application-data bytes written to dst. kind is 0 if it stopped on data (or lack
 *   of it); else the inner content type (21 alert, 22 handshake) of the last record opened,
 *   whose `length` content bytes are at dst[produced:produced + length], not counted in
 *   produced. Raises ValueError (the connection must be closed) on a malformed record, a
 *   record over the size limit, or a failed authentication tag (RFC 8446 bad_record_mac).
 * reader.record_size(src) -> int: the full size of the record starting src (0 if fewer than 5
 *   bytes), so the caller can size a scratch buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <string.h>

#define HEADER 5
#define TAG 16
#define MAX_CIPHERTEXT (16384 + 256) /* RFC 8446 5.2: TLSCiphertext.length limit */
#define APPLICATION_DATA 23

typedef struct {
    PyObject_HEAD
    EVP_CIPHER_CTX *ctx;
    const EVP_CIPHER *cipher;
    unsigned char iv[12];
    uint64_t seq;
} Reader;

static int set_key(Reader *self, Py_buffer *key, Py_buffer *iv)
{
    if (iv->len != 12 || key->len != EVP_CIPHER_key_length(self->cipher)) {
        PyErr_SetString(PyExc_ValueError, "key or iv of the wrong length for the cipher");
        return -1;
    }
    if (EVP_DecryptInit_ex(self->ctx, self->cipher, NULL, key->buf, NULL) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "EVP_DecryptInit_ex failed");
        return -1;
    }
    memcpy(self->iv, iv->buf, 12);
    self->seq = 0;
    return 0;
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kwds)
{
    const char *name;
    Py_buffer key, iv;
    static char *kwlist[] = {"cipher", "key", "iv", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sy*y*", kwlist, &name, &key, &iv))
        return -1;
    int rc = -1;
    if (strcmp(name, "aes-128-gcm") == 0)
        self->cipher = EVP_aes_128_gcm();
    else if (strcmp(name, "aes-256-gcm") == 0)
        self->cipher = EVP_aes_256_gcm();
    else if (strcmp(name, "chacha20-poly1305") == 0)
        self->cipher = EVP_chacha20_poly1305();
    else {
        PyErr_Format(PyExc_ValueError, "unsupported cipher %s", name);
        goto done;
    }
    if (self->ctx == NULL && (self->ctx = EVP_CIPHER_CTX_new()) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    rc = set_key(self, &key, &iv);
done:
    PyBuffer_Release(&key);
    PyBuffer_Release(&iv);
    return rc;
}

static void Reader_dealloc(Reader *self)
{
    if (self->ctx != NULL)
        EVP_CIPHER_CTX_free(self->ctx); /* also clears the key schedule */
    OPENSSL_cleanse(self->iv, sizeof self->iv);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Reader_rekey(Reader *self, PyObject *args)
{
    Py_buffer key, iv;
    if (!PyArg_ParseTuple(args, "y*y*", &key, &iv))
        return NULL;
    int rc = set_key(self, &key, &iv);
    PyBuffer_Release(&key);
    PyBuffer_Release(&iv);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t record_length(const unsigned char *p)
{
    return ((Py_ssize_t)p[3] << 8) | p[4];
}

static PyObject *Reader_record_size(Reader *self, PyObject *arg)
{
    (void)self;
    Py_buffer src;
    if (PyObject_GetBuffer(arg, &src, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = src.len < HEADER ? 0 : HEADER + record_length(src.buf);
    PyBuffer_Release(&src);
    return PyLong_FromSsize_t(n);
}

/* Decrypt one record's body (ciphertext + tag) into out; 1 if authentic. */
static int open_record(Reader *self, const unsigned char *header, const unsigned char *body,
                       int body_len, unsigned char *out)
{
    unsigned char nonce[12];
    int n, fin;
    memcpy(nonce, self->iv, 12);
    for (int i = 0; i < 8; i++)
        nonce[11 - i] ^= (unsigned char)(self->seq >> (8 * i));
    int text_len = body_len - TAG;
    if (EVP_DecryptInit_ex(self->ctx, NULL, NULL, NULL, nonce) != 1)
        return 0;
    if (EVP_DecryptUpdate(self->ctx, NULL, &n, header, HEADER) != 1)
        return 0;
    if (EVP_DecryptUpdate(self->ctx, out, &n, body, text_len) != 1)
        return 0;
    if (EVP_CIPHER_CTX_ctrl(self->ctx, EVP_CTRL_AEAD_SET_TAG, TAG,
                            (void *)(body + text_len)) != 1)
        return 0;
    fin = EVP_DecryptFinal_ex(self->ctx, out + n, &n);
    return fin == 1;
}

static PyObject *Reader_open(Reader *self, PyObject *args)
{
    Py_buffer src, dst;
    if (!PyArg_ParseTuple(args, "y*w*", &src, &dst))
        return NULL;
    const unsigned char *in = src.buf;
    unsigned char *out = dst.buf;
    Py_ssize_t used = 0, made = 0, content = 0;
    int kind = 0;
    const char *error = NULL;
    while (src.len - used >= HEADER) {
        const unsigned char *h = in + used;
        Py_ssize_t len = record_length(h);
        if (h[0] != APPLICATION_DATA || h[1] != 3 || h[2] != 3) {
            error = "unexpected record header after the handshake";
            break;
        }
        if (len > MAX_CIPHERTEXT) {
            error = "record_overflow: record longer than 2^14 + 256 bytes";
            break;
        }
        if (len <= TAG) {
            error = "decode_error: record shorter than its authentication tag";
            break;
        }
        if (src.len - used < HEADER + len)
            break; /* incomplete */
        if (dst.len - made < len - TAG)
            break; /* no room: the caller gives a bigger buffer */
        if (!open_record(self, h, h + HEADER, (int)len, out + made)) {
            error = "bad_record_mac: a record failed authentication";
            break;
        }
        self->seq++;
        used += HEADER + len;
        /* TLSInnerPlaintext: content, then its type, then zero padding */
        Py_ssize_t end = len - TAG;
        while (end > 0 && out[made + end - 1] == 0)
            end--;
        if (end == 0) {
            error = "unexpected_message: a record without a content type";
            break;
        }
        int type = out[made + end - 1];
        if (type == APPLICATION_DATA) {
            made += end - 1;
            continue;
        }
        kind = type;
        content = end - 1;
        break;
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    if (error != NULL) {
        PyErr_SetString(PyExc_ValueError, error);
        return NULL;
    }
    return Py_BuildValue("nnin", used, made, kind, content);
}

static PyMethodDef Reader_methods[] = {
    {"open", (PyCFunction)Reader_open, METH_VARARGS,
     "open(src, dst) -> (consumed, produced, kind, length)"},
    {"rekey", (PyCFunction)Reader_rekey, METH_VARARGS, "rekey(key, iv): a new traffic key"},
    {"record_size", (PyCFunction)Reader_record_size, METH_O,
     "record_size(src) -> size of the record starting src (0: header incomplete)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samsa.net._tlsrecord.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Opens TLS 1.3 application-data records of one direction.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "samsa.net._tlsrecord",
    "TLS 1.3 record opening in C (see samsa/net/tls_transport.py).", -1, NULL, NULL, NULL, NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__tlsrecord(void)
{
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
