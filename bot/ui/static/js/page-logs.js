// Logs: the daemon's recent lines (scrubbed) as the log "Logs"; combobox "Level"; checkbox
// "Follow" keeps a second events stream (with "logs": true) appending new lines.
import { get } from "./api.js";
import { clear, h, when } from "./dom.js";
import { EventBus } from "./events.js";

const LEVELS = ["debug", "info", "warning", "error"];
const RANK = { debug: 10, info: 20, warning: 30, warn: 30, error: 40, critical: 50 };
const KEEP = 1000;

function lineEl(l) {
  return h(
    "div",
    { class: `line level-${l.level}` },
    h("span", { class: "time" }, when(l.time)),
    " ",
    h("span", { class: "level" }, String(l.level).toUpperCase()),
    " ",
    h("span", { class: "logger" }, l.logger),
    ": ",
    h("span", { class: "message" }, l.message),
  );
}

export function mount(root) {
  const ctl = new AbortController();
  const level = h("select", { id: "logs-level" }, LEVELS.map((l) => h("option", { value: l }, l.toUpperCase())));
  level.value = "info";
  const follow = h("input", { type: "checkbox", id: "logs-follow", checked: true });
  const log = h("div", { role: "log", "aria-label": "Logs", class: "log logs" });
  root.append(
    h("div", { class: "toolbar" }, h("label", { for: "logs-level" }, "Level"), level, h("label", { class: "check" }, follow, " Follow")),
    log,
  );
  let last = 0;
  let loaded = false;
  let queue = [];
  let bus = null;

  const add = (l) => {
    if (l.seq <= last || (RANK[l.level] || 0) < RANK[level.value]) return;
    last = l.seq;
    log.append(lineEl(l));
    while (log.childElementCount > KEEP) log.firstElementChild.remove();
    if (follow.checked) log.scrollTop = log.scrollHeight;
  };

  const load = async () => {
    loaded = false;
    try {
      const ans = await get(`logs?level=${level.value}&limit=500`, ctl.signal);
      clear(log);
      last = 0;
      (ans.lines || []).forEach(add);
      loaded = true;
      queue.forEach(add);
      queue = [];
      log.scrollTop = log.scrollHeight;
    } catch (err) {
      if (!ctl.signal.aborted) clear(log).append(h("p", { class: "error" }, err.message));
    }
  };

  const setFollow = () => {
    if (follow.checked && !bus) {
      bus = new EventBus(true);
      bus.on("log.line", (l) => (loaded ? add(l) : queue.push(l)));
      bus.start();
    } else if (!follow.checked && bus) {
      bus.stop();
      bus = null;
    }
  };

  level.addEventListener("change", load);
  follow.addEventListener("change", setFollow);
  setFollow();
  load();
  return () => {
    ctl.abort();
    bus?.stop();
  };
}
