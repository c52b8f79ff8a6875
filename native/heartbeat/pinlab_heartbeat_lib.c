/*
 * libpinlab-heartbeat.so: pinlab_heartbeat.h compiled once, for pinlab.heartbeat.beat() (Python
 * programs call it through ctypes, so Python and C threads share one implementation of the file's
 * protocol: slot claims are atomic, which Python cannot do on shared memory by itself).
 */
#include "pinlab_heartbeat.h"

void pinlab_heartbeat_beat(uint64_t units);

void pinlab_heartbeat_beat(uint64_t units)
{
    pinlab_beat(units);
}
