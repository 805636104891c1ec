// The events stream (POST /ui/api/events, read with fetch): one connection while logged in,
// resumed after a drop with "after": the last seq seen; listeners by event name ("*": all).
import { ApiError, stream } from "./api.js";

export class EventBus {
  constructor(logs = false) {
    this.logs = logs;
    this.listeners = new Map();
    this.seq = null;
    this.ctl = null;
    this.running = false;
  }

  on(name, fn) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(fn);
    return () => this.listeners.get(name)?.delete(fn);
  }

  emit(name, data) {
    for (const key of [name, "*"]) {
      for (const fn of this.listeners.get(key) || []) {
        try {
          fn(data, name);
        } catch (err) {
          console.error(err);
        }
      }
    }
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop();
  }

  stop() {
    this.running = false;
    this.ctl?.abort();
  }

  async loop() {
    let wait = 500;
    while (this.running) {
      this.ctl = new AbortController();
      try {
        await stream("events", { after: this.seq, logs: this.logs }, (ev) => this.take(ev), this.ctl.signal);
        wait = 500;
      } catch (err) {
        if (!this.running) return;
        if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
          this.running = false;
          return;
        }
      }
      if (!this.running) return;
      this.emit("stream.lost", {});
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(wait * 2, 8000);
    }
  }

  take(ev) {
    if (ev.id !== null && ev.id !== "") this.seq = Number(ev.id);
    else if (ev.event === "hello" && this.seq === null) this.seq = ev.data.seq;
    this.emit(ev.event, ev.data);
  }
}
