"""The Control UI: an aiohttp sub-application mounted under ``/ui`` by the HTTP
channel, plus static files shipped as package data (``static/``).

``context`` is what every route reads (:class:`~bot.ui.context.UiContext`, built by the app),
``errors`` the one error shape, ``guard`` the request rules every ``/ui/`` request passes
first, ``auth`` login, logout, bootstrap and the browser sessions,
``static_routes`` the files, ``where`` where the UI is served and why not (light: start-up
lines, ``chela dashboard``), ``app`` puts them together and ``api`` holds the JSON routes and
the streams.
"""
