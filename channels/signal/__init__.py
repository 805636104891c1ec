"""Signal, through ``signal-cli daemon --http``.

``sse.py`` parses the event stream, ``rpc.py`` speaks JSON-RPC to signal-cli, ``translate.py``
holds the pure Signal ⇄ Chela translation, and ``adapter.py`` wires them into
``SignalChannel`` with the channel's state.
"""

from channels.signal.adapter import SignalChannel

__all__ = ["SignalChannel"]
