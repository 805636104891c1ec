// The API client: every /ui/api request carries X-Chela-CSRF (reads too); streams are read
// with fetch (POST), never EventSource.
export const CSRF_KEY = "chela_ui_csrf";
const BASE = "/ui/api/";

export class ApiError extends Error {
  constructor(status, code, message, body = null) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
    this.body = body; // the whole answer (e.g. a Save's problems by key)
  }
}

const authListeners = new Set();
/** fn() runs when an answer says the session is gone (401, or 403 csrf). */
export function onAuthLost(fn) {
  authListeners.add(fn);
}

export function csrf() {
  return localStorage.getItem(CSRF_KEY) || "";
}

export function setCsrf(token) {
  if (token) localStorage.setItem(CSRF_KEY, token);
  else localStorage.removeItem(CSRF_KEY);
}

export function seg(value) {
  return encodeURIComponent(value);
}

async function fail(resp) {
  let code = "";
  let message = "";
  let body = null;
  try {
    body = await resp.json();
    code = body.error?.code || "";
    message = body.error?.message || "";
  } catch {
    // not JSON: keep the status
  }
  const err = new ApiError(resp.status, code, message, body);
  if (resp.status === 401 || (resp.status === 403 && code === "csrf")) {
    if (code !== "login_code_invalid") authListeners.forEach((fn) => fn(err));
  }
  return err;
}

function init(method, body, signal) {
  const headers = { "X-Chela-CSRF": csrf() };
  const opts = { method, headers, credentials: "same-origin", cache: "no-store", signal };
  if (body instanceof FormData) {
    opts.body = body;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  return opts;
}

/** One JSON request; resolves to the parsed body (null for 204), rejects with ApiError. */
export async function call(method, path, body, signal) {
  const resp = await fetch(BASE + path, init(method, body, signal));
  if (!resp.ok) throw await fail(resp);
  if (resp.status === 204) return null;
  return resp.json();
}

export const get = (path, signal) => call("GET", path, undefined, signal);

/** A GET of bytes (an image of a session's media): a blob: URL of them (revoke it when
 * done). An <img src> cannot send X-Chela-CSRF, so the page fetches and shows the blob. */
export async function blobUrl(path, signal) {
  const resp = await fetch(BASE + path, init("GET", undefined, signal));
  if (!resp.ok) throw await fail(resp);
  return URL.createObjectURL(await resp.blob());
}
export const post = (path, body = {}, signal) => call("POST", path, body, signal);
export const del = (path) => call("DELETE", path);

/** A POST that answers text/event-stream: calls onEvent({id, event, data}) per event and
 * resolves when the stream ends. Rejects with ApiError for a refusal. */
export async function stream(path, body, onEvent, signal) {
  const resp = await fetch(BASE + path, init("POST", body, signal));
  if (!resp.ok) throw await fail(resp);
  await readSse(resp.body, onEvent);
}

function parseBlock(block) {
  const out = { id: null, event: "message", data: "" };
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") out.event = value;
    else if (field === "id") out.id = value;
  }
  if (!data.length) return null;
  try {
    out.data = JSON.parse(data.join("\n"));
  } catch {
    return null;
  }
  return out;
}

export async function readSse(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const ev = parseBlock(buf.slice(0, end));
      buf = buf.slice(end + 2);
      if (ev) onEvent(ev);
    }
  }
}
