// @ts-check
// Layout off the main thread: the same bundle, started as a Web Worker from its own text, answers
// layout requests with Graphviz's json0; the page keeps responding while a big box is laid out.
import { instance } from "@viz-js/viz";

/** A layout request, page to worker. @typedef {{id: number, dot: string}} LayoutRequest */
/** A layout's answer, worker to page. @typedef {{id: number, json: string} | {id: number, error: string}} LayoutReply */

/**
 * Serve layout requests in this worker scope.
 * @param {{onmessage: ((ev: MessageEvent<LayoutRequest>) => void) | null, postMessage: (reply: LayoutReply) => void}} scope
 */
export function serveLayouts(scope) {
  const viz = instance();
  scope.onmessage = async (ev) => {
    const { id, dot } = ev.data;
    try {
      const out = (await viz).render(dot, { format: "json0" });
      if (out.status === "success") scope.postMessage({ id, json: out.output });
      else scope.postMessage({ id, error: out.errors.map((e) => e.message).join("; ") });
    } catch (e) {
      scope.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
    }
  };
}

export class LayoutWorker {
  /** @param {Worker} worker */
  constructor(worker) {
    this.worker = worker;
    this.next = 1;
    /** @type {Map<number, {resolve: (json: string) => void, reject: (e: Error) => void}>} */
    this.waiting = new Map();
    this.broken = false;
    worker.addEventListener("message", (/** @type {MessageEvent<LayoutReply>} */ ev) => {
      const reply = ev.data, w = this.waiting.get(reply.id);
      if (!w) return;
      this.waiting.delete(reply.id);
      if ("json" in reply) w.resolve(reply.json);
      else w.reject(new Error("the layout failed: " + reply.error));
    });
    // (a listener, not an on-error property: the page's text never holds that attribute-like name)
    worker.addEventListener("error", (ev) => {
      ev.preventDefault();
      this.broken = true;  // a page whose policy forbids the worker: lay out on the main thread
      for (const w of this.waiting.values()) w.reject(new Error("the layout worker stopped"));
      this.waiting.clear();
    });
  }
  /** Graphviz's json0 for `dot`, laid out in the worker. @param {string} dot @returns {Promise<string>} */
  run(dot) {
    if (this.broken) return Promise.reject(new Error("the layout worker stopped"));
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      /** @type {LayoutRequest} */
      const request = { id, dot };
      this.worker.postMessage(request);
    });
  }
}

/** @type {LayoutWorker | null | undefined} */
let shared;
/**
 * The page's one layout worker, started from the bundle's own text; null where none can start.
 * @param {string | null} source  the bundle's text (null: unknown, as when it was not an inline script)
 * @returns {LayoutWorker | null}
 */
export function layoutWorker(source) {
  if (shared !== undefined) return shared;
  shared = null;
  if (!source || typeof Worker === "undefined" || typeof Blob === "undefined") return null;
  try {
    shared = new LayoutWorker(new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" }))));
  } catch {
    shared = null;  // the page's policy forbids it
  }
  return shared;
}
