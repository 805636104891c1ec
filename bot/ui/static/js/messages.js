// One transcript message as an article: "Your message", "Assistant message" or "Tool: <name>"
// (name, summary, duration, the result behind a disclosure). Text goes through markdown.js.
// A message's images come from the session's own media route, fetched with the CSRF header
// and shown through blob: URLs (never a path, never a URL from content).
import { blobUrl, seg } from "./api.js";
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

async function showImage(img, session, id) {
  try {
    const url = await blobUrl(`sessions/${seg(session)}/media/${seg(id)}`);
    const done = () => URL.revokeObjectURL(url);
    img.addEventListener("load", done, { once: true });
    img.addEventListener("error", done, { once: true });
    img.src = url;
  } catch {
    img.replaceWith(h("span", { class: "muted" }, `[${img.alt}: not available]`));
  }
}

/** The message's images (`msg.images`: ids and names) under its text, once. */
export function addImages(art, msg, session) {
  const list = msg.images || [];
  if (!session || !list.length || art.querySelector(".images")) return;
  const who = msg.role === "user" ? "you" : "the assistant";
  const box = h("div", { class: "images" });
  for (const item of list) {
    const img = h("img", { class: "thumb", alt: `Image from ${who}: ${item.name || "image"}` });
    box.append(img);
    showImage(img, session, String(item.id));
  }
  const meta = art.querySelector(":scope > .meta");
  if (meta) meta.before(box);
  else art.append(box);
}

export function messageArticle(msg, session) {
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
  addImages(art, msg, session);
  return art;
}

/** An assistant message with nothing to show (a tool-call step). */
export function isStep(msg) {
  return msg.role === "assistant" && !msg.text && !(msg.images || []).length;
}

export function setBody(art, text) {
  let body = art.querySelector(".body");
  if (!body) {
    body = h("div", { class: "body" });
    art.prepend(body);
  }
  clear(body).append(render(text));
}

/** Render a transcript of `session` into `log` (replacing what it held); assistant
 * messages with neither text nor images (tool-call steps) are skipped. */
export function fillLog(log, messages, session) {
  clear(log);
  for (const msg of messages) {
    if (isStep(msg)) continue;
    log.append(messageArticle(msg, session));
  }
  if (!log.childElementCount) log.append(h("p", { class: "muted empty" }, "No messages yet."));
}
