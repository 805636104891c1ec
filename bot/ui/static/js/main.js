// The single page: login, bootstrap, the "Pages" navigation and the hash routes (#/chat, …).
import { ApiError, csrf, get, onAuthLost, post, setCsrf } from "./api.js";
import { clear, h, toast } from "./dom.js";
import { EventBus } from "./events.js";
import { Inbox } from "./inbox.js";
import { showLogin } from "./login.js";

export const PAGES = [
  ["chat", "Chat"],
  ["inbox", "Inbox"],
  ["sessions", "Sessions"],
  ["channels", "Channels"],
  ["schedule", "Schedule"],
  ["usage", "Usage"],
  ["workspace", "Workspace"],
  ["config", "Config"],
  ["logs", "Logs"],
  ["system", "System"],
];

const state = { boot: null, bus: null, inbox: null, cleanup: null, links: new Map(), seq: 0, first: null };

const main = () => document.getElementById("main");

export async function start(code, first = null) {
  state.first = first;
  onAuthLost(() => loggedOut("Your browser session has ended. Run chela dashboard to log in again."));
  if (code) {
    const refused = await login(code);
    if (refused) return keepOrLeave(refused);
  } else if (!localStorage.getItem("chela_ui_csrf")) {
    return loggedOut("");
  }
  await enter();
}

/** A new dashboard link opened in this tab: log in with its code afresh. */
export async function relogin(code) {
  state.bus?.stop();
  const refused = await login(code);
  if (refused) return keepOrLeave(refused);
  await enter();
}

/** A refused code (a used or expired link, opened in any tab) says nothing about the session
 * this browser already has, which every tab shares through localStorage: when the stored
 * token still works, keep it and go on logged in, with the alert in this tab only. */
async function keepOrLeave(refused) {
  let boot = null;
  if (csrf()) {
    try {
      boot = await get("bootstrap");
    } catch {
      boot = null; // that session has ended too
    }
  }
  if (!boot) return loggedOut(refused, true);
  state.first = { boot: Promise.resolve(boot), chat: null };
  await enter();
  const title = document.getElementById("page-title");
  title?.after(h("p", { role: "alert", class: "error" }, refused));
}

/** POST the code; "" when it worked, else the sentence to show. */
export async function login(code) {
  try {
    const ans = await post("login", { code });
    setCsrf(ans.csrf);
    return "";
  } catch (err) {
    if (err instanceof ApiError && err.status === 429) {
      return "Too many login attempts. Wait a minute, then run chela dashboard again.";
    }
    if (err instanceof ApiError && err.status === 401) {
      return "This login link was already used or has expired. Run chela dashboard again for a new one.";
    }
    return `Login failed: ${err.message}. Run chela dashboard again for a new link.`;
  }
}

async function enter() {
  let boot = state.first ? await state.first.boot : null;
  try {
    boot = boot || (await get("bootstrap"));
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return loggedOut("");
    clear(main()).append(h("p", { role: "alert" }, `The daemon did not answer: ${err.message}`));
    return;
  }
  setCsrf(boot.csrf);
  state.boot = boot;
  document.getElementById("brand").textContent = boot.agent?.name || "Chela";
  document.getElementById("read-only").hidden = !boot.read_only;
  state.bus = new EventBus(false);
  state.inbox = new Inbox(state.bus);
  state.inbox.subscribe(() => updateNav());
  buildNav();
  window.addEventListener("hashchange", route);
  await route();
  state.bus.start();
  setTimeout(() => state.inbox.refresh(), 50); // after the page's own first reads
}

function loggedOut(message, isAlert = false) {
  state.bus?.stop();
  state.cleanup?.();
  state.cleanup = null;
  window.removeEventListener("hashchange", route);
  setCsrf("");
  document.getElementById("nav").hidden = true;
  showLogin(main(), { message, isAlert, login, onIn: enter });
}

export async function logout() {
  try {
    await post("logout", {});
  } catch (err) {
    toast(`Logout: ${err.message}`);
  }
  loggedOut("You are logged out.");
}

function buildNav() {
  const nav = clear(document.getElementById("nav"));
  const list = h("ul");
  state.links.clear();
  for (const [id, name] of PAGES) {
    const count = h("span", { class: "count" });
    const link = h("a", { href: `#/${id}` }, name, count);
    state.links.set(id, { link, count });
    list.append(h("li", {}, link));
  }
  nav.append(list);
  nav.hidden = false;
}

function updateNav() {
  const entry = state.links.get("inbox");
  if (!entry) return;
  const n = state.inbox.count();
  entry.count.textContent = n ? ` ${n}` : "";
}

function parseRoute() {
  const m = /^#\/([a-z]+)(?:\/(.*))?$/.exec(location.hash);
  const id = m && PAGES.some(([p]) => p === m[1]) ? m[1] : "chat";
  let arg = null;
  if (m && m[2]) {
    try {
      arg = decodeURIComponent(m[2]);
    } catch {
      arg = null;
    }
  }
  return { id, arg };
}

async function route() {
  const { id, arg } = parseRoute();
  const seq = ++state.seq;
  const name = PAGES.find(([p]) => p === id)[1];
  for (const [pid, { link }] of state.links) {
    if (pid === id) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const mod = await import(`./page-${id}.js`);
  if (seq !== state.seq) return;
  state.cleanup?.();
  state.cleanup = null;
  const section = h("section", { class: `page page-${id}`, "aria-labelledby": "page-title" });
  section.append(h("h1", { id: "page-title" }, name));
  clear(main()).append(section);
  document.title = `${name} · ${state.boot.agent?.name || "Chela"}`;
  const early = state.first?.chat || null;
  state.first = null; // the early reads serve the first page only
  const ctx = { boot: state.boot, bus: state.bus, inbox: state.inbox, arg, logout, early };
  state.cleanup = mod.mount(section, ctx) || null;
}
