// What waits on the owner (approvals, pairing requests, failed deliveries), kept fresh from the
// events stream; the Inbox page and the navigation's count read it.
import { get } from "./api.js";
import { debounce } from "./dom.js";

const EVENTS = [
  "approval.pending",
  "approval.resolved",
  "pairing.pending",
  "pairing.resolved",
  "delivery.failed",
  "delivery.resolved",
];

export class Inbox {
  constructor(bus) {
    this.approvals = [];
    this.requests = [];
    this.failed = [];
    this.error = "";
    this.listeners = new Set();
    this.later = debounce(() => this.refresh(), 100);
    for (const name of EVENTS) bus.on(name, () => this.later());
    let hellos = 0; // a hello after the first: the stream came back, things may have changed
    bus.on("hello", () => hellos++ && this.later());
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  count() {
    return this.approvals.length + this.requests.length + this.failed.length;
  }

  async refresh() {
    try {
      const [a, p, o] = await Promise.all([get("approvals"), get("pairing"), get("outbox?state=failed")]);
      this.approvals = a.approvals || [];
      this.requests = p.requests || [];
      this.failed = o.items || [];
      this.error = "";
    } catch (err) {
      this.error = err.message;
    }
    this.listeners.forEach((fn) => fn());
  }
}
