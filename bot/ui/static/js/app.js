// Entry point. It has no imports, so the first thing that runs is this: a login code in the
// fragment (#login=<code>, from `chela dashboard`) is taken out of the address bar with
// history.replaceState before any request to the API is made. A link opened
// in a tab that already shows the UI only changes the fragment: the same happens then.
// Without a code, the first API reads (bootstrap, then the chat transcript) start here, while
// the other modules load.
const LOGIN = /^#login=([A-Za-z0-9_-]{1,128})$/;

function takeCode() {
  if (!location.hash.startsWith("#login=")) return null;
  const match = LOGIN.exec(location.hash);
  history.replaceState(null, "", location.pathname + "#/chat");
  return match ? match[1] : null;
}

function read(path, token) {
  return fetch(`/ui/api/${path}`, { headers: { "X-Chela-CSRF": token }, cache: "no-store" })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null);
}

/** {boot, chat: {key, messages}} promises, or null when nothing can be read yet. */
function early() {
  const token = localStorage.getItem("chela_ui_csrf");
  if (!token) return null;
  const boot = read("bootstrap", token);
  const route = /^#\/chat(?:\/(.+))?$/.exec(location.hash || "#/chat");
  let chat = null;
  if (route) {
    chat = boot.then((b) => {
      if (!b) return null;
      let key = localStorage.getItem("chela_ui_session") || b.main_session;
      try {
        if (route[1]) key = decodeURIComponent(route[1]);
      } catch {
        return null;
      }
      const path = `sessions/${encodeURIComponent(key)}/messages?limit=100`;
      return read(path, token).then((messages) => (messages ? { key, messages } : null));
    });
  }
  return { boot, chat };
}

const code = takeCode();
const main = import("./main.js");
const first = code ? null : early();
main.then((m) => m.start(code, first));
window.addEventListener("hashchange", () => {
  const again = takeCode();
  if (again) main.then((m) => m.relogin(again));
});
