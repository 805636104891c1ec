"""Pure decisions (docs/architecture.md L2): admission, untrusted text, replies, heartbeat rules,
the <tool_call> text protocol.  Data in, data out: no network, no clock reads, no globals."""
