// @ts-check
// What the unit tests share: the payloads tests/support/js_fixtures.py made with the Python payload().
import { readFileSync } from "node:fs";
import { checkPayload } from "../src/decode.js";
import { GraphData } from "../src/graph.js";
import { Tree } from "../src/tree.js";

/** @typedef {import("../src/types.js").Payload} Payload */

/**
 * A fixture payload, checked as the viewer checks what it decodes.
 * @param {"modules" | "hostile" | "chain" | "checked"} name
 * @returns {Payload}
 */
export function fixture(name) {
  return checkPayload(JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8")));
}

/**
 * The fixture's graph and boxes, as the viewer reads them.
 * @param {"modules" | "hostile" | "chain" | "checked"} name
 * @returns {{data: Payload, graph: GraphData, tree: Tree}}
 */
export function loaded(name) {
  const data = fixture(name);
  const graph = new GraphData(data.graph);
  return { data, graph, tree: new Tree(data.tree, graph) };
}

/**
 * The index of the box labelled `label`.
 * @param {Tree} tree
 * @param {string} label
 * @returns {number}
 */
export function boxNamed(tree, label) {
  const g = tree.label.indexOf(label);
  if (g < 0) throw new Error(`no box labelled ${label}: ${tree.label.join(", ")}`);
  return g;
}

/**
 * The index of the first node named `name`.
 * @param {GraphData} graph
 * @param {string} name
 * @returns {number}
 */
export function nodeNamed(graph, name) {
  for (let i = 0; i < graph.n; i++) if (graph.name(i) === name) return i;
  throw new Error(`no node named ${name}`);
}
