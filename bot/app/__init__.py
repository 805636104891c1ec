"""The application: builds the components in dependency order and runs their lifecycle
(``build.py``, ``daemon.py``, one ``Timeouts`` table), plus the state-dir lock, the HTTP API
token and the channel registry."""
