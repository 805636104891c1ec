// DOM helpers: elements are built with createElement and text nodes only (never innerHTML
// with content), and no attribute named on* is ever set.

/** h("button", {class: "x", on: {click: fn}, "aria-label": "Send"}, "text", child, …) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "text") {
      el.textContent = String(value);
    } else if (name.toLowerCase().startsWith("on")) {
      throw new Error(`refusing attribute ${name}`);
    } else if (name === "value" || name === "checked" || name === "disabled") {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

/** A table with a caption (its accessible name), a header row and rows of cells (strings
 * or nodes). */
export function table(caption, headers, rows, empty = "Nothing yet.") {
  const body = h("tbody");
  for (const row of rows) {
    body.append(h("tr", {}, row.map((cell) => h("td", {}, cell))));
  }
  if (!rows.length) {
    body.append(h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, empty)));
  }
  return h(
    "table",
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
    body,
  );
}

export function pad(n) {
  return String(n).padStart(2, "0");
}

/** Unix seconds -> "YYYY-MM-DD HH:MM:SS" local time; "—" for none. */
export function when(t) {
  if (t === null || t === undefined || t === "") return "—";
  const d = new Date(Number(t) * 1000);
  if (Number.isNaN(d.getTime())) return String(t);
  const date = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${date} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(seconds) {
  const s = Math.max(0, Math.round(Number(seconds) || 0));
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${mm}m`;
  if (mm) return `${mm}m ${s % 60}s`;
  return `${s}s`;
}

export function usd(v) {
  if (v === null || v === undefined) return "—";
  const n = Number(v);
  return n && n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

export function num(v) {
  if (v === null || v === undefined) return "—";
  return Number(v).toLocaleString("en-US");
}

export function bytes(v) {
  const n = Number(v) || 0;
  if (n >= 1048576) return `${(n / 1048576).toFixed(1)} MB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${n} B`;
}

const toastTimer = { id: 0 };
/** A short note in the page's status region (announced politely). */
export function toast(message) {
  const el = document.getElementById("toast");
  if (!el) return;
  el.textContent = message;
  clearTimeout(toastTimer.id);
  toastTimer.id = setTimeout(() => {
    el.textContent = "";
  }, 6000);
}

/** fn runs at most once per `ms`, the last call wins. */
export function debounce(fn, ms) {
  let id = 0;
  return (...args) => {
    clearTimeout(id);
    id = setTimeout(() => fn(...args), ms);
  };
}

/** A generic read-only view of JSON data: objects as definition lists, arrays as lists. */
export function tree(value, depth = 0) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
  if (Array.isArray(value)) {
    if (!value.length) return h("span", { class: "muted" }, "(none)");
    if (value.every((v) => typeof v !== "object" || v === null)) {
      return h("span", {}, value.map(String).join(", "));
    }
    return h("ol", { class: "tree" }, value.map((v) => h("li", {}, tree(v, depth + 1))));
  }
  if (typeof value === "object") {
    if ("env" in value && "set" in value && Object.keys(value).length === 2) {
      return h("span", { class: "env" }, `env ${value.env} (${value.set ? "set" : "unset"})`);
    }
    const dl = h("dl", { class: depth ? "tree" : "tree top" });
    for (const [k, v] of Object.entries(value)) dl.append(h("dt", {}, k), h("dd", {}, tree(v, depth + 1)));
    return dl;
  }
  return h("span", {}, String(value));
}
