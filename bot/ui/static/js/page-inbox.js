// Inbox: exec approvals, DM pairing requests and failed deliveries, live from the events
// stream; Approve/Deny, Retry/Discard. Under them the triggers' event ledger ("Events":
// webhooks and mail with their verdicts), live from the stream's trigger.event notices.
// A sender's text (a subject, a body) only ever becomes text nodes (dom.js h()).
import { get, post, seg } from "./api.js";
import { clear, debounce, h, toast, when } from "./dom.js";

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

const PAGE = 50; // events a page shows (the API's default)

function facts(pairs) {
  const dl = h("dl", { class: "facts" });
  for (const [name, value] of pairs) if (value) dl.append(h("dt", {}, name), h("dd", {}, value));
  return dl;
}

function eventDetails(e) {
  const session = e.session && e.verdict === "accepted" ? h("a", { href: `#/sessions/${encodeURIComponent(e.session)}` }, e.session) : "";
  return h(
    "div",
    { class: "event-details" },
    facts([
      ["Event id", e.id],
      ["Delivery id", e.delivery_id],
      ["Verdict", e.outcome],
      ["Received", when(e.received)],
      ["Finished", e.finished ? when(e.finished) : ""],
      ["Event", e.event],
      ["Headers", e.headers.join(", ")],
      ["Session", session],
      [e.kind === "mail" ? "Mail (start)" : "Body (start)", e.excerpt ? h("pre", { class: "excerpt" }, e.excerpt) : ""],
    ]),
  );
}

class EventsView {
  constructor() {
    this.rows = [];
    this.sources = [];
    this.more = false;
    this.open = new Set(); // event ids whose details are shown
    this.error = "";
    this.ctl = new AbortController();
    this.filter = h("select", { "aria-label": "Source" });
    this.filter.addEventListener("change", () => this.load());
    this.holder = h("div", { class: "table-wrap" });
    this.moreButton = h("button", { type: "button", hidden: true }, "More events");
    this.moreButton.addEventListener("click", () => this.load(true));
    this.later = debounce(() => this.load(), 150);
    this.el = h(
      "section",
      { role: "region", "aria-labelledby": "inbox-events", class: "panel" },
      h("h2", { id: "inbox-events" }, "Events"),
      h("p", { class: "muted" }, "Webhooks and mail, newest first, with what became of each."),
      h("div", { class: "toolbar" }, this.filter),
      this.holder,
      this.moreButton,
    );
  }

  async load(append = false) {
    const source = this.filter.value;
    const q = new URLSearchParams({ limit: String(append ? PAGE : Math.max(PAGE, Math.min(this.rows.length, 200))) });
    if (source) q.set("source", source);
    if (append && this.rows.length) q.set("before", this.rows[this.rows.length - 1].id);
    try {
      const ans = await get(`inbox/events?${q}`, this.ctl.signal);
      if (source !== this.filter.value) return; // the filter changed meanwhile
      this.rows = append ? this.rows.concat(ans.events || []) : ans.events || [];
      this.more = Boolean(ans.has_more);
      this.sources = ans.sources || [];
      this.error = "";
    } catch (err) {
      if (this.ctl.signal.aborted) return;
      this.error = err.message;
    }
    this.draw();
  }

  drawFilter() {
    const names = new Set(this.sources.map((s) => s.name));
    for (const r of this.rows) names.add(r.source); // a trigger since removed from the config
    const chosen = this.filter.value;
    if (chosen) names.add(chosen);
    const options = [h("option", { value: "" }, "All sources")];
    for (const name of [...names].sort()) options.push(h("option", { value: name }, name));
    clear(this.filter).append(...options);
    this.filter.value = chosen;
  }

  row(e) {
    const open = this.open.has(e.id);
    const toggle = h("button", { type: "button", class: "link", "aria-expanded": String(open) }, "Details");
    const cells = h(
      "tr",
      {},
      h("td", {}, when(e.received)),
      h("td", {}, e.source),
      h("td", {}, h("span", { class: `verdict verdict-${e.state}` }, e.outcome)),
      h("td", { class: "summary" }, e.summary || "—"),
      h("td", {}, toggle),
    );
    const more = h("tr", { class: "details", hidden: !open }, h("td", { colspan: 5 }, open ? eventDetails(e) : ""));
    toggle.addEventListener("click", () => {
      const now = !this.open.has(e.id);
      if (now) this.open.add(e.id);
      else this.open.delete(e.id);
      toggle.setAttribute("aria-expanded", String(now));
      clear(more.firstChild).append(now ? eventDetails(e) : "");
      more.hidden = !now;
    });
    return [cells, more];
  }

  draw() {
    this.drawFilter();
    const body = h("tbody");
    for (const e of this.rows) body.append(...this.row(e));
    if (!this.rows.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, this.filter.value ? "No event from this source." : "No event yet.")));
    const head = h("tr", {}, ["Time", "Source", "Verdict", "Summary", ""].map((t) => h("th", { scope: "col" }, t)));
    clear(this.holder).append(h("table", { class: "events" }, h("caption", {}, "Events"), h("thead", {}, head), body));
    if (this.error) this.holder.append(h("p", { class: "error" }, this.error));
    this.moreButton.hidden = !this.more;
  }
}

export function mount(root, ctx) {
  view.readOnly = Boolean(ctx.boot.read_only);
  const body = h("div", { class: "inbox" });
  const events = new EventsView();
  root.append(body, events.el);
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
  events.load();
  const offs = [
    ctx.inbox.subscribe(draw),
    ctx.bus.on("trigger.event", events.later),
    ctx.bus.on("hello", events.later), // the stream came back: catch up
  ];
  return () => {
    events.ctl.abort();
    offs.forEach((off) => off());
  };
}
