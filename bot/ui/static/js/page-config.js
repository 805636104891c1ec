// Config: a form for the common keys of each section and the raw file (textbox "Config
// (TOML)"), buttons "Save" and "Reload". Save sends the SHA-256 of the file as loaded: a file
// changed since is refused. Errors come back by TOML key and nothing is written; a saved file
// says which keys need a restart. Secrets appear only as the names of their variables.
// Below: the effective config, read-only (region "Effective config"), and chela check's findings.
import { get, post } from "./api.js";
import { clear, h, toast, tree } from "./dom.js";

function sections(form) {
  const out = new Map();
  for (const row of form) {
    const i = row.key.lastIndexOf(".");
    const name = row.key.slice(0, i);
    if (!out.has(name)) out.set(name, []);
    out.get(name).push(row);
  }
  return out;
}

function control(row, ro) {
  const id = `cfg-${row.key.replace(/[^a-z0-9]/gi, "-")}`;
  const label = h("label", { for: id }, row.key);
  if (row.kind === "bool") {
    const box = h("input", { type: "checkbox", id, checked: Boolean(row.value), disabled: ro });
    return { el: h("div", { class: "field check" }, box, label), read: () => box.checked, id };
  }
  const input = h("input", { type: "text", id, value: row.value ?? "", disabled: ro, spellcheck: "false" });
  const hint = row.kind === "env" ? h("span", { class: "muted" }, row.value ? (row.set ? " variable set" : " variable not set") : " (name of a variable)") : null;
  const read = () => (row.kind === "number" ? Number(input.value) : input.value);
  return { el: h("div", { class: "field" }, label, input, hint), read, id };
}

export function mount(root, ctx) {
  const ctl = new AbortController();
  const ro = ctx.boot.read_only;
  const status = h("div", { role: "status", class: "cfg-status" });
  const problems = h("ul", { class: "problems", "aria-label": "Problems" });
  const formBox = h("div");
  const editor = h("textarea", { id: "cfg-raw", "aria-label": "Config (TOML)", rows: 18, spellcheck: "false", class: "code-edit", disabled: ro });
  const saveBtn = h("button", { type: "button", class: "primary", disabled: ro }, "Save");
  const reloadBtn = h("button", { type: "button" }, "Reload");
  const formSave = h("button", { type: "button", disabled: ro }, "Update settings");
  const effective = h("div");
  const file = h("p");
  let loaded = null;
  let fields = [];

  const restartNote = (r) => {
    if (!r || !r.needed) return null;
    return h("p", { class: "warn-text" }, `Restart needed: ${r.keys.join(", ")} take effect after a restart — ${r.how}.`);
  };

  const showProblems = (list) => {
    clear(problems).append(...(list || []).map((p) => h("li", { class: "error-text" }, p.key ? h("code", {}, p.key) : "", p.key ? " " : "", p.message)));
  };

  const load = async () => {
    try {
      loaded = await get("config/file", ctl.signal);
      editor.textContent = loaded.text; // the default value, so a reload resets the edits
      editor.value = loaded.text;
      clear(file).append("File: ", h("code", {}, loaded.path));
      fields = [];
      clear(formBox).className = "form-grid";
      for (const [name, rows] of sections(loaded.form)) {
        const made = rows.map((r) => ({ row: r, ...control(r, ro) }));
        fields.push(...made);
        formBox.append(h("fieldset", { class: "section" }, h("legend", {}, `[${name}]`), made.map((m) => m.el)));
      }
      showProblems([]);
      clear(status).append(restartNote(loaded.restart) || "");
    } catch (err) {
      if (!ctl.signal.aborted) clear(status).append(h("p", { class: "error" }, err.message));
    }
    try {
      const ans = await get("config", ctl.signal);
      const findings = ans.check || [];
      clear(effective).append(
        h(
          "section",
          { role: "region", "aria-labelledby": "cfg-check", class: "panel" },
          h("h2", { id: "cfg-check" }, "Check"),
          findings.length
            ? h("ul", {}, findings.map((f) => h("li", { class: f.level === "error" ? "error-text" : "warn-text" }, `${f.level}: ${f.message}`)))
            : h("p", { class: "muted" }, "chela check finds nothing to report."),
        ),
        h(
          "details",
          { class: "panel" },
          h("summary", {}, "Effective config (what the running daemon uses)"),
          h("section", { role: "region", "aria-label": "Effective config" }, tree(ans.config || {})),
        ),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(effective).append(h("p", { class: "error" }, err.message));
    }
  };

  const save = async (payload, button) => {
    if (!loaded) return;
    button.disabled = true;
    try {
      const ans = await post("config/file", { base: loaded.sha256, ...payload });
      toast("Config saved.");
      await load();
      const warnings = (ans.warnings || []).map((w) => h("li", { class: "warn-text" }, `warning: ${w}`));
      clear(status).append(h("p", {}, `Saved ${ans.path}.`), restartNote(ans.restart) || "", warnings.length ? h("ul", {}, warnings) : "");
    } catch (err) {
      clear(status).append(h("p", { class: "error-text" }, `Not saved: ${err.message}`));
      showProblems(err.body?.error?.problems || []);
    }
    button.disabled = ro;
  };

  saveBtn.addEventListener("click", () => save({ text: editor.value }, saveBtn));
  reloadBtn.addEventListener("click", () => load().then(() => toast("Config reloaded from the file.")));
  formSave.addEventListener("click", () => {
    const set = {};
    for (const f of fields) {
      const v = f.read();
      if (v !== (f.row.kind === "number" ? Number(f.row.value) : f.row.value ?? (f.row.kind === "bool" ? false : ""))) set[f.row.key] = v;
    }
    if (!Object.keys(set).length) return toast("Nothing changed in the form.");
    save({ set }, formSave);
  });

  root.append(
    file,
    status,
    problems,
    h("section", { role: "region", "aria-labelledby": "cfg-form", class: "panel" }, h("h2", { id: "cfg-form" }, "Common settings"), formBox, h("div", { class: "actions" }, formSave)),
    h(
      "section",
      { role: "region", "aria-labelledby": "cfg-raw-h", class: "panel" },
      h("h2", { id: "cfg-raw-h" }, "config.toml"),
      h("p", { class: "muted" }, "Secrets are never in this file: only the names of the variables that hold them (keys ending in _env)."),
      editor,
      h("div", { class: "actions" }, saveBtn, reloadBtn),
    ),
    effective,
  );
  load();
  return () => ctl.abort();
}
