"""Slack, through slack-bolt (Socket Mode or the HTTP Events API) and slack-sdk.

``transport.py`` sets up the web clients, the bolt app and the two event receivers,
``translate.py`` holds the pure Slack ⇄ Chela translation, and ``adapter.py`` wires them
into ``SlackChannel`` with the channel's state.
"""

from channels.slack.adapter import SlackChannel
from channels.slack.translate import EMOJI_NAMES, slack_emoji_name

__all__ = ["EMOJI_NAMES", "SlackChannel", "slack_emoji_name"]
