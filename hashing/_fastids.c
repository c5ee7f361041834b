/*
 * hashing._fastids: the compiled hot path of hashing/hashers.py and hashing/chaining.py.
 *
 * One call computes, for one StreamGraph, which edges chain (StreamingJobGraphGenerator#isChainable)
 * and the V2 and/or V3 node hashes (StreamGraphHasherV2#traverseStreamGraphAndGenerateHashes,
 * FLIP-411's V3 without the chained-output terms) in one traversal. It reads the frozen
 * StreamNode/StreamEdge objects directly, so Python builds nothing per node but the results, and its
 * working memory is kept between calls (docs/performance.md, "Operator IDs": where a graph's CPU
 * went and what each change saved). It is a port of the Python rules line by line; the
 * pure-Python modules stay the readable reference and the fallback, and tests/hashing/test_fastids.py
 * checks both give identical results (docs/performance.md, "Operator IDs").
 *
 * Anything this code is not sure about (a cycle, an id or type it does not expect) makes it return
 * None, and the caller runs the Python rules, which raise the product's own errors.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* ---- Guava's murmur3_128(0), as mmh3.hash_bytes(data, 0, x64arch=True) ------------------------ */
static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
    return k;
}
static inline uint64_t load64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }  /* little-endian hosts */

static void murmur3_128(const uint8_t *data, size_t len, uint8_t out[16]) {
    const size_t nblocks = len / 16;
    uint64_t h1 = 0, h2 = 0;
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t k1 = load64(data + i * 16), k2 = load64(data + i * 16 + 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
    const uint8_t *tail = data + nblocks * 16;
    uint64_t k1 = 0, k2 = 0;
    switch (len & 15) {
    case 15: k2 ^= ((uint64_t)tail[14]) << 48; /* fall through */
    case 14: k2 ^= ((uint64_t)tail[13]) << 40; /* fall through */
    case 13: k2 ^= ((uint64_t)tail[12]) << 32; /* fall through */
    case 12: k2 ^= ((uint64_t)tail[11]) << 24; /* fall through */
    case 11: k2 ^= ((uint64_t)tail[10]) << 16; /* fall through */
    case 10: k2 ^= ((uint64_t)tail[9]) << 8; /* fall through */
    case 9: k2 ^= ((uint64_t)tail[8]); k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2; /* fall through */
    case 8: k1 ^= ((uint64_t)tail[7]) << 56; /* fall through */
    case 7: k1 ^= ((uint64_t)tail[6]) << 48; /* fall through */
    case 6: k1 ^= ((uint64_t)tail[5]) << 40; /* fall through */
    case 5: k1 ^= ((uint64_t)tail[4]) << 32; /* fall through */
    case 4: k1 ^= ((uint64_t)tail[3]) << 24; /* fall through */
    case 3: k1 ^= ((uint64_t)tail[2]) << 16; /* fall through */
    case 2: k1 ^= ((uint64_t)tail[1]) << 8; /* fall through */
    case 1: k1 ^= ((uint64_t)tail[0]); k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }
    h1 ^= (uint64_t)len; h2 ^= (uint64_t)len;
    h1 += h2; h2 += h1;
    h1 = fmix64(h1); h2 = fmix64(h2);
    h1 += h2; h2 += h1;
    memcpy(out, &h1, 8); memcpy(out + 8, &h2, 8);
}

/* murmur3_128 of LE32(tid) written `repeats` times (hashing.murmur.traverse_id_hash: Guava's `putInt(tid)` once,
 * plus once per chainable out-edge for V2), without building the bytes: every 16-byte block of that input is
 * the same two words, so the block's key mixing is done once (bit-exact with murmur3_128 above; checked by
 * tests/hashing/test_fastids.py against the Python rules on every fixture and random graph). */
static void tid_hash(uint32_t tid, Py_ssize_t repeats, uint8_t out[16]) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    const uint64_t word = (uint64_t)tid | ((uint64_t)tid << 32);  /* two LE32(tid) */
    const uint64_t len = (uint64_t)repeats * 4;
    uint64_t h1 = 0, h2 = 0;
    Py_ssize_t nblocks = repeats / 4;
    if (nblocks) {
        uint64_t k1 = word * c1; k1 = rotl64(k1, 31); k1 *= c2;
        uint64_t k2 = word * c2; k2 = rotl64(k2, 33); k2 *= c1;
        for (Py_ssize_t i = 0; i < nblocks; i++) {
            h1 ^= k1; h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
            h2 ^= k2; h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
        }
    }
    switch (repeats & 3) {  /* the tail: 4, 8 or 12 bytes */
    case 3: { uint64_t k2 = tid; k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2; } /* fall through */
    case 2: { uint64_t k1 = word; k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1; break; }
    case 1: { uint64_t k1 = tid; k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1; break; }
    }
    h1 ^= len; h2 ^= len;
    h1 += h2; h2 += h1;
    h1 = fmix64(h1); h2 = fmix64(h2);
    h1 += h2; h2 += h1;
    memcpy(out, &h1, 8); memcpy(out + 8, &h2, 8);
}

/* StreamGraphHasherV2#generateDeterministicHash's input mixing, `hash[j] = (byte) (hash[j] * 37 ^ other[j])`,
 * eight bytes at a time: each byte times 37 (= 32 + 4 + 1) modulo 256, with the shifts masked so that no bit
 * crosses into the next byte and the two additions done without carries between bytes. */
static inline uint64_t add_bytes(uint64_t a, uint64_t b) {
    const uint64_t high = 0x8080808080808080ULL;
    return ((a & ~high) + (b & ~high)) ^ ((a ^ b) & high);
}
static inline void mix_input(uint8_t h[16], const uint8_t other[16]) {
    for (int w = 0; w < 16; w += 8) {
        uint64_t x, o;
        memcpy(&x, h + w, 8); memcpy(&o, other + w, 8);
        x = add_bytes(add_bytes((x << 5) & 0xE0E0E0E0E0E0E0E0ULL, (x << 2) & 0xFCFCFCFCFCFCFCFCULL), x) ^ o;
        memcpy(h + w, &x, 8);
    }
}

static PyObject *py_murmur3_128(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t out[16];
    murmur3_128(view.buf, (size_t)view.len, out);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

/* ---- the enum members the rules compare by identity, registered once by hashing/hashers.py ------- */
enum { NEVER, HEAD, HEAD_WITH_SOURCES, FORWARD, FORWARD_FOR_CONSECUTIVE_HASH, BATCH, SOURCE, LEGACY_SOURCE,
       YIELDING, N_CONST };
static PyObject *consts[N_CONST];

/* Fast attribute reads: StreamNode/StreamEdge are slotted dataclasses, so every field lives at a fixed
 * offset of the instance (its member descriptor says where). Objects of another type (a subclass)
 * go to the Python rules. */
enum { A_ID, A_UID, A_PAR, A_MAXPAR, A_STRATEGY, A_SSG, A_FACTORY, N_NODE_ATTRS };
enum { A_SOURCE, A_TARGET, A_PARTITIONER, A_EXCHANGE, N_EDGE_ATTRS };
static PyObject *node_names[N_NODE_ATTRS], *edge_names[N_EDGE_ATTRS];
static PyTypeObject *node_type, *edge_type;
static Py_ssize_t node_offsets[N_NODE_ATTRS], edge_offsets[N_EDGE_ATTRS];

static int member_offsets(PyTypeObject *type, PyObject **names, int count, Py_ssize_t *offsets) {
    for (int i = 0; i < count; i++) {
        offsets[i] = -1;
        PyObject *d = PyDict_GetItemWithError(type->tp_dict, names[i]);  /* borrowed */
        if (d == NULL) { if (PyErr_Occurred()) return -1; continue; }
        if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            if (m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED)) offsets[i] = m->offset;
        }
    }
    return 0;
}

static PyObject *py_configure(PyObject *self, PyObject *args) {
    PyObject *t;
    PyTypeObject *nt, *et;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyTuple_Type, &t, &PyType_Type, &nt, &PyType_Type, &et)) return NULL;
    if (PyTuple_GET_SIZE(t) != N_CONST) { PyErr_SetString(PyExc_ValueError, "wrong number of constants"); return NULL; }
    for (int i = 0; i < N_CONST; i++) {
        Py_XDECREF(consts[i]);
        consts[i] = Py_NewRef(PyTuple_GET_ITEM(t, i));
    }
    if (member_offsets(nt, node_names, N_NODE_ATTRS, node_offsets) < 0 ||
        member_offsets(et, edge_names, N_EDGE_ATTRS, edge_offsets) < 0)
        return NULL;
    Py_XDECREF(node_type); Py_XDECREF(edge_type);
    node_type = (PyTypeObject *)Py_NewRef(nt);
    edge_type = (PyTypeObject *)Py_NewRef(et);
    Py_RETURN_NONE;
}

/* The field `i` of `obj`, borrowed (the frozen object keeps it alive for the whole call). NULL with an
 * error set when the slot is empty; NULL without one for an object of another type (a subclass could
 * compute a field in a property), which the caller hands to the Python rules. */
static inline PyObject *field(PyObject *obj, PyTypeObject *type, const Py_ssize_t *offsets, PyObject **names,
                              int i) {
    if (!Py_IS_TYPE(obj, type) || offsets[i] < 0) return NULL;
    PyObject *v = *(PyObject **)((char *)obj + offsets[i]);
    if (v == NULL) PyErr_SetObject(PyExc_AttributeError, names[i]);
    return v;
}

/* ---- one graph ---------------------------------------------------------------------------------- */
typedef struct {
    PyObject *id, *uid, *par, *maxpar, *strategy, *ssg, *factory;  /* borrowed from the nodes */
    long long id_value;
} Node;
typedef struct {
    Py_ssize_t s, t;
    PyObject *partitioner, *exchange;
} Edge;

/* Everything one call needs besides its results lives in one scratch block that is kept and reused by the
 * next call (a fleet hashes thousands of small graphs: one allocation each would cost more than a node's
 * hash). The block is held for the whole call; a second call while it is held (only possible if an
 * equality test ran Python code that hashes another graph) declines and the Python rules answer it. */
static void *scratch;
static size_t scratch_size;
static int scratch_held;

typedef struct {
    Py_ssize_t n, m;
    Node *nodes;
    Edge *edges;
    Py_ssize_t *in_start, *in_list, *out_start, *out_list;  /* CSR, in edge order */
    Py_ssize_t *head, *pending, *queue, *order, *repeats, *slot_of;
    uint8_t *visited, *chainable;  /* chainable: one flag per edge, the bytes handed back to Python */
    uint8_t *v2, *v3;  /* 16 bytes per node */
    int chaining_enabled, chain_diff_maxp;
    int holds_scratch;  /* this call carved the scratch block and must release it */
} Graph;

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

/* Carve the per-call arrays out of the scratch block; 1 ok, 0 held by another call, -1 no memory. The
 * node-id index `slot_of` (id - first id -> position) is used when ids are dense enough, as Flink's are. */
static int carve(Graph *g, Py_ssize_t id_span) {
    size_t n1 = (size_t)g->n + 1, m1 = (size_t)g->m + 1;
    size_t words = 2 * n1 + 2 * m1 + 4 * n1 + (n1 + m1) + (size_t)id_span;  /* CSR, per-node arrays, queue, index */
    size_t size = ALIGN8(n1 * sizeof(Node)) + ALIGN8(m1 * sizeof(Edge)) + words * sizeof(Py_ssize_t)
                  + ALIGN8(n1) + ALIGN8(m1) + 32 * n1;
    if (scratch_held) return 0;
    if (size > scratch_size) {
        void *bigger = PyMem_Realloc(scratch, size);
        if (bigger == NULL) { PyErr_NoMemory(); return -1; }
        scratch = bigger;
        scratch_size = size;
    }
    scratch_held = g->holds_scratch = 1;
    char *p = scratch;
    g->nodes = (Node *)p; p += ALIGN8(n1 * sizeof(Node));
    g->edges = (Edge *)p; p += ALIGN8(m1 * sizeof(Edge));
    Py_ssize_t *w = (Py_ssize_t *)p;
    g->in_start = w; w += n1;
    g->out_start = w; w += n1;
    g->in_list = w; w += m1;
    g->out_list = w; w += m1;
    g->head = w; w += n1;
    g->pending = w; w += n1;
    g->order = w; w += n1;
    g->repeats = w; w += n1;
    g->queue = w; w += n1 + m1;  /* a node is enqueued at most once per in-edge plus once as a source */
    g->slot_of = w; w += id_span;
    p = (char *)w;
    g->visited = (uint8_t *)p; p += ALIGN8(n1);
    g->chainable = (uint8_t *)p; p += ALIGN8(m1);
    g->v2 = (uint8_t *)p; p += 16 * n1;
    g->v3 = (uint8_t *)p;
    memset(g->in_start, 0, 2 * n1 * sizeof(Py_ssize_t));  /* in_start and out_start: degrees are counted in */
    return 1;
}

/* Graphs are small; a huge one's scratch (and collision sets) is not kept for the rest of the process. */
enum { KEEP_BYTES = 4 << 20 };
typedef struct { uint64_t a, b; uint32_t stamp; } Slot;
static Slot *sets;
static size_t set_cap;  /* slots per set, a power of two */
static uint32_t stamp;

static void release(Graph *g) {
    if (!g->holds_scratch) return;
    scratch_held = g->holds_scratch = 0;
    if (scratch_size > KEEP_BYTES) { PyMem_Free(scratch); scratch = NULL; scratch_size = 0; }
    if (set_cap * 2 * sizeof(Slot) > KEEP_BYTES) { PyMem_Free(sets); sets = NULL; set_cap = 0; }
}

static Py_ssize_t find_node(const Graph *g, long long id, long long first, Py_ssize_t id_span) {
    if (id_span) {
        unsigned long long k = (unsigned long long)id - (unsigned long long)first;
        return k < (unsigned long long)id_span ? g->slot_of[k] : -1;
    }
    Py_ssize_t lo = 0, hi = g->n - 1;  /* nodes are sorted by id */
    while (lo <= hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        long long v = g->nodes[mid].id_value;
        if (v == id) return mid;
        if (v < id) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* A graph's objects are scattered over the heap and a fleet's do not fit in the caches: ask for an object's
 * first two cache lines before it is read (the nodes and edges a few positions ahead; while loading, the
 * slot sharing groups the chaining rules compare and the uids the traversal hashes). A hint only. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) do { __builtin_prefetch(p); __builtin_prefetch((const char *)(p) + 64); } while (0)
#else
#define PREFETCH(p) ((void)(p))
#endif
enum { AHEAD = 4 };

static int id_value(PyObject *id, long long *value) {  /* 1 ok, 0 not a plain int in range */
    if (!PyLong_CheckExact(id)) return 0;
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)id)) {
        *value = (long long)PyUnstable_Long_CompactValue((PyLongObject *)id);
        return 1;
    }
#else
    Py_ssize_t size = Py_SIZE(id);  /* one digit or zero: every id a real job has */
    if (size >= -1 && size <= 1) {
        *value = size * (long long)((PyLongObject *)id)->ob_digit[0];
        return 1;
    }
#endif
    int overflow = 0;
    *value = PyLong_AsLongLongAndOverflow(id, &overflow);
    if (overflow || (*value == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    return 1;
}

/* 1: ok; 0: not what this code handles (caller falls back to Python); -1: Python error set */
static int load_graph(Graph *g, PyObject *nodes, PyObject *edges) {
    g->n = PyTuple_GET_SIZE(nodes);
    g->m = PyTuple_GET_SIZE(edges);
    long long first = 0, last = 0;
    Py_ssize_t id_span = 0;
    if (g->n) {  /* ids are sorted (StreamGraph.of): the first and last give the span for a direct index */
        PyObject *a = field(PyTuple_GET_ITEM(nodes, 0), node_type, node_offsets, node_names, A_ID);
        PyObject *b = field(PyTuple_GET_ITEM(nodes, g->n - 1), node_type, node_offsets, node_names, A_ID);
        if (a == NULL || b == NULL) return PyErr_Occurred() ? -1 : 0;
        if (!id_value(a, &first) || !id_value(b, &last)) return 0;
        unsigned long long span = (unsigned long long)last - (unsigned long long)first;
        if (last >= first && span < (unsigned long long)g->n * 4 + 64) id_span = (Py_ssize_t)span + 1;
    }
    int rc = carve(g, id_span);
    if (rc <= 0) return rc;
    if (id_span) memset(g->slot_of, 0xff, (size_t)id_span * sizeof(Py_ssize_t));  /* -1: no such node */
    for (Py_ssize_t i = 0; i < g->n; i++) {
        PyObject *o = PyTuple_GET_ITEM(nodes, i);
        Node *nd = &g->nodes[i];
        if (i + AHEAD < g->n) PREFETCH(PyTuple_GET_ITEM(nodes, i + AHEAD));
#define NF(i) field(o, node_type, node_offsets, node_names, i)
        if (!(nd->id = NF(A_ID)) || !(nd->uid = NF(A_UID)) || !(nd->par = NF(A_PAR)) ||
            !(nd->maxpar = NF(A_MAXPAR)) || !(nd->strategy = NF(A_STRATEGY)) || !(nd->ssg = NF(A_SSG)) ||
            !(nd->factory = NF(A_FACTORY)))
            return PyErr_Occurred() ? -1 : 0;
#undef NF
        PREFETCH(nd->ssg);
        if (nd->uid != Py_None) PREFETCH(nd->uid);
        if (!id_value(nd->id, &nd->id_value)) return 0;
        if (i && nd->id_value <= g->nodes[i - 1].id_value) return 0;  /* StreamGraph.of sorts; unique ids */
        if (id_span) g->slot_of[(unsigned long long)nd->id_value - (unsigned long long)first] = i;
    }
    Py_ssize_t *in_deg = g->in_start + 1, *out_deg = g->out_start + 1;  /* counted in place, then summed */
    for (Py_ssize_t k = 0; k < g->m; k++) {
        PyObject *o = PyTuple_GET_ITEM(edges, k);
        Edge *e = &g->edges[k];
        PyObject *src, *tgt;
        if (k + AHEAD < g->m) PREFETCH(PyTuple_GET_ITEM(edges, k + AHEAD));
#define EF(i) field(o, edge_type, edge_offsets, edge_names, i)
        if (!(src = EF(A_SOURCE)) || !(tgt = EF(A_TARGET)) || !(e->partitioner = EF(A_PARTITIONER)) ||
            !(e->exchange = EF(A_EXCHANGE)))
            return PyErr_Occurred() ? -1 : 0;
#undef EF
        long long sv, tv;
        if (!id_value(src, &sv) || !id_value(tgt, &tv)) return 0;
        e->s = find_node(g, sv, first, id_span);
        e->t = find_node(g, tv, first, id_span);
        if (e->s < 0 || e->t < 0) return 0;
        in_deg[e->t]++;
        out_deg[e->s]++;
    }
    for (Py_ssize_t i = 0; i < g->n; i++) {
        g->in_start[i + 1] += g->in_start[i];
        g->out_start[i + 1] += g->out_start[i];
    }
    Py_ssize_t *fill_in = g->pending, *fill_out = g->head;  /* borrowed before their own use */
    memcpy(fill_in, g->in_start, g->n * sizeof(Py_ssize_t));
    memcpy(fill_out, g->out_start, g->n * sizeof(Py_ssize_t));
    for (Py_ssize_t k = 0; k < g->m; k++) {  /* edge order kept within each list, as Flink's lists */
        Edge *e = &g->edges[k];
        g->in_list[fill_in[e->t]++] = k;
        g->out_list[fill_out[e->s]++] = k;
    }
    return 1;
}

static inline Py_ssize_t in_degree(const Graph *g, Py_ssize_t i) { return g->in_start[i + 1] - g->in_start[i]; }

/* `==` as Python answers it; two str (slot sharing groups) compared here, as unicode_compare_eq does */
static inline int eq(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b) && PyUnicode_IS_READY(a) && PyUnicode_IS_READY(b)) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(a);
        int kind = PyUnicode_KIND(a);
        return len == PyUnicode_GET_LENGTH(b) && kind == (int)PyUnicode_KIND(b) &&
               memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)len * (size_t)kind) == 0;
    }
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* chaining.py: _input_checks (partitioner/exchange, slot sharing group, are_operators_chainable); `head`
 * is head_operator_of_chain per node, already known for every node before the edge's target */
static int input_checks(const Graph *g, const Edge *e) {
    if (!g->chaining_enabled) return 0;
    if (e->partitioner != consts[FORWARD_FOR_CONSECUTIVE_HASH] &&
        !(e->partitioner == consts[FORWARD] && e->exchange != consts[BATCH]))
        return 0;
    const Node *up = &g->nodes[e->s], *down = &g->nodes[e->t];
    int r = eq(up->ssg, down->ssg);
    if (r <= 0) return r;
    if (down->factory == consts[YIELDING] && g->nodes[g->head[e->s]].factory == consts[LEGACY_SOURCE]) return 0;
    int ok = up->strategy != consts[NEVER];
    PyObject *strategy = down->strategy;
    if (strategy == consts[NEVER] || strategy == consts[HEAD]) ok = 0;
    else if (strategy == consts[HEAD_WITH_SOURCES]) ok = ok && up->factory == consts[SOURCE];
    if (!ok) return 0;
    if ((r = eq(up->par, down->par)) <= 0) return r;
    if (!g->chain_diff_maxp) return eq(up->maxpar, down->maxpar);
    return 1;
}

/* g->chainable per edge and g->repeats per node (1 + its chainable out-edges: V2's putInt count);
 * 1 ok, 0 a cycle (fall back), -1 error */
static int chainable_edges(Graph *g) {
    Py_ssize_t n = g->n, qh = 0, qt = 0, *topo = g->queue, *pending = g->pending, *head = g->head;
    memset(g->chainable, 0, (size_t)g->m);
    for (Py_ssize_t i = 0; i < n; i++) {
        g->repeats[i] = 1;
        pending[i] = in_degree(g, i);
        if (!pending[i]) topo[qt++] = i;
    }
    while (qh < qt) {  /* topological order: a node's head is known before its children need it */
        Py_ssize_t i = topo[qh++];
        head[i] = i;
        if (in_degree(g, i) == 1) {
            Py_ssize_t k = g->in_list[g->in_start[i]];
            int c = input_checks(g, &g->edges[k]);
            if (c < 0) return -1;
            if (c) {  /* is_chainable: exactly one input, and it passes */
                g->chainable[k] = 1;
                head[i] = head[g->edges[k].s];
                g->repeats[g->edges[k].s]++;
            }
        }
        for (Py_ssize_t x = g->out_start[i]; x < g->out_start[i + 1]; x++) {
            Py_ssize_t t = g->edges[g->out_list[x]].t;
            if (--pending[t] == 0) topo[qt++] = t;
        }
    }
    return qt == n;
}

/* 128-bit open-addressing sets (`Slot`, above) for Flink's uid collision check (`hashes.containsValue`), one
 * per hasher. Kept between calls like the scratch block; a slot belongs to this call when its stamp is this
 * call's, so nothing is cleared per call. */

static int sets_ready(Py_ssize_t n) {  /* two sets of at least 2n + 2 slots, empty for this call */
    size_t cap = 16;
    while (cap < (size_t)n * 2 + 2) cap <<= 1;
    if (cap > set_cap || stamp == UINT32_MAX) {
        if (cap < set_cap) cap = set_cap;
        Slot *fresh = PyMem_Calloc(2 * cap, sizeof(Slot));
        if (fresh == NULL) { PyErr_NoMemory(); return -1; }
        PyMem_Free(sets);
        sets = fresh;
        set_cap = cap;
        stamp = 0;
    }
    stamp++;
    return 0;
}

static int set_add(Slot *tab, size_t mask, const uint8_t h[16], int check) {  /* 1 if already present */
    uint64_t a, b;
    memcpy(&a, h, 8); memcpy(&b, h + 8, 8);
    size_t i = (size_t)(a ^ (b * 0x9e3779b97f4a7c15ULL)) & mask;
    while (tab[i].stamp == stamp) {
        if (tab[i].a == a && tab[i].b == b) return check;
        i = (i + 1) & mask;
    }
    tab[i].a = a; tab[i].b = b; tab[i].stamp = stamp;
    return 0;
}

/* hashers.py traverse_python for V2 and V3 at once: one traversal, since the order (and so every traverse
 * id) does not depend on the hashes; only the putInt count (g->repeats, V2) and the collision sets differ.
 * Fills g->v2/g->v3 (16 bytes per node) and g->order. Returns the number of nodes hashed; -1 on error; -2
 * with *collision set to the node whose uid collides in the result Python reports first (V2's, then V3's,
 * as hashers.stream_graph_hashes raises); -3 for what the Python rules must answer. */
enum { TRAVERSE_ERROR = -1, TRAVERSE_COLLISION = -2, TRAVERSE_DECLINED = -3 };
static Py_ssize_t traverse(Graph *g, int want_v2, int want_v3, Py_ssize_t *collision) {
    Py_ssize_t n = g->n, done = 0, qh = 0, qt = 0, *pending = g->pending, *queue = g->queue;
    Py_ssize_t collision3 = -1;
    if (sets_ready(n) < 0) return TRAVERSE_ERROR;
    size_t mask = set_cap - 1;
    Slot *set2 = sets, *set3 = sets + set_cap;
    for (Py_ssize_t i = 0; i < n; i++) {
        pending[i] = in_degree(g, i);
        g->visited[i] = !pending[i];
        if (!pending[i]) queue[qt++] = i;
    }
    while (qh < qt) {
        Py_ssize_t i = queue[qh++];
        const Node *nd = &g->nodes[i];
        uint8_t *h2 = g->v2 + 16 * i, *h3 = g->v3 + 16 * i;
        if (nd->uid == Py_None) {
            if (pending[i]) { g->visited[i] = 0; continue; }  /* the last parent to be hashed enqueues it */
            if (done > INT32_MAX) return TRAVERSE_DECLINED;
            if (want_v3) tid_hash((uint32_t)done, 1, h3);
            if (want_v2) {
                if (want_v3 && g->repeats[i] == 1) memcpy(h2, h3, 16);
                else tid_hash((uint32_t)done, g->repeats[i], h2);
            }
            for (Py_ssize_t x = g->in_start[i]; x < g->in_start[i + 1]; x++) {
                Py_ssize_t s = g->edges[g->in_list[x]].s;
                if (want_v2) mix_input(h2, g->v2 + 16 * s);
                if (want_v3) mix_input(h3, g->v3 + 16 * s);
            }
            if (want_v2) set_add(set2, mask, h2, 0);
            if (want_v3 && collision3 < 0) set_add(set3, mask, h3, 0);
        } else {
            if (!PyUnicode_CheckExact(nd->uid)) return TRAVERSE_DECLINED;
            Py_ssize_t len;
            const char *utf8;
            PyObject *enc = NULL;
            if (PyUnicode_IS_ASCII(nd->uid)) {
                utf8 = (const char *)PyUnicode_DATA(nd->uid);
                len = PyUnicode_GET_LENGTH(nd->uid);
            } else {  /* Java's getBytes(UTF_8): a lone surrogate becomes '?' */
                enc = PyUnicode_AsEncodedString(nd->uid, "utf-8", "replace");
                if (enc == NULL) return TRAVERSE_ERROR;
                utf8 = PyBytes_AS_STRING(enc);
                len = PyBytes_GET_SIZE(enc);
            }
            uint8_t *h = want_v2 ? h2 : h3;  /* a uid's hash is the same under V2 and V3 */
            murmur3_128((const uint8_t *)utf8, (size_t)len, h);
            Py_XDECREF(enc);
            if (want_v2 && want_v3) memcpy(h3, h2, 16);
            if (want_v2 && set_add(set2, mask, h, 1)) { *collision = i; return TRAVERSE_COLLISION; }
            if (want_v3 && collision3 < 0 && set_add(set3, mask, h, 1)) {
                collision3 = i;
                if (!want_v2) break;  /* V2's traversal, if asked for, goes on: its collision would win */
            }
        }
        g->order[done++] = i;
        for (Py_ssize_t x = g->out_start[i]; x < g->out_start[i + 1]; x++) {
            Py_ssize_t t = g->edges[g->out_list[x]].t;
            pending[t]--;
            if (!g->visited[t]) { g->visited[t] = 1; queue[qt++] = t; }
        }
    }
    if (collision3 >= 0) { *collision = collision3; return TRAVERSE_COLLISION; }
    return done;
}

/* The node-id dicts: sized once (no resizes while filling), the id's hash computed once for both */
#if PY_VERSION_HEX < 0x030D0000
#define new_dict(size) _PyDict_NewPresized(size)
#define set_item(d, key, value, hash) _PyDict_SetItem_KnownHash(d, key, value, hash)
#else
#define new_dict(size) PyDict_New()
#define set_item(d, key, value, hash) PyDict_SetItem(d, key, value)
#endif

/* {node id: hash} in traversal order, for V2 and/or V3; where both hashes of a node are equal (a uid, or a
 * node with no chainable out-edge and no inputs) the two dicts share one bytes object. 0 ok, -1 error. */
static int hashes_result(const Graph *g, Py_ssize_t count, int want_v2, int want_v3, PyObject **v2, PyObject **v3) {
    if ((want_v2 && (*v2 = new_dict(count)) == NULL) || (want_v3 && (*v3 = new_dict(count)) == NULL)) return -1;
    for (Py_ssize_t x = 0; x < count; x++) {
        Py_ssize_t i = g->order[x];
        PyObject *id = g->nodes[i].id, *b2 = NULL, *b3 = NULL;
        Py_hash_t hash = PyObject_Hash(id);
        if (hash == -1) return -1;
        const uint8_t *h2 = g->v2 + 16 * i, *h3 = g->v3 + 16 * i;
        if (want_v2 && (b2 = PyBytes_FromStringAndSize((const char *)h2, 16)) == NULL) return -1;
        if (want_v3) {
            b3 = b2 != NULL && memcmp(h2, h3, 16) == 0 ? Py_NewRef(b2) : PyBytes_FromStringAndSize((const char *)h3, 16);
            if (b3 == NULL) { Py_XDECREF(b2); return -1; }
        }
        int bad = (b2 != NULL && set_item(*v2, id, b2, hash) < 0) || (b3 != NULL && set_item(*v3, id, b3, hash) < 0);
        Py_XDECREF(b2); Py_XDECREF(b3);
        if (bad) return -1;
    }
    return 0;
}

/* hash_graph(nodes, edges, chaining_enabled, chain_diff_maxp, want_v2, want_v3)
 *   -> None (use the Python rules), the uid (str) whose hash collides (V2's if V2 was asked for and has one),
 *      or (chainable: bytes, one 0/1 flag per edge position, v2, v3)
 * where v2/v3 is None when not asked for, else a {node id: 16 bytes} dict in traversal order */
static PyObject *py_hash_graph(PyObject *self, PyObject *args) {
    PyObject *nodes, *edges;
    int chaining_enabled, chain_diff_maxp, want_v2, want_v3;
    if (!PyArg_ParseTuple(args, "O!O!pppp", &PyTuple_Type, &nodes, &PyTuple_Type, &edges, &chaining_enabled,
                          &chain_diff_maxp, &want_v2, &want_v3))
        return NULL;
    if (node_type == NULL) { PyErr_SetString(PyExc_RuntimeError, "_fastids.configure was not called"); return NULL; }
    Graph g = {0};
    g.chaining_enabled = chaining_enabled;
    g.chain_diff_maxp = chain_diff_maxp;
    PyObject *result = NULL, *mask = NULL, *v2 = NULL, *v3 = NULL;
    int rc = load_graph(&g, nodes, edges);
    if (rc > 0) rc = chainable_edges(&g);
    if (rc > 0) {
        Py_ssize_t collision = -1, count = traverse(&g, want_v2, want_v3, &collision);
        if (count == TRAVERSE_COLLISION) result = Py_NewRef(g.nodes[collision].uid);
        else if (count == TRAVERSE_DECLINED) rc = 0;
        else if (count < 0) rc = -1;
        else if ((mask = PyBytes_FromStringAndSize((const char *)g.chainable, g.m)) == NULL ||
                 hashes_result(&g, count, want_v2, want_v3, &v2, &v3) < 0)
            rc = -1;
        else result = PyTuple_Pack(3, mask, v2 ? v2 : Py_None, v3 ? v3 : Py_None);
        if (rc > 0 && result == NULL) rc = -1;
    }
    release(&g);
    Py_XDECREF(mask); Py_XDECREF(v2); Py_XDECREF(v3);
    if (rc == 0) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    if (rc < 0) { Py_XDECREF(result); return NULL; }
    return result;
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS, "Register the enum members the chaining rules compare by identity."},
    {"hash_graph", py_hash_graph, METH_VARARGS, "Chainable edges and V2/V3 hashes of one StreamGraph."},
    {"murmur3_128", py_murmur3_128, METH_O, "Guava's murmur3_128(0) of a bytes-like object (16 bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastids", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastids(void) {
    const char *nn[N_NODE_ATTRS] = {"id", "uid", "parallelism", "max_parallelism", "chaining_strategy",
                                    "slot_sharing_group", "factory"};
    const char *en[N_EDGE_ATTRS] = {"source", "target", "partitioner", "exchange_mode"};
    for (int i = 0; i < N_NODE_ATTRS; i++)
        if ((node_names[i] = PyUnicode_InternFromString(nn[i])) == NULL) return NULL;
    for (int i = 0; i < N_EDGE_ATTRS; i++)
        if ((edge_names[i] = PyUnicode_InternFromString(en[i])) == NULL) return NULL;
    return PyModule_Create(&module);
}
