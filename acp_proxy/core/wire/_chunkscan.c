/*
 * acp_proxy.core.wire._chunkscan: the agent's content-chunk lines found on the bytes.
 *
 * Optional compiled part of the run path (issue 29). One function,
 * fast_stretch(), reads the lines of a run from a byte offset on and counts
 * those that are content-chunk notifications of a session the caller knows,
 * written exactly as the pure-Python run path (runs.chunk_run) accepts them:
 *
 *   {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":S,"update":U}}
 *
 * U one of (K a content-chunk kind, V any JSON value, M a string or null):
 *
 *   {"sessionUpdate":K,"content":V}            {"content":V,"sessionUpdate":K}
 *   {"sessionUpdate":K,"content":V,"messageId":M}
 *   {"content":V,"messageId":M,"sessionUpdate":K}
 *
 * It builds no object for V: V is validated on its bytes. The scanner is
 * never more lenient than chunk_run, which is the reference (the test suite
 * holds the two together): a line it passes is one chunk_run accepts, with
 * the same session. It may be stricter (then the caller decides the line on
 * the pure-Python path, exactly as before), and is on purpose where being
 * exact would be long:
 *
 * - S and M hold no escape and no control character (chunk_run accepts the
 *   escapes the encoder writes: \" \\ and \u00XX);
 * - a number has at most 200 digits before the point, 200 after it and two
 *   in its exponent (chunk_run decodes a long V and refuses a float past the
 *   double range or an integer past Python's digit limit: these bounds keep
 *   every number passed well inside both);
 * - V nests at most max_depth containers (exactly chunk_run's bound).
 *
 * What it checks as chunk_run does: UTF-8 (strict: no overlong form, no
 * surrogate, nothing past U+10FFFF), JSON's grammar inside V (strings,
 * escapes and surrogate pairs, numbers, literals, whitespace between
 * tokens; none before or after V, which the re-encode would drop), and each
 * key, its order and every byte of the envelope.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_NUMBER_DIGITS 200
#define MAX_EXPONENT_DIGITS 2
#define MAX_DEPTH_LIMIT 4096

typedef const unsigned char *ptr;

/* 1 for a byte that ends a run of plain string bytes: '"', '\\', a control
 * character, or a non-ASCII byte. */
static unsigned char SPECIAL[256];

static void
init_tables(void)
{
    for (int c = 0; c < 256; c++) {
        SPECIAL[c] = (c < 0x20 || c == '"' || c == '\\' || c >= 0x80);
    }
}

/* One UTF-8 sequence starting at p (its first byte >= 0x80); the byte after
 * it, or NULL. Strict, as Python's decoder: no overlong form, no surrogate
 * (U+D800..U+DFFF), nothing past U+10FFFF. */
static ptr
utf8_seq(ptr p, ptr end)
{
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (end - p < 2 || (p[1] & 0xC0) != 0x80) return NULL;
        return p + 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3) return NULL;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80) return NULL;
        return p + 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4) return NULL;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return NULL;
        return p + 4;
    }
    return NULL;
}

/* The body of a string with no escape and no control character (S, M),
 * from after its opening quote; the byte after its closing quote, or NULL. */
static ptr
plain_string(ptr p, ptr end)
{
    while (p < end) {
        unsigned char c = *p;
        if (!SPECIAL[c]) {
            p++;
        } else if (c == '"') {
            return p + 1;
        } else if (c >= 0x80) {
            p = utf8_seq(p, end);
            if (p == NULL) return NULL;
        } else {
            return NULL; /* an escape or a control character */
        }
    }
    return NULL;
}

static int
hex4(ptr p, unsigned int *out)
{
    unsigned int v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned int)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned int)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned int)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* A JSON string inside V, from after its opening quote; the byte after its
 * closing quote, or NULL. Escapes as RFC 8259 section 7; a \u escape of a
 * surrogate must be a high one followed by a low one. */
static ptr
json_string(ptr p, ptr end)
{
    while (p < end) {
        unsigned char c = *p;
        if (!SPECIAL[c]) {
            p++;
            continue;
        }
        if (c == '"') return p + 1;
        if (c >= 0x80) {
            p = utf8_seq(p, end);
            if (p == NULL) return NULL;
            continue;
        }
        if (c != '\\' || end - p < 2) return NULL; /* a control character */
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u': {
            unsigned int u;
            if (end - p < 6 || !hex4(p + 2, &u)) return NULL;
            p += 6;
            if (u >= 0xDC00 && u <= 0xDFFF) return NULL; /* a lone low surrogate */
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned int lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo)
                    || lo < 0xDC00 || lo > 0xDFFF)
                    return NULL;
                p += 6;
            }
            break;
        }
        default:
            return NULL;
        }
    }
    return NULL;
}

/* A JSON number (RFC 8259 section 6) within the digit bounds above; the byte
 * after it, or NULL. */
static ptr
json_number(ptr p, ptr end)
{
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        ptr start = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p - start > MAX_NUMBER_DIGITS) return NULL;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        ptr start = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == start || p - start > MAX_NUMBER_DIGITS) return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        ptr start = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == start || p - start > MAX_EXPONENT_DIGITS) return NULL;
    }
    return p;
}

static inline ptr
skip_ws(ptr p, ptr end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    return p;
}

/* One JSON value starting exactly at p (no whitespace before it), nesting at
 * most max_depth containers; the byte right after it, or NULL. Iterative: the
 * open containers are kept in `open` (1 for an object, 0 for an array). */
static ptr
json_value(ptr p, ptr end, int max_depth, unsigned char *open)
{
    int depth = 0;
value:
    if (p >= end) return NULL;
    switch (*p) {
    case '{':
        if (depth >= max_depth) return NULL;
        open[depth++] = 1;
        p = skip_ws(p + 1, end);
        if (p < end && *p == '}') {
            p++;
            depth--;
            goto after;
        }
        goto key;
    case '[':
        if (depth >= max_depth) return NULL;
        open[depth++] = 0;
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
            p++;
            depth--;
            goto after;
        }
        goto value;
    case '"':
        p = json_string(p + 1, end);
        if (p == NULL) return NULL;
        goto after;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0) return NULL;
        p += 4;
        goto after;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0) return NULL;
        p += 5;
        goto after;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0) return NULL;
        p += 4;
        goto after;
    default:
        p = json_number(p, end);
        if (p == NULL) return NULL;
        goto after;
    }
key:
    if (p >= end || *p != '"') return NULL;
    p = json_string(p + 1, end);
    if (p == NULL) return NULL;
    p = skip_ws(p, end);
    if (p >= end || *p != ':') return NULL;
    p = skip_ws(p + 1, end);
    goto value;
after:
    if (depth == 0) return p;
    p = skip_ws(p, end);
    if (p >= end) return NULL;
    if (*p == ',') {
        p = skip_ws(p + 1, end);
        if (open[depth - 1]) goto key;
        goto value;
    }
    if (*p == (open[depth - 1] ? '}' : ']')) {
        p++;
        depth--;
        goto after;
    }
    return NULL;
}

#define LIT(s) s, (sizeof(s) - 1)

static inline ptr
lit(ptr p, ptr end, const char *s, size_t n)
{
    if ((size_t)(end - p) < n || memcmp(p, s, n) != 0) return NULL;
    return p + n;
}

/* A content-chunk kind K with its quotes, from its opening quote; the byte
 * after it, or NULL. */
static ptr
chunk_kind(ptr p, ptr end)
{
    ptr q;
    if ((q = lit(p, end, LIT("\"agent_message_chunk\""))) != NULL) return q;
    if ((q = lit(p, end, LIT("\"agent_thought_chunk\""))) != NULL) return q;
    return lit(p, end, LIT("\"user_message_chunk\""));
}

/* M: a plain string or null; the byte after it, or NULL. */
static ptr
message_id(ptr p, ptr end)
{
    if (p < end && *p == '"') return plain_string(p + 1, end);
    return lit(p, end, LIT("null"));
}

static const char PREFIX[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"";

/* One line [p, end): when it is a content-chunk envelope, its session id's
 * bytes in [*sid, *sid + *sid_len) and 1; else 0. */
static int
chunk_line(ptr p, ptr end, int max_depth, unsigned char *open, ptr *sid, Py_ssize_t *sid_len)
{
    ptr q = lit(p, end, PREFIX, sizeof(PREFIX) - 1);
    if (q == NULL) return 0;
    ptr s = q;
    q = plain_string(q, end);
    if (q == NULL) return 0;
    *sid = s;
    *sid_len = (q - 1) - s;
    q = lit(q, end, LIT(",\"update\":{"));
    if (q == NULL) return 0;
    ptr r;
    if ((r = lit(q, end, LIT("\"sessionUpdate\":"))) != NULL) {
        /* kind first: K, content, maybe messageId */
        q = chunk_kind(r, end);
        if (q == NULL) return 0;
        q = lit(q, end, LIT(",\"content\":"));
        if (q == NULL) return 0;
        q = json_value(q, end, max_depth, open);
        if (q == NULL) return 0;
        if ((r = lit(q, end, LIT(",\"messageId\":"))) != NULL) {
            q = message_id(r, end);
            if (q == NULL) return 0;
        }
    } else if ((r = lit(q, end, LIT("\"content\":"))) != NULL) {
        /* kind last: content, maybe messageId, K */
        q = json_value(r, end, max_depth, open);
        if (q == NULL) return 0;
        if ((r = lit(q, end, LIT(",\"messageId\":"))) != NULL) {
            q = message_id(r, end);
            if (q == NULL) return 0;
        }
        q = lit(q, end, LIT(",\"sessionUpdate\":"));
        if (q == NULL) return 0;
        q = chunk_kind(q, end);
        if (q == NULL) return 0;
    } else {
        return 0;
    }
    q = lit(q, end, LIT("}}}"));
    return q != NULL && q == end;
}

PyDoc_STRVAR(fast_stretch_doc,
"fast_stretch(data, pos, known, max_depth, /)\n"
"--\n"
"\n"
"The stretch of content-chunk lines of known sessions in a run from ``pos``,\n"
"and the lines after it up to the next such line.\n"
"\n"
"Args:\n"
"    data: lines joined by ``b\"\\\\n\"``, without the last newline (a run).\n"
"    pos: the byte offset of a line's start (0 <= pos <= len(data)).\n"
"    known: the sessions the client knows (``in`` is asked of it).\n"
"    max_depth: the containers a line's ``content`` may nest (0 to 4096).\n"
"\n"
"Returns:\n"
"    ``(count, stop, next)``: the ``count`` lines from ``pos`` up to byte\n"
"    ``stop`` are content-chunk notifications of sessions in ``known``, each\n"
"    one that ``runs.chunk_run`` accepts; the line at ``stop`` is not; the\n"
"    lines after it up to ``next`` are not content-chunk lines at all (of\n"
"    any session: the next one starts at ``next``, where the caller asks\n"
"    again with the sessions known then). Byte offsets of line starts;\n"
"    ``len(data) + 1`` stands for the end of the run (for ``stop``: every\n"
"    line passed; for ``next``: no chunk line follows).\n"
"\n"
"Raises:\n"
"    TypeError: ``data`` is not bytes.\n"
"    ValueError: ``pos`` or ``max_depth`` out of range, or ``pos`` not at a\n"
"        line's start (0 or just after a newline).\n");

static PyObject *
fast_stretch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "fast_stretch() takes exactly 4 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "fast_stretch(): data must be bytes");
        return NULL;
    }
    ptr base = (ptr)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    long max_depth = PyLong_AsLong(args[3]);
    if (max_depth == -1 && PyErr_Occurred()) return NULL;
    if (pos < 0 || pos > size) {
        PyErr_SetString(PyExc_ValueError, "fast_stretch(): pos out of range");
        return NULL;
    }
    if (pos > 0 && base[pos - 1] != '\n') {
        PyErr_SetString(PyExc_ValueError, "fast_stretch(): pos is not a line's start");
        return NULL;
    }
    if (max_depth < 0 || max_depth > MAX_DEPTH_LIMIT) {
        PyErr_SetString(PyExc_ValueError, "fast_stretch(): max_depth out of range");
        return NULL;
    }
    PyObject *known = args[2];
    unsigned char open[MAX_DEPTH_LIMIT];
    ptr end_all = base + size;
    ptr p = base + pos;
    /* the last session decoded, kept for the next line of the same session
     * (most are), and the answer for it. An exact set or frozenset (the
     * engine's) is asked once for consecutive lines of one session: nothing
     * runs between them (no Python code, so no other thread either), so the
     * set cannot change (only an element whose __eq__ answers differently each
     * time could). Any other `known` is asked for every line: its
     * __contains__ may run Python code that changes the answer, and a line is
     * passed on the answer given for it. */
    ptr last_sid = NULL;
    Py_ssize_t last_len = -1;
    PyObject *last = NULL;
    int remember = PyAnySet_CheckExact(known), last_known = 0;
    PyObject *result = NULL;
    Py_ssize_t count = 0, stop = -1;
    for (;;) {
        ptr nl = memchr(p, '\n', (size_t)(end_all - p));
        ptr line_end = nl == NULL ? end_all : nl;
        ptr sid;
        Py_ssize_t sid_len;
        int fast = chunk_line(p, line_end, (int)max_depth, open, &sid, &sid_len);
        if (fast && stop >= 0) { /* the first chunk line after the stretch's end */
            result = Py_BuildValue("(nnn)", count, stop, (Py_ssize_t)(p - base));
            goto done;
        }
        if (fast) {
            int same = sid_len == last_len && memcmp(sid, last_sid, (size_t)sid_len) == 0;
            if (!same) {
                PyObject *s = PyUnicode_DecodeUTF8((const char *)sid, sid_len, "strict");
                if (s == NULL) goto done; /* not reached: the bytes were checked */
                Py_XSETREF(last, s);
                last_sid = sid;
                last_len = sid_len;
            }
            if (!same || !remember) {
                last_known = PySequence_Contains(known, last);
                if (last_known < 0) goto done;
            }
            fast = last_known;
        }
        if (stop < 0) { /* in the stretch */
            if (fast)
                count++;
            else
                stop = p - base;
        }
        if (nl == NULL) break; /* every line read */
        p = nl + 1;
    }
    if (stop < 0) stop = size + 1;
    result = Py_BuildValue("(nnn)", count, stop, size + 1);
done:
    Py_XDECREF(last);
    return result;
}

static PyMethodDef methods[] = {
    {"fast_stretch", (PyCFunction)(void (*)(void))fast_stretch, METH_FASTCALL, fast_stretch_doc},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *m)
{
    /* the CRC-32 of the source it was built from: runs.py checks it at import */
    return PyModule_AddStringConstant(m, "SOURCE_CRC32", ACP_CHUNKSCAN_CRC32);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_chunkscan",
    "Content-chunk lines of a run found on the bytes (issue 29); see fast_stretch.",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__chunkscan(void)
{
    init_tables();
    return PyModuleDef_Init(&module_def);
}
