// Usage: the table "Totals", one table per grouping (day, model, session, source), the
// budgets left, for the period chosen in the combobox "Period".
import { get } from "./api.js";
import { clear, h, num, table, usd } from "./dom.js";

const PERIODS = [
  [1, "Today"],
  [7, "7 days"],
  [30, "30 days"],
];
const GROUPS = [
  ["day", "Usage by day", "Day"],
  ["model", "Usage by model", "Model"],
  ["session", "Usage by session", "Session"],
  ["source", "Usage by source", "Source"],
];
const COLS = ["Calls", "Prompt tokens", "Completion tokens", "Cached tokens", "Cost"];

const cells = (r) => [num(r.calls), num(r.prompt_tokens), num(r.completion_tokens), num(r.cached_tokens), usd(r.cost_usd)];

function budgetLine(label, limit, spent) {
  if (!limit) return h("li", {}, `${label}: no limit (spent today ${usd(spent)})`);
  const left = Math.max(0, limit - (spent || 0));
  return h("li", {}, `${label}: ${usd(left)} left of ${usd(limit)} (spent today ${usd(spent)})`);
}

export function mount(root) {
  const ctl = new AbortController();
  const select = h("select", { id: "usage-period" }, PERIODS.map(([d, t]) => h("option", { value: d }, t)));
  const body = h("div");
  root.append(h("div", { class: "toolbar" }, h("label", { for: "usage-period" }, "Period"), select), body);

  const load = async () => {
    const days = select.value;
    try {
      const answers = await Promise.all(GROUPS.map(([by]) => get(`usage?days=${days}&by=${by}`, ctl.signal)));
      const first = answers[0];
      const b = first.budgets || {};
      clear(body).append(
        table("Totals", COLS, [cells(first.total || {})]),
        h(
          "section",
          { class: "panel", role: "region", "aria-labelledby": "usage-budgets" },
          h("h2", { id: "usage-budgets" }, "Budgets"),
          h("ul", {}, budgetLine("Owner", b.daily_cost_limit_usd, b.spent_today_usd), budgetLine("Guests", b.guest_daily_cost_limit_usd, b.guest_spent_today_usd)),
        ),
        ...GROUPS.map(([, title, keyName], i) => table(title, [keyName, ...COLS], (answers[i].rows || []).map((r) => [String(r.key), ...cells(r)]), "No model call in this period.")),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(body).append(h("p", { class: "error" }, err.message));
    }
  };
  select.addEventListener("change", load);
  load();
  return () => ctl.abort();
}
