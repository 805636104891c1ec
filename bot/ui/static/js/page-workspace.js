// Workspace: the eight prompt files (table "Prompt files": status, size against the per-file
// budget), one button per file named after it. A file opens in a region named after it with
// a textbox of the same name and "Save"; Save sends the SHA-256 of the text as loaded, so a
// file changed since is refused. The /context report (region "Context report") is folded
// under it.
import { get, post, seg } from "./api.js";
import { clear, h, num, table, toast, tree } from "./dom.js";

export function mount(root, ctx) {
  const ctl = new AbortController();
  const ro = ctx.boot.read_only;
  const files = h("div");
  const viewer = h("div", { class: "viewer" });
  const report = h("div");
  let budget = 0;
  root.append(
    files,
    viewer,
    h(
      "details",
      { class: "panel", open: true },
      h("summary", {}, "Context report"),
      h("section", { role: "region", "aria-label": "Context report" }, report),
    ),
  );

  const sizeText = (chars) => {
    const over = budget && chars > budget;
    return `${num(chars)} of ${num(budget)} characters (the per-file budget)${over ? " — over it: the prompt keeps the start and the end" : ""}`;
  };

  const editor = (name, text, sha) => {
    let base = sha;
    const area = h("textarea", { id: "ws-edit", "aria-label": name, rows: 18, spellcheck: "false", class: "code-edit", disabled: ro }, text);
    const size = h("p", { class: "muted", "aria-live": "polite" }, sizeText(text.length));
    const save = h("button", { type: "button", class: "primary", disabled: ro }, "Save");
    const note = h("p", { role: "status" });
    area.addEventListener("input", () => {
      size.textContent = sizeText(area.value.length);
      size.className = budget && area.value.length > budget ? "warn-text" : "muted";
    });
    save.addEventListener("click", async () => {
      save.disabled = true;
      try {
        const ans = await post(`workspace/${seg(name)}`, { text: area.value, base });
        base = ans.sha256;
        note.textContent = `${name} saved.`;
        toast(`${name} saved.`);
        load();
      } catch (err) {
        note.textContent = `Not saved: ${err.message}`;
        note.className = "error-text";
      }
      save.disabled = ro;
    });
    return h(
      "section",
      { role: "region", "aria-labelledby": "ws-file", class: "panel" },
      h("h2", { id: "ws-file" }, name),
      area,
      size,
      h("div", { class: "actions" }, save),
      note,
    );
  };

  const open = async (name) => {
    try {
      const ans = await get(`workspace/${seg(name)}`, ctl.signal);
      clear(viewer).append(editor(ans.name, ans.text || "", ans.sha256));
    } catch (err) {
      if (ctl.signal.aborted) return;
      if (err.status === 404) {
        clear(viewer).append(h("p", { class: "muted" }, `${name} is not in the workspace yet: Save creates it.`), editor(name, "", null));
      } else {
        clear(viewer).append(h("p", { class: "error" }, `${name}: ${err.message}`));
      }
    }
  };

  const load = async () => {
    try {
      const ans = await get("workspace", ctl.signal);
      budget = ans.limits?.per_file_chars || 0;
      const rows = (ans.files || []).map((f) => {
        const b = h("button", { type: "button", class: "link" }, f.name);
        b.addEventListener("click", () => open(f.name));
        const size = `${num(f.raw_chars)} / ${num(budget)}`;
        return [b, f.status, budget && f.raw_chars > budget ? h("span", { class: "warn-text" }, size) : size, num(f.injected_chars)];
      });
      const skills = ans.skills || [];
      clear(files).append(
        table("Prompt files", ["File", "Status", "Chars / budget", "Injected chars"], rows),
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
