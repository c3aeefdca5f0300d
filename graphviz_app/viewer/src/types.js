// @ts-check
// The payload's type, written once: what graphviz_app/viewer/payload.py sends (its contract is in
// graphviz_app/viewer/__init__.py). decode.js checks a decoded payload against it; `tsc --noEmit`
// checks every module that reads it. This module holds types only: it exports nothing at run time.

/** A string-table index (`strings[index]`), -1 for none. @typedef {number} StringIndex */

/**
 * The graph's node columns (schema 3): one entry per node.
 * @typedef {object} NodeColumns
 * @property {StringIndex[] | null} id  null: the ids are n0, n1, ...
 * @property {StringIndex[]} kind
 * @property {StringIndex[]} name
 * @property {StringIndex[]} module
 * @property {StringIndex[]} source
 * @property {(number | null)[]} recency
 * @property {(StringIndex[] | 0)[]} attrs  key, value, key, value, ... (0: none)
 * @property {number[]} tensor  row in `tensors`, -1 for none
 * @property {number[]} grad  row in `grads`, -1 for none
 * @property {(number | null)[]} [order]
 * @property {StringIndex[]} [differentiates]
 */

/**
 * @typedef {object} TensorColumns
 * @property {StringIndex[]} name
 * @property {number[][]} shape
 * @property {StringIndex[]} dtype
 * @property {StringIndex[]} device
 * @property {number[]} numel
 * @property {number[]} bytes
 * @property {(0 | 1)[]} requires_grad
 * @property {(Array<number | string | boolean> | null)[]} values
 * @property {StringIndex[]} storage
 * @property {(0 | 1)[]} freed
 * @property {(number | null)[]} storage_bytes
 * @property {number[]} [sharding]  how a rank's DTensor is laid out (string indices; only when any is sharded)
 */

/** A statistic strict JSON can carry: a number, or "nan", "inf", "-inf". @typedef {number | "nan" | "inf" | "-inf"} Stat */

/**
 * @typedef {object} GradColumns
 * @property {number[]} numel
 * @property {Stat[]} norm
 * @property {Stat[]} max_abs
 * @property {Stat[]} mean_abs
 * @property {number[]} nan
 * @property {number[]} inf
 * @property {Stat[]} zero_fraction
 * @property {(Array<number | string> | null)[]} values
 */

/**
 * @typedef {object} EdgeColumns
 * @property {number[]} src  node index
 * @property {number[]} dst  node index
 * @property {(0 | 1 | 2)[]} kind  data, saved, view
 * @property {number[]} output_nr
 * @property {number[]} slot
 * @property {number[]} grad  row in `grads`, -1 for none
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
 * @property {number[]} parent  -1 for box 0
 * @property {BoxKind[]} kind
 * @property {string[]} label
 * @property {(string | null)[]} module
 * @property {number[]} instance  which instance of its repeat parent, -1 for none
 * @property {number[]} count  instances of a roll or fold
 * @property {number[]} node_group
 * @property {number[]} node_instance
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
