// Channels: the table "Channels" (state, identity, last in/out, outbox depth) and the table
// "MCP servers" (state, tools), refreshed on channel.state.  A channel waiting to be linked
// (a WhatsApp linked device) shows its QR code below the table; the page asks again every few
// seconds while one is shown, since WhatsApp replaces the code about every 20 s.
import { get } from "./api.js";
import { clear, debounce, h, num, table, when } from "./dom.js";

const QR_REFRESH_MS = 3000;

function channelRow(c) {
  const o = c.outbox || {};
  const state = h("span", { class: `state state-${c.state}` }, c.enabled === false ? "disabled" : c.state || "—");
  return [c.id, state, c.identity || "—", when(c.last_inbound), when(c.last_outbound), num(o.queued ?? 0), num(o.sending ?? 0), num(o.failed ?? 0), c.error || ""];
}

function mcpRow(m) {
  const state = h("span", { class: `state state-${m.state}` }, m.state || "—");
  return [m.name, m.transport || "—", state, (m.tools || []).join(", ") || "—", m.error || ""];
}

function pairingBox(c) {
  const title = `Link ${c.id}`;
  const code = c.pairing.qr
    ? [
        h("img", { class: "pairing-qr", src: c.pairing.qr, alt: `QR code to link ${c.id}` }),
        h("p", {}, "In WhatsApp on the phone: Settings > Linked devices > Link a device, then scan this code. It changes every few seconds."),
      ]
    : [h("p", {}, "This account waits to be linked. Run `chela whatsapp login` in a terminal on this machine to scan its QR code.")];
  return h("section", { class: "pairing", "aria-label": title }, h("h3", {}, title), ...code);
}

export function mount(root, ctx) {
  const ctl = new AbortController();
  const body = h("div");
  root.append(body);
  let again = null;
  const load = async () => {
    clearTimeout(again);
    try {
      const ans = await get("channels", ctl.signal);
      const rows = ans.channels || [];
      const waiting = rows.filter((c) => c.pairing);
      clear(body).append(
        table("Channels", ["Channel", "State", "Identity", "Last in", "Last out", "Queued", "Sending", "Failed", "Error"], rows.map(channelRow), "No channel is configured."),
        ...waiting.map(pairingBox),
        table("MCP servers", ["Server", "Transport", "State", "Tools", "Error"], (ans.mcp || []).map(mcpRow), "No MCP server is configured."),
      );
      if (waiting.length && !ctl.signal.aborted) again = setTimeout(load, QR_REFRESH_MS);
    } catch (err) {
      if (!ctl.signal.aborted) clear(body).append(h("p", { class: "error" }, err.message));
    }
  };
  load();
  const later = debounce(load, 200);
  const offs = ["channel.state", "delivery.failed", "delivery.resolved"].map((e) => ctx.bus.on(e, later));
  return () => {
    ctl.abort();
    clearTimeout(again);
    offs.forEach((off) => off());
  };
}
