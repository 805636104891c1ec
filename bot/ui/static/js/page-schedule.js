// Schedule: the table "Jobs" (heartbeat and cron) with "Run now" and "Pause"/"Resume" per row,
// refreshed on schedule.run.
import { get, post, seg } from "./api.js";
import { clear, debounce, h, table, toast, when } from "./dom.js";

function result(r) {
  if (!r) return "—";
  return r.detail ? `${r.status}: ${r.detail}` : r.status;
}

export function mount(root, ctx) {
  const ctl = new AbortController();
  const body = h("div");
  root.append(body);
  const ro = ctx.boot.read_only;

  const act = async (button, job, verb) => {
    button.disabled = true;
    try {
      await post(`schedule/${seg(job.name)}/${verb}`, {});
      toast(verb === "run" ? `${job.name}: run started.` : `${job.name}: ${verb === "pause" ? "paused" : "resumed"}.`);
    } catch (err) {
      toast(err.status === 409 ? `${job.name} is already running.` : `${job.name}: ${err.message}`);
    }
    button.disabled = false;
    load();
  };

  const row = (job) => {
    const run = h("button", { type: "button", disabled: ro }, "Run now");
    const toggle = h("button", { type: "button", disabled: ro }, job.paused ? "Resume" : "Pause");
    run.addEventListener("click", () => act(run, job, "run"));
    toggle.addEventListener("click", () => act(toggle, job, job.paused ? "resume" : "pause"));
    const name = job.paused ? h("span", {}, job.name, h("span", { class: "tag" }, " paused")) : job.name;
    return [name, job.kind, job.schedule || "—", job.target || "—", when(job.next_run), when(job.last_run), result(job.last_result), h("div", { class: "actions" }, run, toggle)];
  };

  const load = async () => {
    try {
      const ans = await get("schedule", ctl.signal);
      clear(body).append(
        table("Jobs", ["Name", "Kind", "Schedule", "Target", "Next run", "Last run", "Last result", "Actions"], (ans.jobs || []).map(row), "No heartbeat or cron job."),
      );
    } catch (err) {
      if (!ctl.signal.aborted) clear(body).append(h("p", { class: "error" }, err.message));
    }
  };
  load();
  const off = ctx.bus.on("schedule.run", debounce(load, 200));
  return () => {
    ctl.abort();
    off();
  };
}
