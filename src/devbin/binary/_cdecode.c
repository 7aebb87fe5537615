/* devbin.binary._cdecode: C twins of devbin's hottest pure-Python table decoders.
 *
 * Each function here has a pure-Python twin with the same signature and the same results
 * (section_table: devbin.formats.elf.tables.section_table_py; nvinfo_indexed and nvinfo_records:
 * devbin.targets.nvidia.nvinfo.indexed_records_py and records_py), and the test suite compares them on
 * every test input and on random bytes.  Like the twins, these functions answer only the
 * well-formed case and return None for anything the careful Python path has to report.
 *
 * Every read is bounds-checked against the buffer's length before it is made; lengths and
 * offsets are unsigned 64-bit and compared by subtraction, never by an addition that could
 * wrap.  The module imports nothing and keeps no state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static uint64_t rd(const unsigned char *p, int size, int little) {
    uint64_t v = 0;
    int i;
    if (little) {
        for (i = size - 1; i >= 0; i--) v = (v << 8) | p[i];
    } else {
        for (i = 0; i < size; i++) v = (v << 8) | p[i];
    }
    return v;
}

#define MAX_NO_FILE 32

/* section_table(buf, shoff, shnum, is64, little, no_file, shstrndx)
 *   -> (rows: list[tuple[int x 10]], sizes: list[int], names: list[str]) | None */
static PyObject *section_table(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long shoff, shnum, shstrndx;
    int is64, little;
    PyObject *no_file_obj;
    uint64_t no_file[MAX_NO_FILE];
    Py_ssize_t n_no_file, k;
    PyObject *rows = NULL, *sizes = NULL, *names = NULL, *result = NULL;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*KKppO!K", &view, &shoff, &shnum, &is64, &little, &PyTuple_Type, &no_file_obj,
                          &shstrndx))
        return NULL;
    n_no_file = PyTuple_GET_SIZE(no_file_obj);
    if (n_no_file > MAX_NO_FILE) {
        PyErr_SetString(PyExc_ValueError, "too many no-file section types");
        goto done;
    }
    for (k = 0; k < n_no_file; k++) {
        no_file[k] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(no_file_obj, k));
        if (PyErr_Occurred()) goto done;
    }
    {
        const unsigned char *buf = (const unsigned char *)view.buf;
        const uint64_t n = (uint64_t)view.len;
        const uint64_t entsize = is64 ? 64 : 40;
        /* field widths, in the order both classes store them (sh_flags, sh_addr, sh_offset, sh_size,
           sh_addralign, sh_entsize are 8 bytes in ELF64) */
        static const int w64[10] = {4, 4, 8, 8, 8, 8, 4, 4, 8, 8};
        static const int w32[10] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
        const int *w = is64 ? w64 : w32;
        uint64_t i;
        const unsigned char *str = NULL;
        uint64_t strsize = 0;

        if (shoff > n || shnum > (n - shoff) / entsize) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        rows = PyList_New((Py_ssize_t)shnum);
        sizes = PyList_New((Py_ssize_t)shnum);
        names = PyList_New((Py_ssize_t)shnum);
        if (!rows || !sizes || !names) goto done;
        for (i = 0; i < shnum; i++) {
            const unsigned char *p = buf + shoff + i * entsize; /* inside: i < shnum <= (n - shoff) / entsize */
            uint64_t f[10];
            int j, pos = 0;
            uint64_t size;
            PyObject *row;
            for (j = 0; j < 10; j++) {
                f[j] = rd(p + pos, w[j], little);
                pos += w[j];
            }
            size = f[5];
            for (k = 0; k < n_no_file; k++) {
                if (no_file[k] == f[1]) {
                    size = 0;
                    break;
                }
            }
            if (size && (f[4] > n || size > n - f[4])) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            row = PyTuple_New(10);
            if (!row) goto done;
            PyList_SET_ITEM(rows, (Py_ssize_t)i, row);
            for (j = 0; j < 10; j++) {
                PyObject *v = PyLong_FromUnsignedLongLong(f[j]);
                if (!v) goto done;
                PyTuple_SET_ITEM(row, j, v);
            }
            {
                PyObject *s = PyLong_FromUnsignedLongLong(size);
                if (!s) goto done;
                PyList_SET_ITEM(sizes, (Py_ssize_t)i, s);
            }
        }
        if (shstrndx != 0) {
            uint64_t b;
            PyObject *srow, *sz, *off;
            if (shstrndx >= shnum) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            srow = PyList_GET_ITEM(rows, (Py_ssize_t)shstrndx);
            sz = PyList_GET_ITEM(sizes, (Py_ssize_t)shstrndx);
            off = PyTuple_GET_ITEM(srow, 4);
            strsize = PyLong_AsUnsignedLongLong(sz);
            if (strsize) {
                uint64_t o = PyLong_AsUnsignedLongLong(off);
                if (PyErr_Occurred()) goto done;
                if (o > n || strsize > n - o) { /* checked in the loop above; kept for the reader */
                    result = Py_NewRef(Py_None);
                    goto done;
                }
                str = buf + o;
            }
            for (b = 0; b < strsize; b++) {
                if (str[b] & 0x80) {
                    result = Py_NewRef(Py_None);
                    goto done;
                }
            }
        }
        for (i = 0; i < shnum; i++) {
            PyObject *row = PyList_GET_ITEM(rows, (Py_ssize_t)i);
            uint64_t o = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(row, 0));
            PyObject *name;
            if (PyErr_Occurred()) goto done;
            if (shstrndx == 0 || (i == 0 && o == 0)) {
                name = PyUnicode_FromStringAndSize("", 0);
            } else {
                const unsigned char *end;
                if (o >= strsize) {
                    result = Py_NewRef(Py_None);
                    goto done;
                }
                end = memchr(str + o, 0, (size_t)(strsize - o));
                if (!end) {
                    result = Py_NewRef(Py_None);
                    goto done;
                }
                name = PyUnicode_DecodeASCII((const char *)(str + o), end - (str + o), "strict");
            }
            if (!name) goto done;
            PyList_SET_ITEM(names, (Py_ssize_t)i, name);
        }
        result = PyTuple_Pack(3, rows, sizes, names);
    }
done:
    Py_XDECREF(rows);
    Py_XDECREF(sizes);
    Py_XDECREF(names);
    PyBuffer_Release(&view);
    return result;
}

static int in_tuple(PyObject *tup, long v) {
    Py_ssize_t k, n = PyTuple_GET_SIZE(tup);
    for (k = 0; k < n; k++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(tup, k));
        if (x == -1 && PyErr_Occurred()) return -1;
        if (x == v) return 1;
    }
    return 0;
}

static PyObject *append3(PyObject *out, long attr, uint64_t a, uint64_t b) {
    PyObject *t = Py_BuildValue("(lKK)", attr, (unsigned long long)a, (unsigned long long)b);
    int rc;
    if (!t) return NULL;
    rc = PyList_Append(out, t);
    Py_DECREF(t);
    return rc ? NULL : out;
}

/* nvinfo_indexed(buf, attrs) -> list[(attr, word0, word1)] | None: the EIATTR records (u8 fmt, u8 attr,
 * u16 value/size; EIFMT_NVAL 1, BVAL 2, HVAL 3 are 4 bytes, SVAL 4 has a payload of that size) whose attr is
 * in attrs and whose payload has two words; an unsizeable record is the rest of the section, its payload
 * read from its own header on; None where an SVAL payload runs past the end. */
static PyObject *nvinfo_indexed(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *attrs, *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyTuple_Type, &attrs)) return NULL;
    {
        const unsigned char *buf = (const unsigned char *)view.buf;
        const uint64_t end = (uint64_t)view.len;
        uint64_t at = 0;
        out = PyList_New(0);
        if (!out) goto done;
        while (end - at >= 4) {
            unsigned fmt = buf[at], attr = buf[at + 1];
            uint64_t half = rd(buf + at + 2, 2, 1);
            int hit;
            if (fmt == 4) {
                if (half > end - at - 4) {
                    Py_SETREF(out, Py_NewRef(Py_None));
                    goto done;
                }
                if (half >= 8) {
                    hit = in_tuple(attrs, (long)attr);
                    if (hit < 0) goto fail;
                    if (hit && !append3(out, attr, rd(buf + at + 4, 4, 1), rd(buf + at + 8, 4, 1))) goto fail;
                }
                at += 4 + half;
            } else if (fmt == 1 || fmt == 2 || fmt == 3) {
                at += 4;
            } else {
                if (end - at >= 8) {
                    hit = in_tuple(attrs, (long)attr);
                    if (hit < 0) goto fail;
                    if (hit && !append3(out, attr, rd(buf + at, 4, 1), rd(buf + at + 4, 4, 1))) goto fail;
                }
                break;
            }
        }
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

static int append_record(PyObject *out, uint64_t at, long fmt, long attr, PyObject *value, const unsigned char *p,
                         uint64_t size) {
    PyObject *payload = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)size);
    PyObject *t;
    int rc;
    if (!payload) return -1;
    t = Py_BuildValue("(KllON)", (unsigned long long)at, fmt, attr, value, payload);
    if (!t) return -1;
    rc = PyList_Append(out, t);
    Py_DECREF(t);
    return rc;
}

/* nvinfo_records(buf) -> list[(offset, fmt, attr, value, payload)] | None: every EIATTR record as
 * devbin.targets.nvidia.nvinfo.records_py gives it (a tail shorter than a header: fmt and attr -1, the tail
 * as payload; an unsizeable format: the rest of the section from its header on); None where an SVAL payload
 * runs past the end. */
static PyObject *nvinfo_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    {
        const unsigned char *buf = (const unsigned char *)view.buf;
        const uint64_t end = (uint64_t)view.len;
        uint64_t at = 0;
        out = PyList_New(0);
        if (!out) goto done;
        while (at < end) {
            unsigned fmt, attr;
            uint64_t half;
            int rc;
            if (end - at < 4) {
                if (append_record(out, at, -1, -1, Py_None, buf + at, end - at)) goto fail;
                break;
            }
            fmt = buf[at];
            attr = buf[at + 1];
            half = rd(buf + at + 2, 2, 1);
            if (fmt == 4) {
                if (half > end - at - 4) {
                    Py_SETREF(out, Py_NewRef(Py_None));
                    goto done;
                }
                if (append_record(out, at, fmt, attr, Py_None, buf + at + 4, half)) goto fail;
                at += 4 + half;
            } else if (fmt == 1 || fmt == 2 || fmt == 3) {
                PyObject *value = fmt == 1 ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(fmt == 2 ? half & 0xFF : half);
                if (!value) goto fail;
                rc = append_record(out, at, fmt, attr, value, buf, 0);
                Py_DECREF(value);
                if (rc) goto fail;
                at += 4;
            } else {
                if (append_record(out, at, fmt, attr, Py_None, buf + at, end - at)) goto fail;
                break;
            }
        }
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"section_table", section_table, METH_VARARGS,
     "section_table(buf, shoff, shnum, is64, little, no_file, shstrndx): ELF section rows, file sizes, names, "
     "or None."},
    {"nvinfo_indexed", nvinfo_indexed, METH_VARARGS,
     "nvinfo_indexed(buf, attrs): (attr, word0, word1) of the .nv.info records of those attributes, or None."},
    {"nvinfo_records", nvinfo_records, METH_VARARGS,
     "nvinfo_records(buf): (offset, fmt, attr, value, payload) of every .nv.info record, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cdecode", "C twins of devbin's table decoders.", 0,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cdecode(void) { return PyModule_Create(&module); }
