/*
 * Shared helpers of pinlab's built-in workloads (the programs in native/workloads).
 *
 * Nothing in here uses OpenMP, so pinlab-corun (a plain single-threaded program) links the same
 * library. Every helper that reports bad input prints ONE line
 *     pinlab-<name>: error: <what is wrong and what to do>
 * on stderr and exits with status 2 (PL_EXIT_USAGE).
 */
#ifndef PINLAB_WORKLOADS_COMMON_H
#define PINLAB_WORKLOADS_COMMON_H

#include <stdint.h>
#include <stdio.h>

#define PL_EXIT_OK 0
#define PL_EXIT_INVALID 1 /* the program ran, its own check of the results failed */
#define PL_EXIT_USAGE 2   /* bad input: options, sizes, not enough memory */

#define PL_MAX_THREADS 65536

#if defined(__GNUC__)
#define PL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PL_NORETURN __attribute__((noreturn))
#else
#define PL_PRINTF(f, a)
#define PL_NORETURN
#endif

/* A compiler barrier: the compiler must assume memory was read and written here. The workloads
 * put it between repetitions so that the optimiser keeps every repetition's memory traffic
 * (no loop interchange, no folding of repeated increments). */
#define PL_CLOBBER_MEMORY() __asm__ __volatile__("" ::: "memory")

/* ---- program identity and errors --------------------------------------------------------- */

/* Sets the workload name ("stream"); messages then start with "pinlab-stream: ". */
void pl_init(const char *workload);
const char *pl_workload(void); /* "stream" */
const char *pl_prog(void);     /* "pinlab-stream" */

/* Bad input: one line on stderr, exit status 2. */
PL_NORETURN void pl_usage_error(const char *fmt, ...) PL_PRINTF(1, 2);
/* A warning line on stderr (never stdout, which belongs to the JSON object). */
void pl_warn(const char *fmt, ...) PL_PRINTF(1, 2);

/* Validation failures: recorded (several join with "; "), reported at the end. */
void pl_fail(const char *fmt, ...) PL_PRINTF(1, 2);
int pl_failed(void);
const char *pl_fail_text(void);
/* End of a run: in human mode prints the recorded failures on stderr; returns the exit status
 * (0 when valid, 1 when a check failed). */
int pl_exit_status(int json);

/* ---- options ----------------------------------------------------------------------------- */

/* Long options every workload has; their values lie outside the char range. */
enum {
    PL_OPT_THREADS = 0x1000,
    PL_OPT_JSON,
    PL_OPT_HELP,
    PL_OPT_CORRUPT, /* hidden, for tests: damage one result after the timed part */
    PL_OPT_FIRST_PRIVATE = 0x1100 /* first value free for a program's own options */
};

#define PL_COMMON_LONG_OPTIONS                                  \
    {"threads", required_argument, NULL, PL_OPT_THREADS},       \
    {"json", no_argument, NULL, PL_OPT_JSON},                   \
    {"help", no_argument, NULL, PL_OPT_HELP},                   \
    {"corrupt", no_argument, NULL, PL_OPT_CORRUPT}

/* Short options string for getopt_long: ':' first, so that a missing value is told apart. */
#define PL_SHORT_OPTIONS ":h"

typedef struct {
    int threads; /* --threads N; 0 when not given (OpenMP's default) */
    int json;
    int help;
    int corrupt;
} pl_common;

/* Handles a common option (or a getopt error: '?' unknown, ':' missing value, which exit 2).
 * Returns 1 when it dealt with `opt`, 0 when it is the program's own. */
int pl_common_option(pl_common *c, int opt, char *const argv[]);
/* Exits 2 when arguments are left after the options. */
void pl_no_positional(int argc, char *const argv[]);
/* The text of the option being parsed, for messages ("--size"). */
const char *pl_optname(char *const argv[]);

/* ---- numbers and sizes ------------------------------------------------------------------- */

/* A whole number in [min, max], optionally with k, M, G, T (x1000): "20M" = 20000000.
 * `what` names the option in messages ("--ntimes"). */
uint64_t pl_parse_count(const char *what, const char *text, uint64_t min, uint64_t max);
/* A plain int in [min, max] (no suffixes). */
int pl_parse_int(const char *what, const char *text, int min, int max);

/* A size: a number of elements ("1000", "10M": k, M, G, T x1000) or of bytes with a byte unit
 * (B, KB, MB, GB, TB x1000; KiB, MiB, GiB, TiB x1024; case does not matter), converted to
 * elements of `elem_bytes` (rounded down). A fraction is allowed where the result is whole
 * ("1.5MiB", "2.5k"). At least one element. */
uint64_t pl_parse_size(const char *what, const char *text, uint64_t elem_bytes);

/* a * b and a + b, saturating at UINT64_MAX (an impossible amount of memory). */
uint64_t pl_mul_sat(uint64_t a, uint64_t b);
uint64_t pl_add_sat(uint64_t a, uint64_t b);

/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
uint64_t pl_mem_available(void);
/* Exits 2 ("needs X GiB, Y GiB available") when `bytes` is more than MemAvailable.
 * `option` is the option to make smaller in the message ("--size"). No check when
 * MemAvailable is unknown. */
void pl_check_memory(uint64_t bytes, const char *option);
/* malloc aligned to a page; exits 2 with a message when it fails. Never touches the memory. */
void *pl_alloc(uint64_t bytes, const char *what);

/* Bytes in human form ("1.50 GiB"), in a static buffer per call slot (0..3). */
const char *pl_fmt_bytes(uint64_t bytes, int slot);

/* ---- machine ----------------------------------------------------------------------------- */

/* Monotonic wall clock in seconds. */
double pl_now(void);

/* The last-level cache of the machine in bytes, summed over its instances: the data or unified
 * caches of the highest level in /sys/devices/system/cpu/cpu* /cache, each distinct
 * shared_cpu_list counted once. Falls back to sysconf; 0 when unknown. */
uint64_t pl_llc_total_bytes(void);

/* NUMA nodes with CPUs (/sys/devices/system/node/has_cpu, else the node<N> directories);
 * at least 1. */
int pl_numa_nodes(void);

/* CPUs in the affinity mask of the process; at least 1. */
int pl_mask_cpus(void);

/* Default STREAM array length: at least 4x the LLC total (split over `shares` teams) in
 * elements of `elem_bytes`, and at least 10 million elements. */
uint64_t pl_stream_default_elements(uint64_t elem_bytes, int shares);

/* ---- JSON -------------------------------------------------------------------------------- */

#define PL_JSON_MAX_DEPTH 16

/* A tiny streaming JSON writer: compact, one line. `key` is NULL inside arrays and for the
 * top-level value. Strings are escaped (quotes, backslash, control characters; invalid UTF-8
 * becomes U+FFFD). Non-finite doubles are written as null. */
typedef struct {
    FILE *out;
    int depth;
    int count[PL_JSON_MAX_DEPTH]; /* values written at each level, for commas */
} pl_json;

void pl_json_start(pl_json *j, FILE *out);
void pl_json_begin_object(pl_json *j, const char *key);
void pl_json_end_object(pl_json *j);
void pl_json_begin_array(pl_json *j, const char *key);
void pl_json_end_array(pl_json *j);
void pl_json_string(pl_json *j, const char *key, const char *value);
void pl_json_int(pl_json *j, const char *key, long long value);
void pl_json_uint(pl_json *j, const char *key, uint64_t value);
void pl_json_double(pl_json *j, const char *key, double value);
void pl_json_bool(pl_json *j, const char *key, int value);
/* Writes `text` as a JSON string (with quotes) to `out`. */
void pl_json_write_escaped(FILE *out, const char *text);

/* The envelope shared by every workload. Between head and tail the program writes
 * "parameters" (object), "elapsed_seconds" and "results" (object):
 *   {"workload": .., "valid": .., "threads": .., <parameters, elapsed_seconds, results>, "error": ..}
 * `valid` and `error` come from pl_fail(). pl_json_tail ends the line and flushes. */
void pl_json_head(pl_json *j, int threads);
void pl_json_tail(pl_json *j);

#endif
