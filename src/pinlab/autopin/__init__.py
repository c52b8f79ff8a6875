"""autopin: probe candidate placements on the running program, keep the best, watch for new phases.

The probing follows the autopin study ([klug2008autopin], section 3): let the program initialise, then for
each candidate pinning measure a rate per worker thread over an interval, re-pin to the next one
and let it warm up; keep the best. pinlab adds candidates chosen from the topology
(:mod:`pinlab.autopin.candidates`), a statistical verdict on the choice, adaptive rounds, page
migration after a re-pin and continuous monitoring. The log it writes is described in
:mod:`pinlab.autopin.log`.
"""
