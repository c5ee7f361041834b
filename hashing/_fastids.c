/*
 * hashing._fastids: the compiled hot path of hashing/hashers.py and hashing/chaining.py.
 *
 * One call computes, for one StreamGraph, which edges chain (StreamingJobGraphGenerator#isChainable)
 * and the V2 and/or V3 node hashes (StreamGraphHasherV2#traverseStreamGraphAndGenerateHashes,
 * FLIP-411's V3 without the chained-output terms). It reads the frozen StreamNode/StreamEdge objects
 * directly, so Python builds nothing per node. It is a port of the Python rules line by line; the
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

/* murmur3 of LE32(tid) written `repeats` times (hashing.murmur.traverse_id_hash) */
static int tid_hash(int32_t tid, Py_ssize_t repeats, uint8_t out[16]) {
    uint8_t small[256];
    size_t len = (size_t)repeats * 4;
    uint8_t *buf = len <= sizeof small ? small : PyMem_Malloc(len);
    if (buf == NULL) { PyErr_NoMemory(); return -1; }
    uint32_t v = (uint32_t)tid;
    uint8_t le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
    for (Py_ssize_t r = 0; r < repeats; r++) memcpy(buf + r * 4, le, 4);
    murmur3_128(buf, len, out);
    if (buf != small) PyMem_Free(buf);
    return 0;
}

static PyObject *py_murmur3_128(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t out[16];
    murmur3_128(view.buf, (size_t)view.len, out);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

/* ---- the enum members the rules compare by identity, registered once by hashing/fast.py ---------- */
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

typedef struct {
    Py_ssize_t n, m;
    void *block;  /* one allocation holds every array below */
    Node *nodes;
    Edge *edges;
    Py_ssize_t *in_deg, *in_start, *in_list, *out_start, *out_list;  /* CSR, in edge order */
    int chaining_enabled, chain_diff_maxp;
} Graph;

static Py_ssize_t find_node(const Graph *g, long long id) {  /* nodes are sorted by id */
    Py_ssize_t lo = 0, hi = g->n - 1;
    while (lo <= hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        long long v = g->nodes[mid].id_value;
        if (v == id) return mid;
        if (v < id) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* 1: ok; 0: not what this code handles (caller falls back to Python); -1: Python error set */
static int load_graph(Graph *g, PyObject *nodes, PyObject *edges) {
    g->n = PyTuple_GET_SIZE(nodes);
    g->m = PyTuple_GET_SIZE(edges);
    size_t n1 = (size_t)g->n + 1, m1 = (size_t)g->m + 1;
    g->block = PyMem_Calloc(1, n1 * sizeof(Node) + m1 * sizeof(Edge) + (3 * n1 + 2 * m1 + 2 * n1) * sizeof(Py_ssize_t));
    if (g->block == NULL) { PyErr_NoMemory(); return -1; }
    g->nodes = (Node *)g->block;
    g->edges = (Edge *)(g->nodes + n1);
    g->in_deg = (Py_ssize_t *)(g->edges + m1);
    g->in_start = g->in_deg + n1;
    g->out_start = g->in_start + n1;
    g->in_list = g->out_start + n1;
    g->out_list = g->in_list + m1;
    Py_ssize_t *fill_in = g->out_list + m1, *fill_out = fill_in + n1;
    for (Py_ssize_t i = 0; i < g->n; i++) {
        PyObject *o = PyTuple_GET_ITEM(nodes, i);
        Node *nd = &g->nodes[i];
#define NF(i) field(o, node_type, node_offsets, node_names, i)
        if (!(nd->id = NF(A_ID)) || !(nd->uid = NF(A_UID)) || !(nd->par = NF(A_PAR)) ||
            !(nd->maxpar = NF(A_MAXPAR)) || !(nd->strategy = NF(A_STRATEGY)) || !(nd->ssg = NF(A_SSG)) ||
            !(nd->factory = NF(A_FACTORY)))
            return PyErr_Occurred() ? -1 : 0;
#undef NF
        if (!PyLong_CheckExact(nd->id)) return 0;
        int overflow = 0;
        nd->id_value = PyLong_AsLongLongAndOverflow(nd->id, &overflow);
        if (overflow || (nd->id_value == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        if (i && nd->id_value <= g->nodes[i - 1].id_value) return 0;  /* StreamGraph.of sorts; unique ids */
        if (nd->uid != Py_None && !PyUnicode_CheckExact(nd->uid)) return 0;
    }
    for (Py_ssize_t k = 0; k < g->m; k++) {
        PyObject *o = PyTuple_GET_ITEM(edges, k);
        Edge *e = &g->edges[k];
        PyObject *src, *tgt;
#define EF(i) field(o, edge_type, edge_offsets, edge_names, i)
        if (!(src = EF(A_SOURCE)) || !(tgt = EF(A_TARGET)) || !(e->partitioner = EF(A_PARTITIONER)) ||
            !(e->exchange = EF(A_EXCHANGE)))
            return PyErr_Occurred() ? -1 : 0;
#undef EF
        if (!PyLong_CheckExact(src) || !PyLong_CheckExact(tgt)) return 0;
        int o1 = 0, o2 = 0;
        long long sv = PyLong_AsLongLongAndOverflow(src, &o1), tv = PyLong_AsLongLongAndOverflow(tgt, &o2);
        if (o1 || o2 || PyErr_Occurred()) { PyErr_Clear(); return 0; }
        e->s = find_node(g, sv);
        e->t = find_node(g, tv);
        if (e->s < 0 || e->t < 0) return 0;
        g->in_deg[e->t]++;
        g->out_start[e->s + 1]++;
    }
    for (Py_ssize_t i = 0; i < g->n; i++) {
        g->in_start[i + 1] = g->in_start[i] + g->in_deg[i];
        g->out_start[i + 1] += g->out_start[i];
    }
    for (Py_ssize_t k = 0; k < g->m; k++) {  /* edge order kept within each list, as Flink's lists */
        Edge *e = &g->edges[k];
        g->in_list[g->in_start[e->t] + fill_in[e->t]++] = k;
        g->out_list[g->out_start[e->s] + fill_out[e->s]++] = k;
    }
    return 1;
}

static void free_graph(Graph *g) { PyMem_Free(g->block); }

static int eq(PyObject *a, PyObject *b) { return a == b ? 1 : PyObject_RichCompareBool(a, b, Py_EQ); }

/* chaining.py: _input_checks (partitioner/exchange, slot sharing group, are_operators_chainable); `head`
 * is head_operator_of_chain per node, already known for every node before the edge's target */
static int input_checks(const Graph *g, const Edge *e, const Py_ssize_t *head) {
    if (!g->chaining_enabled) return 0;
    if (e->partitioner != consts[FORWARD_FOR_CONSECUTIVE_HASH] &&
        !(e->partitioner == consts[FORWARD] && e->exchange != consts[BATCH]))
        return 0;
    const Node *up = &g->nodes[e->s], *down = &g->nodes[e->t];
    int r = eq(up->ssg, down->ssg);
    if (r <= 0) return r;
    if (down->factory == consts[YIELDING] && g->nodes[head[e->s]].factory == consts[LEGACY_SOURCE]) return 0;
    int ok = up->strategy != consts[NEVER];
    PyObject *strategy = down->strategy;
    if (strategy == consts[NEVER] || strategy == consts[HEAD]) ok = 0;
    else if (strategy == consts[HEAD_WITH_SOURCES]) ok = ok && up->factory == consts[SOURCE];
    if (!ok) return 0;
    if ((r = eq(up->par, down->par)) <= 0) return r;
    if (!g->chain_diff_maxp) return eq(up->maxpar, down->maxpar);
    return 1;
}

/* chainable[k] per edge; 1 ok, 0 a cycle (fall back), -1 error */
static int chainable_edges(const Graph *g, uint8_t *chainable) {
    Py_ssize_t n = g->n;
    Py_ssize_t *head = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *pending = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *topo = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    int rc = 1;
    if (!head || !pending || !topo) { rc = -1; PyErr_NoMemory(); goto done; }
    Py_ssize_t qh = 0, qt = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        pending[i] = g->in_deg[i];
        if (!pending[i]) topo[qt++] = i;
    }
    while (qh < qt) {  /* topological order: a node's head is known before its children need it */
        Py_ssize_t i = topo[qh++];
        head[i] = i;
        if (g->in_deg[i] == 1) {
            Py_ssize_t k = g->in_list[g->in_start[i]];
            int c = input_checks(g, &g->edges[k], head);
            if (c < 0) { rc = -1; goto done; }
            chainable[k] = (uint8_t)c;  /* is_chainable: exactly one input, and it passes */
            if (c) head[i] = head[g->edges[k].s];
        }
        for (Py_ssize_t x = g->out_start[i]; x < g->out_start[i + 1]; x++) {
            Py_ssize_t t = g->edges[g->out_list[x]].t;
            if (--pending[t] == 0) topo[qt++] = t;
        }
    }
    if (qt != n) rc = 0;
done:
    PyMem_Free(head); PyMem_Free(pending); PyMem_Free(topo);
    return rc;
}

/* 128-bit open-addressing set: Flink's uid collision check (`hashes.containsValue`) */
typedef struct { uint64_t a, b; uint8_t used; } Slot;

static int set_add(Slot *tab, size_t mask, const uint8_t h[16], int check) {  /* 1 if already present */
    uint64_t a, b;
    memcpy(&a, h, 8); memcpy(&b, h + 8, 8);
    size_t i = (size_t)(a ^ (b * 0x9e3779b97f4a7c15ULL)) & mask;
    while (tab[i].used) {
        if (tab[i].a == a && tab[i].b == b) return check;
        i = (i + 1) & mask;
    }
    tab[i].a = a; tab[i].b = b; tab[i].used = 1;
    return 0;
}

/* hashers.py traverse_stream_graph: fills `out` (16 bytes per node) and `order`; returns the number of
 * nodes hashed, or -2 with *collision set to the node whose uid collides, or -1 on error */
static Py_ssize_t traverse(const Graph *g, const Py_ssize_t *repeats, uint8_t *out, Py_ssize_t *order,
                           Py_ssize_t *collision) {
    Py_ssize_t n = g->n, done = 0, rc;
    Py_ssize_t *pending = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    uint8_t *visited = PyMem_Calloc(n + 1, 1);
    Py_ssize_t *queue = NULL;
    size_t cap = 16;
    while (cap < (size_t)n * 2 + 2) cap <<= 1;
    Slot *tab = PyMem_Calloc(cap, sizeof(Slot));
    /* a node is enqueued at most once per in-edge plus once as a source */
    queue = PyMem_Malloc((n + g->m + 1) * sizeof(Py_ssize_t));
    if (!pending || !visited || !tab || !queue) { rc = -1; PyErr_NoMemory(); goto done; }
    Py_ssize_t qh = 0, qt = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        pending[i] = g->in_deg[i];
        if (!g->in_deg[i]) { visited[i] = 1; queue[qt++] = i; }
    }
    while (qh < qt) {
        Py_ssize_t i = queue[qh++];
        const Node *nd = &g->nodes[i];
        uint8_t *h = out + 16 * i;
        if (nd->uid == Py_None) {
            if (pending[i]) { visited[i] = 0; continue; }  /* the last parent to be hashed enqueues it */
            if (done > INT32_MAX) { rc = 0; goto done; }
            if (tid_hash((int32_t)done, repeats ? repeats[i] : 1, h) < 0) { rc = -1; goto done; }
            for (Py_ssize_t x = g->in_start[i]; x < g->in_start[i + 1]; x++) {
                const uint8_t *o = out + 16 * g->edges[g->in_list[x]].s;
                for (int j = 0; j < 16; j++) h[j] = (uint8_t)((uint8_t)(h[j] * 37) ^ o[j]);
            }
            set_add(tab, cap - 1, h, 0);
        } else {
            Py_ssize_t len;
            const char *utf8;
            PyObject *enc = NULL;
            if (PyUnicode_IS_ASCII(nd->uid)) {
                utf8 = (const char *)PyUnicode_DATA(nd->uid);
                len = PyUnicode_GET_LENGTH(nd->uid);
            } else {  /* Java's getBytes(UTF_8): a lone surrogate becomes '?' */
                enc = PyUnicode_AsEncodedString(nd->uid, "utf-8", "replace");
                if (enc == NULL) { rc = -1; goto done; }
                utf8 = PyBytes_AS_STRING(enc);
                len = PyBytes_GET_SIZE(enc);
            }
            murmur3_128((const uint8_t *)utf8, (size_t)len, h);
            Py_XDECREF(enc);
            if (set_add(tab, cap - 1, h, 1)) { *collision = i; rc = -2; goto done; }
        }
        order[done++] = i;
        for (Py_ssize_t x = g->out_start[i]; x < g->out_start[i + 1]; x++) {
            Py_ssize_t t = g->edges[g->out_list[x]].t;
            pending[t]--;
            if (!visited[t]) { visited[t] = 1; queue[qt++] = t; }
        }
    }
    rc = done;
done:
    PyMem_Free(pending); PyMem_Free(visited); PyMem_Free(tab); PyMem_Free(queue);
    return rc;
}

/* {node id: hash} in traversal order, or the colliding uid (a str) */
static PyObject *hashes_result(const Graph *g, const Py_ssize_t *repeats) {
    Py_ssize_t n = g->n, collision = -1;
    uint8_t *out = PyMem_Malloc(16 * (n + 1));
    Py_ssize_t *order = PyMem_Malloc((n + 1) * sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (!out || !order) { PyErr_NoMemory(); goto done; }
    Py_ssize_t count = traverse(g, repeats, out, order, &collision);
    if (count == -1) goto done;
    if (count == -2) { result = Py_NewRef(g->nodes[collision].uid); goto done; }
    if ((result = PyDict_New()) == NULL) goto done;
    for (Py_ssize_t x = 0; x < count; x++) {
        Py_ssize_t i = order[x];
        PyObject *b = PyBytes_FromStringAndSize((const char *)out + 16 * i, 16);
        if (b == NULL || PyDict_SetItem(result, g->nodes[i].id, b) < 0) {
            Py_XDECREF(b); Py_CLEAR(result); goto done;
        }
        Py_DECREF(b);
    }
done:
    PyMem_Free(out); PyMem_Free(order);
    return result;
}

/* hash_graph(nodes, edges, chaining_enabled, chain_diff_maxp, want_v2, want_v3)
 *   -> None (use the Python rules) or (chainable edge positions: frozenset, v2, v3)
 * where v2/v3 is None when not asked for, a {node id: 16 bytes} dict, or the uid (str) that collides */
static PyObject *py_hash_graph(PyObject *self, PyObject *args) {
    PyObject *nodes, *edges;
    int chaining_enabled, chain_diff_maxp, want_v2, want_v3;
    if (!PyArg_ParseTuple(args, "O!O!pppp", &PyTuple_Type, &nodes, &PyTuple_Type, &edges, &chaining_enabled,
                          &chain_diff_maxp, &want_v2, &want_v3))
        return NULL;
    for (int i = 0; i < N_CONST; i++)
        if (consts[i] == NULL || node_type == NULL) { PyErr_SetString(PyExc_RuntimeError, "_fastids.configure was not called"); return NULL; }
    Graph g = {0};
    g.chaining_enabled = chaining_enabled;
    g.chain_diff_maxp = chain_diff_maxp;
    PyObject *result = NULL, *chain_set = NULL, *v2 = NULL, *v3 = NULL;
    uint8_t *chainable = NULL;
    Py_ssize_t *repeats = NULL;
    int rc = load_graph(&g, nodes, edges);
    if (rc <= 0) goto fallback_or_error;
    chainable = PyMem_Calloc(g.m + 1, 1);
    if (chainable == NULL) { PyErr_NoMemory(); rc = -1; goto fallback_or_error; }
    rc = chainable_edges(&g, chainable);
    if (rc <= 0) goto fallback_or_error;
    PyObject *positions = PyList_New(0);
    if (positions == NULL) { rc = -1; goto fallback_or_error; }
    for (Py_ssize_t k = 0; k < g.m; k++) {
        if (!chainable[k]) continue;
        PyObject *p = PyLong_FromSsize_t(k);
        if (p == NULL || PyList_Append(positions, p) < 0) { Py_XDECREF(p); Py_DECREF(positions); rc = -1; goto fallback_or_error; }
        Py_DECREF(p);
    }
    chain_set = PyFrozenSet_New(positions);
    Py_DECREF(positions);
    if (chain_set == NULL) { rc = -1; goto fallback_or_error; }
    if (want_v2) {
        repeats = PyMem_Malloc((g.n + 1) * sizeof(Py_ssize_t));
        if (repeats == NULL) { PyErr_NoMemory(); rc = -1; goto fallback_or_error; }
        for (Py_ssize_t i = 0; i < g.n; i++) repeats[i] = 1;
        for (Py_ssize_t k = 0; k < g.m; k++) repeats[g.edges[k].s] += chainable[k];
        if ((v2 = hashes_result(&g, repeats)) == NULL) { rc = -1; goto fallback_or_error; }
    }
    if (want_v3 && (v3 = hashes_result(&g, NULL)) == NULL) { rc = -1; goto fallback_or_error; }
    result = PyTuple_Pack(3, chain_set, v2 ? v2 : Py_None, v3 ? v3 : Py_None);
    rc = result ? 1 : -1;
fallback_or_error:
    Py_XDECREF(chain_set); Py_XDECREF(v2); Py_XDECREF(v3);
    PyMem_Free(chainable); PyMem_Free(repeats);
    free_graph(&g);
    if (rc == 0) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    return rc < 0 ? NULL : result;
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
