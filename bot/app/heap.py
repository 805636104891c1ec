"""The cyclic garbage collector around ``chela run``'s start.

A start imports some 80,000 long-lived objects (the config's models, the channel libraries,
the core) and makes almost no garbage cycles.  With the collector on, those imports pay for
its passes over objects that never die (a tenth of the CPU before the first poll), and every
full collection while messages flow walks them all again (about 60 ms each on a small VM).
So ``chela run`` starts with the collector off (bot/__main__.py), and once the daemon is
ready the objects alive by then are frozen out of its view (:func:`gc.freeze`) and the
collector is switched on: later passes look only at what the daemon makes while it runs.
No collection runs before the freeze: it would cost those 60 ms right when the first
messages are answered, for a couple of thousand objects, once.

Measured with bench/run_bench.py (light path, 2-core VM, interleaved runs): the daemon's CPU
up to its first getUpdates is 590-700 ms with this, 770-790 ms without (about 130 ms), and
spawn → first poll about 0.4 s shorter."""

from __future__ import annotations

import gc


def settle() -> None:
    """The daemon is ready: freeze what start-up made and collect from here on."""
    gc.freeze()
    gc.enable()


def release() -> None:
    """The daemon has stopped: hand the frozen objects back (a test process runs several
    daemons) and leave the collector on."""
    gc.unfreeze()
    gc.enable()
