// Workspace: the eight prompt files with status and sizes, one button per file (its text,
// read-only), the skills, and the /context report (region "Context report").
import { get, seg } from "./api.js";
import { clear, h, num, table, tree } from "./dom.js";

export function mount(root) {
  const ctl = new AbortController();
  const files = h("div");
  const viewer = h("div", { class: "viewer" });
  const report = h("div");
  root.append(
    files,
    viewer,
    h("section", { role: "region", "aria-labelledby": "ws-context", class: "panel" }, h("h2", { id: "ws-context" }, "Context report"), report),
  );

  const open = async (name) => {
    try {
      const ans = await get(`workspace/${seg(name)}`, ctl.signal);
      clear(viewer).append(
        h("section", { role: "region", "aria-labelledby": "ws-file", class: "panel" }, h("h2", { id: "ws-file" }, ans.name), h("pre", { class: "file" }, ans.text || "(empty)")),
      );
    } catch (err) {
      if (ctl.signal.aborted) return;
      const why = err.status === 404 ? `${name} is not in the workspace: ${err.message}` : `${name}: ${err.message}`;
      clear(viewer).append(h("p", { class: err.status === 404 ? "muted" : "error" }, why));
    }
  };

  const load = async () => {
    try {
      const ans = await get("workspace", ctl.signal);
      const rows = (ans.files || []).map((f) => {
        const b = h("button", { type: "button", class: "link" }, f.name);
        b.addEventListener("click", () => open(f.name));
        return [b, f.status, num(f.raw_chars), num(f.injected_chars)];
      });
      const skills = ans.skills || [];
      clear(files).append(
        table("Prompt files", ["File", "Status", "Raw chars", "Injected chars"], rows),
        h("p", {}, skills.length ? `Skills: ${skills.join(", ")}` : "No skills."),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(files).append(h("p", { class: "error" }, err.message));
    }
    try {
      clear(report).append(tree(await get("context", ctl.signal)));
    } catch (err) {
      if (!ctl.signal.aborted) clear(report).append(h("p", { class: "error" }, err.message));
    }
  };
  load();
  return () => ctl.abort();
}
