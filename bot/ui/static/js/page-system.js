// System: version, pid, uptime, memory, state dir; the table "Browser sessions" with "Revoke"
// per row; "Log out".
import { del, get, seg } from "./api.js";
import { bytes, clear, duration, h, table, toast, when } from "./dom.js";

export function mount(root, ctx) {
  const ctl = new AbortController();
  const facts = h("div");
  const sessions = h("div");
  const out = h("button", { type: "button", on: { click: () => ctx.logout() } }, "Log out");
  root.append(facts, sessions, h("div", { class: "actions" }, out));

  const revoke = async (s) => {
    try {
      await del(`ui-sessions/${seg(s.id)}`);
      toast("Browser session revoked.");
      if (s.current) return ctx.logout();
      loadSessions();
    } catch (err) {
      toast(err.message);
    }
  };

  const loadSessions = async () => {
    try {
      const ans = await get("ui-sessions", ctl.signal);
      const rows = (ans.sessions || []).map((s) => {
        const b = h("button", { type: "button", disabled: Boolean(ctx.boot.read_only) }, "Revoke");
        b.addEventListener("click", () => revoke(s));
        return [when(s.created), when(s.last_seen), s.user_agent || "—", s.current ? "this browser" : "", b];
      });
      clear(sessions).append(table("Browser sessions", ["Logged in", "Last seen", "Browser", "Current", "Action"], rows));
    } catch (err) {
      if (!ctl.signal.aborted) clear(sessions).append(h("p", { class: "error" }, err.message));
    }
  };

  const load = async () => {
    try {
      const s = await get("system", ctl.signal);
      const item = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
      clear(facts).append(
        h(
          "dl",
          { class: "facts" },
          item("Version", s.version),
          item("PID", String(s.pid)),
          item("Started", when(s.started)),
          item("Uptime", duration(s.uptime_s)),
          item("Memory (RSS)", bytes(s.rss_bytes)),
          item("State dir", s.state_dir),
          item("Config", s.config_path || "—"),
        ),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(facts).append(h("p", { class: "error" }, err.message));
    }
  };
  load();
  loadSessions();
  return () => ctl.abort();
}
