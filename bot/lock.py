"""Old import path of :mod:`bot.app.lock`, kept while callers move."""

from bot.app.lock import LOCK_NAME, LockHeld, StateLock, lock_path, running_daemon

__all__ = ["LOCK_NAME", "LockHeld", "StateLock", "lock_path", "running_daemon"]
