// The login page: heading "Log in", textbox "Login code", button "Log in"; a
// refused code shows an alert.
import { clear, h } from "./dom.js";

function codeOf(raw) {
  const text = raw.trim();
  const m = /[#&]login=([A-Za-z0-9_-]+)/.exec(text);
  return m ? m[1] : text;
}

export function showLogin(root, { message, isAlert, login, onIn }) {
  const input = h("input", {
    id: "login-code",
    type: "text",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const note = h("div", { class: "login-note" });
  const show = (text, alert) => {
    clear(note);
    if (text) note.append(h("p", alert ? { role: "alert", class: "error" } : { class: "muted" }, text));
  };
  show(message, isAlert);
  const button = h("button", { type: "submit" }, "Log in");
  const form = h(
    "form",
    {
      class: "login",
      on: {
        submit: async (ev) => {
          ev.preventDefault();
          const code = codeOf(input.value);
          if (!code) return;
          button.disabled = true;
          const refused = await login(code);
          button.disabled = false;
          if (refused) return show(refused, true);
          onIn();
        },
      },
    },
    h("label", { for: "login-code" }, "Login code"),
    input,
    button,
  );
  const section = h(
    "section",
    { class: "page login-page" },
    h("h1", {}, "Log in"),
    h("p", {}, "Run ", h("code", {}, "chela dashboard"), " on the machine where Chela runs; it opens this page logged in. Or paste its code or link here."),
    form,
    note,
  );
  clear(root).append(section);
  input.focus();
}
