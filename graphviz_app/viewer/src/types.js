// @ts-check
// The payload's type, written once: what graphviz_app/viewer/payload.py sends (its contract is in
// graphviz_app/viewer/__init__.py). decode.js checks a decoded payload against it; `tsc --noEmit`
// checks every module that reads it. This module holds types only: it exports nothing at run time.

/** A string-table index (`strings[index]`), -1 for none. @typedef {number} StringIndex */

/**
 * A column of numbers: a plain array, or a typed array where it arrived packed (unpack.js).
 * @typedef {number[] | Int8Array | Int16Array | Int32Array | Float32Array | Float64Array} Column
 */

/**
 * A column holding a list per entry (or `none`): a plain array, or Rows where it arrived packed (read an
 * entry with unpack.js's `row`).
 * @template T, N
 * @typedef {Array<T[] | N> | import("./unpack.js").Rows} RowColumn
 */

/**
 * The graph's node columns (schema 3): one entry per node.
 * @typedef {object} NodeColumns
 * @property {Column | null} id  string indices; null: the ids are n0, n1, ...
 * @property {Column} kind  string indices
 * @property {Column} name  string indices
 * @property {Column} module  string indices
 * @property {Column} source  string indices
 * @property {(number | null)[]} recency
 * @property {RowColumn<StringIndex, 0>} attrs  key, value, key, value, ... (0: none)
 * @property {Column} tensor  row in `tensors`, -1 for none
 * @property {Column} grad  row in `grads`, -1 for none
 * @property {(number | null)[]} [order]
 * @property {Column} [differentiates]  string indices
 */

/**
 * @typedef {object} TensorColumns
 * @property {Column} name  string indices
 * @property {RowColumn<number, never>} shape
 * @property {Column} dtype  string indices
 * @property {Column} device  string indices
 * @property {Column} numel
 * @property {Column} bytes
 * @property {Column} requires_grad  0 or 1
 * @property {RowColumn<number | string | boolean, null>} values
 * @property {Column} storage  string indices
 * @property {Column} freed  0 or 1
 * @property {(number | null)[]} storage_bytes
 * @property {Column} [sharding]  how a rank's DTensor is laid out (string indices; only when any is sharded)
 */

/** A statistic strict JSON can carry: a number, or "nan", "inf", "-inf". @typedef {number | "nan" | "inf" | "-inf"} Stat */

/**
 * @typedef {object} GradColumns
 * @property {Column} numel
 * @property {Stat[] | Column} norm
 * @property {Stat[] | Column} max_abs
 * @property {Stat[] | Column} mean_abs
 * @property {Column} nan
 * @property {Column} inf
 * @property {Stat[] | Column} zero_fraction
 * @property {RowColumn<number | string, null>} values
 */

/**
 * @typedef {object} EdgeColumns
 * @property {Column} src  node index
 * @property {Column} dst  node index
 * @property {Column} kind  0 data, 1 saved, 2 view
 * @property {Column} output_nr
 * @property {Column} slot
 * @property {Column} grad  row in `grads`, -1 for none
 */

/** A module row: name, type, parameters, parameter bytes. @typedef {[string, string, number, number]} ModuleRow */

/**
 * The graph in compact schema 3 (graphviz_app/model/compact.py).
 * @typedef {object} CompactGraph
 * @property {3} schema
 * @property {string[]} strings
 * @property {NodeColumns} nodes
 * @property {TensorColumns} tensors
 * @property {GradColumns} grads
 * @property {EdgeColumns} edges
 * @property {string[]} [notes]
 * @property {boolean} [truncated]
 * @property {ModuleRow[]} [modules]
 * @property {number | null} [nonfinite_origin]
 * @property {Array<Record<string, unknown>>} [checks]  a model check's verdicts (model/checks.py); the viewer
 *   reads them through the "check" overlay, whose `text` holds each box's verdict in words
 */

/** @typedef {"root" | "module" | "roll" | "fold" | "part"} BoxKind */

/**
 * The boxes: one entry per box in the first six columns (box 0 is the graph), one per node in the last two.
 * @typedef {object} TreeData
 * @property {Column} parent  -1 for box 0
 * @property {BoxKind[]} kind
 * @property {string[]} label
 * @property {(string | null)[]} module
 * @property {Column} instance  which instance of its repeat parent, -1 for none
 * @property {Column} count  instances of a roll or fold
 * @property {Column} node_group
 * @property {Column} node_instance
 */

/**
 * A colouring by a number per node and per box.
 * @typedef {object} Overlay
 * @property {string} key
 * @property {string} label
 * @property {"log" | "linear"} [scale]
 * @property {string} [unit]  "bytes" or ""
 * @property {(number | null)[]} node
 * @property {(number | null)[]} [group]
 * @property {(string | null)[]} [text]  per box, the value in words (the model check's verdict)
 * @property {(string | null)[]} [node_text]  per node, the value in words (the model check's verdict)
 * @property {number[]} [flag]  nodes drawn red
 * @property {number[]} [mark]  nodes ringed
 * @property {string} [mark_label]
 * @property {string} [mark_badge]
 * @property {boolean} [symmetric]  a change: the scale is centred on 0 (blue: less, red: more)
 */

/**
 * Values over steps, charted under the graph.
 * @typedef {object} Series
 * @property {string} key
 * @property {string} [label]
 * @property {string} [unit]
 * @property {string} [x_label]
 * @property {(number | null)[]} values
 * @property {number[]} [node_step]
 * @property {number} [peak]
 * @property {string} [peak_label]
 * @property {number} [peak_bytes]
 * @property {string} [of]  the key of the series this one is drawn beside
 * @property {string[]} [notes]
 * @property {Collective[]} [events]  a rank's collectives, at the step where each was issued
 */

/**
 * A collective a rank ran (all-gather, reduce-scatter, all-reduce), marked on the memory chart.
 * @typedef {object} Collective
 * @property {string} op
 * @property {number} bytes
 * @property {string} phase  "forward", "backward" or "optimizer"
 * @property {number} step  the chart's step where it was issued (0: the forward, or the start of backward)
 * @property {number} [node]  the node running when it was issued (its index), when known
 */

/**
 * What the viewer is sent (PAYLOAD_VERSION 1).
 * @typedef {object} Payload
 * @property {"graphviz-app-viewer"} format
 * @property {1} version
 * @property {string} [title]
 * @property {{rankdir?: Rankdir, opening?: "auto" | "given"}} [options]  opening "given": open on `open`, else the
 *   viewer picks the deepest module level that fits its pane
 * @property {CompactGraph} graph
 * @property {TreeData} tree
 * @property {number[]} [open]  the boxes open in the opening view when `options.opening` is "given"
 * @property {Overlay[]} [overlays]
 * @property {Series[]} [series]
 * @property {string[]} [notes]
 */

/** @typedef {"TB" | "LR" | "BT" | "RL"} Rankdir */

/** An item of an open box: "n<node index>" or "g<box index>". @typedef {string} ItemKey */

/** @typedef {{w: number, h: number}} Size */
/** @typedef {{x: number, y: number, w: number, h: number, open: boolean}} Box */
/** @typedef {[number, number]} Point */
/** @typedef {{start: Point | null, points: Point[], end: Point | null}} Route */
/** @typedef {{w: number, h: number, pos: Map<ItemKey, {x: number, y: number}>, routes: Map<string, Route>, placeholder?: boolean}} LayoutResult */

/**
 * Where everything goes (scene.js).
 * @typedef {object} Scene
 * @property {number[]} open
 * @property {Map<ItemKey, Box>} boxes
 * @property {Map<ItemKey, string[]>} lines
 * @property {Map<string, Route>} routes
 * @property {number} width
 * @property {number} height
 * @property {Set<number>} waiting  the open boxes drawn before their layout is made
 */

/**
 * Anything that lays out one open box (layout.js's Layouts).
 * @typedef {object} Layouter
 * @property {(group: number, items: ItemKey[], sizes: Map<ItemKey, Size>, edges: [ItemKey, ItemKey, number][]) => LayoutResult} layout
 */

export {};
