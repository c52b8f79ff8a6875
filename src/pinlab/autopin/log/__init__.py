"""The autopin log, written by the controller and read by the reports: this package owns it: the events and their writing in
:mod:`pinlab.autopin.log.events`, their reading in :mod:`pinlab.autopin.log.reading`.

JSON lines, one event per line, each with an ``event`` field and ``t``. Each kind of event is a
dataclass below: the controller builds one and writes it with :func:`event_line`; :func:`read_log`
reads the lines back into the same dataclasses, so what a writer writes and what a reader
expects cannot drift apart. The JSON Schema of a line is
``docs/reference/formats/autopin-log-event.schema.json``.

``t`` is seconds since autopin started (the program's start in launch mode, the attach in
``--pid`` mode, the first probe's run with ``--probe restart``). Rates are in the metric's unit per second per worker thread (``metric_unit``).
CPU lists are JSON lists of OS CPU numbers in worker order (worker 0 = the main thread).

``start``   ``version`` (1), ``mode`` (launch|attach|restart: each probe a run of its own, then one
            more on the choice), ``argv`` (launch, restart) or ``pid`` (attach), ``threads``, ``metric``,
            ``metric_unit``, ``metric_notice`` (why this metric), ``topology``, ``params``
            (``init``, ``warmup``, ``interval``, ``windows``, ``rounds``, ``alpha``,
            ``migrate_pages``, ``monitor``, ``threshold``, ``patience``, ``recheck``, ``probe``), ``candidates``: a list of
            ``{"index", "name", "cpus"}``.
``probe``   one candidate measured once: ``candidate`` (index), ``name``, ``cpus``, ``round``
            (1, 2, ...), ``repinned_at`` (when the threads were moved to it; the warm-up runs from
            there, or from the end of the ``migrate`` event that follows, to ``start``; restarted:
            when the probe's own run began, its ``-i`` running from there to ``start``), ``start``, ``end``, ``rates`` (tid -> rate of each worker thread
            measured over the whole window, as strings of tids), ``mean`` (the window's rate per worker: its sub-window rates weighted by their lengths, the paper's r_avg while the workers stay the same),
            ``windows`` (the mean rate of each sub-window, the samples the verdict is computed
            from; sub-window k spans start + k (end - start) / windows, in equal parts when the
            controller woke on time), ``window_seconds`` (each sub-window's length; the
            candidate's rate is the sub-window rates' mean weighted by them), ``threads``
            (the number of workers measured); ``partial``: true for a window the program's end cut
            short. ``round`` starts again at 1 in each search (after a ``reprobe``).
``migrate`` pages moved after a re-pin that changed NUMA nodes: ``from_nodes``, ``to_nodes``
            (lists of node numbers), ``pages_before`` and ``pages_after`` (node number as a string
            -> pages), ``not_moved`` (pages the kernel could not move), ``seconds``; ``t`` is when
            the move ended (it began ``seconds`` earlier), after the re-pin it follows.
``migrate_attached`` with ``--migrate-pages attached``, after a re-pin: the regions the program
            attached to its workers (libpinlab-mem) moved to each worker's new node: ``regions``,
            ``bytes``, ``pages_on_node`` (pages on the new node after the move), ``not_moved``,
            ``seconds``.
``migrate_accessed`` with ``--migrate-pages accessed``, after a re-pin: the pages each worker
            touched first in most of the page tracer's rounds moved to its new node: ``pages``
            (found), ``pages_on_node``, ``not_moved``, ``seconds``.
``choice``  ``candidate``, ``name``, ``cpus``, ``rate`` (the mean of its sub-window rates of this
            search, all rounds pooled, weighted by their lengths), ``runner_up`` (``{"candidate", "name",
            "cpus", "rate"}`` or null with one candidate), ``p_value`` (one-sided, best better than
            runner-up; null when not computable), ``effect`` (best / runner-up - 1), ``decided``
            (p < alpha), ``equivalent`` (indexes of the other candidates the best does not beat
            significantly), ``within_tolerance`` (those surely within ``tolerance`` of it),
            ``verdict`` (one sentence), ``rounds``, ``probing_seconds`` (this search's, from its
            first re-pin to its verdict; logs of pinlab 0.2 counted every search so far).
``rate``    after a choice, every interval: ``start``, ``end``, ``rate``, ``candidate``; with
            ``--monitor`` also ``reference``: the rate a drop is measured against (the chosen
            candidate's probed rate, raised to the lowest of the last ``patience`` intervals when
            all are higher).
``reprobe`` ``why`` (a sentence), ``rate``, ``reference`` (as in ``rate``), ``intervals``.
``metric``  the metric changed: ``metric``, ``metric_unit``, ``metric_notice`` (as in ``start``),
            ``previous`` (the one before). autopin had chosen task-clock because no thread had
            beaten by the end of ``-i``, and a thread has beaten since: what follows is measured by
            the heartbeat, and a new search starts (rates before and after do not compare).
``recheck`` with ``--monitor``, every ``recheck`` intervals on the choice: the runner-up measured
            once, ``candidate``, ``name``, ``cpus``, ``repinned_at`` (its warm-up runs from there to
            ``start``), ``start``, ``end``, ``rate``, ``against`` (the choice's rate over the last
            ``patience`` intervals before). A ``reprobe`` follows when it beat the choice by more
            than ``threshold`` percent both before and in the interval after.
``error``   autopin stopped probing because something failed (``text``, ``error``: the exception's
            type); the program runs on where it is.
``summary`` ``exit_status``, ``signal`` (or null), ``wall_seconds``, ``probing_seconds`` (searches,
            warm-ups included),
            ``choices`` (how many), ``final`` (``{"candidate", "name", "cpus"}`` or null),
            ``ended_during_init`` (nothing measured: the run ended before ``-i`` was over; the
            ``start`` event before it, at ``t`` 0, then has no ``metric``), ``ended_during_probing``,
            ``interrupted``, ``restored`` (``--pid`` with ``--restore``, or nothing measured),
            ``statistics`` (null with one candidate: ``loaded`` ``beside`` the program on ``cpus``
            no candidate uses, ``before`` it started (``--pid``: before the probing), or
            ``already`` in this process; the ``seconds`` and ``cpu_seconds`` the import of numpy and
            scipy.stats took, null if it had not finished).

Reading (:mod:`pinlab.autopin.log.reading`). The report (``pinlab autopin-report``) and the tests read logs through :func:`read_log` only,
so what a log must hold is checked in one place. A log is written while the program runs, and
autopin may be killed mid-line: an unusable *last* line is dropped with a warning (kept in
:attr:`AutopinLog.warnings`) so that everything measured before still shows. Anything else that
is wrong (a line that is not JSON, no ``start`` event first, a version this pinlab does not
know, a field of the wrong type) is a :class:`~pinlab.errors.UsageError` naming the line.

Later pinlabs may add fields and events: unknown fields are kept in each record's ``extra`` and
unknown events in :attr:`AutopinLog.other`, never refused.
"""

from __future__ import annotations

from pinlab.autopin.log.events import (
    LOG_FORMAT_VERSION,
    SUPPORTED_VERSIONS,
    AutopinLog,
    Candidate,
    Choice,
    Failure,
    MetricChange,
    Migration,
    MigrationAccessed,
    MigrationAttached,
    Probe,
    Rate,
    Recheck,
    Reprobe,
    RunnerUp,
    Start,
    Summary,
    event_line,
    finite,
)
from pinlab.autopin.log.reading import parse_log, read_log

__all__ = [
    "AutopinLog",
    "Candidate",
    "Start",
    "Probe",
    "Migration",
    "MigrationAttached",
    "MigrationAccessed",
    "Choice",
    "RunnerUp",
    "Rate",
    "Reprobe",
    "MetricChange",
    "Recheck",
    "Failure",
    "Summary",
    "event_line",
    "read_log",
    "parse_log",
    "finite",
    "LOG_FORMAT_VERSION",
    "SUPPORTED_VERSIONS",
]
