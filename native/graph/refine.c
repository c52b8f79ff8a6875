/*
 * The inner loops of pinlab's graph partitioning and treematch (pinlab.graph.partition,
 * pinlab.placement.treematch), where Python loops over thousands of threads cost more than the
 * arithmetic: sums of weights by group, greedy growth of parts, and swaps between parts.
 *
 * A graph of n vertices comes either dense (row-major n x n, `dense` set) or as CSR (`indptr`,
 * `indices`, `data`; `dense` NULL), symmetric with non-negative weights. Each function makes the
 * choices the numpy code it replaces made (the first of equal candidates, the same comparisons);
 * sums may differ from numpy's in the last bits (numpy adds in pairs).
 *
 * Loaded with ctypes by pinlab.graph.kernels, from the same library as the matching.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n;
    const double *dense;
    const int64_t *indptr;
    const int32_t *indices;
    const double *data;
} graph;

/* out[(row_label[i] or i) * kc + col_label[j]] += w[i][j] over every weight, row by row. */
static void group_sums(const graph *g, const int64_t *row_label, const int64_t *col_label, int kc, double *out)
{
    for (int i = 0; i < g->n; i++) {
        double *row = out + (size_t)(row_label ? row_label[i] : i) * (size_t)kc;
        if (g->dense) {
            const double *w = g->dense + (size_t)i * (size_t)g->n;
            for (int j = 0; j < g->n; j++)
                if (w[j] != 0.0)
                    row[col_label[j]] += w[j];
        } else {
            for (int64_t e = g->indptr[i]; e < g->indptr[i + 1]; e++)
                row[col_label[g->indices[e]]] += g->data[e];
        }
    }
}

/* acc[j] += sign * w[v][j] for every j (the row of v: w is symmetric). */
static void add_row(const graph *g, int v, double sign, double *acc, size_t stride)
{
    if (g->dense) {
        const double *w = g->dense + (size_t)v * (size_t)g->n;
        for (int j = 0; j < g->n; j++)
            acc[(size_t)j * stride] += sign * w[j];
    } else {
        for (int64_t e = g->indptr[v]; e < g->indptr[v + 1]; e++)
            acc[(size_t)g->indices[e] * stride] += sign * g->data[e];
    }
}

/* acc[j] += w[a][j] - w[b][j] for every j (rows for columns: w is symmetric). */
static void add_difference(const graph *g, int a, int b, double *acc, size_t stride)
{
    if (g->dense) {
        const double *wa = g->dense + (size_t)a * (size_t)g->n, *wb = g->dense + (size_t)b * (size_t)g->n;
        for (int j = 0; j < g->n; j++)
            acc[(size_t)j * stride] += wa[j] - wb[j];
    } else {
        add_row(g, a, 1.0, acc, stride);
        add_row(g, b, -1.0, acc, stride);
    }
}

/*
 * Sums of weights by group: out is (row_label ? kr : n) x kc, zeroed here. With row_label NULL,
 * out[v][p] is the weight between vertex v and the vertices labelled p (a partition's
 * connections); with both labels, the graph contracted to its groups.
 */
void pinlab_group_sums(int n, const double *dense, const int64_t *indptr, const int32_t *indices, const double *data,
                       const int64_t *row_label, const int64_t *col_label, int kr, int kc, double *out)
{
    graph g = {n, dense, indptr, indices, data};
    memset(out, 0, sizeof(double) * (size_t)(row_label ? kr : n) * (size_t)kc);
    group_sums(&g, row_label, col_label, kc, out);
}

/*
 * Swaps of two vertices of equal size between parts while a swap raises the weight inside
 * parts (pinlab.graph.partition.refine). parts[v] in 0..k-1, changed in place; vsize[v] the
 * vertex sizes. Returns the number of swaps made, or -1 when out of memory.
 */
int pinlab_refine(int n, const double *dense, const int64_t *indptr, const int32_t *indices, const double *data,
                  const int64_t *vsize, int k, int64_t *parts, int passes)
{
    graph g = {n, dense, indptr, indices, data};
    double *conn = calloc((size_t)n * (size_t)k, sizeof(double));
    double *pull = malloc(sizeof(double) * (size_t)(k > 0 ? k : 1));
    double *wu = dense ? NULL : calloc((size_t)n, sizeof(double)); /* row u, spread out (CSR only) */
    if (!conn || !pull || (!dense && !wu)) {
        free(conn);
        free(pull);
        free(wu);
        return -1;
    }
    group_sums(&g, NULL, parts, k, conn);
    int swaps = 0;
    for (int pass = 0; pass < passes; pass++) {
        int improved = 0;
        for (int u = 0; u < n; u++) {
            int p = (int)parts[u];
            const double *cu = conn + (size_t)u * (size_t)k;
            int q = -1;
            for (int r = 0; r < k; r++) {
                pull[r] = r == p ? -INFINITY : cu[r] - cu[p];
                if (q < 0 || pull[r] > pull[q])
                    q = r;
            }
            if (!(pull[q] > 0))
                continue;
            const double *row = dense ? dense + (size_t)u * (size_t)n : wu;
            if (!dense)
                for (int64_t e = indptr[u]; e < indptr[u + 1]; e++)
                    wu[indices[e]] = data[e];
            int best = -1;
            double best_gain = 0.0;
            for (int v = 0; v < n; v++) {
                if (parts[v] != q || vsize[v] != vsize[u])
                    continue;
                const double *cv = conn + (size_t)v * (size_t)k;
                double gain = pull[q] + cv[p] - cv[q] - 2 * row[v];
                if (best < 0 || gain > best_gain) {
                    best = v;
                    best_gain = gain;
                }
            }
            if (!dense)
                for (int64_t e = indptr[u]; e < indptr[u + 1]; e++)
                    wu[indices[e]] = 0.0;
            if (best < 0 || best_gain <= 1e-12 * fmax(1.0, fabs(pull[q])))
                continue;
            /* conn[:, p] += w[:, v] - w[:, u]; conn[:, q] += w[:, u] - w[:, v] */
            add_difference(&g, best, u, conn + p, (size_t)k);
            add_difference(&g, u, best, conn + q, (size_t)k);
            parts[u] = q;
            parts[best] = p;
            swaps++;
            improved = 1;
        }
        if (!improved)
            break;
    }
    free(conn);
    free(pull);
    free(wu);
    return swaps;
}

/*
 * Greedy growth (pinlab.graph.partition._grow): parts in the order given, each starting from the
 * free vertex with the largest total weight that fits (or from `first` for the first part, when
 * it fits), then taking, while it has room, the free vertex that fits and is most drawn to it.
 * room[p] is part p's size in vertex sizes. parts_out[v] is -1 for a vertex that fitted nowhere.
 * Returns 0, or -1 when out of memory.
 */
int pinlab_grow(int n, const double *dense, const int64_t *indptr, const int32_t *indices, const double *data,
                const int64_t *vsize, int k, const int32_t *order, const int64_t *room_in, int first,
                int64_t *parts_out)
{
    graph g = {n, dense, indptr, indices, data};
    double *total = calloc((size_t)n, sizeof(double));
    double *pull = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!total || !pull) {
        free(total);
        free(pull);
        return -1;
    }
    for (int v = 0; v < n; v++) {
        parts_out[v] = -1;
        add_row(&g, v, 1.0, total + v, 0); /* total[v] = the sum of row v */
    }
    for (int rank = 0; rank < k; rank++) {
        int p = order[rank];
        int64_t room = room_in[p];
        memset(pull, 0, sizeof(double) * (size_t)n);
        int start = 1;
        while (room > 0) {
            const double *by = start ? total : pull;
            int v = -1;
            if (start && rank == 0 && first >= 0 && first < n && vsize[first] <= room)
                v = first;
            else
                for (int x = 0; x < n; x++)
                    if (parts_out[x] < 0 && vsize[x] <= room && (v < 0 || by[x] > by[v]))
                        v = x;
            if (v < 0)
                break;
            start = 0;
            parts_out[v] = p;
            room -= vsize[v];
            add_row(&g, v, 1.0, pull, 1);
        }
    }
    free(total);
    free(pull);
    return 0;
}

/*
 * Each row's k heaviest positive weights off the diagonal, of a dense n x n matrix: out[i*k..]
 * gets their columns, heaviest first (ties: the lower column first), -1 where row i has fewer
 * than k. One pass over each row with a small sorted buffer: a dense graph's heaviest pairs
 * without a partial sort of every row in numpy.
 */
void pinlab_heaviest(int n, const double *dense, int k, int32_t *out)
{
    for (int i = 0; i < n; i++) {
        const double *w = dense + (size_t)i * (size_t)n;
        int32_t *best = out + (size_t)i * (size_t)k;
        int have = 0;
        for (int j = 0; j < n; j++) {
            double x = w[j];
            if (j == i || !(x > 0.0) || (have == k && !(x > w[best[k - 1]])))
                continue;
            int at = have < k ? have++ : k - 1; /* the lightest kept one drops out when full */
            while (at > 0 && x > w[best[at - 1]]) {
                best[at] = best[at - 1];
                at--;
            }
            best[at] = j;
        }
        for (int r = have; r < k; r++)
            best[r] = -1;
    }
}
