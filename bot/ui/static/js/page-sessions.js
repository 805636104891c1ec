// Sessions: the table "Sessions" (newest activity first, searchable, live) and a chosen
// session's transcript as the log "Transcript" (read-only).
import { get, seg } from "./api.js";
import { clear, debounce, h, num, table, usd, when } from "./dom.js";
import { fillLog } from "./messages.js";

function row(s) {
  const link = h("a", { href: `#/sessions/${encodeURIComponent(s.key)}` }, s.key);
  return [link, s.channel || "—", s.trust || "—", when(s.last_activity), num(s.messages), num(s.tokens), usd(s.cost_usd)];
}

export function mount(root, ctx) {
  const ctl = new AbortController();
  const search = h("input", { type: "search", id: "sessions-search", "aria-label": "Search sessions", placeholder: "Search text and keys" });
  const holder = h("div", { class: "table-wrap" });
  const more = h("button", { type: "button", hidden: true }, "More sessions");
  const detail = h("div", { class: "transcript" });
  let cursor = null;
  let rows = [];

  const draw = () => {
    clear(holder).append(
      table("Sessions", ["Key", "Channel", "Trust", "Last activity", "Messages", "Tokens", "Cost"], rows.map(row), "No session matches."),
    );
    more.hidden = !cursor;
  };

  const load = async (append = false) => {
    const q = encodeURIComponent(search.value.trim());
    const after = append && cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
    try {
      const ans = await get(`sessions?q=${q}&limit=50${after}`, ctl.signal);
      rows = append ? rows.concat(ans.sessions || []) : ans.sessions || [];
      cursor = ans.next_cursor || null;
      draw();
    } catch (err) {
      if (!ctl.signal.aborted) clear(holder).append(h("p", { class: "error" }, err.message));
    }
  };

  const transcript = async (key) => {
    const log = h("div", { role: "log", "aria-label": "Transcript", class: "log" });
    const trust = rows.find((s) => s.key === key)?.trust;
    clear(detail).append(
      h("h2", {}, `Transcript of ${key}`),
      h("p", { class: "muted" }, trust === "guest" ? "A guest's session: read-only." : "Read-only here; ", trust === "guest" ? "" : h("a", { href: `#/chat/${encodeURIComponent(key)}` }, "continue it in Chat")),
      log,
    );
    try {
      const ans = await get(`sessions/${seg(key)}/messages?limit=200`, ctl.signal);
      fillLog(log, ans.messages || [], key);
    } catch (err) {
      if (!ctl.signal.aborted) log.append(h("p", { class: "error" }, err.message));
    }
  };

  search.addEventListener("input", debounce(() => load(), 250));
  more.addEventListener("click", () => load(true));
  root.append(h("div", { class: "toolbar" }, search), holder, more, detail);
  load().then(() => {
    if (ctx.arg) transcript(ctx.arg);
  });
  const off = ctx.bus.on("session.updated", debounce(() => load(), 500));
  return () => {
    ctl.abort();
    off();
  };
}
