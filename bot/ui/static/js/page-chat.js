// Chat: the transcript of a session (main_session by default) as the log "Conversation",
// streaming replies (POST …/messages read with fetch), tool activity, Stop, attachments.
// The id of an unanswered message is kept in localStorage and sent again after a reload, so
// the owner sees exactly one reply.
import { ApiError, call, get, post, seg, stream } from "./api.js";
import { debounce, h, toast } from "./dom.js";
import { addImages, fillLog, isStep, messageArticle, setBody, toolArticle, toolStatus } from "./messages.js";

const PENDING = "chela_ui_pending";
const SESSION = "chela_ui_session";

function pendingFor(key) {
  try {
    const p = JSON.parse(localStorage.getItem(PENDING) || "null");
    return p && p.session === key && p.id ? p : null;
  } catch {
    return null;
  }
}

function clearPending(id) {
  const p = pendingFor(JSON.parse(localStorage.getItem(PENDING) || "{}")?.session);
  if (!p || p.id === id) localStorage.removeItem(PENDING);
}

function newId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

class Chat {
  constructor(root, ctx) {
    this.ctx = ctx;
    this.key = ctx.arg || localStorage.getItem(SESSION) || ctx.boot.main_session;
    this.attachments = [];
    this.busy = false;
    this.gone = false;
    this.ctl = new AbortController();
    this.build(root);
  }

  build(root) {
    this.select = h("select", { id: "chat-session", on: { change: () => this.choose(this.select.value) } });
    this.log = h("div", { role: "log", "aria-label": "Conversation", "aria-live": "polite", class: "log chat-log" });
    this.input = h("textarea", {
      id: "chat-message",
      "aria-label": "Message",
      rows: 3,
      placeholder: "Write a message — Enter sends, Shift+Enter is a new line",
      on: { keydown: (ev) => this.key_(ev) },
    });
    this.file = h("input", { type: "file", hidden: true, multiple: true, on: { change: () => this.upload() } });
    this.sendBtn = h("button", { type: "submit", class: "primary" }, "Send");
    this.stopBtn = h("button", { type: "button", disabled: true, on: { click: () => this.stop() } }, "Stop");
    this.attachBtn = h("button", { type: "button", on: { click: () => this.file.click() } }, "Attach file");
    this.files = h("ul", { class: "attachments", "aria-label": "Attachments" });
    this.note = h("p", { class: "muted chat-note" });
    const form = h(
      "form",
      { class: "composer", on: { submit: (ev) => (ev.preventDefault(), this.send()) } },
      this.input,
      this.files,
      h("div", { class: "composer-buttons" }, this.attachBtn, this.file, this.stopBtn, this.sendBtn),
    );
    root.append(
      h("div", { class: "toolbar" }, h("label", { for: "chat-session" }, "Session"), this.select),
      this.log,
      this.note,
      form,
    );
    if (this.ctx.boot.read_only) this.lock("Read-only: this UI cannot send messages.");
  }

  lock(why) {
    this.input.disabled = this.sendBtn.disabled = this.attachBtn.disabled = true;
    this.note.textContent = why;
  }

  async load() {
    this.sessionList();
    try {
      const early = await this.takeEarly();
      const ans = early || (await get(`sessions/${seg(this.key)}/messages?limit=100`, this.ctl.signal));
      if (this.gone) return;
      fillLog(this.log, ans.messages || [], this.key);
      this.seen(ans.messages || []);
      this.scroll(true);
    } catch (err) {
      if (this.gone) return;
      this.log.replaceChildren(h("p", { class: "error" }, `Could not load the transcript: ${err.message}`));
    }
    performance.mark("chela-chat-painted");
    const pending = pendingFor(this.key);
    if (pending && !this.busy) this.resume(pending);
  }

  /** The transcript app.js began to read while the modules loaded, when it is this one. */
  async takeEarly() {
    const early = this.ctx.early ? await this.ctx.early : null;
    this.ctx.early = null;
    return early && early.key === this.key ? early.messages : null;
  }

  async sessionList() {
    let sessions = [];
    try {
      sessions = (await get("sessions?limit=100", this.ctl.signal)).sessions || [];
    } catch {
      sessions = [];
    }
    if (this.gone) return;
    const keys = new Map(sessions.map((s) => [s.key, s]));
    if (!keys.has(this.ctx.boot.main_session)) keys.set(this.ctx.boot.main_session, { key: this.ctx.boot.main_session, trust: "owner" });
    if (!keys.has(this.key)) keys.set(this.key, { key: this.key, trust: "owner" });
    this.select.replaceChildren(
      ...[...keys.values()].map((s) => h("option", { value: s.key }, s.trust === "guest" ? `${s.key} (guest, read-only)` : s.key)),
    );
    this.select.value = this.key;
    if (keys.get(this.key)?.trust === "guest") this.lock("A guest's session is read-only here.");
  }

  choose(key) {
    localStorage.setItem(SESSION, key);
    location.hash = `#/chat/${encodeURIComponent(key)}`;
  }

  key_(ev) {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      this.send();
    }
  }

  scroll(force = false) {
    const near = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 120;
    if (force || near) this.log.scrollTop = this.log.scrollHeight;
  }

  add(node) {
    this.log.querySelector(".empty")?.remove();
    this.log.append(node);
    this.scroll();
  }

  send() {
    const text = this.input.value.trim();
    if (this.busy || this.input.disabled || (!text && !this.attachments.length)) return;
    const p = {
      session: this.key,
      id: newId(),
      text,
      attachments: this.attachments.map((a) => a.id),
      names: this.attachments.map((a) => a.name),
    };
    localStorage.setItem(PENDING, JSON.stringify(p));
    this.input.value = "";
    this.attachments = [];
    this.files.replaceChildren();
    this.add(messageArticle({ role: "user", text: p.text || p.names.join(", "), client_msg_id: p.id }));
    this.run(p);
  }

  resume(p) {
    const shown = [...this.log.querySelectorAll("article")].some((a) => a.dataset.client === p.id);
    if (!shown) this.add(messageArticle({ role: "user", text: p.text || (p.names || []).join(", "), client_msg_id: p.id }));
    this.run(p);
  }

  setBusy(busy) {
    this.busy = busy;
    this.stopBtn.disabled = !busy;
    if (!this.input.disabled) this.sendBtn.disabled = busy;
  }

  async run(p) {
    this.setBusy(true);
    const turn = new Turn(this);
    this.add(turn.art);
    const body = { text: p.text, client_msg_id: p.id, attachments: p.attachments || [] };
    for (let attempt = 0; attempt < 6 && !turn.done && !this.gone; attempt++) {
      if (attempt) await new Promise((r) => setTimeout(r, 500 * attempt));
      try {
        await stream(`sessions/${seg(this.key)}/messages`, body, (ev) => turn.take(ev), this.ctl.signal);
      } catch (err) {
        if (this.gone) return;
        if (err instanceof ApiError) turn.fail(err.code, err.message);
      }
    }
    if (this.gone) return;
    if (!turn.done) turn.fail("lost", "The connection was lost; reload the page to see the reply.");
    else clearPending(p.id);
    this.setBusy(false);
    this.refreshLater(); // the stored copy of the message sent here: its id and images
  }

  async stop() {
    try {
      const ans = await post(`sessions/${seg(this.key)}/stop`, {});
      if (!ans.stopped) toast("Nothing was running.");
    } catch (err) {
      toast(`Stop: ${err.message}`);
    }
  }

  async upload() {
    const max = this.ctx.boot.limits?.max_upload_bytes || Infinity;
    for (const f of [...this.file.files]) {
      if (f.size > max) {
        toast(`${f.name} is larger than the upload limit.`);
        continue;
      }
      const form = new FormData();
      form.append("file", f, f.name);
      try {
        const ans = await call("POST", "uploads", form);
        this.attachments.push(ans);
        const item = h("li", {}, ans.name, " ");
        item.append(h("button", { type: "button", on: { click: () => this.unattach(ans.id, item) } }, `Remove ${ans.name}`));
        this.files.append(item);
      } catch (err) {
        toast(`${f.name}: ${err.message}`);
      }
    }
    this.file.value = "";
  }

  unattach(id, item) {
    this.attachments = this.attachments.filter((a) => a.id !== id);
    item.remove();
  }

  seen(messages) {
    for (const m of messages) if (typeof m.id === "number") this.lastId = Math.max(this.lastId ?? 0, m.id);
  }

  /** Messages that arrived by another way (another channel, another tab): appended when newer
   * than everything shown; the server's copy of a message sent here only gets its id. */
  async catchUp() {
    if (this.busy || this.gone) return;
    let messages;
    try {
      messages = (await get(`sessions/${seg(this.key)}/messages?limit=50`, this.ctl.signal)).messages || [];
    } catch {
      return;
    }
    if (this.busy || this.gone) return;
    for (const m of messages) {
      const local = m.client_msg_id && this.log.querySelector(`article[data-client="${CSS.escape(m.client_msg_id)}"]`);
      if (local) {
        local.dataset.id = m.id;
        addImages(local, m, this.key);
        continue;
      }
      if (typeof m.id !== "number" || m.id <= (this.lastId ?? 0)) continue;
      if (!isStep(m)) this.add(messageArticle(m, this.key));
    }
    this.seen(messages);
  }

  refreshLater = debounce(() => this.catchUp(), 300);
}

/** One assistant reply being written: deltas append, tools get their own articles, `final`
 * replaces the text (or drops the article when that message is already shown). */
class Turn {
  constructor(chat) {
    this.chat = chat;
    this.text = "";
    this.done = false;
    this.tools = new Map();
    this.art = h("article", { class: "msg assistant", "aria-label": "Assistant message", "aria-busy": "true" });
    setBody(this.art, "");
    this.painting = false;
  }

  take({ event, data }) {
    const fn = {
      "turn.started": () => this.started(),
      delta: () => this.delta(data.text || ""),
      "tool.started": () => this.toolStarted(data),
      "tool.finished": () => this.toolFinished(data),
      final: () => this.final(data),
      error: () => this.fail(data.code, data.message),
    }[event];
    if (fn) fn();
  }

  /** Each stream (a re-POST after a drop too) replays the turn from its first event. */
  started() {
    this.text = "";
    this.tools.forEach((art) => art.remove());
    this.tools.clear();
  }

  delta(text) {
    this.text += text;
    if (this.painting) return;
    this.painting = true;
    requestAnimationFrame(() => {
      this.painting = false;
      if (!this.done) setBody(this.art, this.text);
      this.chat.scroll();
    });
  }

  toolStarted(d) {
    const art = toolArticle({ name: d.name, summary: d.summary });
    this.tools.set(d.call_id, art);
    this.art.before(art);
    this.chat.scroll();
  }

  toolFinished(d) {
    const art = this.tools.get(d.call_id);
    if (!art) return;
    art.statusEl.textContent = toolStatus(d);
    if (d.ok === false) art.classList.add("failed");
  }

  final(d) {
    this.done = true;
    const msg = d.message || {};
    const id = msg.id;
    const dup = id !== undefined && id !== null && this.chat.log.querySelector(`article[data-id="${CSS.escape(String(id))}"]`);
    this.art.removeAttribute("aria-busy");
    if (dup && dup !== this.art) {
      this.art.remove();
      return;
    }
    if (id !== undefined && id !== null) this.art.dataset.id = id;
    if (typeof id === "number") this.chat.seen([msg]);
    setBody(this.art, msg.text ?? this.text);
    addImages(this.art, msg, this.chat.key);
    if (d.stopped) {
      this.art.classList.add("stopped");
      this.art.append(h("p", { class: "stopped-note" }, "Stopped"));
    }
    this.chat.scroll();
  }

  fail(code, message) {
    this.done = true;
    this.art.removeAttribute("aria-busy");
    if (this.text) setBody(this.art, this.text);
    this.art.classList.add("failed");
    this.art.append(h("p", { class: "error" }, message || code || "The turn failed."));
  }
}

export function mount(root, ctx) {
  const chat = new Chat(root, ctx);
  const off = ctx.bus.on("session.updated", (d) => {
    if (d.key === chat.key) chat.refreshLater();
  });
  chat.load();
  return () => {
    chat.gone = true;
    chat.ctl.abort();
    off();
  };
}
