/*
 * Shared helpers of pinlab's built-in workloads; see common.h.
 */
#define _GNU_SOURCE
#include "common.h"
#include "cpulist.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- program identity and errors --------------------------------------------------------- */

static char workload_name[64] = "workload";
static char prog_name[80] = "pinlab-workload";

void pl_init(const char *workload)
{
    snprintf(workload_name, sizeof workload_name, "%s", workload);
    snprintf(prog_name, sizeof prog_name, "pinlab-%s", workload);
}

const char *pl_workload(void) { return workload_name; }
const char *pl_prog(void) { return prog_name; }

void pl_usage_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, whatever the argument quoted in the message contained. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stdout);
    fprintf(stderr, "%s: error: %s\n", prog_name, msg);
    exit(PL_EXIT_USAGE);
}

void pl_warn(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: warning: ", prog_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static char fail_text[2048];
static int fail_count;

void pl_fail(const char *fmt, ...)
{
    size_t used = strlen(fail_text);
    if (used + 8 >= sizeof fail_text) {
        fail_count++;
        return;
    }
    if (fail_count > 0) {
        snprintf(fail_text + used, sizeof fail_text - used, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fail_text + used, sizeof fail_text - used, fmt, ap);
    va_end(ap);
    fail_count++;
}

int pl_failed(void) { return fail_count > 0; }
const char *pl_fail_text(void) { return fail_text; }

int pl_exit_status(int json)
{
    if (!pl_failed())
        return PL_EXIT_OK;
    if (!json) {
        fflush(stdout);
        fprintf(stderr, "%s: validation failed: %s\n", prog_name, fail_text);
    }
    return PL_EXIT_INVALID;
}

/* ---- options ----------------------------------------------------------------------------- */

const char *pl_optname(char *const argv[])
{
    /* After getopt_long returned, argv[optind - 1] is the option or, for "--opt value",
     * its value; the option itself is then argv[optind - 2]. */
    static char name[128];
    const char *arg = argv[optind - 1];
    if (optind >= 2 && arg[0] != '-' && argv[optind - 2][0] == '-')
        arg = argv[optind - 2];
    size_t len = strcspn(arg, "=");
    if (len >= sizeof name)
        len = sizeof name - 1;
    memcpy(name, arg, len);
    name[len] = '\0';
    return name;
}

int pl_common_option(pl_common *c, int opt, char *const argv[])
{
    switch (opt) {
    case PL_OPT_THREADS:
        c->threads = pl_parse_int("--threads", optarg, 1, PL_MAX_THREADS);
        return 1;
    case PL_OPT_JSON:
        c->json = 1;
        return 1;
    case 'h':
    case PL_OPT_HELP:
        c->help = 1;
        return 1;
    case PL_OPT_CORRUPT:
        c->corrupt = 1;
        return 1;
    case ':':
        pl_usage_error("option '%s' needs a value (see --help)", pl_optname(argv));
    case '?': {
        const char *arg = argv[optind - 1];
        if (optopt && optopt < 0x100 && arg[0] == '-' && arg[1] != '-')
            pl_usage_error("unknown option '-%c' (see --help)", optopt);
        if (optopt && strncmp(arg, "--", 2) == 0 && strchr(arg, '='))
            pl_usage_error("option '%s' takes no value (see --help)", pl_optname(argv));
        pl_usage_error("unknown or ambiguous option '%s' (see --help)", arg);
    }
    default:
        return 0;
    }
}

void pl_no_positional(int argc, char *const argv[])
{
    if (optind < argc)
        pl_usage_error("unexpected argument '%s' (options only; see --help)", argv[optind]);
}

/* ---- numbers and sizes ------------------------------------------------------------------- */

typedef unsigned __int128 u128;

/* Parses "<digits>[.<digits>]" at *p into mantissa and number of fraction digits.
 * Returns 1, 0 when malformed, -1 when too long. */
static int parse_decimal(const char **p, u128 *mantissa, int *frac_digits)
{
    const char *s = *p;
    u128 m = 0;
    int digits = 0, frac = 0, seen_point = 0;
    for (;; s++) {
        if (*s >= '0' && *s <= '9') {
            if (m > ((u128)1 << 100))
                return -1; /* absurdly long */
            m = m * 10 + (u128)(*s - '0');
            digits++;
            if (seen_point)
                frac++;
        } else if (*s == '.' && !seen_point) {
            seen_point = 1;
        } else {
            break;
        }
    }
    if (frac > 18)
        return -1;
    if (digits == 0 || (seen_point && frac == 0))
        return 0;
    *p = s;
    *mantissa = m;
    *frac_digits = frac;
    return 1;
}

static u128 pow10_u128(int n)
{
    u128 r = 1;
    while (n-- > 0)
        r *= 10;
    return r;
}

static const char *skip_blanks(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

uint64_t pl_parse_count(const char *what, const char *text, uint64_t min, uint64_t max)
{
    const char *s = skip_blanks(text);
    u128 m;
    int frac;
    if (*s == '-')
        pl_usage_error("%s must be a positive whole number (got '%s')", what, text);
    if (*s == '+')
        s++;
    int parsed = parse_decimal(&s, &m, &frac);
    if (parsed < 0)
        pl_usage_error("%s is far too large or too precise (got '%s')", what, text);
    if (!parsed)
        pl_usage_error("%s must be a whole number such as 1000 or 20M (got '%s')", what, text);
    u128 mult = 1;
    switch (*s) {
    case 'k': case 'K': mult = 1000; s++; break;
    case 'm': case 'M': mult = 1000000; s++; break;
    case 'g': case 'G': mult = 1000000000; s++; break;
    case 't': case 'T': mult = 1000000000000ULL; s++; break;
    default: break;
    }
    s = skip_blanks(s);
    if (*s)
        pl_usage_error("%s must be a whole number with an optional k, M, G or T (x1000) (got '%s')",
                       what, text);
    if (m > ((u128)1 << 80))
        pl_usage_error("%s is far too large (got '%s')", what, text);
    u128 scale = pow10_u128(frac);
    u128 total = m * mult;
    if (total % scale)
        pl_usage_error("%s must be a whole number (got '%s')", what, text);
    total /= scale;
    if (total < min || total > max) {
        if (max == UINT64_MAX)
            pl_usage_error("%s must be at least %llu (got '%s')", what, (unsigned long long)min, text);
        pl_usage_error("%s must be between %llu and %llu (got '%s')", what, (unsigned long long)min,
                       (unsigned long long)max, text);
    }
    return (uint64_t)total;
}

int pl_parse_int(const char *what, const char *text, int min, int max)
{
    const char *s = skip_blanks(text);
    if (*s == '-' && s[1] >= '0' && s[1] <= '9') {
        if (min > 0)
            pl_usage_error("%s must be a positive whole number (got '%s')", what, text);
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *skip_blanks(end) || errno == ERANGE)
        pl_usage_error("%s must be a whole number (got '%s')", what, text);
    if (v < min || v > max)
        pl_usage_error("%s must be between %d and %d (got '%s')", what, min, max, text);
    return (int)v;
}

struct unit {
    const char *name;
    uint64_t mult;
    int bytes;
};

static const struct unit units[] = {
    {"", 1, 0}, {"k", 1000, 0}, {"m", 1000000, 0}, {"g", 1000000000, 0}, {"t", 1000000000000ULL, 0},
    {"b", 1, 1}, {"kb", 1000, 1}, {"mb", 1000000, 1}, {"gb", 1000000000, 1}, {"tb", 1000000000000ULL, 1},
    {"kib", 1ULL << 10, 1}, {"mib", 1ULL << 20, 1}, {"gib", 1ULL << 30, 1}, {"tib", 1ULL << 40, 1},
};

uint64_t pl_parse_size(const char *what, const char *text, uint64_t elem_bytes)
{
    const char *s = skip_blanks(text);
    u128 m;
    int frac;
    if (*s == '-')
        pl_usage_error("%s must be a positive size (got '%s')", what, text);
    if (*s == '+')
        s++;
    int parsed = parse_decimal(&s, &m, &frac);
    if (parsed < 0)
        pl_usage_error("%s is far too large or too precise (got '%s')", what, text);
    if (!parsed)
        pl_usage_error("%s must be a size such as 10M (elements) or 512MiB (bytes) (got '%s')", what, text);
    s = skip_blanks(s);
    char unit[8];
    size_t len = 0;
    while (s[len] && s[len] != ' ' && s[len] != '\t' && len < sizeof unit - 1) {
        unit[len] = (char)tolower((unsigned char)s[len]);
        len++;
    }
    unit[len] = '\0';
    if (*skip_blanks(s + len))
        len = sizeof unit; /* junk after the unit */
    const struct unit *u = NULL;
    for (size_t i = 0; len < sizeof unit && i < sizeof units / sizeof units[0]; i++)
        if (strcmp(unit, units[i].name) == 0)
            u = &units[i];
    if (!u)
        pl_usage_error("%s: unknown unit in '%s'; use a number of elements (optionally k, M, G, T x1000) "
                       "or bytes with B, KB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB (x1024)", what, text);
    if (m > ((u128)1 << 80))
        pl_usage_error("%s is far too large (got '%s')", what, text);
    u128 scale = pow10_u128(frac);
    u128 total = m * u->mult;
    uint64_t elements;
    if (u->bytes) {
        u128 bytes = total / scale;
        u128 n = bytes / elem_bytes;
        if (n == 0)
            pl_usage_error("%s of '%s' is less than one element of %llu bytes", what, text,
                           (unsigned long long)elem_bytes);
        elements = n > UINT64_MAX / 2 ? UINT64_MAX / 2 : (uint64_t)n;
    } else {
        if (total % scale)
            pl_usage_error("%s: '%s' is not a whole number of elements", what, text);
        u128 n = total / scale;
        if (n == 0)
            pl_usage_error("%s must be at least one element (got '%s')", what, text);
        elements = n > UINT64_MAX / 2 ? UINT64_MAX / 2 : (uint64_t)n;
    }
    return elements;
}

uint64_t pl_mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return UINT64_MAX;
    return r;
}

uint64_t pl_add_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return UINT64_MAX;
    return r;
}

uint64_t pl_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
            kib = v;
            break;
        }
    }
    fclose(f);
    return pl_mul_sat(kib, 1024);
}

const char *pl_fmt_bytes(uint64_t bytes, int slot)
{
    static char buf[4][48];
    char *out = buf[slot & 3];
    if (bytes == UINT64_MAX)
        snprintf(out, sizeof buf[0], "more than 16 EiB");
    else if (bytes >= (1ULL << 30))
        snprintf(out, sizeof buf[0], "%.2f GiB", (double)bytes / (double)(1ULL << 30));
    else if (bytes >= (1ULL << 20))
        snprintf(out, sizeof buf[0], "%.2f MiB", (double)bytes / (double)(1ULL << 20));
    else if (bytes >= (1ULL << 10))
        snprintf(out, sizeof buf[0], "%.2f KiB", (double)bytes / (double)(1ULL << 10));
    else
        snprintf(out, sizeof buf[0], "%llu B", (unsigned long long)bytes);
    return out;
}

void pl_check_memory(uint64_t bytes, const char *option)
{
    uint64_t avail = pl_mem_available();
    if (avail == 0 || bytes <= avail)
        return;
    double gib = (double)(1ULL << 30);
    if (bytes == UINT64_MAX)
        pl_usage_error("needs more than 16777216 GiB, %.2f GiB available (MemAvailable); choose a smaller %s",
                       (double)avail / gib, option);
    pl_usage_error("needs %.2f GiB, %.2f GiB available (MemAvailable); choose a smaller %s",
                   (double)bytes / gib, (double)avail / gib, option);
}

void *pl_alloc(uint64_t bytes, const char *what)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (bytes > SIZE_MAX || posix_memalign(&p, 4096, (size_t)bytes) != 0 || !p)
        pl_usage_error("cannot allocate %s for %s; choose a smaller size", pl_fmt_bytes(bytes, 0), what);
    return p;
}

/* ---- machine ----------------------------------------------------------------------------- */

double pl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads the first line of a file, without its newline. */
static int read_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* "48K", "107520K", "32M", "1024" (bytes) as in sysfs cache/index<N>/size. */
static uint64_t parse_cache_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    switch (*end) {
    case 'K': case 'k': return pl_mul_sat(v, 1ULL << 10);
    case 'M': case 'm': return pl_mul_sat(v, 1ULL << 20);
    case 'G': case 'g': return pl_mul_sat(v, 1ULL << 30);
    default: return v;
    }
}

struct cache_entry {
    int level;
    uint64_t size;
    char shared[256];
};

static int is_cpu_dir(const char *name)
{
    if (strncmp(name, "cpu", 3) != 0 || !name[3])
        return 0;
    for (const char *p = name + 3; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

uint64_t pl_llc_total_bytes(void)
{
    const char *base = "/sys/devices/system/cpu";
    DIR *cpus = opendir(base);
    struct cache_entry *entries = NULL;
    size_t count = 0, cap = 0;
    int max_level = 0;
    if (cpus) {
        struct dirent *cpu;
        while ((cpu = readdir(cpus))) {
            if (!is_cpu_dir(cpu->d_name))
                continue;
            for (int index = 0; index < 16; index++) {
                char path[512], type[64], level[32], size[64];
                struct cache_entry e;
                snprintf(path, sizeof path, "%s/%s/cache/index%d/type", base, cpu->d_name, index);
                if (!read_line(path, type, sizeof type))
                    break;
                if (strcmp(type, "Data") != 0 && strcmp(type, "Unified") != 0)
                    continue;
                snprintf(path, sizeof path, "%s/%s/cache/index%d/level", base, cpu->d_name, index);
                if (!read_line(path, level, sizeof level))
                    continue;
                snprintf(path, sizeof path, "%s/%s/cache/index%d/size", base, cpu->d_name, index);
                if (!read_line(path, size, sizeof size))
                    continue;
                snprintf(path, sizeof path, "%s/%s/cache/index%d/shared_cpu_list", base, cpu->d_name, index);
                if (!read_line(path, e.shared, sizeof e.shared))
                    snprintf(e.shared, sizeof e.shared, "%s", cpu->d_name); /* private, presumably */
                e.level = atoi(level);
                e.size = parse_cache_size(size);
                if (e.level <= 0 || e.size == 0)
                    continue;
                if (count == cap) {
                    size_t ncap = cap ? 2 * cap : 64;
                    struct cache_entry *n = realloc(entries, ncap * sizeof *n);
                    if (!n)
                        break;
                    entries = n;
                    cap = ncap;
                }
                entries[count++] = e;
                if (e.level > max_level)
                    max_level = e.level;
            }
        }
        closedir(cpus);
    }
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        if (entries[i].level != max_level)
            continue;
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = entries[k].level == max_level && strcmp(entries[k].shared, entries[i].shared) == 0;
        if (!seen)
            total = pl_add_sat(total, entries[i].size);
    }
    free(entries);
    if (total)
        return total;
    /* No sysfs: glibc's view of one instance, from the highest level it knows. */
    long v = -1;
#ifdef _SC_LEVEL4_CACHE_SIZE
    v = sysconf(_SC_LEVEL4_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (v <= 0)
        v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (v <= 0)
        v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? (uint64_t)v : 0;
}

static int count_item(long first, long last, void *arg)
{
    *(int *)arg += (int)(last - first + 1);
    return 0;
}

/* Number of entries of a list such as "0-3,8,10-11" (a line of /sys: the items before its end). */
static int count_list(const char *s)
{
    int n = 0;
    pinlab_cpulist_items(s, NULL, LONG_MAX, count_item, &n);
    return n;
}

int pl_numa_nodes(void)
{
    char line[4096];
    if (read_line("/sys/devices/system/node/has_cpu", line, sizeof line)) {
        int n = count_list(line);
        if (n > 0)
            return n;
    }
    DIR *d = opendir("/sys/devices/system/node");
    int n = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            const char *p = e->d_name;
            if (strncmp(p, "node", 4) != 0 || !p[4])
                continue;
            int digits = 1;
            for (p += 4; *p; p++)
                digits &= *p >= '0' && *p <= '9';
            n += digits;
        }
        closedir(d);
    }
    return n > 0 ? n : 1;
}

int pl_mask_cpus(void)
{
    for (int ncpus = 1024; ncpus <= (1 << 20); ncpus *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpus);
        if (!set)
            break;
        size_t size = CPU_ALLOC_SIZE(ncpus);
        if (sched_getaffinity(0, size, set) == 0) {
            int n = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return n > 0 ? n : 1;
        }
        CPU_FREE(set);
        if (errno != EINVAL)
            break;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

uint64_t pl_stream_default_elements(uint64_t elem_bytes, int shares)
{
    const uint64_t min_elements = 10000000;
    uint64_t llc = pl_llc_total_bytes();
    if (shares < 1)
        shares = 1;
    uint64_t want = pl_mul_sat(llc, 4) / (uint64_t)shares;
    uint64_t elements = (want + elem_bytes - 1) / elem_bytes;
    return elements > min_elements ? elements : min_elements;
}

/* ---- JSON -------------------------------------------------------------------------------- */

void pl_json_start(pl_json *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->count[0] = 0;
}

/* Length of the valid UTF-8 sequence at s, 0 when invalid. */
static int utf8_length(const unsigned char *s)
{
    unsigned c = s[0];
    int len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x3Fu >> (len - 1));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

void pl_json_write_escaped(FILE *out, const char *text)
{
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    fputc('"', out);
    while (*s) {
        unsigned c = *s;
        switch (c) {
        case '"': fputs("\\\"", out); s++; continue;
        case '\\': fputs("\\\\", out); s++; continue;
        case '\b': fputs("\\b", out); s++; continue;
        case '\f': fputs("\\f", out); s++; continue;
        case '\n': fputs("\\n", out); s++; continue;
        case '\r': fputs("\\r", out); s++; continue;
        case '\t': fputs("\\t", out); s++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7F) {
            fprintf(out, "\\u%04x", c);
            s++;
            continue;
        }
        int len = utf8_length(s);
        if (len == 0) {
            fputs("\\ufffd", out);
            s++;
            continue;
        }
        fwrite(s, 1, (size_t)len, out);
        s += len;
    }
    fputc('"', out);
}

static void json_prefix(pl_json *j, const char *key)
{
    if (j->count[j->depth]++ > 0)
        fputc(',', j->out);
    if (key) {
        pl_json_write_escaped(j->out, key);
        fputc(':', j->out);
    }
}

static void json_open(pl_json *j, const char *key, char bracket)
{
    json_prefix(j, key);
    fputc(bracket, j->out);
    if (j->depth + 1 < PL_JSON_MAX_DEPTH)
        j->depth++;
    j->count[j->depth] = 0;
}

static void json_close(pl_json *j, char bracket)
{
    fputc(bracket, j->out);
    if (j->depth > 0)
        j->depth--;
}

void pl_json_begin_object(pl_json *j, const char *key) { json_open(j, key, '{'); }
void pl_json_end_object(pl_json *j) { json_close(j, '}'); }
void pl_json_begin_array(pl_json *j, const char *key) { json_open(j, key, '['); }
void pl_json_end_array(pl_json *j) { json_close(j, ']'); }

void pl_json_string(pl_json *j, const char *key, const char *value)
{
    json_prefix(j, key);
    pl_json_write_escaped(j->out, value);
}

void pl_json_int(pl_json *j, const char *key, long long value)
{
    json_prefix(j, key);
    fprintf(j->out, "%lld", value);
}

void pl_json_uint(pl_json *j, const char *key, uint64_t value)
{
    json_prefix(j, key);
    fprintf(j->out, "%llu", (unsigned long long)value);
}

void pl_json_double(pl_json *j, const char *key, double value)
{
    json_prefix(j, key);
    if (!isfinite(value)) {
        fputs("null", j->out);
        return;
    }
    char buf[64];
    /* The shortest form that reads back as the same double. */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, value);
        if (strtod(buf, NULL) == value)
            break;
    }
    /* Keep it a JSON number that reads back as a float ("3" -> "3.0"). */
    if (!strpbrk(buf, ".eE"))
        strncat(buf, ".0", sizeof buf - strlen(buf) - 1);
    fputs(buf, j->out);
}

void pl_json_bool(pl_json *j, const char *key, int value)
{
    json_prefix(j, key);
    fputs(value ? "true" : "false", j->out);
}

void pl_json_head(pl_json *j, int threads)
{
    pl_json_begin_object(j, NULL);
    pl_json_string(j, "workload", workload_name);
    pl_json_bool(j, "valid", !pl_failed());
    pl_json_int(j, "threads", threads);
}

void pl_json_tail(pl_json *j)
{
    if (pl_failed())
        pl_json_string(j, "error", fail_text);
    pl_json_end_object(j);
    fputc('\n', j->out);
    fflush(j->out);
}
