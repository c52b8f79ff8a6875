/* See cpulist.h. */
#include "cpulist.h"

#include <stddef.h>
#include <string.h>

/* A decimal number of at most max at *p (before end); advances *p past it. */
static int number(const char **p, const char *end, long max, long *out)
{
    const char *s = *p;
    if (s == end || *s < '0' || *s > '9')
        return -1;
    long v = 0;
    while (s != end && *s >= '0' && *s <= '9') {
        int digit = *s - '0';
        if (digit > max || v > (max - digit) / 10)
            return -1; /* above max, and never an overflow on the way */
        v = v * 10 + digit;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

int pinlab_cpulist_items(const char *s, const char *end, long max, int (*item)(long first, long last, void *arg), void *arg)
{
    if (!end)
        end = s + strlen(s);
    const char *p = s;
    if (p == end)
        return -1;
    for (;;) {
        long a, b;
        if (number(&p, end, max, &a))
            return -1;
        b = a;
        if (p != end && *p == '-') {
            p++;
            if (number(&p, end, max, &b) || b < a)
                return -1;
        }
        if (item(a, b, arg))
            return -1;
        if (p == end)
            return 0;
        if (*p != ',')
            return -1;
        p++;
    }
}
