// Entry point. It has no imports, so the first thing that runs is this: a login code in the
// fragment (#login=<code>, from `chela dashboard`) is taken out of the address bar with
// history.replaceState before any request to the API is made (SPEC §16.2).
const match = /^#login=([A-Za-z0-9_-]{1,128})$/.exec(location.hash);
let code = null;
if (match) {
  code = match[1];
  history.replaceState(null, "", location.pathname + "#/chat");
} else if (location.hash.startsWith("#login=")) {
  history.replaceState(null, "", location.pathname + "#/chat");
}
import("./main.js").then((m) => m.start(code));
