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


/* ------------------------------------------------------------------------------------------------------------
 * cubin_usage_lines(buf) -> str | None: the lines ``cuobjdump -res-usage`` prints for one cubin (from its empty
 * line on), what the readers give as devbin.targets.nvidia.resources.format_cuobjdump(usage(Cubin(ElfFile(buf),
 * records=False))) (called from devbin.targets.nvidia.resources.usage_lines).  One pass over the section headers, the symbol table's two fields it needs (st_name,
 * st_other) and the global .nv.info stack/register records; no Python object per function or record.
 *
 * It answers only the plain case and returns None for everything else, where the reader's own path gives the
 * lines or the error: an ELF that is not 64-bit little-endian EM_CUDA, extended section/segment numbering, any
 * check ElfFile makes at open that fails (header tables, section/segment extents, section names, symbol and
 * relocation table shapes, the symbol table's string table), a cubin without SHT_SYMTAB, a .nv.info or
 * .nv.compat record running past its section, a section or symbol name that is not printable ASCII (the text
 * rule, devbin.escape.text, would escape it), a bank number of more than 9 digits, a sum past 2**64.
 * ------------------------------------------------------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 4096;
        char *q;
        while (cap - b->len < n) {
            if (cap > ((size_t)1 << 40)) {
                b->failed = 1;
                return;
            }
            cap *= 2;
        }
        q = PyMem_Realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(sbuf *b, uint64_t v) {
    char tmp[24];
    int i = 24;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    sb_put(b, tmp + i, (size_t)(24 - i));
}

typedef struct {
    uint64_t bank, size;
} cbank;

typedef struct {
    const char *name;
    size_t name_len;
    uint64_t symbol, section;
    int is_entry;
    uint64_t registers, shared, local;
    int has_regcount, has_min, has_max;
    uint64_t regcount, min_stack, max_stack;
    size_t nbanks, bank_cap;
    cbank *banks;
} cfunc;

static int add_u64(uint64_t *acc, uint64_t v) {
    if (v > UINT64_MAX - *acc) return -1;
    *acc += v;
    return 0;
}

/* add size to bank in (banks, n, cap) keeping first-seen order; -1 on overflow or no memory */
static int add_bank(cbank **banks, size_t *n, size_t *cap, uint64_t bank, uint64_t size) {
    size_t k;
    for (k = 0; k < *n; k++) {
        if ((*banks)[k].bank == bank) return add_u64(&(*banks)[k].size, size);
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        cbank *q = PyMem_Realloc(*banks, c * sizeof(cbank));
        if (!q) return -1;
        *banks = q;
        *cap = c;
    }
    (*banks)[*n].bank = bank;
    (*banks)[*n].size = size;
    (*n)++;
    return 0;
}

/* ``^\.nv\.constant(\d+)(?:\.(.+))?$`` on a name without control characters: 1 and the bank (and *fn, *fn_len
 * the function part, NULL when none) on a match, 0 on none, -1 for a bank of more than 9 digits. */
static int const_section(const char *name, size_t len, uint64_t *bank, const char **fn, size_t *fn_len) {
    size_t i = 12, d = 0;
    uint64_t v = 0;
    if (len < 13 || memcmp(name, ".nv.constant", 12) != 0) return 0;
    while (i < len && name[i] >= '0' && name[i] <= '9') {
        v = v * 10 + (uint64_t)(name[i] - '0');
        i++;
        if (++d > 9) return -1;
    }
    if (d == 0) return 0;
    *bank = v;
    if (i == len) {
        *fn = NULL;
        *fn_len = 0;
        return 1;
    }
    if (name[i] == '.' && i + 1 < len) {
        *fn = name + i + 1;
        *fn_len = len - i - 1;
        return 1;
    }
    return 0;
}

static int starts(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

/* the EIATTR records of a section walked as nvinfo_indexed walks them: -1 where an SVAL payload runs past
 * the end (parse_nvinfo's error); with funcs, the stack/register records applied to them */
static int walk_nvinfo(const unsigned char *buf, uint64_t end, cfunc *funcs, size_t nfuncs,
                       const int64_t *by_symbol, uint64_t nsyms) {
    uint64_t at = 0;
    while (end - at >= 4) {
        unsigned fmt = buf[at], attr = buf[at + 1];
        uint64_t half = rd(buf + at + 2, 2, 1);
        uint64_t w_at = 0;
        int hit = 0;
        if (fmt == 4) {
            if (half > end - at - 4) return -1;
            if (half >= 8) {
                hit = 1;
                w_at = at + 4;
            }
            at += 4 + half;
        } else if (fmt == 1 || fmt == 2 || fmt == 3) {
            at += 4;
        } else {
            if (end - at >= 8) {
                hit = 1;
                w_at = at;
            }
            at = end;
        }
        if (hit && funcs && (attr == 0x2f || attr == 0x11 || attr == 0x12 || attr == 0x23)) {
            uint64_t sym = rd(buf + w_at, 4, 1), value = rd(buf + w_at + 4, 4, 1);
            cfunc *g = NULL;
            if (sym < nsyms) {
                if (by_symbol[sym] >= 0) g = &funcs[by_symbol[sym]];
            } else {
                size_t k;
                for (k = nfuncs; k-- > 0;) {
                    if (funcs[k].symbol == sym) {
                        g = &funcs[k];
                        break;
                    }
                }
            }
            if (g) {
                if (attr == 0x2f) {
                    g->has_regcount = 1;
                    g->regcount = value;
                } else if (attr == 0x11) {
                    /* the frame: not a cuobjdump number */
                } else if (attr == 0x12) {
                    g->has_min = 1;
                    g->min_stack = value;
                } else {
                    g->has_max = 1;
                    g->max_stack = value;
                }
            }
        }
    }
    return 0;
}

static int printable_ascii(const char *s, size_t n) {
    size_t k;
    for (k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c < 0x20 || c >= 0x7f) return 0;
    }
    return 1;
}

#define SHT_PROGBITS 1
#define SHT_SYMTAB 2
#define SHT_STRTAB 3
#define SHT_RELA 4
#define SHT_REL 9
#define SHT_DYNSYM 11
#define SHT_CUDA_INFO 0x70000000u

static PyObject *cubin_usage_lines(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *result = NULL;
    const char **names = NULL;
    size_t *name_lens = NULL;
    cfunc *funcs = NULL;
    size_t nfuncs = 0, k;
    int64_t *by_symbol = NULL, *by_section = NULL;
    cbank *common = NULL;
    size_t ncommon = 0, common_cap = 0;
    sbuf out = {NULL, 0, 0, 0};
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    {
        const unsigned char *b = (const unsigned char *)view.buf;
        const uint64_t n = (uint64_t)view.len;
        uint64_t phoff, shoff, phnum, shnum, shstrndx, i;
        const unsigned char *str = NULL, *symstr = NULL, *sh;
        uint64_t strsize = 0, symstrsize = 0, symoff = 0, nsyms = 0, global = 0;
        int64_t symtab = -1, nvinfo = -1, compat = -1;
#define NONE_IF(cond)                     \
    do {                                  \
        if (cond) {                       \
            result = Py_NewRef(Py_None);  \
            goto done;                    \
        }                                 \
    } while (0)
#define SH(i, off, size) rd(sh + (i) * 64 + (off), (size), 1)
        NONE_IF(n < 64 || memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2 || b[5] != 1);
        NONE_IF(rd(b + 18, 2, 1) != 190);
        phoff = rd(b + 32, 8, 1);
        shoff = rd(b + 40, 8, 1);
        phnum = rd(b + 56, 2, 1);
        shnum = rd(b + 60, 2, 1);
        shstrndx = rd(b + 62, 2, 1);
        NONE_IF(phnum == 0xffff || shstrndx == 0xffff || shnum == 0);
        NONE_IF(rd(b + 58, 2, 1) != 64 || shoff > n || shnum > (n - shoff) / 64);
        if (phnum) {
            NONE_IF(rd(b + 54, 2, 1) != 56 || phoff > n || phnum > (n - phoff) / 56);
            for (i = 0; i < phnum; i++) {
                uint64_t off = rd(b + phoff + i * 56 + 8, 8, 1), filesz = rd(b + phoff + i * 56 + 32, 8, 1);
                NONE_IF(filesz && (off > n || filesz > n - off));
            }
        }
        sh = b + shoff;
        for (i = 0; i < shnum; i++) {
            uint64_t type = SH(i, 4, 4), off = SH(i, 24, 8), size = SH(i, 32, 8);
            int no_file = type == 0 || type == 8 || type == 0x70000007u || type == 0x70000009u ||
                          type == 0x7000000Au || type == 0x70000015u;
            NONE_IF(!no_file && size && (off > n || size > n - off));
        }
        if (shstrndx != 0) {
            uint64_t type;
            int no_file;
            NONE_IF(shstrndx >= shnum);
            type = SH(shstrndx, 4, 4);
            no_file = type == 0 || type == 8 || type == 0x70000007u || type == 0x70000009u || type == 0x7000000Au ||
                      type == 0x70000015u;
            strsize = no_file ? 0 : SH(shstrndx, 32, 8);
            str = b + (strsize ? SH(shstrndx, 24, 8) : 0);
            for (i = 0; i < strsize; i++) NONE_IF(str[i] & 0x80);
        }
        names = PyMem_Calloc((size_t)shnum, sizeof(char *));
        name_lens = PyMem_Calloc((size_t)shnum, sizeof(size_t));
        by_section = PyMem_Malloc((size_t)shnum * sizeof(int64_t));
        funcs = PyMem_Calloc((size_t)shnum, sizeof(cfunc));
        if (!names || !name_lens || !by_section || !funcs) {
            PyErr_NoMemory();
            goto done;
        }
        for (i = 0; i < shnum; i++) {
            uint64_t o = SH(i, 0, 4), type = SH(i, 4, 4);
            by_section[i] = -1;
            if (shstrndx == 0 || (i == 0 && o == 0)) {
                names[i] = "";
                name_lens[i] = 0;
            } else {
                const unsigned char *e;
                NONE_IF(o >= strsize);
                e = memchr(str + o, 0, (size_t)(strsize - o));
                NONE_IF(!e);
                names[i] = (const char *)(str + o);
                name_lens[i] = (size_t)(e - (str + o));
                NONE_IF(!printable_ascii(names[i], name_lens[i]));
            }
            if (type == SHT_SYMTAB || type == SHT_DYNSYM) {
                uint64_t link = SH(i, 40, 4);
                NONE_IF(SH(i, 56, 8) != 24 || SH(i, 32, 8) % 24 != 0);
                NONE_IF(link >= shnum || SH(link, 4, 4) != SHT_STRTAB);
                if (type == SHT_SYMTAB && symtab < 0) symtab = (int64_t)i;
            } else if (type == SHT_REL || type == SHT_RELA) {
                uint64_t ent = type == SHT_RELA ? 24 : 16, es = SH(i, 56, 8);
                NONE_IF((es != ent && es != 0) || SH(i, 32, 8) % ent != 0);
            }
            if (nvinfo < 0 && name_lens[i] == 8 && memcmp(names[i], ".nv.info", 8) == 0) nvinfo = (int64_t)i;
            if (compat < 0 && name_lens[i] == 10 && memcmp(names[i], ".nv.compat", 10) == 0) compat = (int64_t)i;
        }
        NONE_IF(symtab < 0);
        {
            uint64_t link = SH(symtab, 40, 4), ltype = SH(link, 4, 4);
            int no_file = ltype == 0 || ltype == 8 || ltype == 0x70000007u || ltype == 0x70000009u ||
                          ltype == 0x7000000Au || ltype == 0x70000015u;
            symoff = SH(symtab, 24, 8);
            nsyms = SH(symtab, 32, 8) / 24;
            symstrsize = no_file ? 0 : SH(link, 32, 8);
            symstr = b + (symstrsize ? SH(link, 24, 8) : 0);
            for (i = 0; i < symstrsize; i++) NONE_IF(symstr[i] & 0x80);
        }
        if (compat >= 0) {
            uint64_t type = SH(compat, 4, 4), size = SH(compat, 32, 8);
            int no_file = type == 0 || type == 8 || type == 0x70000007u || type == 0x70000009u ||
                          type == 0x7000000Au || type == 0x70000015u;
            if (!no_file && size) NONE_IF(walk_nvinfo(b + SH(compat, 24, 8), size, NULL, 0, NULL, 0) < 0);
        }
        /* the functions: one per .text.<f> PROGBITS section, in section order */
        for (i = 0; i < shnum; i++) {
            uint64_t info;
            cfunc *f;
            if (!starts(names[i], name_lens[i], ".text.") || SH(i, 4, 4) != SHT_PROGBITS) continue;
            info = SH(i, 44, 4);
            f = &funcs[nfuncs];
            f->symbol = info & 0xFFFFFF;
            f->section = i;
            f->name = names[i] + 6;
            f->name_len = name_lens[i] - 6;
            if (f->symbol < nsyms) {
                const unsigned char *sym = b + symoff + f->symbol * 24;
                uint64_t so = rd(sym, 4, 1);
                f->is_entry = (sym[5] & 0x10) != 0;
                if (so) {
                    const unsigned char *e;
                    NONE_IF(so >= symstrsize);
                    e = memchr(symstr + so, 0, (size_t)(symstrsize - so));
                    NONE_IF(!e);
                    if (e != symstr + so) {
                        f->name = (const char *)(symstr + so);
                        f->name_len = (size_t)(e - (symstr + so));
                    }
                }
            }
            NONE_IF(!printable_ascii(f->name, f->name_len));
            f->registers = info >> 24;
            by_section[i] = (int64_t)nfuncs;
            nfuncs++;
        }
        by_symbol = PyMem_Malloc((size_t)(nsyms ? nsyms : 1) * sizeof(int64_t));
        if (!by_symbol) {
            PyErr_NoMemory();
            goto done;
        }
        for (i = 0; i < nsyms; i++) by_symbol[i] = -1;
        for (k = 0; k < nfuncs; k++) {
            if (funcs[k].symbol < nsyms) by_symbol[funcs[k].symbol] = (int64_t)k; /* the last one wins */
        }
        if (nvinfo >= 0 && SH(nvinfo, 4, 4) == SHT_CUDA_INFO) {
            uint64_t size = SH(nvinfo, 32, 8);
            if (size) NONE_IF(walk_nvinfo(b + SH(nvinfo, 24, 8), size, funcs, nfuncs, by_symbol, nsyms) < 0);
        }
        for (k = 0; k < nfuncs; k++) {
            if (funcs[k].is_entry && funcs[k].has_regcount) funcs[k].registers = funcs[k].regcount;
        }
        /* the sections a function owns, and the module-wide ones */
        for (i = 0; i < shnum; i++) {
            const char *nm = names[i];
            size_t nl = name_lens[i];
            uint64_t size = SH(i, 32, 8), bank = 0;
            const char *fn = NULL;
            size_t fn_len = 0;
            int m;
            cfunc *owner = NULL;
            if ((nl == 10 && memcmp(nm, ".nv.global", 10) == 0) || (nl == 15 && memcmp(nm, ".nv.global.init", 15) == 0))
                NONE_IF(add_u64(&global, size) < 0);
            if (!(starts(nm, nl, ".nv.info.") || starts(nm, nl, ".nv.shared.") || starts(nm, nl, ".nv.local.") ||
                  starts(nm, nl, ".nv.constant")))
                continue;
            m = const_section(nm, nl, &bank, &fn, &fn_len);
            NONE_IF(m < 0);
            if (m == 1 && fn == NULL)
                NONE_IF(add_bank(&common, &ncommon, &common_cap, bank, size) < 0);
            {
                uint64_t flags = SH(i, 8, 8), info = SH(i, 44, 4);
                if ((flags & 0x40) && info < shnum && by_section[info] >= 0) {
                    owner = &funcs[by_section[info]];
                } else {
                    /* by the name after its third dot (none: the empty name) */
                    const char *suffix = nm + nl;
                    size_t dots = 0, q;
                    for (q = 0; q < nl; q++) {
                        if (nm[q] == '.' && ++dots == 3) {
                            suffix = nm + q + 1;
                            break;
                        }
                    }
                    for (q = nfuncs; q-- > 0;) {
                        size_t sl = (size_t)(nm + nl - suffix);
                        if (funcs[q].name_len == sl && memcmp(funcs[q].name, suffix, sl) == 0) {
                            owner = &funcs[q];
                            break;
                        }
                    }
                }
            }
            if (owner == NULL || SH(i, 4, 4) == SHT_CUDA_INFO) continue;
            if (starts(nm, nl, ".nv.shared.") && !starts(nm, nl, ".nv.shared.reserved")) {
                NONE_IF(add_u64(&owner->shared, size) < 0);
            } else if (starts(nm, nl, ".nv.local.")) {
                NONE_IF(add_u64(&owner->local, size) < 0);
            } else if (m == 1 && fn != NULL) {
                NONE_IF(add_bank(&owner->banks, &owner->nbanks, &owner->bank_cap, bank, size) < 0);
            }
        }
        sb_str(&out, "\nResource usage:\n Common:\n  GLOBAL:");
        sb_u64(&out, global);
        for (k = 0; k < ncommon; k++) {
            sb_str(&out, " CONSTANT[");
            sb_u64(&out, common[k].bank);
            sb_str(&out, "]:");
            sb_u64(&out, common[k].size);
        }
        sb_str(&out, "\n");
        for (k = 0; k < nfuncs; k++) {
            cfunc *f = &funcs[k];
            uint64_t stack = f->has_min ? f->min_stack : f->has_max ? f->max_stack : 0;
            size_t j;
            sb_str(&out, " Function ");
            sb_put(&out, f->name, f->name_len);
            sb_str(&out, ":\n  REG:");
            sb_u64(&out, f->registers);
            sb_str(&out, " STACK:");
            if (stack == 0xFFFFFFFFu)
                sb_str(&out, "UNKNOWN");
            else
                sb_u64(&out, stack);
            sb_str(&out, " SHARED:");
            sb_u64(&out, f->shared);
            sb_str(&out, " LOCAL:");
            sb_u64(&out, f->local);
            for (j = 0; j < f->nbanks; j++) {
                sb_str(&out, " CONSTANT[");
                sb_u64(&out, f->banks[j].bank);
                sb_str(&out, "]:");
                sb_u64(&out, f->banks[j].size);
            }
            sb_str(&out, " TEXTURE:0 SURFACE:0 SAMPLER:0\n");
        }
        if (out.failed) {
            PyErr_NoMemory();
            goto done;
        }
        result = PyUnicode_DecodeASCII(out.p, (Py_ssize_t)out.len, "strict");
#undef NONE_IF
#undef SH
    }
done:
    if (funcs) {
        for (k = 0; k < nfuncs; k++) PyMem_Free(funcs[k].banks);
    }
    PyMem_Free(funcs);
    PyMem_Free(names);
    PyMem_Free(name_lens);
    PyMem_Free(by_symbol);
    PyMem_Free(by_section);
    PyMem_Free(common);
    PyMem_Free(out.p);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"section_table", section_table, METH_VARARGS,
     "section_table(buf, shoff, shnum, is64, little, no_file, shstrndx): ELF section rows, file sizes, names, "
     "or None."},
    {"nvinfo_indexed", nvinfo_indexed, METH_VARARGS,
     "nvinfo_indexed(buf, attrs): (attr, word0, word1) of the .nv.info records of those attributes, or None."},
    {"nvinfo_records", nvinfo_records, METH_VARARGS,
     "nvinfo_records(buf): (offset, fmt, attr, value, payload) of every .nv.info record, or None."},
    {"cubin_usage_lines", cubin_usage_lines, METH_VARARGS,
     "cubin_usage_lines(buf): the lines cuobjdump -res-usage prints for a cubin, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cdecode", "C twins of devbin's table decoders.", 0,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cdecode(void) { return PyModule_Create(&module); }
