/* The one reader of CPU lists ("0-3,8", the Linux cpulist format) in pinlab's native parts.
 *
 * The preload library reads the lists pinlab hands it in PINLAB_* variables, the memory library
 * and the workloads read the node and CPU lists of /sys; each used to have its own loop, with its
 * own idea of what a malformed list is. This one is strict: decimal digits only (no sign, no
 * blank), each item a number or a range "a-b" with a <= b, items separated by ',' and nothing
 * after the last. It hands each item to a callback as it goes, so a caller that reads /sys (whose
 * files end with a newline) keeps the items read before the first thing that is not a list.
 *
 * Compiled into each target that uses it; hidden, so that the copy in the preload library and the
 * one in libpinlab-mem (both in one program) do not interpose on each other. */
#ifndef PINLAB_CPULIST_H
#define PINLAB_CPULIST_H

/* Calls item(first, last, arg) for each item of the list between s and end (end may be NULL: up
 * to the terminating NUL), in written order. Returns 0 when the whole text is a list; -1 when it
 * is empty, when a number exceeds max (a number from 0 to max is accepted), when a range runs
 * backwards, at the first character that belongs to no list, or when item returns non-zero: the
 * items before that point have been handed to item. */
__attribute__((visibility("hidden"))) int pinlab_cpulist_items(const char *s, const char *end, long max,
                                                               int (*item)(long first, long last, void *arg), void *arg);

#endif
