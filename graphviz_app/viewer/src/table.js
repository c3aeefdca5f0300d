// @ts-check
// The module table: one row per module box (a rolled repeat as one row), tree-indented, sortable
// among siblings; clicking a row selects the module's box in the drawing.
import { bytes, format } from "./colour.js";
import { h } from "./dom.js";

/** @typedef {import("./graph.js").GraphData} GraphData */
/** @typedef {import("./tree.js").Tree} Tree */
/** @typedef {import("./types.js").Overlay} Overlay */

/**
 * One module's row.
 * @typedef {object} ModuleRow
 * @property {number} g  its box
 * @property {number} depth  0 for the modules of the graph itself
 * @property {string} name
 * @property {string} type
 * @property {number} params  its parameters (a roll: all its instances')
 * @property {number} ops
 * @property {Record<string, number | null>} values  per overlay key, the box's value
 * @property {Record<string, string | null>} texts  per overlay key with words per box (the check's verdict)
 * @property {string} dtype  the most common among its tensors ("" for none)
 * @property {string} device
 * @property {string} tied  the parameters of other modules its ops use (tied weights), by name
 * @property {number[]} children  the rows below it, by box
 */

/**
 * A column: `value` sorts it; `text`, when given, is what its cells show (the check's verdict in words).
 * @typedef {{key: string, label: string, unit: string, value: (r: ModuleRow) => number | string,
 *   text?: (r: ModuleRow) => string}} Column
 */

// The colourings shown as columns when the payload has them, in this order, then your own (user:...).
const BUILT_IN = ["memory", "held", "gradient"];
// The model check's colouring (graphviz_app/viewer/check.py): a column of its own, in words.
const CHECK = "check";

/**
 * The rows of the module table, by box, and the boxes of the top rows.
 * @param {GraphData} graph
 * @param {Tree} tree
 * @param {Overlay[]} overlays
 * @returns {{rows: Map<number, ModuleRow>, top: number[]}}
 */
export function moduleRows(graph, tree, overlays) {
  const G = tree.parent.length;
  const shown = (/** @type {number} */ g) => tree.kind[g] === "module" || tree.kind[g] === "roll";
  const dtypes = Array.from({ length: G }, () => /** @type {Map<string, number>} */ (new Map()));
  const devices = Array.from({ length: G }, () => /** @type {Map<string, number>} */ (new Map()));
  for (let i = 0; i < graph.n; i++) {
    const t = graph.tensor(i);
    if (!t || t.freed) continue;
    for (let g = tree.nodeGroup[i]; g !== -1; g = tree.parent[g]) {
      if (t.dtype) dtypes[g].set(t.dtype, (dtypes[g].get(t.dtype) || 0) + 1);
      if (t.device) devices[g].set(t.device, (devices[g].get(t.device) || 0) + 1);
    }
  }
  const tied = tiedParameters(graph);
  /** @type {Map<number, ModuleRow>} */
  const rows = new Map();
  /** @type {number[]} */
  const top = [];
  // Parents come before their children in the box columns (the tree is built top down).
  const depth = new Int32Array(G).fill(-1);
  for (let g = 1; g < G; g++) {
    if (!shown(g)) continue;
    let p = tree.parent[g];
    while (p > 0 && !shown(p)) p = tree.parent[p];
    if (p > 0 && (!rows.has(p) || tree.kind[p] === "roll")) continue;  // inside a roll: folded into its row
    depth[g] = p > 0 ? depth[p] + 1 : 0;
    const name = tree.module[g] || "";
    const info = graph.modules.get(name);
    const params = tree.kind[g] === "roll" ?
      tree.children[g].reduce((sum, c) => sum + ((graph.modules.get(tree.module[c] || "") || { params: 0 }).params || 0), 0) :
      (info && info.params) || 0;
    /** @type {Record<string, number | null>} */
    const values = {};
    for (const o of overlays) values[o.key] = (o.group || [])[g] ?? null;
    /** @type {Record<string, string | null>} */
    const texts = {};
    for (const o of overlays) if (o.text) texts[o.key] = o.text[g] ?? null;
    rows.set(g, { g, depth: depth[g], name: tree.kind[g] === "roll" ? tree.label[g] : name, type: (info && info.type) || "",
      params, ops: tree.ops[g], values, texts, dtype: commonest(dtypes[g]), device: commonest(devices[g]),
      tied: [...(tied.get(name) || [])].join(", "), children: [] });
    if (p > 0) rows.get(p).children.push(g);
    else top.push(g);
  }
  return { rows, top };
}

/**
 * Per module: the parameters of another module (not one around it) that its ops use, as tied weights
 * are (GPT-2's lm_head uses transformer.wte.weight).
 * @param {GraphData} graph
 * @returns {Map<string, Set<string>>}
 */
export function tiedParameters(graph) {
  /** @type {Map<string, Set<string>>} */
  const found = new Map();
  for (let e = 0; e < graph.m; e++) {
    const s = graph.src[e], d = graph.dst[e];
    const owner = graph.module(s), user = graph.module(d);
    if (graph.kind(s) !== "leaf" || owner === null || user === null || user === owner) continue;
    // a module's own parameter used inside it, or a child's used by the module around it: not shared
    if (owner === "" || user === "" || user.startsWith(owner + ".") || owner.startsWith(user + ".")) continue;
    let names = found.get(user);
    if (!names) found.set(user, names = new Set());
    names.add(graph.name(s));
  }
  return found;
}

/** The key seen most often ("" for none). @param {Map<string, number>} counts @returns {string} */
function commonest(counts) {
  let best = "", n = 0;
  for (const [k, c] of counts) if (c > n) { best = k; n = c; }
  return best;
}

/**
 * The table's columns for these overlays.
 * @param {Overlay[]} overlays
 * @returns {Column[]}
 */
export function columns(overlays) {
  /** @type {Column[]} */
  const cols = [
    { key: "name", label: "module", unit: "text", value: (r) => r.name },
    { key: "type", label: "type", unit: "text", value: (r) => r.type },
    { key: "params", label: "parameters", unit: "", value: (r) => r.params },
    { key: "ops", label: "ops", unit: "", value: (r) => r.ops },
  ];
  const byKey = new Map(overlays.map((o) => [o.key, o]));
  const extra = BUILT_IN.filter((k) => byKey.has(k)).concat(overlays.map((o) => o.key).filter((k) => k.startsWith("user:")));
  for (const k of extra) {
    const o = byKey.get(k);
    const label = k === "memory" ? "saved bytes" : k === "held" ? "bytes at the peak" : k === "gradient" ? "gradient norm" : o.label;
    cols.push({ key: k, label, unit: o.unit || "", value: (r) => r.values[k] ?? NaN });
  }
  if (byKey.has(CHECK)) cols.push(checkColumn());
  cols.push({ key: "dtype", label: "dtype", unit: "text", value: (r) => r.dtype },
    { key: "device", label: "device", unit: "text", value: (r) => r.device },
    { key: "tied", label: "tied parameters", unit: "text", value: (r) => r.tied });
  return cols;
}

/**
 * The model check's verdict per module, in words; it sorts by how bad it is (the culprit first, descending).
 * @returns {Column}
 */
function checkColumn() {
  return { key: CHECK, label: "check", unit: "", value: (r) => r.values[CHECK] ?? NaN,
    text: (r) => r.texts[CHECK] || "—" };
}

/**
 * The boxes in table order: each row's children after it, siblings sorted by `column` (none: tree order).
 * @param {{rows: Map<number, ModuleRow>, top: number[]}} table
 * @param {Column | null} column
 * @param {boolean} descending
 * @returns {number[]}
 */
export function ordered(table, column, descending) {
  /** @param {number[]} list */
  const sort = (list) => {
    if (!column) return [...list];  // a copy: the caller reverses it
    const sign = descending ? -1 : 1;
    return [...list].sort((a, b) => {
      const x = column.value(table.rows.get(a)), y = column.value(table.rows.get(b));
      if (typeof x === "string" || typeof y === "string") return sign * String(x).localeCompare(String(y));
      if (Number.isNaN(x) !== Number.isNaN(y)) return Number.isNaN(x) ? 1 : -1;  // no value: last either way
      return sign * (x - y) || a - b;
    });
  };
  const out = [], stack = sort(table.top).reverse();
  while (stack.length) {
    const g = stack.pop();
    out.push(g);
    stack.push(...sort(table.rows.get(g).children).reverse());
  }
  return out;
}

/**
 * A cell's text.
 * @param {Column} column @param {ModuleRow} row
 * @returns {string}
 */
function cell(column, row) {
  if (column.text) return column.text(row);
  const v = column.value(row);
  if (typeof v === "string") return v;
  if (Number.isNaN(v)) return "—";
  if (column.key === "params" || column.key === "ops") return v.toLocaleString();
  return column.unit === "bytes" ? bytes(v) : format(v);
}

export class ModuleTable {
  /**
   * @param {HTMLElement} panel  where the table goes
   * @param {GraphData} graph
   * @param {Tree} tree
   * @param {Overlay[]} overlays
   * @param {(g: number) => void} onPick  a row was clicked: its box
   */
  constructor(panel, graph, tree, overlays, onPick) {
    this.panel = panel;
    this.table = moduleRows(graph, tree, overlays);
    this.columns = columns(overlays);
    this.onPick = onPick;
    /** @type {Column | null} */
    this.sortBy = null;
    this.descending = false;
    this.draw();
  }
  draw() {
    const head = h("tr", null, ...this.columns.map((c) => {
      const mark = this.sortBy === c ? (this.descending ? " ▾" : " ▴") : "";
      const th = h("th", { scope: "col", "data-column": c.key, tabindex: "0", title: "Sort by " + c.label, text: c.label + mark });
      th.onclick = () => this.sort(c);
      th.onkeydown = (ev) => { if (ev.key === "Enter") this.sort(c); };
      return th;
    }));
    const body = ordered(this.table, this.sortBy, this.descending).map((g) => {
      const row = this.table.rows.get(g);
      const verdict = row.values[CHECK];
      const tr = h("tr", { "data-group": "g" + g, tabindex: "0", ...(verdict === null || verdict === undefined ? {} : { "data-check": String(verdict) }) },
        ...this.columns.map((c, k) => {
        const td = h("td", { text: cell(c, row) });
        if (k === 0) td.style.paddingLeft = `${4 + 14 * row.depth}px`;
        if (c.unit !== "text" && !c.text) td.className = "gv-num";
        return td;
      }));
      tr.onclick = () => this.onPick(g);
      tr.onkeydown = (ev) => { if (ev.key === "Enter") this.onPick(g); };
      return tr;
    });
    const empty = this.table.rows.size ? null : h("p", { text: "This graph has no modules." });
    this.panel.replaceChildren(h("table", { class: "gv-table", "data-testid": "viewer-table" },
      h("thead", null, head), h("tbody", null, ...body)), empty || h("span"));
  }
  /** Sort by column c (again: the other way). @param {Column} c */
  sort(c) {
    this.descending = this.sortBy === c ? !this.descending : c.unit !== "text";
    this.sortBy = c;
    this.draw();
  }
  /** Mark box g's row as selected (-1: none). @param {number} g */
  mark(g) {
    for (const tr of this.panel.querySelectorAll("tr.gv-row-selected")) tr.classList.remove("gv-row-selected");
    const tr = this.panel.querySelector(`tr[data-group="g${g}"]`);
    if (tr) tr.classList.add("gv-row-selected");
  }
}
