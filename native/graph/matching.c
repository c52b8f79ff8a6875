/*
 * Exact maximum-weight matching of a general graph (Edmonds' blossom algorithm with dual
 * variables, in the O(n^3) form described by Galil, "Efficient algorithms for finding maximum
 * matching in graphs", 1986).
 *
 * pinlab pairs the threads that share the most (lp-compact, lp-scatter, lpgp, gplp): the pairs
 * must be an exact optimum, and graphs of thousands of threads must be matched in well under a
 * second, which the Python reference (networkx) cannot do. The graph is given as an edge list and
 * kept as adjacency lists, so the edge scans of a stage cost O(m) rather than O(n^2) on a sparse
 * graph (the dual steps stay O(n) each; O(n^3) in all on a dense graph).
 *
 * Weights are 64-bit integers. Vertex duals are kept as twice the textbook duals (the slack of an
 * edge is y_u + y_v - 2 w), so with integer weights every slack of an edge between two S-blossoms
 * is even and every dual and every step (delta) stays an integer: the optimum is exact.
 *
 * Vertices are 0..n-1, blossoms n..2n-1. An "endpoint" p names one end of edge p/2: endpoint[2k]
 * is edge k's first vertex, endpoint[2k+1] its second, and p^1 is the other end. Labels: 0 free,
 * 1 S (outer), 2 T (inner); bit 4 marks blossoms visited by scan_blossom.
 *
 * Entry point: pinlab_max_weight_matching (see the end of the file).
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n, m;
    const int32_t *eu, *ev;   /* edge k joins eu[k] and ev[k] */
    const int64_t *ew;        /* edge k's weight */
    int *endpoint;            /* 2m: vertex of endpoint p */
    int *adj_start;           /* n+1: CSR of remote endpoints per vertex */
    int *adj;                 /* 2m: remote endpoint p of each adjacency entry */
    int *adj_to;              /* 2m: the vertex at that endpoint */
    int64_t *adj_w;           /* 2m: the edge's weight */
    int *mate;                /* n: remote endpoint of the matched edge, or -1 */
    int *label;               /* 2n */
    int *labelend;            /* 2n: endpoint through which the label was reached, or -1 */
    int *inblossom;           /* n: top-level blossom of each vertex */
    int *bparent;             /* 2n */
    int **bchilds;            /* 2n: sub-blossoms in cycle order, starting at the base */
    int **bendps;             /* 2n: endpoints joining consecutive sub-blossoms */
    int *bnchilds;            /* 2n */
    int *bbase;               /* 2n: base vertex, -1 for an unused blossom slot */
    int *bestedge;            /* 2n: least-slack edge to an S-blossom, or -1 */
    int *best_u, *best_v;     /* 2n: that edge's ends and weight, kept next to it: comparing */
    int64_t *best_w;          /*     against it must not read the scattered edge arrays */
    int **bbest;              /* 2n: for S-blossoms, least-slack edges to other S-blossoms */
    int *nbbest;              /* 2n */
    int *unused;              /* stack of free blossom slots */
    int nunused;
    int bend;                 /* blossom slots n..bend-1 have ever been used (loops stop there) */
    int64_t *dual;            /* 2n */
    uint64_t *allowedge;      /* 2m bits, by adjacency position: edge known to have zero slack */
    int *adj_pos;             /* 2m: adjacency position of endpoint p's entry (the far end's list) */
    int *queue;               /* S-vertices whose edges are still to scan */
    int qlen;
    /* scratch */
    int *leaves;              /* n */
    int *stack;               /* 2n */
    int *path;                /* 2n */
    int *side;                /* 2n */
    int *side_endps;          /* 2n */
    int *bestedgeto;          /* 2n, all -1 between uses */
    int *touched;             /* 2n */
    int *rot;                 /* 2n */
    int *by_weight;           /* m: edges, heaviest first (see match_tight_free_pairs) */
    int by_weight_start;      /* edges before it are heavier than any free pair can be, or dead */
    int failed;               /* out of memory */
} matcher;

static int64_t slack(const matcher *M, int k)
{
    return M->dual[M->eu[k]] + M->dual[M->ev[k]] - 2 * M->ew[k];
}

static inline void set_best_known(matcher *M, int b, int k, int u, int v, int64_t w)
{
    M->bestedge[b] = k;
    M->best_u[b] = u;
    M->best_v[b] = v;
    M->best_w[b] = w;
}

static inline void set_best(matcher *M, int b, int k)
{
    set_best_known(M, b, k, M->eu[k], M->ev[k], M->ew[k]);
}

/* Slack of bestedge[b] (which must be set). */
static inline int64_t best_slack(const matcher *M, int b)
{
    return M->dual[M->best_u[b]] + M->dual[M->best_v[b]] - 2 * M->best_w[b];
}

/* Edges are scanned through the adjacency lists, which carry each edge's far vertex and weight
 * so that the scan reads memory in order (edge arrays indexed by k are scattered on dense graphs);
 * the allowed-edge flags are bits so that they stay in cache. */
static inline int allowed_at(const matcher *M, int a)
{
    return (int)((M->allowedge[a >> 6] >> (a & 63)) & 1u);
}

static inline void allow_at(matcher *M, int a)
{
    M->allowedge[a >> 6] |= (uint64_t)1 << (a & 63);
}

/* Edge k is allowed: flag it in both adjacency lists. */
static inline void allow(matcher *M, int k)
{
    allow_at(M, M->adj_pos[2 * k]);
    allow_at(M, M->adj_pos[2 * k + 1]);
}

/* Writes the vertices inside blossom b (b itself for a vertex) into out; returns their count. */
static int blossom_leaves(matcher *M, int b, int *out)
{
    int count = 0, top = 0;
    M->stack[top++] = b;
    while (top > 0) {
        int t = M->stack[--top];
        if (t < M->n) {
            out[count++] = t;
        } else {
            for (int i = M->bnchilds[t] - 1; i >= 0; i--)
                M->stack[top++] = M->bchilds[t][i];
        }
    }
    return count;
}

static void assign_label(matcher *M, int w, int t, int p)
{
    for (;;) {
        int b = M->inblossom[w];
        M->label[w] = M->label[b] = t;
        M->labelend[w] = M->labelend[b] = p;
        M->bestedge[w] = M->bestedge[b] = -1;
        if (t == 1) {
            int c = blossom_leaves(M, b, M->leaves);
            for (int i = 0; i < c; i++)
                M->queue[M->qlen++] = M->leaves[i];
            return;
        }
        /* T: its base is matched; the mate becomes S. */
        int base = M->bbase[b];
        int pm = M->mate[base];
        w = M->endpoint[pm];
        t = 1;
        p = pm ^ 1;
    }
}

/* Follows the alternating trees back from v and w: the base of a new blossom, or -1 when the
 * two roots differ (an augmenting path). */
static int scan_blossom(matcher *M, int v, int w)
{
    int np = 0, base = -1;
    while (v != -1 || w != -1) {
        if (v != -1) {
            int b = M->inblossom[v];
            if (M->label[b] & 4) {
                base = M->bbase[b];
                break;
            }
            M->path[np++] = b;
            M->label[b] = 5;
            if (M->labelend[b] == -1) {
                v = -1;
            } else {
                v = M->endpoint[M->labelend[b]];
                b = M->inblossom[v];
                v = M->endpoint[M->labelend[b]];
            }
        }
        if (w != -1) {
            int t = v;
            v = w;
            w = t;
        }
    }
    for (int i = 0; i < np; i++)
        M->label[M->path[i]] = 1;
    return base;
}

/* Makes a new blossom with base `base` from the S-S edge k closing a cycle. */
static void add_blossom(matcher *M, int base, int k)
{
    int v = M->eu[k], w = M->ev[k];
    int bb = M->inblossom[base], bv = M->inblossom[v], bw = M->inblossom[w];
    int b = M->unused[--M->nunused];
    if (b >= M->bend)
        M->bend = b + 1;
    M->bbase[b] = base;
    M->bparent[b] = -1;
    M->bparent[bb] = b;

    /* v's side, from bv back to bb, collected then reversed. */
    int ns = 0;
    while (bv != bb) {
        M->bparent[bv] = b;
        M->side[ns] = bv;
        M->side_endps[ns] = M->labelend[bv];
        ns++;
        v = M->endpoint[M->labelend[bv]];
        bv = M->inblossom[v];
    }
    int nw = 0;
    int bw0 = bw;
    while (bw != bb) {
        nw++;
        w = M->endpoint[M->labelend[bw]];
        bw = M->inblossom[w];
    }
    int total = ns + 1 + nw;
    int *childs = malloc(sizeof(int) * (size_t)total);
    int *endps = malloc(sizeof(int) * (size_t)total);
    if (!childs || !endps) {
        free(childs);
        free(endps);
        M->failed = 1;
        return;
    }
    int c = 0;
    childs[c++] = bb;
    for (int i = ns - 1; i >= 0; i--)
        childs[c++] = M->side[i];
    int e = 0;
    for (int i = ns - 1; i >= 0; i--)
        endps[e++] = M->side_endps[i];
    endps[e++] = 2 * k;
    bw = bw0;
    while (bw != bb) {
        M->bparent[bw] = b;
        childs[c++] = bw;
        endps[e++] = M->labelend[bw] ^ 1;
        w = M->endpoint[M->labelend[bw]];
        bw = M->inblossom[w];
    }
    M->bchilds[b] = childs;
    M->bendps[b] = endps;
    M->bnchilds[b] = total;
    M->label[b] = 1;
    M->labelend[b] = M->labelend[bb];
    M->dual[b] = 0;

    int nl = blossom_leaves(M, b, M->leaves);
    for (int i = 0; i < nl; i++) {
        int x = M->leaves[i];
        if (M->label[M->inblossom[x]] == 2)
            M->queue[M->qlen++] = x; /* a former T-vertex becomes S */
        M->inblossom[x] = b;
    }

    /* The least-slack edges from the new blossom to each other S-blossom. */
    int ntouched = 0;
    for (int ci = 0; ci < total; ci++) {
        int sb = childs[ci];
        if (M->bbest[sb] == NULL) {
            int cl = blossom_leaves(M, sb, M->leaves);
            for (int li = 0; li < cl; li++) {
                int x = M->leaves[li];
                for (int a = M->adj_start[x]; a < M->adj_start[x + 1]; a++) {
                    int kk = M->adj[a] >> 1;
                    int bj = M->inblossom[M->adj_to[a]];
                    if (bj != b && M->label[bj] == 1) {
                        if (M->bestedgeto[bj] == -1) {
                            M->bestedgeto[bj] = kk;
                            M->touched[ntouched++] = bj;
                        } else if (M->dual[x] + M->dual[M->adj_to[a]] - 2 * M->adj_w[a] <
                                   slack(M, M->bestedgeto[bj])) {
                            M->bestedgeto[bj] = kk;
                        }
                    }
                }
            }
        } else {
            for (int q = 0; q < M->nbbest[sb]; q++) {
                int kk = M->bbest[sb][q];
                int i = M->eu[kk], j = M->ev[kk];
                if (M->inblossom[j] == b)
                    j = i;
                int bj = M->inblossom[j];
                if (bj != b && M->label[bj] == 1) {
                    if (M->bestedgeto[bj] == -1) {
                        M->bestedgeto[bj] = kk;
                        M->touched[ntouched++] = bj;
                    } else if (slack(M, kk) < slack(M, M->bestedgeto[bj])) {
                        M->bestedgeto[bj] = kk;
                    }
                }
            }
            free(M->bbest[sb]);
            M->bbest[sb] = NULL;
            M->nbbest[sb] = 0;
        }
        M->bestedge[sb] = -1;
    }
    int *best = malloc(sizeof(int) * (size_t)(ntouched > 0 ? ntouched : 1));
    if (!best) {
        M->failed = 1;
        return;
    }
    M->bestedge[b] = -1;
    for (int i = 0; i < ntouched; i++) {
        int kk = M->bestedgeto[M->touched[i]];
        best[i] = kk;
        M->bestedgeto[M->touched[i]] = -1;
        if (M->bestedge[b] == -1 || slack(M, kk) < best_slack(M, b))
            set_best(M, b, kk);
    }
    M->bbest[b] = best;
    M->nbbest[b] = ntouched;
}

/* Index into a blossom's cycle, negative indices counting from the end. */
static inline int cyc(int j, int len)
{
    return j >= 0 ? j : j + len;
}

static void expand_blossom(matcher *M, int b, int endstage)
{
    int len = M->bnchilds[b];
    int *childs = M->bchilds[b];
    int *endps = M->bendps[b];
    for (int i = 0; i < len; i++) {
        int s = childs[i];
        M->bparent[s] = -1;
        if (s < M->n) {
            M->inblossom[s] = s;
        } else if (endstage && M->dual[s] == 0) {
            expand_blossom(M, s, endstage);
        } else {
            int c = blossom_leaves(M, s, M->leaves);
            for (int l = 0; l < c; l++)
                M->inblossom[M->leaves[l]] = s;
        }
    }
    if (!endstage && M->label[b] == 2) {
        /* A T-blossom in mid-stage: relabel the even-length path from the entry child to the
         * base as alternating T/S, and leave the rest free (or T where reachable). */
        int entry = M->inblossom[M->endpoint[M->labelend[b] ^ 1]];
        int j = 0;
        while (childs[j] != entry)
            j++;
        int jstep, trick;
        if (j & 1) {
            j -= len;
            jstep = 1;
            trick = 0;
        } else {
            jstep = -1;
            trick = 1;
        }
        int p = M->labelend[b];
        while (j != 0) {
            M->label[M->endpoint[p ^ 1]] = 0;
            M->label[M->endpoint[endps[cyc(j - trick, len)] ^ trick ^ 1]] = 0;
            assign_label(M, M->endpoint[p ^ 1], 2, p);
            allow(M, endps[cyc(j - trick, len)] >> 1);
            j += jstep;
            p = endps[cyc(j - trick, len)] ^ trick;
            allow(M, p >> 1);
            j += jstep;
        }
        int bv = childs[cyc(j, len)];
        M->label[M->endpoint[p ^ 1]] = M->label[bv] = 2;
        M->labelend[M->endpoint[p ^ 1]] = M->labelend[bv] = p;
        M->bestedge[bv] = -1;
        j += jstep;
        while (childs[cyc(j, len)] != entry) {
            bv = childs[cyc(j, len)];
            if (M->label[bv] == 1) {
                j += jstep;
                continue;
            }
            int c = blossom_leaves(M, bv, M->leaves);
            int v = -1;
            for (int l = 0; l < c; l++) {
                if (M->label[M->leaves[l]] != 0) {
                    v = M->leaves[l];
                    break;
                }
            }
            if (v != -1) {
                M->label[v] = 0;
                M->label[M->endpoint[M->mate[M->bbase[bv]]]] = 0;
                assign_label(M, v, 2, M->labelend[v]);
            }
            j += jstep;
        }
    }
    M->label[b] = 0;
    M->labelend[b] = -1;
    free(M->bchilds[b]);
    free(M->bendps[b]);
    free(M->bbest[b]);
    M->bchilds[b] = M->bendps[b] = M->bbest[b] = NULL;
    M->bnchilds[b] = M->nbbest[b] = 0;
    M->bbase[b] = -1;
    M->bestedge[b] = -1;
    M->unused[M->nunused++] = b;
}

/* Swaps matched and unmatched edges on the even path through blossom b from vertex v to the
 * base, and rotates the cycle so that v's sub-blossom becomes the base. */
static void augment_blossom(matcher *M, int b, int v)
{
    int t = v;
    while (M->bparent[t] != b)
        t = M->bparent[t];
    if (t >= M->n)
        augment_blossom(M, t, v);
    int len = M->bnchilds[b];
    int *childs = M->bchilds[b];
    int *endps = M->bendps[b];
    int i = 0;
    while (childs[i] != t)
        i++;
    int j = i, jstep, trick;
    if (i & 1) {
        j -= len;
        jstep = 1;
        trick = 0;
    } else {
        jstep = -1;
        trick = 1;
    }
    while (j != 0) {
        j += jstep;
        t = childs[cyc(j, len)];
        int p = endps[cyc(j - trick, len)] ^ trick;
        if (t >= M->n)
            augment_blossom(M, t, M->endpoint[p]);
        j += jstep;
        t = childs[cyc(j, len)];
        if (t >= M->n)
            augment_blossom(M, t, M->endpoint[p ^ 1]);
        M->mate[M->endpoint[p]] = p ^ 1;
        M->mate[M->endpoint[p ^ 1]] = p;
    }
    /* rotate by i */
    if (i > 0) {
        memcpy(M->rot, childs, sizeof(int) * (size_t)len);
        for (int q = 0; q < len; q++)
            childs[q] = M->rot[(q + i) % len];
        memcpy(M->rot, endps, sizeof(int) * (size_t)len);
        for (int q = 0; q < len; q++)
            endps[q] = M->rot[(q + i) % len];
    }
    M->bbase[b] = M->bbase[childs[0]];
}

/* Augments along the path through S-S edge k joining two different trees. */
static void augment_matching(matcher *M, int k)
{
    int ends[2][2] = {{M->eu[k], 2 * k + 1}, {M->ev[k], 2 * k}};
    for (int side = 0; side < 2; side++) {
        int s = ends[side][0], p = ends[side][1];
        for (;;) {
            int bs = M->inblossom[s];
            if (bs >= M->n)
                augment_blossom(M, bs, s);
            M->mate[s] = p;
            if (M->labelend[bs] == -1)
                break; /* reached the tree's root */
            int t = M->endpoint[M->labelend[bs]];
            int bt = M->inblossom[t];
            s = M->endpoint[M->labelend[bt]];
            int j = M->endpoint[M->labelend[bt] ^ 1];
            if (bt >= M->n)
                augment_blossom(M, bt, j);
            M->mate[j] = M->labelend[bt];
            p = M->labelend[bt] ^ 1;
        }
    }
}

/* Edges by decreasing weight, ties by index (so the order does not depend on qsort). */
typedef struct {
    int64_t w;
    int k;
} weighted_edge;

static int heavier_first(const void *a, const void *b)
{
    const weighted_edge *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

static void matcher_free(matcher *M)
{
    if (M->bchilds) {
        for (int b = 0; b < 2 * M->n; b++) {
            free(M->bchilds[b]);
            free(M->bendps[b]);
            free(M->bbest[b]);
        }
    }
    free(M->endpoint); free(M->adj_start); free(M->adj); free(M->adj_to); free(M->adj_w); free(M->mate); free(M->label);
    free(M->labelend); free(M->inblossom); free(M->bparent); free(M->bchilds); free(M->bendps);
    free(M->bnchilds); free(M->bbase); free(M->bestedge); free(M->best_u); free(M->best_v); free(M->best_w); free(M->bbest); free(M->nbbest);
    free(M->unused); free(M->dual); free(M->allowedge); free(M->adj_pos); free(M->queue); free(M->leaves);
    free(M->stack); free(M->path); free(M->side); free(M->side_endps); free(M->bestedgeto);
    free(M->touched); free(M->rot); free(M->by_weight);
}

static int matcher_init(matcher *M, int n, int m, const int32_t *eu, const int32_t *ev, const int64_t *ew)
{
    memset(M, 0, sizeof *M);
    M->n = n;
    M->m = m;
    M->eu = eu;
    M->ev = ev;
    M->ew = ew;
    size_t n2 = 2 * (size_t)n, m2 = 2 * (size_t)m + 1;
    M->endpoint = malloc(sizeof(int) * m2);
    M->adj_start = calloc((size_t)n + 1, sizeof(int));
    M->adj = malloc(sizeof(int) * m2);
    M->adj_to = malloc(sizeof(int) * m2);
    M->adj_w = malloc(sizeof(int64_t) * m2);
    M->mate = malloc(sizeof(int) * (size_t)n);
    M->label = calloc(n2, sizeof(int));
    M->labelend = malloc(sizeof(int) * n2);
    M->inblossom = malloc(sizeof(int) * (size_t)n);
    M->bparent = malloc(sizeof(int) * n2);
    M->bchilds = calloc(n2, sizeof(int *));
    M->bendps = calloc(n2, sizeof(int *));
    M->bnchilds = calloc(n2, sizeof(int));
    M->bbase = malloc(sizeof(int) * n2);
    M->bestedge = malloc(sizeof(int) * n2);
    M->best_u = malloc(sizeof(int) * n2);
    M->best_v = malloc(sizeof(int) * n2);
    M->best_w = malloc(sizeof(int64_t) * n2);
    M->bbest = calloc(n2, sizeof(int *));
    M->nbbest = calloc(n2, sizeof(int));
    M->unused = malloc(sizeof(int) * n2);
    M->dual = calloc(n2, sizeof(int64_t));
    M->allowedge = calloc(2 * (size_t)m / 64 + 1, sizeof(uint64_t));
    M->adj_pos = malloc(sizeof(int) * m2);
    M->queue = malloc(sizeof(int) * n2);
    M->leaves = malloc(sizeof(int) * n2);
    M->stack = malloc(sizeof(int) * n2);
    M->path = malloc(sizeof(int) * n2);
    M->side = malloc(sizeof(int) * n2);
    M->side_endps = malloc(sizeof(int) * n2);
    M->bestedgeto = malloc(sizeof(int) * n2);
    M->touched = malloc(sizeof(int) * n2);
    M->rot = malloc(sizeof(int) * n2);
    M->by_weight = malloc(sizeof(int) * ((size_t)m + 1));
    if (!M->endpoint || !M->adj_start || !M->adj || !M->adj_to || !M->adj_w || !M->mate || !M->label || !M->labelend ||
        !M->inblossom || !M->bparent || !M->bchilds || !M->bendps || !M->bnchilds || !M->bbase ||
        !M->bestedge || !M->best_u || !M->best_v || !M->best_w || !M->bbest || !M->nbbest || !M->unused || !M->dual || !M->allowedge || !M->adj_pos ||
        !M->queue || !M->leaves || !M->stack || !M->path || !M->side || !M->side_endps ||
        !M->bestedgeto || !M->touched || !M->rot || !M->by_weight)
        return -1;

    int64_t maxw = 0;
    for (int k = 0; k < m; k++) {
        M->endpoint[2 * k] = eu[k];
        M->endpoint[2 * k + 1] = ev[k];
        M->adj_start[eu[k] + 1]++;
        M->adj_start[ev[k] + 1]++;
        if (ew[k] > maxw)
            maxw = ew[k];
    }
    for (int v = 0; v < n; v++)
        M->adj_start[v + 1] += M->adj_start[v];
    int *fill = malloc(sizeof(int) * ((size_t)n + 1));
    if (!fill)
        return -1;
    memcpy(fill, M->adj_start, sizeof(int) * ((size_t)n + 1));
    for (int k = 0; k < m; k++) {
        int a = fill[eu[k]]++; /* from eu[k], the remote end is ev[k] */
        M->adj[a] = 2 * k + 1;
        M->adj_to[a] = ev[k];
        M->adj_w[a] = ew[k];
        M->adj_pos[2 * k + 1] = a;
        a = fill[ev[k]]++;
        M->adj_pos[2 * k] = a;
        M->adj[a] = 2 * k;
        M->adj_to[a] = eu[k];
        M->adj_w[a] = ew[k];
    }
    free(fill);

    for (int v = 0; v < n; v++) {
        M->mate[v] = -1;
        M->inblossom[v] = v;
        M->bbase[v] = v;
        M->dual[v] = maxw;
    }
    for (int b = 0; b < 2 * n; b++) {
        M->bparent[b] = -1;
        M->bestedgeto[b] = -1;
        M->labelend[b] = -1;
    }
    for (int b = n; b < 2 * n; b++)
        M->bbase[b] = -1;
    weighted_edge *sorted = malloc(sizeof(weighted_edge) * (size_t)m);
    if (!sorted)
        return -1;
    for (int k = 0; k < m; k++) {
        sorted[k].w = ew[k];
        sorted[k].k = k;
    }
    qsort(sorted, (size_t)m, sizeof(weighted_edge), heavier_first);
    for (int k = 0; k < m; k++)
        M->by_weight[k] = sorted[k].k;
    free(sorted);
    M->by_weight_start = 0;
    M->nunused = 0;
    M->bend = n;
    for (int b = 2 * n - 1; b >= n; b--)
        M->unused[M->nunused++] = b;
    return 0;
}

/*
 * Before a stage: match at once every tight edge between two free vertices that are not inside a
 * blossom. Each such edge is an augmenting path of length one in the equality subgraph, which is
 * what the stage would find and augment first (its search order is arbitrary), so augmenting many
 * of them here does the work of many stages without their full rescans of the graph. Duals do not
 * change. All free vertices have the same dual D (they are S-roots from the start and every dual
 * step moves them together), so an edge between two free vertices is tight exactly when its
 * weight is D; heavier edges have a matched end (their slack would be negative otherwise) and
 * stay so, since a matched vertex stays matched. With distinct weights this finds little; with
 * repeated weights (whole-number counts) it removes most stages.
 */
static void match_tight_free_pairs(matcher *M)
{
    int64_t d = -1;
    for (int v = 0; v < M->n; v++) {
        if (M->mate[v] == -1) {
            d = M->dual[v];
            break;
        }
    }
    if (d < 0)
        return;
    int *order = M->by_weight;
    int start = M->by_weight_start;
    while (start < M->m && M->ew[order[start]] > d)
        start++;
    for (int i = start; i < M->m && M->ew[order[i]] == d; i++) {
        int k = order[i], u = M->eu[k], v = M->ev[k];
        int dead = M->mate[u] != -1 || M->mate[v] != -1;
        if (!dead && M->inblossom[u] == u && M->inblossom[v] == v &&
            M->dual[u] + M->dual[v] - 2 * M->ew[k] == 0) {
            M->mate[u] = 2 * k + 1;
            M->mate[v] = 2 * k;
            dead = 1;
        }
        if (dead) { /* never useful again: move it out of the range */
            order[i] = order[start];
            order[start] = k;
            start++;
        }
    }
    M->by_weight_start = start;
}

/* One stage: grow alternating trees from every free vertex, adjusting duals, until an augmenting
 * path is found (returns 1) or no dual step can make progress (returns 0: optimum reached). */
static int stage(matcher *M)
{
    int n = M->n, bend = M->bend;
    for (int b = 0; b < bend; b++) {
        M->label[b] = 0;
        M->bestedge[b] = -1;
    }
    for (int b = n; b < bend; b++) {
        if (M->bbest[b]) {
            free(M->bbest[b]);
            M->bbest[b] = NULL;
        }
        M->nbbest[b] = 0;
    }
    memset(M->allowedge, 0, sizeof(uint64_t) * (2 * (size_t)M->m / 64 + 1));
    M->qlen = 0;
    for (int v = 0; v < n; v++)
        if (M->mate[v] == -1 && M->label[M->inblossom[v]] == 0)
            assign_label(M, v, 1, -1);

    for (;;) {
        while (M->qlen > 0) {
            int v = M->queue[--M->qlen];
            for (int a = M->adj_start[v]; a < M->adj_start[v + 1]; a++) {
                int w = M->adj_to[a];
                if (M->inblossom[v] == M->inblossom[w])
                    continue;
                int p = M->adj[a];
                int k = p >> 1;
                int64_t kslack = M->dual[v] + M->dual[w] - 2 * M->adj_w[a];
                int ok = allowed_at(M, a);
                if (!ok && kslack <= 0) {
                    allow(M, k);
                    ok = 1;
                }
                if (ok) {
                    int lw = M->label[M->inblossom[w]];
                    if (lw == 0) {
                        assign_label(M, w, 2, p ^ 1);
                    } else if (lw == 1) {
                        int base = scan_blossom(M, v, w);
                        if (base >= 0) {
                            add_blossom(M, base, k);
                            if (M->failed)
                                return -1;
                        } else {
                            augment_matching(M, k);
                            return 1;
                        }
                    } else if (M->label[w] == 0) {
                        M->label[w] = 2;
                        M->labelend[w] = p ^ 1;
                    }
                } else if (M->label[M->inblossom[w]] == 1) {
                    int b = M->inblossom[v];
                    if (M->bestedge[b] == -1 || kslack < best_slack(M, b))
                        set_best_known(M, b, k, v, w, M->adj_w[a]);
                } else if (M->label[w] == 0) {
                    if (M->bestedge[w] == -1 || kslack < best_slack(M, w))
                        set_best_known(M, w, k, v, w, M->adj_w[a]);
                }
            }
        }

        /* Dual step: the largest delta keeping every slack and blossom dual non-negative. The
         * candidates are found in one pass over the vertices and one over the blossoms in use;
         * among equal deltas the kinds win in the order 1, 2, 3, 4, and the lowest index within a
         * kind (the order of separate passes). */
        bend = M->bend;
        int64_t d1 = M->dual[0], d2 = INT64_MAX, d3 = INT64_MAX, d4 = INT64_MAX;
        int e2 = -1, e3 = -1, b4 = -1;
        for (int v = 0; v < n; v++) {
            int64_t y = M->dual[v];
            if (y < d1)
                d1 = y;
            int top = M->inblossom[v];
            int l = M->label[top];
            if (l == 0 && M->bestedge[v] != -1) {
                int64_t d = best_slack(M, v);
                if (d < d2) {
                    d2 = d;
                    e2 = M->bestedge[v];
                }
            }
            /* A vertex that is its own top-level S-blossom: its least-slack S-S edge. */
            if (top == v && l == 1 && M->bestedge[v] != -1) {
                int64_t d = best_slack(M, v) / 2; /* even: see the header */
                if (d < d3) {
                    d3 = d;
                    e3 = M->bestedge[v];
                }
            }
        }
        for (int b = n; b < bend; b++) {
            if (M->bbase[b] < 0 || M->bparent[b] != -1)
                continue;
            if (M->label[b] == 1 && M->bestedge[b] != -1) {
                int64_t d = best_slack(M, b) / 2;
                if (d < d3) {
                    d3 = d;
                    e3 = M->bestedge[b];
                }
            } else if (M->label[b] == 2 && M->dual[b] < d4) {
                d4 = M->dual[b];
                b4 = b;
            }
        }
        int deltatype = 1, deltaedge = -1, deltablossom = -1;
        int64_t delta = d1;
        if (d2 < delta) {
            delta = d2;
            deltatype = 2;
            deltaedge = e2;
        }
        if (d3 < delta) {
            delta = d3;
            deltatype = 3;
            deltaedge = e3;
        }
        if (d4 < delta) {
            delta = d4;
            deltatype = 4;
            deltablossom = b4;
        }
        for (int v = 0; v < n; v++) {
            int l = M->label[M->inblossom[v]];
            if (l == 1)
                M->dual[v] -= delta;
            else if (l == 2)
                M->dual[v] += delta;
        }
        for (int b = n; b < bend; b++) {
            if (M->bbase[b] >= 0 && M->bparent[b] == -1) {
                if (M->label[b] == 1)
                    M->dual[b] += delta;
                else if (M->label[b] == 2)
                    M->dual[b] -= delta;
            }
        }
        if (deltatype == 1) {
            return 0; /* some free vertex's dual reached zero: no augmentation can gain */
        } else if (deltatype == 2) {
            allow(M, deltaedge);
            int i = M->eu[deltaedge];
            if (M->label[M->inblossom[i]] == 0)
                i = M->ev[deltaedge];
            M->queue[M->qlen++] = i;
        } else if (deltatype == 3) {
            allow(M, deltaedge);
            M->queue[M->qlen++] = M->eu[deltaedge];
        } else {
            expand_blossom(M, deltablossom, 0);
        }
    }
}

/*
 * Maximum-weight matching of the graph on n vertices with m edges (eu[k], ev[k], w[k]).
 * Requirements: 0 <= eu[k], ev[k] < n, eu[k] != ev[k], 0 <= w[k] <= 2^60. Writes mate_out[v]
 * (the vertex matched to v, or -1). Returns 0, -1 when out of memory, -2 on bad input.
 */
int pinlab_max_weight_matching(int n, int m, const int32_t *eu, const int32_t *ev, const int64_t *w,
                               int32_t *mate_out)
{
    if (n < 0 || m < 0 || n > INT_MAX / 2 || m > (INT_MAX - 1) / 2)
        return -2; /* endpoints (2m) and blossom numbers (2n) must fit an int */
    for (int k = 0; k < m; k++) {
        if (eu[k] < 0 || eu[k] >= n || ev[k] < 0 || ev[k] >= n || eu[k] == ev[k] || w[k] < 0 ||
            w[k] > ((int64_t)1 << 60))
            return -2;
    }
    for (int v = 0; v < n; v++)
        mate_out[v] = -1;
    if (n == 0 || m == 0)
        return 0;
    matcher M;
    if (matcher_init(&M, n, m, eu, ev, w) != 0) {
        matcher_free(&M);
        return -1;
    }
    int rc = 0;
    for (int t = 0; t < n; t++) {
        match_tight_free_pairs(&M);
        int r = stage(&M);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0)
            break;
        /* End of stage: expand S-blossoms whose dual reached zero. */
        for (int b = n; b < 2 * n; b++)
            if (M.bparent[b] == -1 && M.bbase[b] >= 0 && M.label[b] == 1 && M.dual[b] == 0)
                expand_blossom(&M, b, 1);
    }
    if (rc == 0)
        for (int v = 0; v < n; v++)
            mate_out[v] = M.mate[v] >= 0 ? M.endpoint[M.mate[v]] : -1;
    matcher_free(&M);
    return rc;
}
