// Entry point. It has no imports, so the first thing that runs is this: a login code in the
// fragment (#login=<code>, from `chela dashboard`) is taken out of the address bar with
// history.replaceState before any request to the API is made (SPEC §16.2). A link opened
// in a tab that already shows the UI only changes the fragment: the same happens then.
const LOGIN = /^#login=([A-Za-z0-9_-]{1,128})$/;

function takeCode() {
  if (!location.hash.startsWith("#login=")) return null;
  const match = LOGIN.exec(location.hash);
  history.replaceState(null, "", location.pathname + "#/chat");
  return match ? match[1] : null;
}

const code = takeCode();
const main = import("./main.js");
main.then((m) => m.start(code));
window.addEventListener("hashchange", () => {
  const again = takeCode();
  if (again) main.then((m) => m.relogin(again));
});
