// Model, channel and tool text -> DOM. The text is never parsed as HTML: every character ends
// up in a text node (that is the escaping), and only this small Markdown subset makes
// elements: headings (# … ######), **strong**, *em*/_em_, `code`, fenced code, lists, tables,
// and links — an <a> only for http:/https: URLs, with rel="noopener noreferrer"; any other
// scheme stays visible text. A heading in a message is h3–h6 (# → h3): the page keeps h1/h2.
import { h } from "./dom.js";

const FENCE = /^\s*(```|~~~)(.*)$/;
const ITEM = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

export function safeUrl(raw) {
  let url;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

function link(label, href) {
  return h("a", { href, rel: "noopener noreferrer", target: "_blank" }, label);
}

const INLINE = [
  // [label](url)
  [/^\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)/, (m) => {
    const href = safeUrl(m[2]);
    return href ? link(inline(m[1], false), href) : null;
  }],
  [/^https?:\/\/[^\s<>"'`]+[^\s<>"'`.,;:!?)\]]/, (m, links) => (links ? link(m[0], safeUrl(m[0])) : null)],
  [/^(`+)([^]*?[^`])\1(?!`)/, (m) => h("code", {}, m[2].replace(/^ (.*) $/, "$1"))],
  [/^\*\*(?=\S)([^]*?\S)\*\*/, (m, links) => h("strong", {}, inline(m[1], links))],
  [/^__(?=\S)([^]*?\S)__(?!\w)/, (m, links) => h("strong", {}, inline(m[1], links))],
  [/^\*(?=[^\s*])([^*]*?[^\s*])\*/, (m, links) => h("em", {}, inline(m[1], links))],
  [/^\*([^\s*])\*/, (m) => h("em", {}, m[1])],
  [/^_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/, (m, links) => h("em", {}, inline(m[1], links))],
];

/** Inline Markdown of one block's text -> an array of nodes. */
export function inline(text, links = true) {
  const out = [];
  let plain = "";
  let i = 0;
  let prev = " ";
  while (i < text.length) {
    const rest = text.slice(i);
    let node = null;
    let used = 0;
    if ("[h`*_".includes(rest[0]) && !(rest[0] === "_" && /\w/.test(prev))) {
      for (const [re, make] of INLINE) {
        const m = re.exec(rest);
        if (m && m[0].length && (node = make(m, links))) {
          used = m[0].length;
          break;
        }
      }
    }
    if (node) {
      if (plain) out.push(document.createTextNode(plain));
      plain = "";
      out.push(node);
      i += used;
      prev = text[i - 1];
    } else {
      plain += text[i];
      prev = text[i];
      i += 1;
    }
  }
  if (plain) out.push(document.createTextNode(plain));
  return out;
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split("|").map((c) => c.trim());
}

function fence(lines, i) {
  const open = FENCE.exec(lines[i]);
  const body = [];
  let j = i + 1;
  while (j < lines.length && !lines[j].trim().startsWith(open[1])) body.push(lines[j++]);
  const lang = open[2].trim().split(/\s+/)[0];
  const code = h("code", lang ? { "data-lang": lang.slice(0, 32) } : {}, body.join("\n"));
  return [h("pre", {}, code), j + 1];
}

function tableBlock(lines, i) {
  const head = cells(lines[i]);
  const rows = [];
  let j = i + 2;
  while (j < lines.length && lines[j].includes("|") && lines[j].trim()) rows.push(cells(lines[j++]));
  const el = h(
    "table",
    { class: "md" },
    h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, inline(c))))),
    h("tbody", {}, rows.map((r) => h("tr", {}, head.map((_, k) => h("td", {}, inline(r[k] || "")))))),
  );
  return [el, j];
}

function listBlock(lines, i) {
  const ordered = /\d/.test(ITEM.exec(lines[i])[1]);
  const list = h(ordered ? "ol" : "ul");
  let j = i;
  let m;
  while (j < lines.length && (m = ITEM.exec(lines[j])) && /\d/.test(m[1]) === ordered) {
    const parts = [m[2]];
    j += 1;
    while (j < lines.length && /^\s{2,}\S/.test(lines[j]) && !ITEM.exec(lines[j])) parts.push(lines[j++].trim());
    list.append(h("li", {}, inline(parts.join(" "))));
  }
  return [list, j];
}

function startsBlock(lines, i) {
  const line = lines[i];
  if (!line.trim()) return true;
  if (FENCE.test(line) || ITEM.test(line) || HEADING.test(line)) return true;
  return line.includes("|") && i + 1 < lines.length && RULE.test(lines[i + 1]) && lines[i + 1].includes("-");
}

function paragraph(lines, i) {
  const p = h("p");
  let j = i;
  do {
    if (j > i) p.append(h("br"));
    p.append(...inline(lines[j]));
    j += 1;
  } while (j < lines.length && !startsBlock(lines, j));
  return [p, j];
}

/** The whole text -> a DocumentFragment of blocks. */
export function render(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let made;
    if (!line.trim()) {
      i += 1;
      continue;
    } else if (FENCE.test(line)) {
      made = fence(lines, i);
    } else if (HEADING.test(line)) {
      const m = HEADING.exec(line);
      made = [h(`h${Math.min(6, m[1].length + 2)}`, { class: "md-h" }, inline(m[2])), i + 1];
    } else if (line.includes("|") && i + 1 < lines.length && RULE.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      made = tableBlock(lines, i);
    } else if (ITEM.test(line)) {
      made = listBlock(lines, i);
    } else {
      made = paragraph(lines, i);
    }
    frag.append(made[0]);
    i = made[1];
  }
  return frag;
}
