// Config: the effective config, read-only (region "Effective config"); secrets only as env
// names with set/unset; chela check's findings.
import { get } from "./api.js";
import { clear, h, tree } from "./dom.js";

export function mount(root) {
  const ctl = new AbortController();
  const body = h("div");
  root.append(body);
  (async () => {
    try {
      const ans = await get("config", ctl.signal);
      const findings = ans.check || [];
      clear(body).append(
        h("p", {}, "File: ", h("code", {}, ans.path || "(defaults)")),
        h(
          "section",
          { role: "region", "aria-labelledby": "cfg-check", class: "panel" },
          h("h2", { id: "cfg-check" }, "Check"),
          findings.length
            ? h("ul", {}, findings.map((f) => h("li", { class: f.level === "error" ? "error-text" : "warn-text" }, `${f.level}: ${f.message}`)))
            : h("p", { class: "muted" }, "chela check finds nothing to report."),
        ),
        h("section", { role: "region", "aria-labelledby": "cfg-effective", class: "panel" }, h("h2", { id: "cfg-effective" }, "Effective config"), tree(ans.config || {})),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(body).append(h("p", { class: "error" }, err.message));
    }
  })();
  return () => ctl.abort();
}
