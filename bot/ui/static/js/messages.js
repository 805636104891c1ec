// One transcript message as an article: "Your message", "Assistant message" or "Tool: <name>"
// (name, summary, duration, the result behind a disclosure). Text goes through markdown.js.
import { clear, h, when } from "./dom.js";
import { render } from "./markdown.js";

export function toolLabel(name) {
  return `Tool: ${name || "tool"}`;
}

function meta(msg) {
  const bits = [];
  if (msg.channel && msg.channel !== "web") bits.push(`via ${msg.channel}`);
  if (msg.created) bits.push(when(msg.created));
  return bits.length ? h("div", { class: "meta" }, bits.join(" · ")) : null;
}

export function toolStatus(tool) {
  const bits = [];
  if (tool.ok === true) bits.push("ok");
  else if (tool.ok === false) bits.push("failed");
  else bits.push("running…");
  if (tool.duration_ms !== undefined && tool.duration_ms !== null) bits.push(`${tool.duration_ms} ms`);
  if (tool.result_chars !== undefined && tool.result_chars !== null) bits.push(`${tool.result_chars} chars`);
  return bits.join(" · ");
}

/** A tool article; `status` and `summary` are updated in place while the tool runs. */
export function toolArticle(tool, result) {
  const status = h("span", { class: "tool-status" }, toolStatus(tool));
  const art = h(
    "article",
    { class: `msg tool${tool.ok === false ? " failed" : ""}`, "aria-label": toolLabel(tool.name) },
    h("div", { class: "tool-head" }, h("span", { class: "tool-name" }, tool.name || "tool"), " ", status),
  );
  if (tool.summary) art.append(h("div", { class: "tool-summary" }, tool.summary));
  if (result) {
    art.append(h("details", {}, h("summary", {}, "Result"), h("pre", {}, result)));
  }
  art.statusEl = status;
  return art;
}

export function messageArticle(msg) {
  if (msg.role === "tool") {
    const art = toolArticle(msg.tool || { name: "tool" }, msg.text);
    art.dataset.id = msg.id;
    return art;
  }
  const mine = msg.role === "user";
  const art = h(
    "article",
    { class: `msg ${mine ? "user" : "assistant"}`, "aria-label": mine ? "Your message" : "Assistant message" },
    h("div", { class: "body" }, render(msg.text)),
    meta(msg),
  );
  if (msg.id !== undefined && msg.id !== null) art.dataset.id = msg.id;
  if (msg.client_msg_id) art.dataset.client = msg.client_msg_id;
  return art;
}

export function setBody(art, text) {
  let body = art.querySelector(".body");
  if (!body) {
    body = h("div", { class: "body" });
    art.prepend(body);
  }
  clear(body).append(render(text));
}

/** Render a transcript into `log` (replacing what it held); empty-text assistant messages
 * (tool-call steps) are skipped. */
export function fillLog(log, messages) {
  clear(log);
  for (const msg of messages) {
    if (msg.role === "assistant" && !msg.text) continue;
    log.append(messageArticle(msg));
  }
  if (!log.childElementCount) log.append(h("p", { class: "muted empty" }, "No messages yet."));
}
