// Schedule: the table "Jobs" (heartbeat, config jobs, tool jobs) with "Run now" and
// "Pause"/"Resume" per row; tool jobs also "Edit" and "Remove" (a dialog confirms with
// "Remove"); config jobs are read-only here (edited in config.toml). "New job" opens the form:
// "Name", "Prompt", "Kind" (at, in, every, schedule), "When", and the next run the scheduler
// resolves, shown before "Save". Below: one-shot jobs that ended in the last 7 days.
import { del, get, post, seg } from "./api.js";
import { clear, debounce, h, table, toast, when } from "./dom.js";

const HINTS = {
  at: "a date-time, e.g. 2026-12-01T09:00 (the agent's time zone)",
  in: "a duration from now, e.g. 20m, 2h, 1h30m",
  every: "a duration, at least 10s, e.g. 1h",
  schedule: "crontab, 5 fields, e.g. 0 9 * * 1-5",
};

function result(r) {
  if (!r) return "—";
  return r.detail ? `${r.status}: ${r.detail}` : r.status;
}

class JobForm {
  constructor(onSaved) {
    this.onSaved = onSaved;
    this.editing = null;
    this.name = h("input", { type: "text", id: "job-name", autocomplete: "off" });
    this.prompt = h("textarea", { id: "job-prompt", rows: 3 });
    this.kind = h("select", { id: "job-kind" }, Object.keys(HINTS).map((k) => h("option", { value: k }, k)));
    this.when = h("input", { type: "text", id: "job-when", autocomplete: "off", "aria-describedby": "job-when-hint" });
    this.hint = h("span", { id: "job-when-hint", class: "muted" });
    this.target = h("select", { id: "job-target" }, h("option", { value: "last" }, "last (the owner's last chat)"), h("option", { value: "none" }, "none (run only)"));
    this.next = h("p", { role: "status", class: "muted" });
    this.save = h("button", { type: "submit", class: "primary" }, "Save");
    this.cancel = h("button", { type: "button" }, "Cancel");
    this.title = h("h2", { id: "job-form-title" }, "New job");
    const field = (label, input, ...extra) => h("div", { class: "field" }, h("label", { for: input.id }, label), input, ...extra);
    this.el = h(
      "form",
      { class: "panel job-form", "aria-labelledby": "job-form-title", hidden: true },
      this.title,
      field("Name", this.name),
      field("Prompt", this.prompt),
      h("div", { class: "field-row" }, field("Kind", this.kind), field("When", this.when, this.hint)),
      field("Deliver to", this.target),
      this.next,
      h("div", { class: "actions" }, this.save, this.cancel),
    );
    const check = debounce(() => this.preview(), 250);
    this.kind.addEventListener("change", () => (this.showHint(), check()));
    this.when.addEventListener("input", check);
    this.cancel.addEventListener("click", () => this.close());
    this.el.addEventListener("submit", (ev) => (ev.preventDefault(), this.submit()));
  }

  showHint() {
    this.hint.textContent = ` ${HINTS[this.kind.value]}`;
  }

  open(job = null) {
    this.editing = job;
    this.title.textContent = job ? `Edit ${job.name}` : "New job";
    this.name.value = job ? job.name : "";
    this.prompt.value = job ? job.prompt || "" : "";
    this.kind.value = job ? job.spec.kind : "in";
    this.when.value = job ? job.spec.when : "";
    this.target.querySelector("option.kept")?.remove();
    const where = job ? job.target || "last" : "last";
    if (!["last", "none"].includes(where)) this.target.append(h("option", { value: where, class: "kept" }, where));
    this.target.value = where;
    this.next.textContent = "";
    this.showHint();
    this.el.hidden = false;
    this.name.focus();
    if (job) this.preview();
  }

  close() {
    this.el.hidden = true;
    this.editing = null;
  }

  async preview() {
    const spec = this.when.value.trim();
    if (!spec) {
      this.next.textContent = "";
      return;
    }
    try {
      const ans = await post("schedule/preview", { kind: this.kind.value, when: spec });
      this.next.className = "muted";
      this.next.textContent = ans.next_run ? `Next run: ${when(ans.next_run)}` : "No future run.";
    } catch (err) {
      this.next.className = "error-text";
      this.next.textContent = `Not valid: ${err.message}`;
    }
  }

  async submit() {
    const [target, ...to] = this.target.value.split(":");
    const body = { name: this.name.value, prompt: this.prompt.value, kind: this.kind.value, when: this.when.value, target, to: to.join(":") };
    this.save.disabled = true;
    try {
      const path = this.editing ? `schedule/${seg(this.editing.name)}/edit` : "schedule";
      const ans = await post(path, body);
      toast(`${ans.job.name}: saved; next run ${when(ans.job.next_run)}.`);
      this.close();
      this.onSaved();
    } catch (err) {
      this.next.className = "error-text";
      this.next.textContent = `Not saved: ${err.message}`;
    }
    this.save.disabled = false;
  }
}

export function mount(root, ctx) {
  const ctl = new AbortController();
  const body = h("div");
  const ended = h("div");
  const ro = ctx.boot.read_only;
  const form = new JobForm(() => load());
  const newBtn = h("button", { type: "button", class: "primary", disabled: ro }, "New job");
  newBtn.addEventListener("click", () => form.open());
  const confirmText = h("p");
  const confirmBtn = h("button", { type: "button", class: "primary" }, "Remove");
  const keepBtn = h("button", { type: "button" }, "Cancel");
  const dialog = h("dialog", { "aria-labelledby": "rm-title" }, h("h2", { id: "rm-title" }, "Remove job"), confirmText, h("div", { class: "actions" }, confirmBtn, keepBtn));
  keepBtn.addEventListener("click", () => dialog.close());
  let removing = null;
  confirmBtn.addEventListener("click", async () => {
    dialog.close();
    try {
      await del(`schedule/${seg(removing)}`);
      toast(`${removing} removed.`);
    } catch (err) {
      toast(`${removing}: ${err.message}`);
    }
    load();
  });
  root.append(h("div", { class: "toolbar" }, newBtn), form.el, body, ended, dialog);

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
    const actions = h("div", { class: "actions" }, run, toggle);
    if (job.source === "tool") {
      const edit = h("button", { type: "button", disabled: ro }, "Edit");
      const remove = h("button", { type: "button", disabled: ro }, "Remove");
      edit.addEventListener("click", () => form.open(job));
      remove.addEventListener("click", () => {
        removing = job.name;
        confirmText.textContent = `Remove ${job.name}? Its next runs are cancelled; past results stay in the ledger.`;
        dialog.showModal();
      });
      actions.append(edit, remove);
    } else if (job.source === "config") {
      actions.append(h("span", { class: "muted" }, "from config.toml: edit it there"));
    }
    const name = job.paused ? h("span", {}, job.name, h("span", { class: "tag" }, " paused")) : job.name;
    return [name, job.kind, job.schedule || "—", job.target || "—", when(job.next_run), when(job.last_run), result(job.last_result), actions];
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
    try {
      const ans = await get("schedule/ended", ctl.signal);
      const rows = (ans.jobs || []).map((j) => [j.name, when(j.due), j.status, j.detail || "—"]);
      clear(ended).append(table(`Ended one-shot jobs (last ${ans.days} days)`, ["Name", "Due", "Result", "Detail"], rows, "None."));
    } catch (err) {
      if (!ctl.signal.aborted) clear(ended).append(h("p", { class: "error" }, err.message));
    }
  };
  load();
  const off = ctx.bus.on("schedule.run", debounce(load, 200));
  return () => {
    ctl.abort();
    off();
    if (dialog.open) dialog.close();
  };
}
