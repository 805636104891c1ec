// Channels: the table "Channels" (state, identity, last in/out, outbox depth) and the table
// "MCP servers" (state, tools), refreshed on channel.state.
import { get } from "./api.js";
import { clear, debounce, h, num, table, when } from "./dom.js";

function channelRow(c) {
  const o = c.outbox || {};
  const state = h("span", { class: `state state-${c.state}` }, c.enabled === false ? "disabled" : c.state || "—");
  return [c.id, state, c.identity || "—", when(c.last_inbound), when(c.last_outbound), num(o.queued ?? 0), num(o.sending ?? 0), num(o.failed ?? 0), c.error || ""];
}

function mcpRow(m) {
  const state = h("span", { class: `state state-${m.state}` }, m.state || "—");
  return [m.name, m.transport || "—", state, (m.tools || []).join(", ") || "—", m.error || ""];
}

export function mount(root, ctx) {
  const ctl = new AbortController();
  const body = h("div");
  root.append(body);
  const load = async () => {
    try {
      const ans = await get("channels", ctl.signal);
      clear(body).append(
        table("Channels", ["Channel", "State", "Identity", "Last in", "Last out", "Queued", "Sending", "Failed", "Error"], (ans.channels || []).map(channelRow), "No channel is configured."),
        table("MCP servers", ["Server", "Transport", "State", "Tools", "Error"], (ans.mcp || []).map(mcpRow), "No MCP server is configured."),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(body).append(h("p", { class: "error" }, err.message));
    }
  };
  load();
  const later = debounce(load, 200);
  const offs = ["channel.state", "delivery.failed", "delivery.resolved"].map((e) => ctx.bus.on(e, later));
  return () => {
    ctl.abort();
    offs.forEach((off) => off());
  };
}
