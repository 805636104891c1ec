from bot.cli import entry

entry()
