// Inbox: exec approvals, DM pairing requests and failed deliveries, live from the events
// stream; Approve/Deny, Retry/Discard.
import { post, seg } from "./api.js";
import { clear, h, toast, when } from "./dom.js";

function firstLine(text) {
  const line = String(text || "").split("\n")[0];
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

async function act(button, path, body, done) {
  const row = button.closest("li");
  row?.querySelectorAll("button").forEach((b) => (b.disabled = true));
  try {
    await post(path, body);
    toast(done);
    row?.remove();
  } catch (err) {
    toast(err.status === 409 ? "Already decided." : err.status === 404 ? "It has expired or is unknown." : err.message);
    row?.querySelectorAll("button").forEach((b) => (b.disabled = false));
  }
}

const view = { readOnly: false }; // ui.read_only: the buttons show, disabled

function decide(path, what) {
  const approve = h("button", { type: "button", class: "primary", disabled: view.readOnly }, "Approve");
  const deny = h("button", { type: "button", disabled: view.readOnly }, "Deny");
  approve.addEventListener("click", () => act(approve, path, { decision: "approve" }, `${what} approved.`));
  deny.addEventListener("click", () => act(deny, path, { decision: "deny" }, `${what} denied.`));
  return h("div", { class: "actions" }, approve, deny);
}

function approvalItem(a) {
  return h(
    "li",
    { class: "item" },
    h("pre", { class: "command" }, a.command),
    h("div", { class: "meta" }, `session ${a.session} · ${a.trust || "owner"} · code ${a.code} · expires ${when(a.expires)}`),
    decide(`approvals/${seg(a.code)}`, `Command ${a.code}`),
  );
}

function pairingItem(r) {
  return h(
    "li",
    { class: "item" },
    h("div", {}, h("strong", {}, r.sender_name || "(no name)"), ` · ${r.channel} · sender ${r.sender_id}`),
    h("blockquote", {}, firstLine(r.first_message) || "(no message)"),
    h("div", { class: "meta" }, `code ${r.code} · expires ${when(r.expires)}`),
    decide(`pairing/${seg(r.channel)}/${seg(r.code)}`, `Pairing ${r.code}`),
  );
}

function deliveryItem(d) {
  const retry = h("button", { type: "button", class: "primary", disabled: view.readOnly }, "Retry");
  const discard = h("button", { type: "button", disabled: view.readOnly }, "Discard");
  retry.addEventListener("click", () => act(retry, `outbox/${d.id}/retry`, {}, "Queued again."));
  discard.addEventListener("click", () => act(discard, `outbox/${d.id}/discard`, {}, "Discarded."));
  return h(
    "li",
    { class: "item" },
    h("div", {}, h("strong", {}, d.channel), ` · chat ${d.chat} · ${d.kind || "text"}`),
    h("blockquote", {}, firstLine(d.preview)),
    h("div", { class: "meta error-text" }, `${d.error || "failed"} · ${d.attempts} attempt${d.attempts === 1 ? "" : "s"} · ${when(d.created)}`),
    h("div", { class: "actions" }, retry, discard),
  );
}

function region(title, id, items, make, empty) {
  const heading = h("h2", { id }, title);
  const list = items.length ? h("ul", { class: "items" }, items.map(make)) : h("p", { class: "muted" }, empty);
  return h("section", { role: "region", "aria-labelledby": id, class: "panel" }, heading, list);
}

export function mount(root, ctx) {
  view.readOnly = Boolean(ctx.boot.read_only);
  const body = h("div", { class: "inbox" });
  root.append(body);
  const draw = () => {
    const ib = ctx.inbox;
    clear(body).append(
      region("Approvals", "inbox-approvals", ib.approvals, approvalItem, "No command waits for approval."),
      region("Pending pairing", "inbox-pairing", ib.requests, pairingItem, "No pairing request."),
      region("Failed deliveries", "inbox-failed", ib.failed, deliveryItem, "No failed delivery."),
    );
    if (ib.error) body.append(h("p", { class: "error" }, ib.error));
  };
  draw();
  ctx.inbox.refresh();
  return ctx.inbox.subscribe(draw);
}
